"""Prefect task of the generate stage: a fixture's simulated logs (the calculator's native
JSONL, the support desk's OpenAI-chat JSONL)."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.config.fixtures import get_fixture
from tracerl.config.schema import Params
from tracerl.io.staging import staged


@task(name="generate-logs", task_run_name="generate {name}")
def generate_logs(fixture: str, name: str, index: int, config: Params, out_path: Path) -> int:
    """The `fixture`'s logs of dataset `name` (the index-th dataset) at out_path."""
    generator = get_fixture(fixture).generate_logs
    if generator is None:
        raise ValueError(f"fixture {fixture!r} generates no logs")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return generator(name, index, config, staged(out_path))  # published with the stage
