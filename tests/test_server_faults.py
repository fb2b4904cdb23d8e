"""Server faults around a stage: a port taken by another program is named (and what
`dvc repro` removed is put back); a server that dies mid-stage stops the stage within
30 s with a message that says so; its flow run does not stay Running."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import copy_project, project_env

SMALL = {"calculator": {"episodes": 120}}


def _run(cmd, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PUBLISH_TABLE = """
from tracerl.io.fileio import write_json
from tracerl.io.staging import stage_outputs
with stage_outputs("table"):
    write_json("metrics/table.json", {"previous": 1})
"""


@pytest.mark.integration
def test_a_taken_port_is_named_and_removed_outputs_come_back(tmp_path):
    project = copy_project(tmp_path)
    env = project_env()
    assert _run([sys.executable, "-c", _PUBLISH_TABLE], project, env).returncode == 0
    (project / "metrics" / "table.json").unlink()  # as `dvc repro` does before the command
    with socket.socket() as squatter:  # a program that is not a Prefect server
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = project_env(PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
                          PREFECT_SERVER_API_PORT=str(port))
        ran = _run([sys.executable, "-m", "tracerl", "run", "table"], project, env, timeout=120)
    assert ran.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert json.loads((project / "metrics" / "table.json").read_text()) == {"previous": 1}
    assert "metrics/table.json" in ran.stderr  # says what it put back


@pytest.mark.integration
def test_server_killed_mid_stage(tmp_path):
    project = copy_project(tmp_path, **SMALL, table={"mc_episodes": 200_000_000})
    port = _free_port()
    env = project_env(PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
                      PREFECT_SERVER_API_PORT=str(port))
    tracerl = [sys.executable, "-m", "tracerl"]
    try:
        for stage in ("generate", "ingest", "validate", "relabel", "train"):
            done = _run([*tracerl, "run", stage], project, env)
            assert done.returncode == 0, done.stderr
        before = (project / "metrics" / "table.json").read_bytes()
        stage = subprocess.Popen([*tracerl, "run", "table"], cwd=project, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(15)  # the flow run is under way (its Monte Carlo runs for minutes)
        assert stage.poll() is None
        _run([*tracerl, "server", "stop"], project, env)
        killed_at = time.monotonic()
        _, err = stage.communicate(timeout=60)
        took = time.monotonic() - killed_at
        assert took < 30, took
        assert stage.returncode == 1
        assert "has not answered" in err and "Traceback" not in err
        assert (project / "metrics" / "table.json").read_bytes() == before
        # The next stage run (server back) marks the orphaned run Crashed.
        assert _run([*tracerl, "server", "start"], project, env).returncode == 0
        again = _run([*tracerl, "run", "train"], project, env)
        assert again.returncode == 0, again.stderr
        assert "marked Crashed" in again.stderr
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import (
            FlowRunFilter,
            FlowRunFilterState,
            FlowRunFilterStateType,
        )
        from prefect.client.schemas.objects import StateType
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
                get_client(sync_client=True) as client:
            running = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(
                    any_=[StateType.RUNNING]))))
        assert running == []
    finally:
        _run([*tracerl, "server", "stop"], project, env)
