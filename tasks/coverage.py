"""Prefect tasks of the coverage stage: which states and actions the logs support, and how
much of one agent's behaviour another agent's logs cover."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task

from tracerl.io.fileio import read_table, write_json, write_text
from tracerl.rl.encoding import policy_view

SUMMARY_KEYS = ("n_transitions", "n_episodes", "n_states", "n_never_logged_pairs")


@task(name="coverage-report", task_run_name="coverage {name}")
def coverage_of(steps_dir: Path, featurizer: str, out_dir: Path, name: str,
                plot_path: Path, featurizer_params: dict | None = None) -> dict:
    from tracerl.data.coverage import coverage_report

    report = coverage_report(policy_view(read_table(steps_dir), featurizer, featurizer_params))
    out_dir.mkdir(parents=True, exist_ok=True)
    detail = report.to_dict()
    write_json(out_dir / f"{name}.json", detail)
    markdown = report.to_markdown()
    write_text(out_dir / f"{name}.md", markdown + "\n")
    report.plot(out_dir / f"{name}.png")
    # Plot data for `dvc plots`: logged count of each (task, action), never-logged included.
    write_json(plot_path, [
        {"task": str(task), "action": action, "task_action": f"{task} · {action}",
         "count": int(report.action_counts[k, a])}
        for k, task in enumerate(report.tasks.tolist())
        for a, action in enumerate(report.actions)])
    return {"markdown": markdown, "summary": {k: detail[k] for k in SUMMARY_KEYS}}


@task(name="cross-agent-coverage")
def cross_agent_coverage_of(target_dir: Path, reference_dir: Path, featurizer: str,
                            featurizer_params: dict | None, out_dir: Path, target: str,
                            reference: str) -> dict:
    """Share of the target dataset's (state, action) pairs the reference's logs contain."""
    from tracerl.data.coverage import cross_agent_coverage

    keys = []
    for folder in (target_dir, reference_dir):
        tr = policy_view(read_table(folder), featurizer, featurizer_params)
        keys += [tr.labels[tr.s], np.asarray(tr.actions, dtype=str)[tr.a]]
    report = cross_agent_coverage(*keys, target=target, reference=reference)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"cross_agent_{target}_in_{reference}"
    write_json(out_dir / f"{stem}.json", report.to_dict())
    write_text(out_dir / f"{stem}.md", report.to_markdown())
    return {"markdown": report.to_markdown(), "overall": report.overall}
