"""Prefect task of the table stage: the chapter's calculator table."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.learning import LEARNERS


@task(name="calculator-table", task_run_name="table {datasets}")
def evaluate_calculator_policies(models: Path, datasets: list[str], behavior: dict,
                                 mc_episodes: int, seed: int, gamma: float) -> dict:
    from tracerl.envs.calculator.env import BehaviorPolicy, BehaviorSpec
    from tracerl.envs.calculator.table import calculator_table
    from tracerl.policies.artifact import load_policy

    policies = {name: {"behavior": BehaviorPolicy(name,
                                                  BehaviorSpec.from_params(behavior.get(name))),
                       **{p: load_policy(models / name / f"{p}.json") for p in LEARNERS}}
                for name in datasets}
    return calculator_table(policies, mc_episodes, seed, gamma)
