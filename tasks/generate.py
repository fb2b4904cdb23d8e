"""Prefect task of the generate stage: the calculator's logs as native JSONL."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.envs import calculator
from tracerl.staging import staged


@task(name="generate-calculator-logs", task_run_name="generate {name}")
def generate_calculator_logs(name: str, n_episodes: int, seed: int, test_fraction: float,
                             behavior: dict, gamma: float, out_path: Path) -> int:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    records = calculator.log_records(name, n_episodes, seed, test_fraction,
                                     calculator.BehaviorSpec.from_params(behavior), gamma)
    return calculator.write_jsonl(staged(out_path), records)  # published with the stage
