"""Prefect task of the validate stage: the Great Expectations suite over a step table."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.fileio import read_table


@task(name="validate-steps", task_run_name="validate {steps_dir.parent.name}")
def validate_step_table(steps_dir: Path, reward_min: float, reward_max: float):
    from tracerl.validation import validate_steps

    return validate_steps(read_table(steps_dir), reward_min, reward_max)
