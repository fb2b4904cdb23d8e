"""Prefect task of the table stage: the chapter's calculator table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import task

from tasks.train import load_encoder, load_learners

if TYPE_CHECKING:
    from tracerl.envs.calculator.params import Behavior


@task(name="calculator-table", task_run_name="table {datasets}")
def evaluate_calculator_policies(models: Path, datasets: list[str], learners: list[str],
                                 behavior: Mapping[str, Behavior], mc_episodes: int, seed: int,
                                 gamma: float) -> dict:
    """Each dataset's logging policy (`behavior`: its calculator.behavior section) and
    learners, exact and Monte Carlo."""
    from tracerl.envs.calculator.behavior import BehaviorPolicy
    from tracerl.envs.calculator.fixture import behavior_spec
    from tracerl.envs.calculator.table import calculator_table

    encoder = load_encoder(models)
    policies = {name: {"behavior": BehaviorPolicy(name, behavior_spec(behavior[name])),
                       **load_learners(models / name, learners, encoder)}
                for name in datasets}
    return calculator_table(policies, mc_episodes, seed, gamma)
