"""A failing stage fails the nightly run, naming the stage and the reason, and what came
before it stays in place."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import copy_project, project_env

pytestmark = pytest.mark.integration


def test_a_failing_stage_fails_the_nightly_run_with_its_name_and_reason(tmp_path,
                                                                        prefect_server):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    (tmp_path / "project").mkdir()
    # A bound changed in params but gx/ not regenerated: validate must refuse to run.
    project = copy_project(tmp_path / "project", calculator={"episodes": 60},
                           validate={"reward_min": -1.02, "reward_max": 0.9})
    done = subprocess.run(
        [sys.executable, "-c", "from flows.nightly import nightly_flow; "
         "s = nightly_flow(return_state=True); print('RUN', s.state_details.flow_run_id)"],
        cwd=project, env=project_env(), capture_output=True, text=True, timeout=900)
    run_id = next(line.split()[1] for line in done.stdout.splitlines()
                  if line.startswith("RUN "))
    with temporary_settings({PREFECT_API_URL: prefect_server}), \
            get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        summary = next(a.data for a in client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])))
            if a.key == "calculator-nightly-summary")
    assert run.state.is_failed()
    assert "stage validate failed" in run.state.message
    assert "FAIL at stage validate" in summary
    assert "gx/ does not match params" in done.stdout + done.stderr
    # The stages before it kept their outputs; relabel never ran.
    assert (project / "data/ingested/good_coverage/steps").is_dir()
    assert not (project / "data/labelled").exists()
