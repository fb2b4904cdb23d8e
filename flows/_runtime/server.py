"""One long-lived local Prefect server per checkout, which every stage of that checkout
talks to, and no other.

The checkout is the repository a stage runs for: `DVC_ROOT` (DVC sets it for every stage,
to the parent repository even for an experiment run in a temporary copy), else the working
directory. Its server's home and database are `<checkout>/.prefect/` (absolute paths, so
the server can say whose it is), and its address is the port prefect.toml names (4200) when
that is free or already this checkout's server, else the next free port above it; the port
is kept in `<checkout>/.prefect/server.json`, so a checkout keeps its address. A server
answering on a port is this checkout's when the home it reports (`/api/admin/settings`) is
this checkout's `.prefect` — or, for a server an older tracerl started with a relative home,
when this checkout's `.prefect/server.pid` names a live process. Two checkouts running at
once therefore run two servers, and never post to each other's.

An address set in the environment (`PREFECT_API_URL`: the test suite's own server, a remote
one) is used as it is, except that a local server there that says it belongs to another
checkout is refused, naming that checkout.

`use_checkout_server()` must run before Prefect is imported (its settings are read once, at
import): the `tracerl` commands call it first. A stage run with no server answering starts
it in the background (and says so) instead of letting Prefect spin up a temporary server
per process (~11 s each).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

PORTS_TRIED = 100  # above prefect.toml's port, for the checkouts of one machine
_LOCAL = ("127.0.0.1", "localhost")


def checkout_root() -> Path:
    """The repository this process works for (DVC_ROOT under `dvc repro`/`dvc exp run`)."""
    return Path(os.environ.get("DVC_ROOT") or os.getcwd()).resolve()


def checkout_home(root: Path | None = None) -> Path:
    """PREFECT_HOME of the checkout: prefect.toml's `home` (.prefect) under its root."""
    root = root or checkout_root()
    return (root / str(_config(root).get("home", ".prefect"))).resolve()


def _config(root: Path) -> dict:
    path = root / "prefect.toml"
    return tomllib.loads(path.read_text()) if path.is_file() else {}


def _base_url(root: Path) -> str:
    config = _config(root)
    url = (config.get("api") or {}).get("url")
    if url:
        return str(url).rstrip("/")
    server = (config.get("server") or {}).get("api") or {}
    return f"http://{server.get('host', '127.0.0.1')}:{server.get('port', 4200)}/api"


def use_checkout_server(start: bool = False) -> str:
    """Point this process (and the processes it starts) at the checkout's own server: set
    PREFECT_API_URL and PREFECT_HOME in the environment; start the server when `start` and
    none of this checkout's answers. Returns the API URL. Call before importing Prefect."""
    root = checkout_root()
    home = Path(os.environ.get("PREFECT_HOME") or checkout_home(root)).resolve()
    explicit = os.environ.get("PREFECT_API_URL")
    if explicit:
        url = explicit.rstrip("/")
        _refuse_another_checkouts(url, home)
    else:
        with _port_lock():
            url, running = _choose_url(root, home)
            os.environ["PREFECT_API_URL"] = url
            os.environ["PREFECT_SERVER_API_PORT"] = str(urlparse(url).port)
            os.environ["PREFECT_HOME"] = str(home)
            _check_not_imported(url)
            if start and not running:
                start_server()
        return url
    os.environ.setdefault("PREFECT_HOME", str(home))
    _check_not_imported(url)
    if start and not is_healthy(url):
        start_server()
    return url


def _check_not_imported(url: str) -> None:
    """Prefect read its settings at import: too late to point it elsewhere."""
    if "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        seen = str(get_current_settings().api.url or "").rstrip("/")
        if seen != url:
            raise RuntimeError(f"Prefect was imported before this checkout's server was chosen "
                               f"(it points at {seen or 'nothing'}, the checkout's is {url})")


@contextlib.contextmanager
def _port_lock() -> Iterator[None]:
    """One checkout at a time picks (and starts on) a port of this machine."""
    path = Path(tempfile.gettempdir()) / f"tracerl-prefect-ports-{os.getuid()}.lock"
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _choose_url(root: Path, home: Path) -> tuple[str, bool]:
    """(URL, already running) of the checkout's server: the port it used last, else the
    first from prefect.toml's up that is this checkout's server or free."""
    base = urlparse(_base_url(root))
    host, base_port = base.hostname or "127.0.0.1", base.port or 4200
    remembered = _remembered_port(home)
    candidates = [p for p in (remembered,) if p] + list(range(base_port,
                                                            base_port + PORTS_TRIED))
    for port in dict.fromkeys(candidates):
        url = f"{base.scheme}://{host}:{port}/api"
        if is_healthy(url, timeout=2.0):
            theirs = server_home(url)
            if theirs == home or (theirs is None and port == base_port
                                  and _legacy_server_alive(home)):
                return url, True
            continue  # another checkout's server
        if not _port_in_use(host, port):
            return url, False
    raise RuntimeError(f"no free port for this checkout's Prefect server in {base_port}-"
                       f"{base_port + PORTS_TRIED - 1} on {host}")


