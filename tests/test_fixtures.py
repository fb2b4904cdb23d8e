"""The fixture registry as the stages use it: a dataset's fixture found by params, and what
each fixture brings (replay adapter, behaviour policy and truth from params)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import tracerl.envs  # noqa: F401  (registers the fixtures, as the CLI does)
from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.replay import CalculatorReplay
from tracerl.envs.calculator.rules import ACTIONS, STATE_KEYS, keys_to_rows
from tracerl.envs.support_desk.replay import SupportDeskReplay
from tracerl.envs.support_desk.sim import SCRIPT
from tracerl.fixtures import Fixture, fixture_of, get_fixture, register_fixture

PARAMS = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())


def test_fixtures_are_found_by_params():
    assert fixture_of({"fixture": "calculator"}, "good_coverage").name == "calculator"
    params = {"fixture": "calculator", "datasets": {"desk": {"fixture": "support_desk"}}}
    assert fixture_of(params, "desk").name == "support_desk"
    assert fixture_of(params, "other").name == "calculator"
    assert fixture_of({"datasets": {"gpt": {}}}, "gpt") is None  # real logs: no fixture
    with pytest.raises(ValueError, match="unknown fixture 'calculater'.*support_desk"):
        fixture_of({"fixture": "calculater"}, "x")
    desk = get_fixture("support_desk")
    assert desk.encoder == "support_desk" and isinstance(desk.replay_adapter(),
                                                         SupportDeskReplay)
    assert get_fixture("calculator").encoder == "calculator"


def test_behaviour_and_truth_come_from_params():
    calc = get_fixture("calculator")
    params = {"gamma": 0.99, "calculator": {"behavior": {
        "good_coverage": {"lookup": 0.88, "op": 0.62, "final": 0.90, "ops": ["add", "sub",
                                                                             "mul"]}}}}
    truth = calc.truth_metrics(calc.behavior_policy("good_coverage", params), params)
    # README: 0.62 + 0.38/3 x (1 + 2/3 x 1/81), exact (standard error 0)
    assert truth["success"] == pytest.approx(0.62 + 0.38 / 3 * (1 + 2 / 3 / 81), abs=5e-4)
    assert truth["success_se"] == 0.0 and calc.truth(calc.behavior_policy(
        "good_coverage", params), params)[1] == 0.0

    desk = get_fixture("support_desk")
    params = {"gamma": 0.99, "support_desk": {"behavior": {"p_script": 0.9},
                                              "truth": {"episodes": 4000, "seed": 5}}}
    logger = desk.behavior_policy("any", params)
    start = np.zeros((1, 10), dtype=np.int8)
    assert logger.action_probs(start)[0].max() == pytest.approx(0.9 + 0.1 / 10)
    script = desk.truth_metrics(SCRIPT, params)
    assert script["success"] == 1.0 and script["success_se"] == 0.0  # the script never fails
    value, se = desk.truth(logger, params)
    assert 0 < se < 0.02 and value == desk.truth_metrics(logger, params)["return"]


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        register_fixture(Fixture(name="calculator"))


def test_the_calculator_ope_inputs_come_from_the_registry_unchanged():
    # What the ope stage used before it looked the fixture up (CalculatorReplay, each
    # dataset's BehaviorPolicy from calculator.behavior, the exact evaluator) is what the
    # registry gives for the project's params: the calculator's OPE table cannot move.
    fixture = fixture_of(PARAMS, "no_mul_support")
    assert fixture.name == "calculator" and isinstance(fixture.replay_adapter(),
                                                       CalculatorReplay)
    keys = keys_to_rows(STATE_KEYS)
    for dataset in PARAMS["calculator"]["datasets"]:
        direct = BehaviorPolicy(dataset, BehaviorSpec.from_params(
            PARAMS["calculator"]["behavior"][dataset]))
        via = fixture.behavior_policy(dataset, PARAMS)
        np.testing.assert_array_equal(via.action_probs(keys), direct.action_probs(keys))
        truth = fixture.truth_metrics(via, PARAMS)
        exact = exact_value(direct, PARAMS["gamma"])
        assert (truth["return"], truth["success"]) == (exact["return"], exact["success"])
    # no_mul_support's logger never calls mul: the dataset's own behaviour params reach it.
    mul = ACTIONS.index("mul")
    assert not fixture.behavior_policy("no_mul_support", PARAMS).action_probs(keys)[:, mul].any()
