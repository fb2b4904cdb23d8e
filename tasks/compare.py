"""Prefect task of the compare stage: logged agents compared on the tasks they share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from tracerl.data.compare import COLUMNS, agent_episodes, compare_datasets
from tracerl.io.fileio import read_table, write_json, write_text
from tracerl.report.compare import compare_markdown


@task(name="compare-agents", task_run_name="compare the datasets")
def compare_logged(labelled: Path, names: list[str], settings: dict[str, Any],
                   out_dir: Path) -> dict[str, Any]:
    """Read each dataset's labelled steps, compare every pair and rank every dataset; write
    `compare.json` (everything) and `compare.md` (the tables) into out_dir."""
    logger = get_run_logger()
    agents = []
    for name in names:
        steps = read_table(Path(labelled) / name / "steps", columns=COLUMNS)
        agents.append(agent_episodes(steps, name, value=settings["value"],
                                     exclude_terminations=settings["exclude_terminations"]))
        logger.info("compare: %s has %d episodes (%s)", name, agents[-1].n_episodes,
                    ", ".join(f"{n} left out: {why}" for why, n in agents[-1].excluded.items())
                    or "none left out")
    result = compare_datasets(
        agents, settings["pairs"], confidence=settings["confidence"],
        n_boot=settings["n_boot"], seed=settings["seed"], max_k=settings["max_k"],
        min_tasks=settings["min_tasks"], success_threshold=settings["success_threshold"])
    everything = result.to_dict()
    write_json(Path(out_dir) / "compare.json", everything)
    write_text(Path(out_dir) / "compare.md", compare_markdown(everything))
    return {"result": everything, "metrics": result.metrics()}
