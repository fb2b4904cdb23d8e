"""The one long-lived local Prefect server every stage talks to.

A stage run with no server answering starts it in the background (and says so) instead
of letting Prefect spin up a temporary server per process (~11 s each).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse


def api_url() -> str:
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        raise RuntimeError("PREFECT_API_URL is not set: run from the project root, where "
                           "prefect.toml points Prefect at the local server")
    return str(url).rstrip("/")


def ui_url() -> str:
    """The UI address from Prefect's settings: PREFECT_UI_URL, else derived from the API URL
    (so it follows the port or host the API is on)."""
    from prefect.settings import get_current_settings

    return str(get_current_settings().ui_url or api_url().removesuffix("/api")).rstrip("/")


def home() -> Path:
    """PREFECT_HOME as Prefect resolves it (prefect.toml: .prefect/ of the checkout)."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home)


def is_healthy(url: str | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url or api_url()}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _prefect_exe() -> str:
    beside = Path(sys.executable).with_name("prefect")
    return str(beside) if beside.exists() else (shutil.which("prefect") or "prefect")


def start_server(wait_seconds: float = 120.0) -> None:
    """Start the local server in the background and wait until it answers."""
    url = api_url()
    host = urlparse(url).hostname
    if host not in ("127.0.0.1", "localhost"):
        raise RuntimeError(f"the Prefect API at {url} is not answering, and it is not local: "
                           "start it yourself")
    home().mkdir(parents=True, exist_ok=True)
    print(f"No Prefect server answering at {url}: starting the local one in the background "
          "(stop it with `make stop`).", file=sys.stderr, flush=True)
    pid_file = home() / "server.pid"  # where `prefect server start --background` writes it
    if pid_file.exists():  # left by a server that is gone; it would block the start
        pid_file.unlink()
    port = urlparse(url).port or 80
    with socket.socket() as probe:
        probe.settimeout(1.0)
        if probe.connect_ex((host, port)) == 0:
            raise RuntimeError(f"port {port} on {host} is in use by a program that is not a "
                               f"Prefect server answering at {url}: stop it, or point "
                               "PREFECT_API_URL and PREFECT_SERVER_API_PORT at a free port")
    started = subprocess.run([_prefect_exe(), "server", "start", "--background"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if started.returncode != 0:
        last = (started.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"`prefect server start` failed for {host}:{port} "
                           f"(exit {started.returncode}): {last}")
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if is_healthy(url):
            print(f"Prefect server ready: UI at {ui_url()}", file=sys.stderr, flush=True)
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Prefect server did not answer at {url} within {wait_seconds:.0f} s; "
                       f"see {home()} for its logs")


def ensure_server() -> None:
    if not is_healthy():
        start_server()


def stop_server() -> None:
    subprocess.run([_prefect_exe(), "server", "stop"], check=False)
