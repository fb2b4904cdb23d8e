"""Server faults around a stage run by `tracerl run`.

- While the stage runs, a thread asks the server's /health every 2 s; when it has not
  answered for `grace` seconds the stage stops at once with a message that says so (the
  Prefect client would otherwise retry for minutes, then print a traceback). Its staged
  outputs are discarded, so the previous outputs stay (tracerl.io.staging).
- Flow runs started by `tracerl run` carry a tag naming the host, and their process as
  the run's infrastructure pid (`host:pid`, set when the stage identifies itself; not a
  tag, which would fill the UI's tag filter with one tag per run). A run left Running or
  Pending by a process that is gone (killed, or its server died under it) is marked
  Crashed by the next `tracerl run`, so no run stays "Running" forever; so is one that never
  named its process within ORPHAN_AFTER (its process died as it started).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from flows._runtime.server import api_url, is_healthy
from tracerl.io.staging import pid_alive

RUN_TAG = "tracerl-cli"
ORPHAN_AFTER = 600.0  # seconds a run may stay without a process id before it is an orphan


def run_tags() -> list[str]:
    return [RUN_TAG, f"host:{socket.gethostname()}"]


def process_id() -> str:
    """This process as a flow run's infrastructure pid (Prefect's workers write the same)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_of(run) -> int | None:
    """The process of a run: its infrastructure pid, or the `pid:` tag older runs carry."""
    pid = (run.infrastructure_pid or "").rpartition(":")[2]
    if pid.isdigit():
        return int(pid)
    tagged = [t[4:] for t in run.tags if t.startswith("pid:") and t[4:].isdigit()]
    return int(tagged[0]) if tagged else None


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
            now = datetime.now(UTC)
            for run in runs:
                pid = _pid_of(run)
                if pid is not None and pid_alive(pid):
                    continue
                if pid is None and run.created and (
                        now - run.created).total_seconds() < ORPHAN_AFTER:
                    continue  # starting: it names its process when it identifies itself
                why = (f"the process that ran it (pid {pid}) is gone" if pid is not None else
                       f"its process never started it within {ORPHAN_AFTER:.0f} s")
                client.set_flow_run_state(run.id, Crashed(message=(
                    f"{why}: killed, or its Prefect server stopped answering; marked by the "
                    "next tracerl run")), force=True)
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
