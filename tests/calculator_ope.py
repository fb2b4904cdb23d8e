"""The calculator through the one engine, for the OPE tests: logs, the chapter's learners,
the stage's candidates and the prepared data, as the train and ope stages make them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tracerl.config.learning import Ope, Train
from tracerl.data.ingest.parse import records_to_table
from tracerl.data.relabel import relabel
from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.encoder import CalculatorEncoder
from tracerl.envs.calculator.logs import log_records
from tracerl.envs.calculator.replay import CalculatorReplay
from tracerl.ope.evaluate import LoggedData, Settings
from tracerl.rl.features import OneHot
from tracerl.rl.learners import behavior_model, fit_learners
from tracerl.rl.policy import UniformValidPolicy, with_derived

VERIFIERS = ["calculator_exact@1", "format_valid@1", "tool_error_penalty@1", "cost_penalty@1"]
WEIGHTS = {"task_success": 1.0, "format_valid": 0.0, "tool_error_penalty": 1.0,
           "cost_penalty": 1.0}
SPEC = {"softened": {"bc": [0.1, 0.3], "naive_fqi": [0.1], "constrained_fqi": [0.2]},
        "mixtures": [["behavior", "constrained_fqi", 0.5], ["bc", "naive_fqi", 0.5]]}
ENCODER = CalculatorEncoder()
POLICY_FEATURES = OneHot(ENCODER.cardinality, len(ENCODER.actions), ENCODER.policy_variables)
CRITIC_FEATURES = OneHot(ENCODER.cardinality, len(ENCODER.actions))


def steps_of(name: str, episodes: int, seed: int, spec: BehaviorSpec | None = None,
             test_fraction: float = 0.0) -> pa.Table:
    records = list(log_records(name, episodes, seed, test_fraction, spec=spec))
    return relabel(records_to_table(records, "log.jsonl", list(range(1, len(records) + 1))),
                   VERIFIERS, WEIGHTS)


def settings(n_episodes: int, **ope: Any) -> Settings:
    return Settings.of(Ope(**{"n_boot": 1000, **ope}), gamma=0.99, verifiers=VERIFIERS,
                       weights=WEIGHTS, n_episodes=n_episodes)


def prepared(steps: pa.Table, s: Settings, seed: int = 0, features: Any = CRITIC_FEATURES,
             replay: bool = True) -> LoggedData:
    tr = ENCODER.transitions(steps)
    return LoggedData.prepare(tr, features, behavior_model(tr, features), s, seed,
                              steps if replay else None, CalculatorReplay() if replay else None)


def candidates(name: str, train_steps: pa.Table, spec: BehaviorSpec | None = None
               ) -> dict[str, Any]:
    """behavior, the chapter's three learners, and what SPEC derives from them."""
    learned = fit_learners(ENCODER.transitions(train_steps), POLICY_FEATURES,
                           Train(encoder="calculator"), 0.99)
    base = {"behavior": BehaviorPolicy(name, spec), **learned}
    return with_derived(base, SPEC, UniformValidPolicy(ENCODER.valid_actions))
