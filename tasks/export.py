"""Prefect tasks of the export stage: one dataset's fine-tuning files and manifest."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prefect import task

from tracerl.config.export import Export
from tracerl.export.run import export_dataset, source_sha256, split_keys
from tracerl.io.fileio import read_table


@task(name="export-split-keys", task_run_name="split keys {steps_dir.parent.name}")
def split_keys_of(steps_dir: Path) -> list[str]:
    """What the task split keeps together, per episode of one labelled table."""
    return split_keys(read_table(steps_dir, columns=["episode_id", "task"]))


@task(name="export-dataset", task_run_name="export {steps_dir.parent.name}")
def export_steps(steps_dir: Path, out_dir: Path, config: Export,
                 process: Mapping[str, float] | None, outcome: str | None,
                 split_of: Mapping[str, str], tool_definitions: Mapping[str, dict] | None
                 ) -> dict:
    steps = read_table(steps_dir)
    return export_dataset(steps, out_dir, config, process=process, outcome=outcome,
                          split_of=split_of, tool_definitions=tool_definitions,
                          source={"steps": str(steps_dir), "sha256": source_sha256(steps_dir)})
