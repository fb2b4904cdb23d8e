"""`tracerl init` as a new user runs it, in a temp copy of the project (a git repo with
DVC, ../shared reachable as the repository expects, the suite's own Prefect server): two
tau2-bench files copied to a folder of their own become a pipeline that `dvc repro` runs to
the report with no edit; OpenTelemetry logs (another format, three agents) run through
coverage; the generated files validate and their code deps are current."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import copy_project, project_env
from tracerl.config.schema import validate_params

pytestmark = pytest.mark.integration

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
TAU2 = ("gpt-4.1_airline.json", "ft-gpt-4.1-sft_airline.json")


def _checked(path: Path) -> dict:
    """The params file as written, after checking it validates."""
    params = yaml.safe_load(path.read_text())
    validate_params(params, path)
    return params


def _run(project: Path, *cmd: str) -> subprocess.CompletedProcess:
    out = subprocess.run(list(cmd), cwd=project, env=project_env(), capture_output=True,
                         text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory, prefect_server):
    if not (REAL / "tau2-bench").is_dir():
        pytest.skip("no real logs at ../shared/realdata")
    root = tmp_path_factory.mktemp("init")
    (root / "shared").mkdir()
    (root / "shared" / "realdata").symlink_to(REAL.resolve())
    (root / "project").mkdir()
    project = copy_project(root / "project")
    logs = root / "my-logs"  # outside the repository: init copies them in
    logs.mkdir()
    for name in TAU2:
        shutil.copy(REAL / "tau2-bench" / name, logs / name)
    out = _run(project, "python", "-m", "tracerl", "init", "mine",
               "--logs", *(str(logs / n) for n in TAU2))
    assert "run it: dvc repro pipelines/mine/dvc.yaml" in out.stdout
    _run(project, "dvc", "repro", "pipelines/mine/dvc.yaml")
    return project


def test_the_pipeline_runs_to_the_report_on_the_copied_logs(project):
    html = (project / "reports/mine/report/index.html").read_text()
    assert '<section id="compare"' in html and '<section id="ope"' in html
    compare = json.loads((project / "metrics/mine/compare.json").read_text())
    pair = compare["pairs"]["ft-gpt-4.1-sft_airline_vs_gpt-4.1_airline"]
    assert (pair["n_tasks"], pair["agent_score"], pair["baseline_score"]) == (20, 0.65, 0.5)
    ingest = json.loads((project / "metrics/mine/ingest.json").read_text())
    assert {k: v["accepted"] for k, v in ingest.items()} == {
        "gpt-4.1_airline": 20, "ft-gpt-4.1-sft_airline": 20}
    assert json.loads((project / "metrics/mine/ope.json").read_text())


def test_the_generated_params_validate_and_the_logs_are_dvc_tracked(project):
    params = _checked(project / "pipelines/mine/params.yaml")
    assert params["datasets"]["gpt-4.1_airline"]["format"] == "tau2"
    assert params["datasets"]["gpt-4.1_airline"]["inputs"] == ["data/mine/raw/gpt-4.1_airline"]
    assert (project / "data/mine/raw/gpt-4.1_airline" / TAU2[0]).read_bytes() == (
        REAL / "tau2-bench" / TAU2[0]).read_bytes()
    tracked = yaml.safe_load((project / "data/mine/raw.dvc").read_text())
    assert tracked["outs"][0]["path"] == "raw"
    assert "/raw" in (project / "data/mine/.gitignore").read_text().split()
    _run(project, "python", "-m", "tracerl", "deps", "--check")  # the generator's own output
    status = _run(project, "dvc", "status", "pipelines/mine/dvc.yaml").stdout
    assert "up to date" in status


def test_logs_of_another_format_without_outcomes_stop_at_relabel_saying_what_to_add(project):
    """OpenTelemetry logs (three agents) carry no outcome: ingest and validate run, then
    relabel stops with one message naming what to add, not a green run of zeros."""
    otel = REAL / "otel-genai"
    if not otel.is_dir():
        pytest.skip("no OpenTelemetry sample at ../shared/realdata/otel-genai")
    _run(project, "python", "-m", "tracerl", "init", "otel", "--logs", str(otel))
    params = _checked(project / "pipelines/otel/params.yaml")
    assert {d["format"] for d in params["datasets"].values()} == {"otel-genai"}
    out = subprocess.run(["dvc", "repro", "pipelines/otel/dvc.yaml:coverage"], cwd=project,
                         env=project_env(), capture_output=True, text=True, timeout=1200)
    assert out.returncode != 0
    said = [line for line in out.stderr.splitlines()
            if line.startswith("error: stage relabel failed: every episode's return is 0")]
    assert len(said) == 1, out.stderr[-3000:]
    assert "your own outcome verifier, named by import path" in said[0]
    assert sorted(json.loads((project / "metrics/otel/ingest.json").read_text())) == \
        sorted(params["datasets"])
    assert not (project / "metrics/otel/relabel.json").exists()
    assert not (project / "metrics/otel/coverage.json").exists()


def test_a_missing_path_and_an_unknown_format_exit_2_naming_the_file(project, tmp_path):
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"hello": "world"}))
    for logs, message in ((tmp_path / "missing.json", "missing.json: no such file or folder"),
                          (odd, "odd.json: its first record (keys: hello) is of no known log "
                                "format")):
        out = subprocess.run(["python", "-m", "tracerl", "init", "bad", "--logs", str(logs)],
                             cwd=project, env=project_env(), capture_output=True, text=True)
        assert out.returncode == 2 and message in out.stderr, out.stderr
    assert not (project / "pipelines/bad").exists()


def test_the_nightly_run_serves_the_pipeline(project):
    """A file dropped in the pipeline's inbox is landed and the pipeline brought up to date
    by the nightly flow with `pipeline: mine` (the deployment init adds to prefect.yaml)."""
    deployments = yaml.safe_load((project / "prefect.yaml").read_text())["deployments"]
    mine = next(d for d in deployments if d["name"] == "nightly-mine")
    assert mine["parameters"] == {"force": False, "pipeline": "mine"}
    doc = json.loads((REAL / "tau2-bench" / TAU2[0]).read_text())
    doc["simulations"] = [{**s, "id": f"{s['id']}-night", "trial": 1}
                          for s in doc["simulations"][:3]]
    dropped = project / "data/mine/inbox/gpt-4.1_airline/tonight.json"
    dropped.parent.mkdir(parents=True)
    dropped.write_text(json.dumps(doc))
    out = _run(project, "python", "-c", "import json; from flows.nightly import nightly_flow; "
               "print(json.dumps(nightly_flow(pipeline='mine')))")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["new"] == 1 and result["landed_rows"] > 0
    assert "pipelines/mine/dvc.yaml:ingest" in result["ran"]
    assert "pipelines/mine/dvc.yaml:report" in result["ran"]
    ingest = json.loads((project / "metrics/mine/ingest.json").read_text())
    assert ingest["gpt-4.1_airline"]["landed_files"] == 1
