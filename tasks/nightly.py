"""Prefect tasks of the nightly flow: land each new inbox file (mapped over files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from tracerl.data.inbox import InboxFile, land


@task(name="land-inbox-file", task_run_name="land {file.dataset}/{file.partition}")
def land_file(file: InboxFile, landed: Path, batch_lines: int,
              max_bad_fraction: float) -> dict[str, Any]:
    return land(file, landed, batch_lines=batch_lines, max_bad_fraction=max_bad_fraction,
                workers=1)
