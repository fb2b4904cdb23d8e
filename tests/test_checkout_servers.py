"""One Prefect server per checkout: two checkouts running their pipelines at once (what
`make run` runs: every pipeline whose inputs are there, here the calculator and the support
desk; tau2's shared logs are absent from the copies) start two servers, one each, and
every run and artifact lands on its own checkout's — none crossing; each pipeline's
`ope-summary` is that pipeline's; runs are tagged with their pipeline and carry no per-run
tag. Both copies are given the same first port (a free one, never the project's), so the
second must find its own.

And: a checkout pointed (PREFECT_API_URL) at another checkout's server refuses, naming it;
`dvc exp run` tags its runs with the experiment's name."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.conftest import ISOLATION_VARS, copy_project, project_env
from tests.own_prefect import free_port

pytestmark = pytest.mark.integration

SMALL = {"calculator": {"episodes": 120}, "table": {"mc_episodes": 500},
         "ope": {"n_boot": 100, "critic": {"iterations": 100}}}
DESK = {"support_desk": {"episodes": 200, "truth": {"episodes": 2000}},
        "ope": {"n_boot": 50}, "train": {"naive_fqi": {"iterations": 5},
                                         "constrained_fqi": {"iterations": 5}}}


def _merge(base: dict, changes: dict) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _checkout(root: Path, port: int, episodes: int) -> Path:
    """A copy of the project, committed (its commit names its runs), first port `port`."""
    root.mkdir()
    project = copy_project(root, **{**SMALL, "calculator": {"episodes": episodes}})
    desk = project / "pipelines/support_desk/params.yaml"
    params = yaml.safe_load(desk.read_text())
    _merge(params, DESK)
    desk.write_text(yaml.safe_dump(params, sort_keys=False))
    toml = project / "prefect.toml"
    toml.write_text(toml.read_text().replace("4200", str(port)))
    for cmd in (["git", "add", "-A"], ["git", "-c", "user.email=t@t", "-c", "user.name=t",
                                       "commit", "-qm", "checkout"]):
        subprocess.run(cmd, cwd=project, check=True, capture_output=True)
    return project


def _env() -> dict[str, str]:
    """A user's shell: no Prefect address of the suite's, so each checkout picks its own."""
    return {k: v for k, v in project_env().items() if k not in ISOLATION_VARS}


def _run(cmd: list[str], project: Path, env: dict | None = None, timeout: float = 1800):
    return subprocess.run(cmd, cwd=project, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)


def _make_run(project: Path) -> subprocess.CompletedProcess:
    """`make run` without the venv setup: the server, then every runnable pipeline's ope."""
    started = _run([sys.executable, "-m", "tracerl", "server", "start"], project)
    assert started.returncode == 0, started.stderr
    targets = _run([sys.executable, "-m", "tracerl", "inputs", "--runnable"], project)
    assert targets.stdout.split() == ["dvc.yaml", "pipelines/support_desk/dvc.yaml"]
    return _run(["dvc", "repro", "ope", "pipelines/support_desk/dvc.yaml:ope"], project)


def _get(url: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())


def _head(project: Path) -> str:
    return _run(["git", "rev-parse", "HEAD"], project).stdout.strip()[:12]


def test_two_checkouts_at_once_never_cross(tmp_path):
    port = free_port()
    a = _checkout(tmp_path / "a", port, episodes=120)
    b = _checkout(tmp_path / "b", port, episodes=160)
    try:
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(_make_run, (a, b)))
        for d in done:
            assert d.returncode == 0, d.stdout[-3000:] + d.stderr[-3000:]
        urls = {p: _run([sys.executable, "-m", "tracerl", "server", "url"], p).stdout.strip()
                for p in (a, b)}
        assert sorted(urls.values()) == sorted(
            f"http://127.0.0.1:{p}/api" for p in (port, port + 1)), urls
        for project, api in urls.items():
            other = b if project == a else a
            home = _get(f"{api}/admin/settings")["home"]
            assert Path(home) == project / ".prefect"  # its own home and database
            runs = _get(f"{api}/flow_runs/filter", {"limit": 200})
            assert runs
            mine, theirs = f"commit:{_head(project)}", f"commit:{_head(other)}"
            for run in runs:
                commits = [t for t in run["tags"] if t.startswith("commit:")]
                assert commits and all(t.startswith(mine) for t in commits), run["tags"]
                assert not any(t.startswith(theirs) for t in run["tags"])
                assert not any(t.startswith("pid:") for t in run["tags"])
                assert {t.split(":")[0] for t in run["tags"]} >= {"pipeline", "stage"}
            tags = {t for run in runs for t in run["tags"]}
            assert {"pipeline:calculator", "pipeline:support_desk"} <= tags
            assert len(tags) < 40  # a filter to read, not one tag per run
            stages = {(t["pipeline"], t["stage"]) for t in (
                dict(x.split(":", 1) for x in run["tags"] if ":" in x) for run in runs)}
            assert ("calculator", "ope") in stages and ("support_desk", "ope") in stages
            # each pipeline's ope-summary is that pipeline's, from this checkout's runs
            by_id = {run["id"]: run for run in runs}
            for pipeline, key, dataset in (("calculator", "calculator-ope-summary",
                                            "good_coverage"),
                                           ("support_desk", "support-desk-ope-summary",
                                            "scripted")):
                [latest] = _get(f"{api}/artifacts/latest/filter",
                                {"artifacts": {"key": {"any_": [key]}}})
                assert dataset in latest["data"], latest["data"]
                run = by_id[latest["flow_run_id"]]
                assert f"pipeline:{pipeline}" in run["tags"] and "stage:ope" in run["tags"]
    finally:
        for project in (a, b):
            _run([sys.executable, "-m", "tracerl", "server", "stop"], project, timeout=120)


def test_a_checkout_refuses_another_checkouts_server(tmp_path):
    port = free_port()
    a = _checkout(tmp_path / "a", port, episodes=120)
    b = _checkout(tmp_path / "b", port, episodes=120)
    try:
        assert _run([sys.executable, "-m", "tracerl", "server", "start"], a).returncode == 0
        api = _run([sys.executable, "-m", "tracerl", "server", "url"], a).stdout.strip()
        pointed = {**_env(), "PREFECT_API_URL": api}
        refused = _run([sys.executable, "-m", "tracerl", "run", "generate"], b, pointed)
        assert refused.returncode == 1
        assert f"is the Prefect server of {a}" in refused.stderr, refused.stderr
        assert _get(f"{api}/flow_runs/count", {}) == 0  # nothing reached a's server
    finally:
        for project in (a, b):
            _run([sys.executable, "-m", "tracerl", "server", "stop"], project, timeout=120)


def test_an_experiment_tags_its_runs_with_its_name(tmp_path):
    a = _checkout(tmp_path / "a", free_port(), episodes=120)
    try:
        ran = _run(["dvc", "exp", "run", "--name", "fewer-episodes", "-S",
                    "calculator.episodes=100", "ingest"], a)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        api = _run([sys.executable, "-m", "tracerl", "server", "url"], a).stdout.strip()
        runs = _get(f"{api}/flow_runs/filter", {"limit": 50})
        assert runs and all("exp:fewer-episodes" in r["tags"] for r in runs)
    finally:
        _run([sys.executable, "-m", "tracerl", "server", "stop"], a, timeout=120)
