"""What every stage flow shares: params, paths, and publishing a markdown artifact."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact

from tracerl.params import get, load_params


def stage_params() -> dict[str, Any]:
    return load_params()


def path(params: dict[str, Any], key: str) -> Path:
    return Path(get(params, f"paths.{key}"))


def datasets(params: dict[str, Any]) -> list[str]:
    return list(get(params, "calculator.datasets", []))


def publish(key: str, markdown: str, description: str) -> None:
    """A markdown artifact in the Prefect UI (keys: lowercase letters, digits, dashes)."""
    create_markdown_artifact(key=re.sub(r"[^a-z0-9-]+", "-", key.lower()), markdown=markdown,
                             description=description)


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
