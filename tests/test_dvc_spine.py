"""The spine a user relies on, in a real DVC repo (a temp git copy of the project) on the
tests' own Prefect server: params experiments rerun what they should, validation stops the
chain, outputs reproduce across commits, metrics compare across revisions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import copy_project, project_env
from tests.test_behavior_params import behavior_success

pytestmark = pytest.mark.integration

# Small and quick; the table's behaviour rows are exact, whatever the sample size.
SMALL = {"calculator": {"episodes": 150}, "table": {"mc_episodes": 500},
         "ope": {"n_boot": 50, "critic": {"iterations": 200},
                 "replay": {"min_draws": 300, "max_samples": 2}}}


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=project_env(), capture_output=True, text=True,
                          timeout=timeout)


def _ok(cmd: list[str], cwd: Path) -> str:
    done = _run(cmd, cwd)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _json(cmd: list[str], cwd: Path):
    done = _run(cmd, cwd)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def _git_repo(project: Path) -> None:
    for cmd in (["git", "config", "user.email", "t@example.com"],
                ["git", "config", "user.name", "test"],
                ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        _ok(cmd, project)


@pytest.fixture(scope="module")
def repo(tmp_path_factory, prefect_server) -> Path:
    """A reproduced project, committed with its dvc.lock and metrics."""
    project = copy_project(tmp_path_factory.mktemp("spine"), **SMALL)
    _git_repo(project)
    _ok(["dvc", "repro"], project)
    _ok(["git", "add", "-A"], project)
    _ok(["git", "commit", "-qm", "reproduced"], project)
    return project


def test_an_empty_commit_changes_no_output(repo: Path) -> None:
    _ok(["git", "commit", "-q", "--allow-empty", "-m", "nothing"], repo)
    assert "up to date" in _ok(["dvc", "repro"], repo)
    # Rebuilding everything at the new commit gives the same bytes: dvc.lock (every
    # output's hash) and the committed metrics and plot data are unchanged.
    _ok(["dvc", "repro", "-f"], repo)
    assert _ok(["git", "status", "--porcelain"], repo).strip() == ""


def test_metrics_are_scalar_and_compare_across_revisions(repo: Path) -> None:
    shown = _json(["dvc", "metrics", "show", "--json"], repo)
    assert "failed to load" not in _ok(["dvc", "metrics", "show"], repo)
    leaves: list = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        else:
            leaves.append(node)

    for files in shown.values():
        for metrics in files["data"].values():
            walk(metrics["data"])
    assert leaves and all(isinstance(v, int | float) for v in leaves), leaves[:10]
    # The OPE headline of every candidate is a metric, with its error against the truth.
    ope = json.loads((repo / "metrics/ope.json").read_text())
    assert {"estimate", "minus_truth", "support"} <= set(ope["good_coverage"]["behavior"])

    weights = (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(weights.replace("format_valid: 0.0",
                                                      "format_valid: 0.5"))
    _ok(["dvc", "repro"], repo)
    # a stage's own metrics file is an out in git, diffed by naming it (the declared metrics
    # are the few headline figures)
    diff = _json(["dvc", "metrics", "diff", "HEAD", "--json", "--targets",
                  "metrics/relabel.json"], repo)
    changed = diff["metrics/relabel.json"]["good_coverage.mean_reward"]
    assert changed["old"] != changed["new"] and isinstance(changed["diff"], float)
    _ok(["git", "checkout", "--", "params.yaml"], repo)
    _ok(["dvc", "repro"], repo)


def test_behaviour_params_rerun_from_generate_and_the_table_follows(repo: Path) -> None:
    knobs = {"lookup": 0.95, "op": 0.7, "final": 0.6}
    sets = [f"calculator.behavior.{d}.{k}={v}" for d in ("good_coverage", "no_mul_support")
            for k, v in knobs.items()]
    out = _ok(["dvc", "exp", "run", "-n", "noisier", *[a for s in sets for a in ("-S", s)]],
              repo)
    for stage in ("generate", "ingest", "validate", "relabel", "train", "table", "ope"):
        assert f"Running stage '{stage}'" in out, stage
    table = json.loads((repo / "metrics/table.json").read_text())
    assert table["good_coverage"]["behavior"]["success"] == pytest.approx(0.8008, abs=5e-5)
    assert table["no_mul_support"]["behavior"]["success"] == pytest.approx(0.5687, abs=5e-5)
    for dataset, ops in (("good_coverage", ("add", "sub", "mul")),
                         ("no_mul_support", ("add", "sub"))):
        assert table[dataset]["behavior"]["success"] == pytest.approx(
            behavior_success(0.7, ops), abs=1e-6)
    shown = _ok(["dvc", "exp", "show", "--csv"], repo)
    row = next(line for line in shown.splitlines() if line.startswith("noisier,"))
    # the experiment's headline metrics (the logged policy's value under the new behaviour)
    headline = json.loads((repo / "metrics/headline/good_coverage.json").read_text())
    assert str(headline["logged"]) in row and "!" not in row
    # Back to the committed state for the next test.
    _ok(["git", "reset", "-q", "--hard"], repo)
    _ok(["dvc", "checkout", "--force", "dvc.yaml"], repo)  # the calculator pipeline


def test_a_broken_table_stops_repro_at_validate(repo: Path) -> None:
    steps = repo / "data/ingested/no_mul_support/steps"
    part = sorted(steps.glob("*.parquet"))[0]
    table = pq.read_table(part)
    broken = table.set_column(table.schema.get_field_index("reward"), "reward",
                              pc.add(table.column("reward"), 5.0))
    pq.write_table(broken, part)
    # Accept the hand edit as ingest's output, as a changed upstream would deliver it.
    _ok(["dvc", "commit", "-f", "ingest"], repo)
    done = _run(["dvc", "repro"], repo)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "Running stage 'validate'" in said and "Running stage 'relabel'" not in said
    assert "expect_column_values_to_be_between" in said and "reward" in said
    # Run by hand, relabel refuses the table that failed validation.
    by_hand = _run([sys.executable, "-m", "tracerl", "run", "relabel"], repo)
    assert by_hand.returncode != 0 and "did not pass validation" in by_hand.stderr
