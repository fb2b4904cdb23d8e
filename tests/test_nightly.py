"""The nightly deployment as a user runs it: deployed from prefect.yaml to a process work
pool on a Prefect server of the test's own, executed by a worker, over a real DVC repo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import BIN, copy_project
from tests.inbox_logs import inbox_log
from tests.own_prefect import own_server

pytestmark = pytest.mark.integration

SMALL = {"calculator": {"episodes": 120}, "table": {"mc_episodes": 500},
         "ope": {"n_boot": 100, "critic": {"iterations": 100}}}
STAGES = ["generate", "ingest", "validate", "relabel", "coverage", "train", "table", "ope",
          "report", "export"]


def _run(cmd, cwd, env, timeout=300):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{cmd}: {done.stdout}\n{done.stderr}"
    return done


def _trigger_and_wait(client, deployment_id, timeout=900):
    run = client.create_flow_run_from_deployment(deployment_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(run.id)
        if run.state is not None and run.state.is_final():
            return run
        time.sleep(2)
    raise AssertionError(f"nightly run {run.id} not finished in {timeout} s: {run.state}")


def _artifact(client, run_id, key) -> str:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    found = client.read_artifacts(artifact_filter=ArtifactFilter(
        key=ArtifactFilterKey(any_=[key]), flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))
    assert len(found) == 1, f"{key}: {len(found)} artifacts"
    return found[0].data


def _count(summary: str, what: str) -> int:
    return int(re.search(rf"\| {what} \| (\d+) \|", summary).group(1))


def _children(client, run_id) -> dict[str, object]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run_id])))
    return {next((t[6:] for t in r.tags if t.startswith("stage:")), r.name.split(" ")[0]): r
            for r in runs}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def test_nightly_lands_new_inbox_files_once_and_runs_the_stages_as_subflows(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project", **SMALL)
    inbox = project / "data" / "inbox"
    rows_a = inbox_log(inbox / "a.jsonl", "night1-a", seed=101)
    rows_b = inbox_log(inbox / "no_mul_support" / "b.jsonl", "night1-b", seed=102,
                       dataset="no_mul_support")
    with own_server(tmp_path / "prefect-home") as env:
        _run(["prefect", "work-pool", "create", "tracerl-local", "--type", "process"],
             project, env)
        _run(["prefect", "--no-prompt", "deploy", "--all"], project, env)
        _run([sys.executable, "-m", "tracerl", "worker", "start"], project, env)
        worker_pid = int((tmp_path / "prefect-home" / "worker.pid").read_text())
        try:
            with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
                    get_client(sync_client=True) as client:
                deployment = client.read_deployment_by_name("nightly/nightly")
                assert deployment.schedules and deployment.schedules[0].schedule.cron

                # Night 1: two new files land, every stage runs as a child of the run.
                first = _trigger_and_wait(client, deployment.id)
                assert first.state.is_completed(), first.state.message
                assert "stage:nightly" in first.tags and first.name.startswith("nightly · ")
                children = _children(client, first.id)
                assert sorted(children) == sorted([*STAGES, "land"])  # land: inbox files
                assert all(c.state.is_completed() for c in children.values())
                summary = _artifact(client, first.id, "calculator-nightly-summary")
                assert _count(summary, "new files") == 2
                assert _count(summary, "files landed") == 2
                assert _count(summary, "rows landed") == rows_a + rows_b
                metrics = orjson.loads((project / "metrics/ingest.json").read_bytes())
                assert metrics["good_coverage"]["landed_rows"] == rows_a
                assert metrics["no_mul_support"]["landed_rows"] == rows_b
                ingest_summary = _artifact(client, children["ingest"].id,
                                           "calculator-ingest-summary")
                assert "| good_coverage | " in ingest_summary and "PASS" in ingest_summary

                # Night 2: nothing new; nothing lands, no stage reruns, and it says so.
                second = _trigger_and_wait(client, deployment.id)
                assert second.state.is_completed(), second.state.message
                summary = _artifact(client, second.id, "calculator-nightly-summary")
                assert _count(summary, "new files") == 0
                assert _count(summary, "files seen before") == 2
                assert "nothing new" in summary
                assert not _children(client, second.id)

                # Night 3: one new file (and a re-dropped old one): only it lands.
                rows_c = inbox_log(inbox / "c.jsonl", "night3-c", seed=103)
                (inbox / "a-again.jsonl").write_bytes((inbox / "a.jsonl").read_bytes())
                third = _trigger_and_wait(client, deployment.id)
                assert third.state.is_completed(), third.state.message
                summary = _artifact(client, third.id, "calculator-nightly-summary")
                assert _count(summary, "new files") == 1
                assert _count(summary, "rows landed") == rows_c
                files = _artifact(client, third.id, "calculator-nightly-files")
                assert "c.jsonl | good_coverage | landed" in files
                assert "ingest" in _children(client, third.id)
                manifest = orjson.loads((project / "data/manifest.json").read_bytes())
                assert len(manifest) == 3
                metrics = orjson.loads((project / "metrics/ingest.json").read_bytes())
                assert metrics["good_coverage"]["landed_rows"] == rows_a + rows_c
        finally:
            # `make stop` stops the worker for certain (and the server, none here).
            stop = subprocess.run(["make", "stop", f"BIN={BIN}"], cwd=project, env=env,
                                  capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not _alive(worker_pid)
        assert not (tmp_path / "prefect-home" / "worker.pid").exists()
