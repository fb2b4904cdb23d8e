"""Prefect task of the table stage: the chapter's calculator table."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.train import load_encoder, load_learners


@task(name="calculator-table", task_run_name="table {datasets}")
def evaluate_calculator_policies(models: Path, datasets: list[str], learners: list[str],
                                 behavior: dict, mc_episodes: int, seed: int,
                                 gamma: float) -> dict:
    from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
    from tracerl.envs.calculator.table import calculator_table

    encoder = load_encoder(models)
    policies = {name: {"behavior": BehaviorPolicy(name,
                                                  BehaviorSpec.from_params(behavior.get(name))),
                       **load_learners(models / name, learners, encoder)}
                for name in datasets}
    return calculator_table(policies, mc_episodes, seed, gamma)
