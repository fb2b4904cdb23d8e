"""The calculator agent of the book chapter, one module per job: the environment's rules
(`rules`), the hand-written and logging policies (`behavior`), the simulator
(`simulator`), the exact evaluator (`exact`), the log writer (`logs`), the state encoder
(`encoder`), replay (`replay`), the verifier (`verifiers`), the items that read params
(`fixture`) and the chapter table (`table`).

This module is what loading the fixture by name runs (`fixture: calculator` in params):
the declaration below, with its params section (`calculator:`, `params`). Each item is
imported only when a stage uses it.
"""

from tracerl.config.fixtures import Fixture
from tracerl.config.registry import Ref
from tracerl.envs.calculator.params import Calculator

_HERE = "tracerl.envs.calculator"

FIXTURE = Fixture(
    "calculator",
    params=Calculator,
    encoder="calculator",
    encoders={"calculator": Ref(f"{_HERE}.encoder:CalculatorEncoder")},
    verifiers={"calculator_exact@1": Ref(f"{_HERE}.verifiers:CalculatorExact")},
    generate_logs=Ref(f"{_HERE}.fixture:generate_logs"),
    replay_adapter=Ref(f"{_HERE}.replay:CalculatorReplay"),
    behavior_policy=Ref(f"{_HERE}.fixture:behavior_policy"),
    truth=Ref(f"{_HERE}.fixture:truth"),
    truth_metrics=Ref(f"{_HERE}.fixture:truth_metrics"),
    result_view=Ref(f"{_HERE}.table:print_calculator_table"),
)
