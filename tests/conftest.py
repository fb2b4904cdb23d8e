"""Shared fixtures: a Prefect server and home of the suite's own, and throw-away copies of
the project.

The suite never talks to the server `make run` uses (prefect.toml: 127.0.0.1:4200, home
.prefect/). At start-up, before anything imports Prefect, it points Prefect at a temporary
home, a free port and a database in that home through environment variables, which win
over prefect.toml (Prefect 3: init > environment > .env > prefect.toml > pyproject.toml >
profiles). Every subprocess (stage commands, `dvc repro` in temp copies) inherits them.
The server itself starts on first use (`prefect_server` fixture) and stops at the end.
Under pytest-xdist every worker isolates itself the same way: a home, a port and a server
of its own, so two workers never share a database.

The fast loop's rule (`make test-fast`: every test not marked `integration`, in minutes):
a test that starts a process (a subprocess, a process pool, a server) is marked
`integration`. The guard below fails an unmarked test that starts one, in every run, so the
rule holds for the tests written after it.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import json
import os
import resource
import shutil
import signal
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

import pytest
import yaml

# before anything loads numpy: tracerl pins OpenBLAS's kernels (tracerl/__init__.py), and the
# suite compares what it computes in this process with what the stages computed in theirs
import tracerl  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# The variables that decide which server and which files Prefect uses.
ISOLATION_VARS = ("PREFECT_HOME", "PREFECT_API_URL", "PREFECT_UI_URL",
                  "PREFECT_SERVER_API_HOST", "PREFECT_SERVER_API_PORT",
                  "PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_PROFILES_PATH")

_home: tempfile.TemporaryDirectory | None = None
_project_runs_before: int | None = None


def project_api_url(root: Path = ROOT) -> str:
    """The API URL `make run` uses: prefect.toml's, as a user's shell sees it."""
    config = tomllib.loads((root / "prefect.toml").read_text())
    return config["api"]["url"].rstrip("/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flow_run_count(api: str) -> int | None:
    """Flow runs a server holds, or None when nothing answers there."""
    request = urllib.request.Request(f"{api}/flow_runs/count", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return int(json.loads(resp.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _isolate() -> None:
    global _home
    _home = tempfile.TemporaryDirectory(prefix="tracerl-test-prefect-")
    home = Path(_home.name)
    port = _free_port()
    os.environ.update({
        "PREFECT_HOME": str(home),
        "PREFECT_PROFILES_PATH": str(home / "profiles.toml"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
    })
    # The UI URL is derived from the API URL; a profile or a Cloud key of the user's
    # shell would point elsewhere.
    for var in ("PREFECT_UI_URL", "PREFECT_PROFILE", "PREFECT_API_KEY"):
        os.environ.pop(var, None)


def _refuse_the_project_server(root: Path = ROOT) -> None:
    """Stop the session if Prefect, as configured from the project root, would still reach
    the project's server, home or database."""
    probe = ("import json; from prefect.settings import get_current_settings as g; s = g(); "
             "print(json.dumps([str(s.api.url), str(s.home), "
             "s.server.database.connection_url.get_secret_value()]))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=dict(os.environ),
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        pytest.exit(f"cannot read Prefect's settings:\n{out.stderr}", returncode=3)
    api, home, db = json.loads(out.stdout.strip().splitlines()[-1])
    project_home = (root / ".prefect").resolve()
    if (api.rstrip("/") == project_api_url(root) or (root / home).resolve() == project_home
            or ".prefect/prefect.db" in db):
        pytest.exit(f"refusing to run: the tests would use the project's Prefect server or "
                    f"home (api {api}, home {home}, database {db})", returncode=3)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--peak-memory", metavar="FILE", default=None,
                     help="append a line to FILE for each test that raised its process's "
                          "peak RSS or its largest child's (MB): which tests to make lean or "
                          "keep on one xdist worker")


def pytest_configure(config: pytest.Config) -> None:
    global _project_runs_before
    _isolate()
    if hasattr(config, "workerinput"):
        # a pytest-xdist worker: a home and port of its own (the controller's, inherited,
        # would be shared by every worker); the controller has refused the project's server
        return
    _refuse_the_project_server()
    _project_runs_before = flow_run_count(project_api_url())


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if hasattr(config, "workerinput"):
        return
    api = project_api_url()
    after = flow_run_count(api)
    before = _project_runs_before
    if before is None and after is None:
        line = f"project Prefect server ({api}): not running before or after the tests"
    else:
        line = (f"project Prefect server ({api}): {before} flow runs before the tests, {after} "
                "after (runs other clients made meanwhile count too)")
    terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _home is not None:
        _home.cleanup()


class ProcessInUnitTest(RuntimeError):
    """An unmarked test started a process."""


