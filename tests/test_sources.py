"""A pipeline whose input logs are absent (the tau2 pipeline without ../shared/realdata):
`tracerl inputs` names each missing file, where it resolves and where it comes from, and
leaves the pipeline out of `make run`'s targets (or fails with --require); the ingest stage
refuses to start with the same message, before any server or flow; `tracerl results` says
it first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import copy_project, project_env
from tracerl.config.params import load_params
from tracerl.data.sources import missing_inputs, missing_message

pytestmark = pytest.mark.integration  # a copy of the project (git) and tracerl commands

TAU2 = Path("pipelines/tau2/params.yaml")


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """A copy of the project with no ../shared beside it."""
    root = tmp_path_factory.mktemp("bare")
    (root / "project").mkdir()
    project = copy_project(root / "project")
    assert not (root / "shared").exists()
    return project


def _tracerl(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracerl", *args], cwd=project,
                          env=project_env(), capture_output=True, text=True, timeout=300)


def test_missing_inputs_are_named_with_their_source(bare):
    params = load_params(bare / TAU2)
    missing = missing_inputs(params, bare)
    assert {m.dataset for m in missing} == set(params["datasets"])
    text = missing_message(str(TAU2), missing)
    for m in missing:
        assert m.path in text and m.source and m.source in text
    assert "datasets.<name>.inputs in pipelines/tau2/params.yaml" in text
    assert missing_inputs(load_params(bare / "params.yaml"), bare) == []  # a fixture: none


def test_inputs_leaves_the_pipeline_out_and_says_why(bare):
    done = _tracerl(bare, "inputs", "--runnable")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["dvc.yaml", "pipelines/support_desk/dvc.yaml"]
    assert "warning: pipeline pipelines/tau2/dvc.yaml is skipped" in done.stderr
    assert "gpt-4.1_airline.json" in done.stderr and "sierra-research/tau2-bench" in done.stderr
    assert "REQUIRE_INPUTS=1" in done.stderr
    required = _tracerl(bare, "inputs", "--require")
    assert required.returncode == 1 and "error: pipeline pipelines/tau2/dvc.yaml" in required.stderr


def test_the_ingest_stage_refuses_to_start_naming_what_is_missing(bare):
    done = _tracerl(bare, "run", "ingest", "--params", str(TAU2))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: stage ingest not started: its input logs are missing")
    assert "gpt-4.1_airline.json" in done.stderr and "Traceback" not in done.stderr
    assert "Prefect server" not in done.stderr  # refused before any server was started


def test_results_say_the_pipeline_was_not_run(bare):
    done = _tracerl(bare, "results", "--params", str(TAU2))
    assert done.returncode == 0, done.stderr
    assert "its input logs are missing" in done.stderr


def test_every_present_input_makes_the_pipeline_runnable():
    """Here (the shared sample mounted, or not), `--runnable` is what is present."""
    root = Path(__file__).resolve().parents[1]
    done = _tracerl(root, "inputs", "--runnable")
    assert done.returncode == 0
    shared = (root / "../shared/realdata/tau2-bench/gpt-4.1_airline.json").exists()
    assert ("pipelines/tau2/dvc.yaml" in done.stdout.split()) == shared
