"""The stages as a user runs them: flows on a real local Prefect server, `dvc repro` in a
real DVC repo (a temp copy of the project), and the server started on demand."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ISOLATION_VARS, copy_project, project_env

pytestmark = pytest.mark.integration

SMALL = {"calculator": {"episodes": 120}}


def _run(cmd: list[str], cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env or project_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_flows_run_on_the_local_server_and_publish_artifacts(tmp_path, prefect_server,
                                                             monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.generate import generate_flow
    from flows.ingest import ingest_flow

    project = copy_project(tmp_path, **SMALL)
    monkeypatch.chdir(project)
    assert generate_flow(return_state=True).is_completed()
    good = ingest_flow(return_state=True)
    assert good.is_completed()
    summary = json.loads((project / "reports/ingest/summary.json").read_text())
    assert summary["good_coverage"]["accepted"] == summary["good_coverage"]["read"] > 0

    # Break the raw log beyond max_bad_fraction: the flow run fails, with the counts.
    raw = project / "data/raw/calculator/good_coverage.jsonl"
    lines = raw.read_text().splitlines()
    raw.write_text("\n".join(lines[:-20] + ["garbage"] * 20) + "\n")
    bad = ingest_flow(return_state=True)
    assert bad.is_failed()
    assert "quarantined" in str(bad.message) or "quarantined" in repr(bad)

    with get_client(sync_client=True) as client:
        for state, expected in ((good, "COMPLETED"), (bad, "FAILED")):
            run_id = state.state_details.flow_run_id
            assert client.read_flow_run(run_id).state.type.value == expected
            artifacts = client.read_artifacts(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
            published = [a for a in artifacts if a.key == "calculator-ingest-summary"]
            assert len(published) == 1 and "good_coverage" in published[0].data


def test_dvc_repro_in_a_fresh_copy(tmp_path, prefect_server):
    project = copy_project(tmp_path, **SMALL)
    first = _run(["dvc", "repro"], project)
    assert first.returncode == 0, first.stdout + first.stderr
    for stage in ("generate", "ingest", "validate", "relabel", "coverage", "train", "table"):
        assert f"Running stage '{stage}'" in first.stdout
    assert json.loads((project / "reports/validate/summary.json").read_text())[
        "good_coverage"]["success"] is True

    started = time.monotonic()
    again = _run(["dvc", "repro"], project)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout
    assert time.monotonic() - started < 10

    # A changed ingest knob reruns ingest and what follows, never generate.
    params = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(params.replace("batch_lines: 25000",
                                                        "batch_lines: 1000"))
    partial = _run(["dvc", "repro"], project)
    assert partial.returncode == 0, partial.stdout + partial.stderr
    assert "Stage 'generate' didn't change" in partial.stdout
    assert "Running stage 'ingest'" in partial.stdout

    # A changed reward weight reruns relabel and what follows, nothing before it.
    params = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(params.replace("format_valid: 0.0",
                                                        "format_valid: 0.5"))
    reweighted = _run(["dvc", "repro"], project)
    assert reweighted.returncode == 0, reweighted.stdout + reweighted.stderr
    for stage in ("generate", "ingest", "validate"):
        assert f"Stage '{stage}' didn't change" in reweighted.stdout
    for stage in ("relabel", "coverage", "train"):
        assert f"Running stage '{stage}'" in reweighted.stdout
    relabelled = json.loads((project / "reports/relabel/summary.json").read_text())
    assert relabelled["weights"]["format_valid"] == 0.5
    assert relabelled["datasets"]["good_coverage"]["rows_reward_changed"] > 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_stage_with_no_server_running_starts_one(tmp_path):
    """As after `make stop`: the stage starts the local server in the background and says
    so, instead of failing or using a temporary server per process. The copy's prefect.toml
    decides home and database (its .prefect/); only the port is moved off the user's."""
    project = copy_project(tmp_path, **SMALL)
    port = _free_port()
    env = {k: v for k, v in project_env().items() if k not in ISOLATION_VARS}
    env.update(PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
               PREFECT_SERVER_API_PORT=str(port))
    try:
        status = _run([sys.executable, "-m", "tracerl", "server", "status"], project, env)
        assert status.returncode == 1 and "not running" in status.stdout
        ran = _run([sys.executable, "-m", "tracerl", "run", "generate"], project, env)
        assert ran.returncode == 0, ran.stderr
        assert "starting it in the background" in ran.stderr
        assert (project / "data/raw/calculator/good_coverage.jsonl").is_file()
        assert (project / ".prefect" / "prefect.db").is_file()  # its database is local
        # The next stage finds it running and starts nothing.
        again = _run([sys.executable, "-m", "tracerl", "run", "ingest"], project, env)
        assert again.returncode == 0 and "starting" not in again.stderr
        # What `make run` prints last: the UI of the server the stages used, on its port.
        shown = _run([sys.executable, "-m", "tracerl", "results"], project, env)
        assert shown.returncode == 0, shown.stderr
        assert f"Prefect UI (flow runs, artifacts): http://127.0.0.1:{port}" in shown.stdout
    finally:
        _run([sys.executable, "-m", "tracerl", "server", "stop"], project, env)
    assert os.path.exists(project / ".prefect")
