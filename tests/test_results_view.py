"""`tracerl results` reads at 100 columns: no line is longer, no name is cut, and a note
that explains many rows is printed once; `tracerl --version`."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import orjson
import pytest

from tests.conftest import ROOT

NOTE = ("{c} estimates {v} but carries unsupported_actions, low_support (support 0.83, "
        "min_support 0.95): not ranked first")
DATASETS = ("good_coverage", "no_mul_support_with_a_longer_name")
ESTIMATORS = ("critic/fqe", "importance/is", "importance/wis", "importance/pdwis",
              "importance/dr", "replay/replay")


def _write(path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(obj))


def _tabular(tmp):
    """The calculator pipeline's outputs: a long note on every estimator's row."""
    reports, metrics = tmp / "reports", tmp / "metrics"
    _write(reports / "ingest/summary.json", {d: {"read": 12000, "accepted": 12000,
                                                  "quarantined": 0, "episodes": 3000,
                                                  "passed": True} for d in DATASETS})
    _write(reports / "validate/summary.json", {d: {"rows": 12000, "episodes": 3000,
                                                    "expectations": 52, "failed": 0,
                                                    "success": True} for d in DATASETS})
    row = {"success": 0.748, "success_mc": 0.749, "success_mul": 0.748, "success_mul_mc": 0.74,
           "return": 0.4019}
    _write(metrics / "table.json", {d: {p: row for p in ("behavior", "bc", "naive_fqi",
                                                         "constrained_fqi")}
                                    for d in DATASETS})
    selection = []
    for d in DATASETS:
        for i, e in enumerate(ESTIMATORS):
            layer, estimator = e.split("/")
            note = "" if d == DATASETS[0] else "; ".join(
                NOTE.format(c=c, v=f"0.{399 + i}") for c in ("bc+naive_fqi@0.5", "naive_fqi"))
            selection.append({"dataset": d, "layer": layer, "estimator": estimator,
                              "pick": "constrained_fqi", "rank_correlation": 0.98,
                              "regret_at_1": 0.647, "note": note})
    _write(reports / "ope/selection.json", selection)
    return reports, metrics


def _features(tmp):
    """A feature-based pipeline's outputs (tau2-like): verdicts with their reasons."""
    reports, metrics = tmp / "reports", tmp / "metrics"
    _write(reports / "train/summary.json", {"gpt-4.1": {"bc_heldout": {
        "accuracy": 0.54, "majority_baseline": 0.48, "test_steps": 284, "n_folds": 5,
        "group_by": "task", "n_groups": 20}}})
    _write(reports / "ope/logged.json", {"gpt-4.1": {"value": 0.5}})
    why = ("not enough support: {s} of the candidate's episodes stay on actions the log "
           "shows (needs 0.95)")
    _write(reports / "ope/comparison.json", [
        {"candidate": f"ft-gpt-4.1-sft/{p}", "evaluated_on": "gpt-4.1", "estimate": 0.457,
         "support": s, "source_logged": 0.65, "evaluated_logged": 0.5,
         "verdict": why.format(s=s)}
        for p, s in (("bc", 0.28), ("fqi", 0.05), ("fqi_constrained_with_a_long_name", 0.15))])
    _write(reports / "ope/selection.json", [{
        "dataset": "gpt-4.1", "layer": "critic", "estimator": "fqe", "pick": "constrained_fqi",
        "rank_correlation": None, "regret_at_1": None,
        "note": "; ".join(f"ft-gpt-4.1-sft/candidate_{i} estimates 0.{i}00 but carries "
                          "low_support: not ranked first" for i in range(8))}])
    return reports, metrics


def _results(reports, metrics, columns=100) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("TERM", None)
    done = subprocess.run([sys.executable, "-m", "tracerl", "results", "--reports",
                           str(reports), "--metrics", str(metrics)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.integration
def test_tabular_results_fit_100_columns_and_print_each_note_once(tmp_path):
    out = _results(*_tabular(tmp_path))
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "…" not in out  # no name cut short
    # a long name wraps in its cell: every row starts with it
    assert sum(line.startswith("no_mul_support") for line in lines) >= 2 + 4 + len(ESTIMATORS)
    assert out.count("bc+naive_fqi@0.5 estimates") == 1  # one footnote for six rows
    assert out.count("[1]") == len(ESTIMATORS) + 1
    assert "more rows have this note" in out
    flat = out.replace("\n", "")  # a long path folds over lines, never cut
    assert "report.html" in flat and "selection.json" in flat


@pytest.mark.integration
def test_feature_results_fit_100_columns(tmp_path):
    out = _results(*_features(tmp_path))
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "…" not in out
    assert out.count("not enough support") == 3  # the verdict on every row...
    assert out.count("of the candidate's episodes stay on") == 1  # ...its reason once
    assert "ft-gpt-4.1-sft/fqi_c" in out and "ng_name" in out  # wrapped, not cut


@pytest.mark.integration
def test_version():
    done = subprocess.run([sys.executable, "-m", "tracerl", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"tracerl {metadata.version('tracerl')}"
