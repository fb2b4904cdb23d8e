"""Server faults around a stage run by `tracerl run`.

- While the stage runs, a thread asks the server's /health every 2 s; when it has not
  answered for `grace` seconds the stage stops at once with a message that says so (the
  Prefect client would otherwise retry for minutes, then print a traceback). Its staged
  outputs are discarded, so the previous outputs stay (tracerl.io.staging).
- Flow runs started by `tracerl run` carry tags naming the host and process. A run left
  Running or Pending by a process that is gone (killed, or its server died under it) is
  marked Crashed by the next `tracerl run`, so no run stays "Running" forever.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable

from flows._runtime.server import api_url, is_healthy
from tracerl.io.staging import pid_alive

RUN_TAG = "tracerl-cli"


def run_tags() -> list[str]:
    return [RUN_TAG, f"host:{socket.gethostname()}", f"pid:{os.getpid()}"]


def mark_orphaned_runs_crashed() -> list[str]:
    """Mark Crashed every Running/Pending flow run of this host whose process is gone;
    returns their names. Best effort: a server error leaves them as they are."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    host = f"host:{socket.gethostname()}"
    marked = []
    try:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(
                    any_=[StateType.RUNNING, StateType.PENDING])),
                tags=FlowRunFilterTags(all_=[RUN_TAG, host])))
            for run in runs:
                pids = [int(t[4:]) for t in run.tags if t.startswith("pid:") and t[4:].isdigit()]
                if pids and not pid_alive(pids[0]):
                    client.set_flow_run_state(run.id, Crashed(message=(
                        f"the process that ran it (pid {pids[0]}) is gone: killed, or its "
                        "Prefect server stopped answering; marked by the next tracerl run")),
                        force=True)
                    marked.append(run.name)
    except Exception as exc:  # noqa: BLE001 - housekeeping must not stop a stage
        print(f"warning: could not check for orphaned flow runs: {exc}", file=sys.stderr)
    return marked


def watch_server(stage: str, grace: float = 15.0, every: float = 2.0,
                 on_failure: Callable[[], object] | None = None) -> threading.Thread:
    """Stop this process (exit 1) when the server stops answering for `grace` seconds,
    after calling on_failure (e.g. put back outputs `dvc repro` removed)."""
    url = api_url()

    def watch() -> None:
        last_ok = time.monotonic()
        while True:
            time.sleep(every)
            if is_healthy(url, timeout=3.0):
                last_ok = time.monotonic()
            elif time.monotonic() - last_ok > grace:
                print(f"error: stage {stage} stopped: the Prefect server at {url} has not "
                      f"answered for {grace:.0f} s (it died or hangs). The stage's new outputs "
                      "were discarded; the previous ones are kept. Start the server "
                      "(`tracerl server start`) and run the stage again; this flow run will "
                      "then be marked Crashed.", file=sys.stderr, flush=True)
                if on_failure is not None:
                    try:
                        on_failure()
                    finally:
                        os._exit(1)
                os._exit(1)

    thread = threading.Thread(target=watch, name="server-watchdog", daemon=True)
    thread.start()
    return thread
