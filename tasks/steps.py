"""Prefect tasks for the data stages: thin, retriable wrappers over the library."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.envs import calculator
from tracerl.fileio import read_table
from tracerl.ingest import IngestSummary, ingest


@task(name="generate-calculator-logs")
def generate_calculator_logs(name: str, n_episodes: int, seed: int, test_fraction: float,
                             behavior: dict, gamma: float, out_path: Path) -> int:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    records = calculator.log_records(name, n_episodes, seed, test_fraction,
                                     calculator.BehaviorSpec.from_params(behavior), gamma)
    return calculator.write_jsonl(out_path, records)


@task(name="ingest-jsonl")
def ingest_jsonl(inputs: list[Path], out_dir: Path, batch_lines: int,
                 max_bad_fraction: float, workers: int, fmt: str = "auto",
                 strict: bool = False) -> IngestSummary:
    return ingest(inputs, out_dir, batch_lines=batch_lines, max_bad_fraction=max_bad_fraction,
                  workers=workers, fmt=fmt, strict=strict)


@task(name="validate-steps")
def validate_step_table(steps_dir: Path, reward_min: float, reward_max: float,
                        tools: list[str] | None = None, hallucinated_tools: str = "fail"):
    from tracerl.validation import validate_steps

    return validate_steps(read_table(steps_dir), reward_min, reward_max, tools=tools,
                          hallucinated_tools=hallucinated_tools)
