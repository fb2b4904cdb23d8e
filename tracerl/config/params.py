"""params.yaml: the one place for every knob and seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEFAULT_PARAMS = Path("params.yaml")


def load_params(path: Path | str = DEFAULT_PARAMS) -> dict[str, Any]:
    """Read params.yaml; a missing file is an error that names it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no params file (run from the project root)")
    with open(path, encoding="utf-8") as f:
        params = yaml.safe_load(f) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return params


def dataset_names(params: dict[str, Any]) -> list[str]:
    """Dataset names: the keys of `datasets` when params has it, else calculator.datasets."""
    named = get(params, "datasets")
    return list(named) if named else list(get(params, "calculator.datasets", []))


def get(params: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """params['a']['b'] for 'a.b', or default when any level is missing."""
    node: Any = params
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node
