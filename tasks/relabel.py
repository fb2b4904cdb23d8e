"""Prefect task of the relabel stage: rewards recomputed by versioned verifiers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import task

from tracerl.config.data import Filters
from tracerl.data import relabel as rl
from tracerl.data.schema import upgrade_table
from tracerl.data.verifiers import return_summary
from tracerl.io.fileio import read_row_groups, read_table, write_row_groups
from tracerl.io.staging import visible


@task(name="relabel-steps", task_run_name="relabel {steps_dir.parent.name}")
def relabel_steps(steps_dir: Path, out_dir: Path, verifiers: list[str],
                  weights: dict[str, float], filters: Filters | None = None) -> dict:
    """filters: the components the SWiRL filters read (relabel.filters); the library's
    when absent.

    The verifiers score, and the report is computed from, only the columns they read
    (`relabel.columns_read`; every column when a verifier does not say); the labelled
    table is then written a row group at a time from the step table's parts, the same
    bytes as writing it whole."""
    filters = filters or Filters()
    parts = sorted(Path(visible(steps_dir)).glob("*.parquet"))
    available = pq.read_schema(parts[0]).names if parts else []
    steps = upgrade_table(read_table(steps_dir, rl.columns_read(verifiers, available)))
    labels = rl.score(steps, verifiers, weights)  # (the verifiers' decoding is of steps)
    labelled = labels.apply(steps)
    del steps
    changed = pc.greater(pc.abs(pc.subtract(labelled.column("reward"),
                                            labelled.column("reward_logged"))), 1e-12)
    result = {
        "rows": labelled.num_rows,
        "episodes_by_filter": rl.episodes_by_filter(labelled, filters.process,
                                                    filters.outcome),
        "rows_reward_changed": int(pc.sum(changed).as_py() or 0),
        "mean_reward": float(np.mean(labelled.column("reward").to_numpy())),
        "verifier_version": labelled.column("verifier_version")[0].as_py()
        if labelled.num_rows else None,
        "verifier_diagnostics": rl.diagnostics(labelled, verifiers),
        "returns": return_summary(labelled),
    }
    del labelled
    pa.default_memory_pool().release_unused()  # what scoring freed, before the big part
    write_row_groups((labels.apply(upgrade_table(part), offset)
                      for offset, part in read_row_groups(steps_dir)), out_dir)
    return result
