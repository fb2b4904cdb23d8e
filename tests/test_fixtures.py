"""Fixtures loaded by name, as the stages use them: a dataset's fixture found by params, what
each fixture brings (replay adapter, behaviour policy and truth from params), and that
loading one runs its declaration only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tracerl.config.fixtures import (
    COLLECTIONS,
    FIXTURES,
    ITEMS,
    Fixture,
    fixture_of,
    get_fixture,
)
from tracerl.config.registries import ENCODERS, VERIFIERS
from tracerl.config.registry import STAGE_ENV, STAGE_USES_ENV
from tracerl.config.schema import validate_params
from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.replay import CalculatorReplay
from tracerl.envs.calculator.rules import ACTIONS, STATE_KEYS, keys_to_rows
from tracerl.envs.support_desk.replay import SupportDeskReplay
from tracerl.envs.support_desk.sim import SCRIPT

PARAMS = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())


def _config(params: dict):
    return validate_params(params)


def test_fixtures_are_found_by_params():
    calculator = {"fixture": "calculator", "calculator": {"datasets": ["good_coverage"]}}
    assert fixture_of(_config(calculator), "good_coverage").name == "calculator"
    params = _config({**calculator, "datasets": {"desk": {"fixture": "support_desk"},
                                                  "other": {}}})
    assert fixture_of(params, "desk").name == "support_desk"
    assert fixture_of(params, "other").name == "calculator"
    assert params.fixture_names() == ["calculator", "support_desk"]
    assert fixture_of(_config({"datasets": {"gpt": {}}}), "gpt") is None  # real logs
    with pytest.raises(ValueError, match="unknown fixture 'calculater'.*support_desk"):
        get_fixture("calculater")
    desk = get_fixture("support_desk")
    assert desk.encoder == "support_desk" and isinstance(desk.replay_adapter(),
                                                         SupportDeskReplay)
    assert get_fixture("calculator").encoder == "calculator"


def test_behaviour_and_truth_come_from_params():
    calc = get_fixture("calculator")
    params = _config({"gamma": 0.99, "fixture": "calculator", "calculator": {
        "datasets": ["good_coverage"], "behavior": {"good_coverage": {
            "lookup": 0.88, "op": 0.62, "final": 0.90, "ops": ["add", "sub", "mul"]}}}})
    truth = calc.truth_metrics(calc.behavior_policy("good_coverage", params), params)
    # README: 0.62 + 0.38/3 x (1 + 2/3 x 1/81), exact (standard error 0)
    assert truth["success"] == pytest.approx(0.62 + 0.38 / 3 * (1 + 2 / 3 / 81), abs=5e-4)
    assert truth["success_se"] == 0.0 and calc.truth(calc.behavior_policy(
        "good_coverage", params), params)[1] == 0.0

    desk = get_fixture("support_desk")
    params = _config({"gamma": 0.99, "fixture": "support_desk", "support_desk": {
        "behavior": {"p_script": 0.9}, "truth": {"episodes": 4000, "seed": 5}}})
    logger = desk.behavior_policy("any", params)
    start = np.zeros((1, 10), dtype=np.int8)
    assert logger.action_probs(start)[0].max() == pytest.approx(0.9 + 0.1 / 10)
    script = desk.truth_metrics(SCRIPT, params)
    assert script["success"] == 1.0 and script["success_se"] == 0.0  # the script never fails
    value, se = desk.truth(logger, params)
    assert 0 < se < 0.02 and value == desk.truth_metrics(logger, params)["return"]


def test_a_fixture_is_its_package_and_names_its_items_after_itself():
    assert FIXTURES.names() == ["calculator", "support_desk"]  # the packages under envs/
    from tracerl.envs.calculator.params import Calculator
    from tracerl.envs.support_desk.params import SupportDesk

    # Each brings its params section, the top-level key of its name.
    assert get_fixture("calculator").params is Calculator
    assert get_fixture("support_desk").params is SupportDesk
    with pytest.raises(ValueError, match="must be named 'toy' or 'toy_'"):
        Fixture("toy", verifiers={"exact@1": object()})
    with pytest.raises(TypeError, match="unknown items.*replay_adaptor"):
        Fixture("toy", replay_adaptor=object)
    with pytest.raises(ValueError, match="encoder 'toy' is not one of its encoders"):
        Fixture("toy", encoder="toy")


@pytest.mark.parametrize("name", ["calculator", "support_desk"])
def test_every_declared_item_resolves_to_what_its_name_says(name):
    fixture = get_fixture(name)
    for item in fixture.encoders.own_names():
        assert fixture.encoders.get(item).name == item
        assert ENCODERS.get(item) is fixture.encoders.get(item)  # found by its name
    for vid in fixture.verifiers.own_names():
        assert fixture.verifiers.get(vid).id == vid
        assert VERIFIERS.get(vid) is fixture.verifiers.get(vid)  # found by its name
    for item in ITEMS:
        assert fixture.refs(item) == [] or callable(getattr(fixture, item))
    # The generic registries' own items too.
    for item in ENCODERS.own_names():
        assert ENCODERS.get(item).name == item
    for vid in VERIFIERS.own_names():
        assert VERIFIERS.get(vid).id == vid


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join("
                          "m for m in sys.modules if m.startswith('tracerl')))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.integration
def test_nothing_registers_at_import_and_loading_runs_the_declaration_only():
    # The generic core and the envs package load no fixture.
    loaded = _modules_after("import tracerl.envs, tracerl.rl.encoding, tracerl.data.verifiers, "
                            "tracerl.config.registries, tracerl.config.schema")
    assert not {m for m in loaded if m.startswith("tracerl.envs.")}, loaded
    # Loading a fixture by name runs its declaration: none of its items' code.
    loaded = _modules_after("from tracerl.config.fixtures import get_fixture\n"
                            "get_fixture('support_desk'); get_fixture('calculator')")
    envs = {m for m in loaded if m.startswith("tracerl.envs.")}
    assert envs == {"tracerl.envs.calculator", "tracerl.envs.calculator.params",
                    "tracerl.envs.support_desk", "tracerl.envs.support_desk.params",
                    "tracerl.envs.support_desk.sim"}, envs
    assert not {m for m in loaded if m.startswith(("tracerl.ope", "tracerl.rl"))}
    # An item is imported when it is looked up, and only its module.
    loaded = _modules_after("from tracerl.config.registries import VERIFIERS\n"
                            "VERIFIERS.get('calculator_exact@1')")
    assert "tracerl.envs.calculator.verifiers" in loaded
    assert "tracerl.envs.calculator.replay" not in loaded


def test_a_stage_resolves_only_the_kinds_it_declares(monkeypatch):
    calculator = get_fixture("calculator")
    monkeypatch.setenv(STAGE_ENV, "relabel")
    monkeypatch.setenv(STAGE_USES_ENV, "verifiers")
    with pytest.raises(RuntimeError, match="stage relabel resolved the calculator fixture's "
                                           "replay_adapter.*STAGE_USES\\['relabel'\\]"):
        _ = calculator.replay_adapter
    with pytest.raises(RuntimeError, match="state encoder 'dialogue'"):
        ENCODERS.get("dialogue")
    assert VERIFIERS.get("calculator_exact@1").id == "calculator_exact@1"
    monkeypatch.setenv(STAGE_USES_ENV, "")  # a stage that uses nothing
    with pytest.raises(RuntimeError, match="'verifiers' item"):
        VERIFIERS.get("tau2_outcome@1")
    assert set(COLLECTIONS) | set(ITEMS) >= {"verifiers", "truth"}


def test_the_calculator_ope_inputs_come_from_the_registry_unchanged():
    # What the ope stage used before it looked the fixture up (CalculatorReplay, each
    # dataset's BehaviorPolicy from calculator.behavior, the exact evaluator) is what the
    # registry gives for the project's params: the calculator's OPE table cannot move.
    fixture = fixture_of(_config(PARAMS), "no_mul_support")
    assert fixture.name == "calculator" and isinstance(fixture.replay_adapter(),
                                                       CalculatorReplay)
    keys = keys_to_rows(STATE_KEYS)
    for dataset in PARAMS["calculator"]["datasets"]:
        direct = BehaviorPolicy(dataset, BehaviorSpec.from_params(
            PARAMS["calculator"]["behavior"][dataset]))
        via = fixture.behavior_policy(dataset, _config(PARAMS))
        np.testing.assert_array_equal(via.action_probs(keys), direct.action_probs(keys))
        truth = fixture.truth_metrics(via, _config(PARAMS))
        exact = exact_value(direct, PARAMS["gamma"])
        assert (truth["return"], truth["success"]) == (exact["return"], exact["success"])
    # no_mul_support's logger never calls mul: the dataset's own behaviour params reach it.
    mul = ACTIONS.index("mul")
    assert not fixture.behavior_policy("no_mul_support", _config(PARAMS)).action_probs(
        keys)[:, mul].any()
