"""Prefect tasks of the export stage: one dataset's fine-tuning files and manifest."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from tracerl.config.export import Export
from tracerl.config.learning import Ope, Train
from tracerl.export.run import CreditPlan, export_dataset, plan_credit, source_sha256, split_keys
from tracerl.io.fileio import read_table

CREDIT_FORMATS = ("weighted", "pairs")


@task(name="export-split-keys", task_run_name="split keys {steps_dir.parent.name}")
def split_keys_of(steps_dir: Path) -> list[str]:
    """What the task split keeps together, per episode of one labelled table."""
    return split_keys(read_table(steps_dir, columns=["episode_id", "task"]))


@task(name="export-credit", task_run_name="step credit", cache_policy=NO_CACHE)
def credit_plan(steps_dirs: Mapping[str, Path], config: Export, train: Train | None,
                ope: Ope | None, gamma: float, split_of: Mapping[str, str]
                ) -> CreditPlan | None:
    """Every dataset's step credit and the mined pairs (None when no format needs them):
    the params' train encoder and ope critic, else the dialogue defaults."""
    if not set(CREDIT_FORMATS) & set(config.formats):
        return None
    tables = {name: read_table(d) for name, d in steps_dirs.items()}
    return plan_credit(tables, config, train, ope, gamma, split_of)


# The credit plan is a large input: no cache key hashed from it.
@task(name="export-dataset", task_run_name="export {steps_dir.parent.name}",
      cache_policy=NO_CACHE)
def export_steps(steps_dir: Path, out_dir: Path, config: Export,
                 process: Mapping[str, float] | None, outcome: str | None,
                 split_of: Mapping[str, str], tool_definitions: Mapping[str, dict] | None,
                 plan: CreditPlan | None = None) -> dict:
    steps = read_table(steps_dir)
    name = steps_dir.parent.name
    return export_dataset(steps, out_dir, config, process=process, outcome=outcome,
                          split_of=split_of, tool_definitions=tool_definitions,
                          source={"steps": str(steps_dir), "sha256": source_sha256(steps_dir)},
                          credit=plan.credits.get(name) if plan else None,
                          pairs=plan.pairs[name] if plan else (),
                          chosen=plan.chosen if plan else None)
