"""What every stage flow shares: params, paths, and publishing a markdown artifact."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact

from tracerl.params import get, load_params


def stage_params() -> dict[str, Any]:
    """params.yaml, or the file TRACERL_PARAMS names (a second pipeline's own params)."""
    return load_params(os.environ.get("TRACERL_PARAMS", "params.yaml"))


def path(params: dict[str, Any], key: str) -> Path:
    return Path(get(params, f"paths.{key}"))


def datasets(params: dict[str, Any]) -> list[str]:
    """Dataset names: the keys of `datasets` when params has it, else calculator.datasets."""
    named = get(params, "datasets")
    return list(named) if named else list(get(params, "calculator.datasets", []))


def dataset_param(params: dict[str, Any], name: str, key: str, default: Any = None) -> Any:
    """datasets[name][key] (dataset names may hold dots, e.g. gpt-4.1), else default."""
    entry = (get(params, "datasets") or {}).get(name)
    return entry.get(key, default) if isinstance(entry, dict) else default


def dataset_settings(params: dict[str, Any], name: str, section: str) -> dict[str, Any]:
    """params[section] with the dataset's own overrides (datasets.<name>.<section>) on top."""
    return {**(get(params, section) or {}), **(dataset_param(params, name, section) or {})}


def publish(key: str, markdown: str, description: str) -> None:
    """A markdown artifact in the Prefect UI (keys: lowercase letters, digits, dashes)."""
    create_markdown_artifact(key=re.sub(r"[^a-z0-9-]+", "-", key.lower()), markdown=markdown,
                             description=description)


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
