"""The support_desk pipeline (pipelines/support_desk): generate → ingest → validate →
relabel → coverage by `dvc repro` in a fresh copy of the project, with the suite's own
Prefect server; what it writes is the simulator's episodes, read back through the adapter."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import yaml

from tests._shared_runs import SUPPORT_DESK_EPISODES
from tests.conftest import project_env
from tracerl.config.schema import validate_params
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk.features import to_transitions
from tracerl.io.fileio import read_table
from tracerl.rl.encoding import get_encoder

pytestmark = pytest.mark.integration

PIPELINE = "pipelines/support_desk"
EPISODES = SUPPORT_DESK_EPISODES


def test_the_pipeline_params_are_valid_and_match_the_simulator() -> None:
    from tests.conftest import ROOT

    path = ROOT / PIPELINE / "params.yaml"
    params = yaml.safe_load(path.read_text())
    validate_params(params, path)
    # The relabel weights are the simulator's reward, so relabelled rewards are its rewards.
    env, weights = params["support_desk"]["env"], params["relabel"]["weights"]
    assert (weights["step_cost"], weights["tool_error"], weights["escalate"]) == (
        env["step_cost"], env["error_cost"], env["escalate_reward"])


@pytest.mark.xdist_group("support_desk_pipeline_run")
def test_support_desk_pipeline_in_a_fresh_copy(support_desk_pipeline_run) -> None:
    project, stdout = support_desk_pipeline_run.project, support_desk_pipeline_run.stdout
    params = yaml.safe_load((project / PIPELINE / "params.yaml").read_text())
    assert params["support_desk"]["episodes"] == EPISODES

    for stage in ("generate", "ingest", "validate", "relabel", "coverage"):
        assert f"Running stage '{PIPELINE}/dvc.yaml:{stage}'" in stdout, stage

    raw = project / "data/support_desk/raw/scripted.jsonl"
    assert len(raw.read_bytes().splitlines()) == EPISODES
    metrics = project / "metrics/support_desk"
    ingest = json.loads((metrics / "ingest.json").read_text())["scripted"]
    assert ingest["read"] == ingest["accepted"] == ingest["episodes"] == EPISODES
    assert json.loads((metrics / "validate.json").read_text())["scripted"]["failed"] == 0
    relabel = json.loads((project / "reports/support_desk/relabel/summary.json").read_text())
    diagnostics = relabel["datasets"]["scripted"]["verifier_diagnostics"]
    assert diagnostics["support_desk_success@1"]["agreement"] == 1.0
    coverage = json.loads((metrics / "coverage.json").read_text())["scripted"]
    assert coverage["n_episodes"] == EPISODES

    # The labelled steps are the simulator's episodes of these params (seed + dataset 0).
    episodes = sd.generate(sd.FixtureParams.from_dict(params["support_desk"]))
    oracle = to_transitions(episodes)
    tr = get_encoder("support_desk").transitions(
        read_table(project / "data/support_desk/labelled/scripted/steps"))
    for name in ("s", "a", "r", "done", "behavior_logp", "rows"):
        np.testing.assert_array_equal(*(getattr(x, name) for x in (tr, oracle)), name)
    np.testing.assert_array_equal(tr.states(), oracle.states())

    again = subprocess.run(["dvc", "repro", f"{PIPELINE}/dvc.yaml"], cwd=project,
                           env=project_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout
