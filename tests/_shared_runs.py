"""Pipeline runs that several test modules read: one `dvc repro` of a pipeline in a copy of
the project per session, instead of one per test. Under pytest-xdist a session is a worker:
the tests that read one run carry its xdist_group (`make test` runs --dist loadgroup), so
that they land on one worker and the run is made once. A test that reads a shared run
never changes it (a test that must change its copy makes its own)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import copy_project, project_env

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
TAU2_DVC = "pipelines/tau2/dvc.yaml"
SUPPORT_DESK = "pipelines/support_desk"
SUPPORT_DESK_EPISODES = 400  # small and quick; every assertion on it holds at any size


@dataclass(frozen=True)
class PipelineRun:
    """A reproduced copy of the project and what its `dvc repro` printed."""
    project: Path
    stdout: str


def repro(project: Path, *args: str, timeout: float = 900) -> str:
    """`dvc repro <args>` in `project`, on the suite's server; its stdout, or the test
    fails with the end of both streams."""
    run = subprocess.run(["dvc", "repro", *args], cwd=project, env=project_env(),
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


@pytest.fixture(scope="session")
def tau2_pipeline_run(tmp_path_factory, prefect_server) -> PipelineRun:
    """The tau2 pipeline, every stage, on the real logs (../shared/realdata, linked beside
    the copy), default params."""
    if not (REAL / "tau2-bench").is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    root = tmp_path_factory.mktemp("tau2")
    (root / "shared").mkdir()
    (root / "shared" / "realdata").symlink_to(REAL.resolve())
    (root / "project").mkdir()
    project = copy_project(root / "project")  # its ../shared/realdata is the link above
    return PipelineRun(project, repro(project, TAU2_DVC))


@pytest.fixture(scope="session")
def support_desk_pipeline_run(tmp_path_factory, prefect_server) -> PipelineRun:
    """The support-desk pipeline, every stage, at SUPPORT_DESK_EPISODES conversations."""
    project = copy_project(tmp_path_factory.mktemp("support_desk"))
    params_path = project / SUPPORT_DESK / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["support_desk"]["episodes"] = SUPPORT_DESK_EPISODES
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    return PipelineRun(project, repro(project, f"{SUPPORT_DESK}/dvc.yaml"))
