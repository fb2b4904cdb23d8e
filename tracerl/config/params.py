"""Reading params files. `tracerl.config.schema.load_config` gives the checked, typed
model the stages use; `load_params` is the raw YAML (for tools that only look at it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from tracerl.config.schema import Params

DEFAULT_PARAMS = Path("params.yaml")


def load_params(path: Path | str = DEFAULT_PARAMS) -> dict[str, Any]:
    """Read a params file as raw YAML; a missing file is an error that names it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no params file (run from the project root)")
    with open(path, encoding="utf-8") as f:
        params = yaml.safe_load(f) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return params


def dataset_names(params: Params | Mapping[str, Any]) -> list[str]:
    """The pipeline's dataset names (`Params.dataset_names`), of the model or of raw params."""
    from tracerl.config.schema import Params, validate_params

    config = params if isinstance(params, Params) else validate_params(dict(params))
    return config.dataset_names()


def get(params: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """params['a']['b'] for 'a.b' (raw YAML params, e.g. a dumped model), or default when a
    level is missing or None."""
    node: Any = params
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return default if node is None else node


def stage_param_keys(dvc_file: Path | str, stage: str) -> list[str] | None:
    """The params a stage of a dvc.yaml reads (its `params:`, dotted names; `{file: [keys]}`
    entries too), None when the file has no such stage. The one list of what a stage
    reads: DVC reruns the stage when one of them changes."""
    path = Path(dvc_file)
    if not path.is_file():
        return None
    spec = ((yaml.safe_load(path.read_text()) or {}).get("stages") or {}).get(stage)
    if spec is None:
        return None
    keys: list[str] = []
    for entry in spec.get("params", []) or []:
        keys += ([k for ks in entry.values() for k in ks or []] if isinstance(entry, dict)
                 else [entry])
    return keys
