"""Prefect task of the validate stage: the Great Expectations suite over a step table."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.fileio import read_table


@task(name="validate-steps", task_run_name="validate {steps_dir.parent.name}")
def validate_step_table(steps_dir: Path, reward_min: float, reward_max: float,
                        tools: list[str] | None = None, hallucinated_tools: str = "fail"):
    from tracerl.validation import validate_steps

    return validate_steps(read_table(steps_dir), reward_min, reward_max, tools=tools,
                          hallucinated_tools=hallucinated_tools)


@task(name="gx-data-docs", task_run_name="data docs {dataset}")
def gx_data_docs(steps_dir: Path, gx_dir: Path, dataset: str, docs_dir: Path) -> bool:
    """Run the dataset's GX checkpoint (from the GX project folder) and build its Data
    Docs offline."""
    from tracerl.gx_project import build_data_docs
    from tracerl.validation import _step_frame

    return build_data_docs(_step_frame(read_table(steps_dir)), gx_dir, dataset, docs_dir)
