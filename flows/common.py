"""What every stage flow shares: params, paths, metrics, provenance, and publishing a
markdown artifact."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact

from tracerl.fileio import write_json
from tracerl.params import dataset_names, get, load_params


def stage_params() -> dict[str, Any]:
    """params.yaml, or the file TRACERL_PARAMS names (a second pipeline's own params)."""
    return load_params(os.environ.get("TRACERL_PARAMS", "params.yaml"))


def path(params: dict[str, Any], key: str) -> Path:
    return Path(get(params, f"paths.{key}"))


def datasets(params: dict[str, Any]) -> list[str]:
    """Dataset names: the keys of `datasets` when params has it, else calculator.datasets."""
    return dataset_names(params)


def dataset_param(params: dict[str, Any], name: str, key: str, default: Any = None) -> Any:
    """datasets[name][key] (dataset names may hold dots, e.g. gpt-4.1), else default."""
    entry = (get(params, "datasets") or {}).get(name)
    return entry.get(key, default) if isinstance(entry, dict) else default


def dataset_settings(params: dict[str, Any], name: str, section: str) -> dict[str, Any]:
    """params[section] with the dataset's own overrides (datasets.<name>.<section>) on top."""
    return {**(get(params, section) or {}), **(dataset_param(params, name, section) or {})}


def write_metrics(params: dict[str, Any], stage: str, metrics: dict[str, Any]) -> Path:
    """The stage's scalar metrics (`paths.metrics`/<stage>.json, committed to git so
    `dvc metrics diff` and `dvc exp show` compare revisions). Leaves must be numbers."""
    _check_scalar(metrics, stage)
    out = path(params, "metrics") / f"{stage}.json"
    write_json(out, _rounded(metrics))
    return out


def _rounded(node: Any) -> Any:
    """Floats to 6 decimals: diffs between revisions show changes, not float noise."""
    if isinstance(node, dict):
        return {k: _rounded(v) for k, v in node.items()}
    return round(node, 6) if isinstance(node, float) else node


def _check_scalar(node: Any, where: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _check_scalar(value, f"{where}.{key}")
    elif isinstance(node, bool) or not isinstance(node, int | float):
        raise TypeError(f"metric {where} is {node!r}: metrics hold numbers only")


def params_hash(params: dict[str, Any]) -> str:
    """sha256 of the params as canonical JSON (what a run was configured with)."""
    return hashlib.sha256(orjson.dumps(params, option=orjson.OPT_SORT_KEYS)).hexdigest()


def git_commit() -> str:
    """HEAD of the checkout, with "+dirty" when tracked files differ ("unknown" outside git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def record_provenance(params: dict[str, Any], stage: str) -> dict[str, str]:
    """Which code and params produced this stage's outputs, kept OUT of the outputs (so
    their bytes do not change with every commit): a git-ignored sidecar that no stage
    depends on, and the flow run's log."""
    try:
        version = metadata.version("tracerl")
    except metadata.PackageNotFoundError:
        version = "unknown"
    info = {"stage": stage, "git_commit": git_commit(), "tracerl": version,
            "params_sha256": params_hash(params),
            "finished_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    write_json(path(params, "reports") / "provenance" / f"{stage}.json", info)
    get_run_logger().info("provenance: %s", info)
    return info


def publish(key: str, markdown: str, description: str) -> None:
    """A markdown artifact in the Prefect UI (keys: lowercase letters, digits, dashes)."""
    create_markdown_artifact(key=re.sub(r"[^a-z0-9-]+", "-", key.lower()), markdown=markdown,
                             description=description)


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
