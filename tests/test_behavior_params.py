"""The behaviour policy's knobs come from params, and its exact success follows the
hand-derived formula for any values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.rules import ACTION_INDEX
from tracerl.envs.calculator.simulator import simulate

OPS = ("add", "sub", "mul")


def coincide(task: str, op: str) -> float:
    """P(op(x, y) == task(x, y)) for x, y uniform on 1..9, derived by hand: x + y == x * y
    only at x = y = 2; x - y never equals x + y (y >= 1) nor x * y (x(1 - y) = y has no
    solution with x, y >= 1)."""
    if task == op:
        return 1.0
    return 1 / 81 if {task, op} == {"add", "mul"} else 0.0


def behavior_success(p_op: float, ops: tuple[str, ...]) -> float:
    """Success of the scripted-with-noise logger: the task's op with p_op + (1 - p_op)/k
    (k = number of ops it may use), each other op with (1 - p_op)/k; uniform over its ops
    when the task's op is not one of them. Lookups and final have a single valid call."""
    k = len(ops)
    total = 0.0
    for task in OPS:
        if task in ops:
            total += p_op + sum((1 - p_op) / k * coincide(task, op) for op in ops)
        else:
            total += sum(coincide(task, op) / k for op in ops)
    return total / len(OPS)


def test_the_issue_figures() -> None:
    changed = {"lookup": 0.95, "op": 0.7, "final": 0.6}
    good = BehaviorSpec.from_params({**changed, "ops": ["add", "sub", "mul"]})
    no_mul = BehaviorSpec.from_params({**changed, "ops": ["add", "sub"]})
    assert exact_value(BehaviorPolicy("good_coverage", good))["success"] == pytest.approx(
        0.8008, abs=5e-5)
    assert exact_value(BehaviorPolicy("no_mul_support", no_mul))["success"] == pytest.approx(
        0.5687, abs=5e-5)


@pytest.mark.parametrize("seed", range(6))
def test_exact_success_follows_the_formula_for_any_values(seed: int) -> None:
    rng = np.random.default_rng(seed)
    subsets = [c for r in (1, 2, 3) for c in itertools.combinations(OPS, r)]
    for ops in subsets:
        lookup, op, final = rng.random(3)
        spec = BehaviorSpec(lookup=lookup, op=op, final=final, ops=ops)
        got = exact_value(BehaviorPolicy("any", spec))["success"]
        assert got == pytest.approx(behavior_success(op, ops), abs=1e-12), (ops, op)


def test_the_defaults_are_the_chapter_regimes() -> None:
    assert exact_value(BehaviorPolicy("good_coverage"))["success"] == pytest.approx(
        behavior_success(0.62, OPS), abs=1e-12)
    assert exact_value(BehaviorPolicy("no_mul_support"))["success"] == pytest.approx(
        behavior_success(0.62, ("add", "sub")), abs=1e-12)


def test_logged_op_frequencies_follow_the_spec() -> None:
    spec = BehaviorSpec(op=0.3, ops=("sub", "mul"))
    ro = simulate(BehaviorPolicy("x", spec), 20_000, seed=5)
    at_op = ro.stage == 2
    for task, expected in (("sub", {"sub": 0.65, "mul": 0.35}),
                           ("add", {"sub": 0.5, "mul": 0.5})):
        chosen = ro.action[at_op & (ro.task == OPS.index(task))]
        for op, p in expected.items():
            share = np.mean(chosen == ACTION_INDEX[op])
            assert share == pytest.approx(p, abs=0.02), (task, op)
        assert not np.any(chosen == ACTION_INDEX["add"])  # never an op it may not use


@pytest.mark.parametrize("bad", [{"op": 1.2}, {"lookup": -0.1}, {"ops": []},
                                 {"ops": ["div"]}, {"ops": ["add", "add"]}, {"opp": 0.5}])
def test_bad_knobs_are_named(bad: dict) -> None:
    with pytest.raises(ValueError) as err:
        BehaviorSpec.from_params(bad)
    assert next(iter(bad)) in str(err.value) or "ops" in str(err.value)
