"""Prefect task of the relabel stage: rewards recomputed by versioned verifiers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
from prefect import task

from tracerl.config.data import Filters
from tracerl.data import relabel as rl
from tracerl.data.verifiers import return_summary
from tracerl.io.fileio import read_table, write_table


@task(name="relabel-steps", task_run_name="relabel {steps_dir.parent.name}")
def relabel_steps(steps_dir: Path, out_dir: Path, verifiers: list[str],
                  weights: dict[str, float], filters: Filters | None = None) -> dict:
    """filters: the components the SWiRL filters read (relabel.filters); the library's
    when absent."""
    filters = filters or Filters()
    steps = read_table(steps_dir)
    labelled = rl.relabel(steps, verifiers, weights)
    write_table(labelled, out_dir)
    changed = pc.greater(pc.abs(pc.subtract(labelled.column("reward"),
                                            labelled.column("reward_logged"))), 1e-12)
    episodes = {mode: len(pc.unique(rl.select_training_data(
        labelled, mode, filters.process, filters.outcome).column("episode_id")))
        for mode in rl.MODES}
    return {
        "rows": labelled.num_rows,
        "episodes_by_filter": episodes,
        "rows_reward_changed": int(pc.sum(changed).as_py() or 0),
        "mean_reward": float(np.mean(labelled.column("reward").to_numpy())),
        "verifier_version": labelled.column("verifier_version")[0].as_py()
        if labelled.num_rows else None,
        "verifier_diagnostics": rl.diagnostics(labelled, verifiers),
        "returns": return_summary(labelled),
    }
