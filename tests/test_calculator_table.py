"""The chapter's table, end to end through the library: train on 3000 logged episodes of
each dataset, evaluate exactly and by Monte Carlo."""

from __future__ import annotations

import pytest

from tracerl.config.learning import Train
from tracerl.data.ingest.parse import records_to_table
from tracerl.data.relabel import relabel
from tracerl.envs.calculator.behavior import BehaviorPolicy
from tracerl.envs.calculator.encoder import CalculatorEncoder
from tracerl.envs.calculator.logs import log_records
from tracerl.envs.calculator.table import calculator_table, markdown
from tracerl.rl.features import OneHot
from tracerl.rl.learners import fit_learners

VERIFIERS = ["calculator_exact@1", "format_valid@1", "tool_error_penalty@1", "cost_penalty@1"]
WEIGHTS = {"task_success": 1.0, "format_valid": 0.0, "tool_error_penalty": 1.0,
           "cost_penalty": 1.0}


@pytest.fixture(scope="module")
def table():
    policies = {}
    for i, name in enumerate(("good_coverage", "no_mul_support")):
        records = list(log_records(name, 3000, seed=20261129 + i, test_fraction=0.0))
        steps = relabel(records_to_table(records, "t.jsonl", list(range(len(records)))),
                        VERIFIERS, WEIGHTS)
        encoder = CalculatorEncoder()
        features = OneHot(encoder.cardinality, len(encoder.actions), encoder.policy_variables)
        policies[name] = {"behavior": BehaviorPolicy(name), **fit_learners(
            encoder.transitions(steps), features, Train(encoder="calculator"), 0.99)}
    return calculator_table(policies, mc_episodes=20000, seed=11)


def test_table_matches_the_acceptance_values(table):
    good, gap = table["good_coverage"], table["no_mul_support"]
    assert good["behavior"]["success"] == pytest.approx(0.748, abs=0.005)
    for name in ("bc", "naive_fqi", "constrained_fqi"):
        assert good[name]["success"] == pytest.approx(1.0)
    assert gap["behavior"]["success"] == pytest.approx(0.542, abs=0.005)
    assert gap["bc"]["success"] == pytest.approx(0.67, abs=0.01)
    assert gap["naive_fqi"]["success"] == pytest.approx(1.0)
    assert gap["constrained_fqi"]["success"] == pytest.approx(0.667, abs=0.01)
    assert gap["bc"]["success_mul"] <= 0.02
    assert gap["naive_fqi"]["success_mul"] == pytest.approx(1.0)
    assert gap["constrained_fqi"]["success_mul"] <= 0.02


def test_monte_carlo_agrees_with_exact(table):
    for rows in table.values():
        for row in rows.values():
            assert set(row) == {"success", "success_mc", "success_mul", "success_mul_mc",
                                "return"}
            assert abs(row["success_mc"] - row["success"]) <= 0.02
            assert abs(row["success_mul_mc"] - row["success_mul"]) <= 0.02


def test_markdown_shows_the_chapter_beside_ours(table):
    text = markdown(table)
    assert "| no_mul_support | constrained_fqi | 0.667 |" in text
    assert "0.72" in text  # the chapter's printed figure stands beside ours