def _remembered_port(home: Path) -> int | None:
    try:
        return int(json.loads((home / "server.json").read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _legacy_server_alive(home: Path) -> bool:
    """A server started in this checkout by a tracerl that gave it a relative home."""
    from tracerl.io.staging import pid_alive

    try:
        return pid_alive(int((home / "server.pid").read_text().strip()))
    except (OSError, ValueError):
        return False


def server_home(url: str) -> Path | None:
    """The absolute PREFECT_HOME the server at url runs with (None: it does not say, or
    says a relative one)."""
    try:
        with urllib.request.urlopen(f"{url}/admin/settings", timeout=5) as resp:
            home = json.loads(resp.read()).get("home")
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return None
    return Path(home) if home and Path(home).is_absolute() else None


def _refuse_another_checkouts(url: str, home: Path) -> None:
    if urlparse(url).hostname not in _LOCAL or not is_healthy(url, timeout=2.0):
        return
    theirs = server_home(url)
    if theirs is not None and theirs.resolve() != home:
        raise RuntimeError(
            f"PREFECT_API_URL ({url}) is the Prefect server of {theirs.parent} (home "
            f"{theirs}), not of this checkout ({checkout_root()}): unset PREFECT_API_URL to "
            "use this checkout's own server")


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
    """PREFECT_HOME as Prefect resolves it (the checkout's .prefect/, absolute)."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).resolve()


def is_healthy(url: str | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url or api_url()}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


def _prefect_exe() -> str:
    beside = Path(sys.executable).with_name("prefect")
    return str(beside) if beside.exists() else (shutil.which("prefect") or "prefect")


def start_server(wait_seconds: float = 120.0) -> None:
    """Start the local server in the background, its home and database the checkout's
    (absolute, so it can say whose it is), and wait until it answers."""
    url = os.environ.get("PREFECT_API_URL", "").rstrip("/") or api_url()
    host = urlparse(url).hostname
    if host not in _LOCAL:
        raise RuntimeError(f"the Prefect API at {url} is not answering, and it is not local: "
                           "start it yourself")
    server_dir = Path(os.environ.get("PREFECT_HOME") or checkout_home()).resolve()
    server_dir.mkdir(parents=True, exist_ok=True)
    print(f"No Prefect server of this checkout answering at {url}: starting it in the "
          "background (stop it with `make stop`).", file=sys.stderr, flush=True)
    pid_file = server_dir / "server.pid"  # where `prefect server stop` reads it
    if pid_file.exists():  # left by a server that is gone; it would block the start
        pid_file.unlink()
    port = urlparse(url).port or 80
    if _port_in_use(host, port):
        raise RuntimeError(f"port {port} on {host} is in use by a program that is not a "
                           f"Prefect server answering at {url}: stop it, or point "
                           "PREFECT_API_URL and PREFECT_SERVER_API_PORT at a free port")
    env = {**os.environ, "PREFECT_HOME": str(server_dir), "PREFECT_API_URL": url,
           "PREFECT_SERVER_API_HOST": host, "PREFECT_SERVER_API_PORT": str(port)}
    if "PREFECT_SERVER_DATABASE_CONNECTION_URL" not in os.environ:
        env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = (
            f"sqlite+aiosqlite:///{server_dir / 'prefect.db'}")
    # Not `prefect server start --background`: that one pipes the server's output to a
    # parent that exits, so the server's first large write (e.g. "Refusing to publish event
    # of size ...") fails and takes the request, then the server, down. The server runs in
    # the foreground of a session of its own, its output appended to a file under its home.
    log_file = server_dir / "server.log"
    with open(log_file, "ab") as log:
        process = subprocess.Popen([_prefect_exe(), "server", "start"], stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    pid_file.write_text(str(process.pid))  # what `prefect server stop` signals
    (server_dir / "server.json").write_text(json.dumps({"port": port, "url": url}) + "\n")
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pid_file.unlink(missing_ok=True)
            raise RuntimeError(f"`prefect server start` exited ({process.returncode}) for "
                               f"{host}:{port}: {_last_line(log_file)} (log: {log_file})")
        if is_healthy(url):
            print(f"Prefect server ready: UI at {url.removesuffix('/api')}", file=sys.stderr,
                  flush=True)
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Prefect server did not answer at {url} within {wait_seconds:.0f} s; "
                       f"see its log, {log_file}")


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines() if path.is_file() else []
    return lines[-1] if lines else "no message"


def ensure_server() -> None:
    """The checkout's server answers (started when it does not)."""
    use_checkout_server(start=True)


def stop_server() -> None:
    """Stop the checkout's server (the one whose pid its home holds)."""
    use_checkout_server()
    subprocess.run([_prefect_exe(), "server", "stop"], check=False)
