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


# A params file is a few kilobytes a person writes: bounds that no such file comes near
MAX_PARAMS_BYTES = 1 << 20
MAX_NODES = 100_000  # values (scalars, lists, mappings) once every alias is expanded
MAX_DEPTH = 64


class YamlRefused(ValueError):
    """A params file refused before it is used: a key given twice in one mapping, aliases
    that expand past MAX_NODES values (an alias bomb) or refer to themselves, nesting
    past MAX_DEPTH, a file past MAX_PARAMS_BYTES. str(): one line, with the line number."""


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses, while composing (before anything is built), a key
    given twice in one mapping (merged keys `<<:` may be overridden, as YAML says) and
    nesting past MAX_DEPTH; `_check_size` then counts the values with every alias
    expanded."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 - PyYAML's signature
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise YamlRefused(f"line {mark.line + 1}: nested more than {MAX_DEPTH} levels "
                                  "deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_mapping_node(self, anchor):  # noqa: ANN001, ANN201
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            line = key.start_mark.line + 1
            first = seen.get((key.tag, key.value))
            seen.setdefault((key.tag, key.value), line)
            if first is not None:
                raise YamlRefused(f"line {line}: the key {key.value!r} is given twice in one "
                                  f"mapping (first on line {first}); YAML would keep the last "
                                  "silently: remove one")
        return node


def _check_size(root: yaml.Node) -> None:
    """Refuse aliases that expand past MAX_NODES values or refer to themselves (the
    expanded size, memoised per node: linear in the file, whatever the aliases)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise YamlRefused(f"line {node.start_mark.line + 1}: an alias that refers to the "
                              "value it is inside (a recursive alias)")
        on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(v) for v in node.value)
        else:
            total = 1
        on_path.discard(key)
        if total > MAX_NODES:
            raise YamlRefused(f"line {node.start_mark.line + 1}: aliases expand this value to "
                              f"more than {MAX_NODES:,} values (an alias bomb?); params are "
                              "refused past that")
        sizes[key] = total
        return total

    size(root)


def load_yaml(path: Path | str) -> Any:
    """A params file's YAML, bounded (time and memory linear in its size): YamlRefused
    for a duplicated key (naming its line), an alias bomb, a recursive alias, nesting past
    MAX_DEPTH or a file past MAX_PARAMS_BYTES; yaml.YAMLError for what is not YAML."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_PARAMS_BYTES:
        raise YamlRefused(f"{size:,} bytes, over the limit of {MAX_PARAMS_BYTES:,} for a "
                          "params file")
    loader = _BoundedLoader(path.read_text(encoding="utf-8"))
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_size(root)
        return loader.construct_document(root)
    except RecursionError:
        raise YamlRefused("nested too deeply to read") from None
    finally:
        loader.dispose()


def load_params(path: Path | str = DEFAULT_PARAMS) -> dict[str, Any]:
    """Read a params file as raw YAML (load_yaml: bounded, duplicate keys refused); a
    missing file is an error that names it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no params file (run from the project root)")
    try:
        params = load_yaml(path) or {}
    except YamlRefused as exc:
        raise ValueError(f"{path}: {exc}") from None
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
