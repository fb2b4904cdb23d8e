"""Prefect task of the coverage stage: which states and actions the logs support."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.fileio import read_table, write_json, write_text

SUMMARY_KEYS = ("n_transitions", "n_episodes", "n_states", "n_never_logged_pairs")


@task(name="coverage-report", task_run_name="coverage {name}")
def coverage_of(steps_dir: Path, featurizer: str, out_dir: Path, name: str,
                plot_path: Path) -> dict:
    from tracerl.coverage import coverage_report
    from tracerl.features import get_featurizer

    report = coverage_report(read_table(steps_dir), get_featurizer(featurizer))
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