# Every way Python starts a process: subprocess (Popen), multiprocessing's spawn and
# forkserver (_posixsubprocess.fork_exec), its fork context (os.fork), os.system and
# posix_spawn.
_SPAWNERS = ((subprocess.Popen, "__init__"), (_posixsubprocess, "fork_exec"), (os, "fork"),
             (os, "forkpty"), (os, "system"), (os, "posix_spawn"), (os, "posix_spawnp"))
_violations = pytest.StashKey[list[str]]()


def _is_integration(item: pytest.Item) -> bool:
    return item.get_closest_marker("integration") is not None


@contextlib.contextmanager
def _no_processes(item: pytest.Item) -> Iterator[None]:
    """While an unmarked test sets up and runs, starting a process raises (and is recorded,
    so that a caller that swallows the error does not hide it)."""
    def refuse(what: str):
        def refused(*args, **kwargs):
            shown = args[1] if what == "subprocess.Popen" and len(args) > 1 else kwargs.get(
                "args", args[:1])
            message = (f"{item.nodeid} started a process ({what}: {shown!r:.200}) but is not "
                       "marked integration: mark it `@pytest.mark.integration` (or the file's "
                       "`pytestmark`), or keep it in-process; `make test-fast` runs the "
                       "unmarked tests only, with no process and no server")
            item.stash.setdefault(_violations, []).append(message)
            raise ProcessInUnitTest(message)
        return refused

    saved = [(owner, name, getattr(owner, name)) for owner, name in _SPAWNERS
             if hasattr(owner, name)]
    for owner, name, _ in saved:
        label = "subprocess.Popen" if owner is subprocess.Popen else f"{owner.__name__}.{name}"
        setattr(owner, name, refuse(label))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if _is_integration(item):
        return (yield)
    if "prefect_server" in item.fixturenames:
        message = (f"{item.nodeid} uses the prefect_server fixture but is not marked "
                   "integration: a test that needs a server is marked `integration`")
        item.stash.setdefault(_violations, []).append(message)
        raise ProcessInUnitTest(message)
    with _no_processes(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if _is_integration(item):
        return (yield)
    with _no_processes(item):
        return (yield)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """xdist_group under `--dist loadgroup`, with pytest 9: pytest-xdist 3.8 names a test's
    group by appending `@group` to `item._nodeid`, which pytest 9 no longer reads (the id
    is `item._id`), so the groups were silently ignored and a shared run made on every
    worker. Done here the same way, where xdist's own did not take."""
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and hasattr(item, "_id") and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


_peaks = {"self": 0, "children": 0}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    path = item.config.getoption("--peak-memory")
    if not path:
        return
    now = {"self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
           "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024}
    if now != _peaks:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(path, "a") as out:
            out.write(f"{worker} {now['self']} {now['children']} {item.nodeid}\n")
        _peaks.update(now)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    violations = item.stash.get(_violations, [])
    if violations and report.when in ("setup", "call"):
        # A test that swallowed the refusal, or an xfail that the refusal satisfied, fails
        # all the same, saying why.
        if not report.failed or hasattr(report, "wasxfail"):
            report.outcome = "failed"
            report.longrepr = "\n".join(violations)
            if hasattr(report, "wasxfail"):
                del report.wasxfail
        violations.clear()
    return report


def _wait_healthy(api: str, proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the test Prefect server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the test Prefect server did not answer at {api} within {seconds:.0f} s")


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """The suite's own Prefect server (temp home and database, free port), started on first
    use and stopped at the end of the session. Every test that runs a flow or a stage
    command asks for it."""
    api = os.environ["PREFECT_API_URL"]
    home = Path(os.environ["PREFECT_HOME"])
    log = open(home / "server.log", "wb")  # noqa: SIM115 (open for the server's lifetime)
    # Its own session, so that stopping it reaches any process it spawned and nothing else.
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--no-ui"],
                            cwd=home, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_healthy(api, proc, 180)
        yield api
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def copy_project(dest: Path, **param_overrides: dict) -> Path:
    """A copy of the project's files as git sees them (tracked + untracked, not ignored),
    in a fresh git repo, with params.yaml sections updated."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    _deep_update(params, param_overrides)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for lock in dest.rglob("dvc.lock"):  # every pipeline starts unreproduced
        lock.unlink()
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def _deep_update(base: dict, overrides: dict) -> None:
    """Nested sections are updated key by key, so an override names only what it changes."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_update(base[key], value)
        else:
            base[key] = value


def project_env(**extra: str) -> dict[str, str]:
    """Environment for stage commands: the project's virtualenv first on PATH, and the
    suite's Prefect isolation (inherited from os.environ)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.update(extra)
    return env


# Pipeline runs several modules read (imported last: the module imports this one's helpers).
from tests._shared_runs import support_desk_pipeline_run, tau2_pipeline_run  # noqa: E402,F401
