"""The nightly deployment's worker: started in a session of its own (so it outlives the
shell and its flow-run processes can be stopped with it), stopped for certain.

`stop_worker` sends SIGTERM to the worker's process group, waits, escalates to SIGKILL,
and only then forgets the pid: a worker that ignores SIGTERM can no longer be orphaned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from flows._runtime.server import _prefect_exe
from tracerl.io.staging import pid_alive


def prefect_home() -> Path:
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home)


def pid_file() -> Path:
    return prefect_home() / "worker.pid"


def alive(pid: int) -> bool:
    if not pid_alive(pid):
        return False
    try:  # a zombie (exited, not yet reaped) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(alive(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()
               and _pgid(int(p.name)) == pgid)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def start_worker(pool: str) -> int:
    """Start `prefect worker start --pool POOL` in its own session; its pid."""
    pf = pid_file()
    if pf.is_file() and alive(int(pf.read_text())):
        return int(pf.read_text())
    pf.parent.mkdir(parents=True, exist_ok=True)
    log = open(pf.with_name("worker.log"), "ab")  # noqa: SIM115 (the worker keeps it)
    proc = subprocess.Popen([_prefect_exe(), "worker", "start", "--pool", pool],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    pf.write_text(str(proc.pid))
    return proc.pid


def stop_worker(grace: float = 20.0, kill_wait: float = 10.0) -> str:
    """Stop the worker and its flow-run processes: SIGTERM to its group, wait `grace` s,
    then SIGKILL; the pid file is removed only once nothing of the group is left."""
    pf = pid_file()
    if not pf.is_file():
        return "no worker pid file: nothing to stop"
    pid = int(pf.read_text())
    if not alive(pid) and not _group_alive(pid):
        pf.unlink()
        return f"worker {pid} was not running"
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)  # the worker leads its own session and group
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid) and not _group_alive(pid):
                pf.unlink()
                return f"worker {pid} stopped ({signal.Signals(sig).name})"
            time.sleep(0.25)
    raise RuntimeError(f"worker {pid} is still alive after SIGKILL; pid file kept: {pf}")
