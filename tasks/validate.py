"""Prefect task of the validate stage: the Great Expectations suite over a step table."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.io.fileio import read_row_groups

# Rows per part the suite's frame is built from (the step table is never held whole).
PART_ROWS = 1 << 16


@task(name="validate-steps", task_run_name="validate {steps_dir.parent.name}")
def validate_step_table(steps_dir: Path, reward_min: float, reward_max: float,
                        tools: list[str] | None = None, hallucinated_tools: str = "fail",
                        gx_dir: Path | None = None, docs_dir: Path | None = None):
    """The suite over the dataset's step table; with `gx_dir` and `docs_dir`, run as the
    dataset's GX checkpoint, which builds its Data Docs there in the same run."""
    from tracerl.data.gx_project import DataDocs
    from tracerl.data.validation import validate_step_parts

    docs = (DataDocs(gx_dir, steps_dir.parent.name, docs_dir)
            if gx_dir is not None and docs_dir is not None else None)
    parts = (part for _, part in read_row_groups(steps_dir, PART_ROWS))
    return validate_step_parts(parts, reward_min, reward_max, tools=tools,
                               hallucinated_tools=hallucinated_tools, data_docs=docs)
