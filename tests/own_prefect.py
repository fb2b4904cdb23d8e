"""A Prefect server of the test's own: a free port, a temporary home, never 4200.

(Until the infra team's conftest fixture lands; then this can go.)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import BIN


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prefect_env(home: Path, port: int) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_API_PORT": str(port), "PREFECT_SERVER_API_HOST": "127.0.0.1",
           "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_DATABASE_CONNECTION_URL":
               f"sqlite+aiosqlite:///{home}/prefect.db"}
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


@contextmanager
def own_server(home: Path, timeout: float = 120.0) -> Iterator[dict[str, str]]:
    """Start `prefect server start` on a free port; yield the env that points at it."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = prefect_env(home, port)
    log = open(home / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=home)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{env['PREFECT_API_URL']}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("test Prefect server did not start: "
                                       + (home / "server.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
