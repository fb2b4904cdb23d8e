"""The tau2 pipeline end to end in a temp copy (`dvc repro` there, the suite's own Prefect
server): train, ope and report on the real gpt-4.1 / fine-tuned logs."""

from __future__ import annotations

import hashlib
import json
import subprocess
from html import escape as html_escape
from pathlib import Path

import pytest

from tests.conftest import copy_project, project_env

pytestmark = pytest.mark.integration

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
DVC = "pipelines/tau2/dvc.yaml"


def _repro(project: Path, *args: str) -> None:
    out = subprocess.run(["dvc", "repro", *args], cwd=project, env=project_env(),
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def _load(project: Path, rel: str):
    return json.loads((project / rel).read_text())


def _digest(paths: list[Path]) -> str:
    d = hashlib.sha256()
    for p in sorted(paths):
        d.update(p.read_bytes())
    return d.hexdigest()


def _logged_success(agent: str) -> tuple[float, set[str]]:
    """Mean reward and task ids straight from the raw tau2 results file."""
    sims = json.loads((REAL / "tau2-bench" / f"{agent}_airline.json").read_text())["simulations"]
    return (sum(s["reward_info"]["reward"] for s in sims) / len(sims),
            {str(s["task_id"]) for s in sims})


@pytest.fixture(scope="module")
def tau2_run(tmp_path_factory, prefect_server):
    if not REAL.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    root = tmp_path_factory.mktemp("tau2")
    (root / "shared").mkdir()
    (root / "shared" / "realdata").symlink_to(REAL.resolve())
    (root / "project").mkdir()
    project = copy_project(root / "project")  # its ../shared/realdata is the link above
    _repro(project, DVC)
    return project


def test_bc_heldout_accuracy_is_reported_on_unseen_tasks(tau2_run):
    metrics = _load(tau2_run, "metrics/tau2/train.json")
    summary = _load(tau2_run, "reports/tau2/train/summary.json")
    for agent in ("gpt-4.1", "ft-gpt-4.1-sft"):
        _, tasks = _logged_success(agent)
        assert 0.0 <= metrics[agent]["bc_heldout_accuracy"] <= 1.0
        assert 0.0 <= metrics[agent]["bc_heldout_majority_baseline"] <= 1.0
        folds = summary[agent]["bc_heldout"]["folds"]
        tested = [g for f in folds for g in f["test_groups"]]
        assert sorted(tested) == sorted(tasks)  # each task held out exactly once
        assert sum(f["test_steps"] for f in folds) == summary[agent]["rows"]
        for learner in ("bc", "naive_fqi", "constrained_fqi"):
            art = _load(tau2_run, f"data/tau2/models/{agent}/{learner}.json")
            assert art["data_hash"] == summary[agent]["data_hash"] and art["params"]


def test_every_layer_says_its_support_and_what_it_cannot_know(tau2_run):
    records = _load(tau2_run, "reports/tau2/ope/estimates.json")
    assert {r["policy"] for r in records} >= {"bc", "ft-gpt-4.1-sft/bc"}
    for r in records:
        assert r["dataset"] == "gpt-4.1" and 0.0 <= r["support"] <= 1.0
        if r["layer"] in ("replay", "verifier"):
            assert r["value"] is None and "no fixture" in r["flags"][0]
        elif r["value"] is None:  # issue 17: no point value without effective samples
            assert r["ess"] == 0 and r["ci_low"] is None and r["ci_high"] is None
            assert any(f.startswith("no estimate: ESS 0") for f in r["flags"]), r["flags"]
        else:
            assert r["ci_low"] <= r["value"] <= r["ci_high"]
            assert r["ci_low"] >= 0.0 and r["ci_high"] <= 1.0  # tau2's return range
        if r["layer"] == "importance":
            assert "estimated_propensities" in r["flags"]  # tau2 logs no log-probs
        assert r["truth"] is None and r["truth_se"] is None  # real logs: no simulator
    info = _load(tau2_run, "reports/tau2/ope/datasets.json")["gpt-4.1"]
    assert info["truth"].startswith("no truth: real logs")
    assert all("minus_truth" not in v for v in _load(tau2_run, "metrics/tau2/ope.json")[
        "gpt-4.1"].values())
    assert not (tau2_run / "reports/tau2/ope/estimate_vs_truth.png").exists()
    blocking = ("unsupported_actions", "low_support", "interval_unreliable")
    for s in _load(tau2_run, "reports/tau2/ope/selection.json"):
        if s["pick"] is not None:
            (picked,) = [r for r in records if r["policy"] == s["pick"]
                         and (r["layer"], r["estimator"]) == (s["layer"], s["estimator"])]
            assert not any(f.split(":")[0] in blocking for f in picked["flags"])


def test_fine_tuned_clone_is_shown_beside_both_logged_successes(tau2_run):
    ft, _ = _logged_success("ft-gpt-4.1-sft")
    base, _ = _logged_success("gpt-4.1")
    logged = _load(tau2_run, "reports/tau2/ope/logged.json")
    assert logged["ft-gpt-4.1-sft"]["value"] == pytest.approx(ft)
    assert logged["gpt-4.1"]["value"] == pytest.approx(base)
    compared = {c["candidate"]: c for c in _load(tau2_run, "reports/tau2/ope/comparison.json")}
    clone = compared["ft-gpt-4.1-sft/bc"]
    assert clone["source_logged"] == pytest.approx(ft)
    assert clone["evaluated_logged"] == pytest.approx(base)
    if clone["support"] < 0.95:
        assert clone["verdict"].startswith("not enough support")
    html = (tau2_run / "reports/tau2/report/index.html").read_text()
    for needle in ("Behaviour cloning on groups it did not see", "estimated propensities",
                   "ft-gpt-4.1-sft/bc", html_escape(clone["verdict"]), f"{ft:.4f}",
                   "not applicable"):
        assert needle in html, needle
    assert "<script src" not in html and "<link" not in html  # self-contained


def test_same_params_give_the_same_bytes(tau2_run):
    outputs = [*sorted((tau2_run / "data/tau2/models").rglob("*.json")),
               *sorted((tau2_run / "reports/tau2/ope").glob("*.json"))]
    before = _digest(outputs)
    _repro(tau2_run, "-f", "-s", f"{DVC}:train")
    _repro(tau2_run, "-f", "-s", f"{DVC}:ope")
    assert _digest(outputs) == before


def test_the_answer_opens_with_the_agents_ranked_by_model(tau2_run):
    """Two logged agents on the same tasks: the stage's answer (estimates.md) opens with
    their ranking by the model each file's rows name, with a Holm-adjusted pair verdict."""
    ranking = _load(tau2_run, "reports/tau2/ope/ranking.json")
    assert {r["model"] for r in ranking["agents"]} >= {"gpt-4.1"}
    assert ranking["adjustment"] == "Holm" and len(ranking["pairs"]) == 1
    lines = (tau2_run / "reports/tau2/ope/estimates.md").read_text().splitlines()
    assert lines[2].startswith("- agents ranked (logged value): 1. ")
    assert "Holm-adjusted over 1 pair" in lines[3]
