"""The `tools` of an export record: each tool's definition, from where the logs or params
give one, else a JSON schema inferred from the tool's logged calls.

- given: `export.tool_definitions` (a JSON file of OpenAI-style tools) or the definitions
  a log format carries (OpenAI `tools`, tau2's `tool_defs`, Anthropic `tools`);
- inferred: from every logged call of the tool in the dataset, `parameters` is an object
  schema whose properties are the argument names seen, each typed by the JSON types of its
  values (several types: a list of them; objects and array items merged the same way,
  to `INFER_DEPTH` levels), `required` the names present in every call. The function's
  `description` says it was inferred and from how many calls; the manifest lists each
  tool's source (`tool_sources`);
- a tool offered but neither defined nor ever called: `parameters: {"type": "object"}`
  and a description saying so.

Every definition is `{"type": "function", "function": {"name", "description",
"parameters"}}`, the shape OpenAI fine-tuning, TRL and the transformers chat templates read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

INFER_DEPTH = 4  # nested objects / arrays typed this deep; below, any value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class _Shape:
    """What the logged values at one argument path looked like."""

    def __init__(self) -> None:
        self.types: set[str] = set()
        self.props: dict[str, _Shape] = {}
        self.present: dict[str, int] = {}   # property -> objects holding it
        self.objects = 0
        self.items: _Shape | None = None

    def add(self, value: Any, depth: int) -> None:
        kind = _json_type(value)
        self.types.add(kind)
        if depth <= 0:
            return
        if kind == "object":
            self.objects += 1
            for key, v in value.items():
                self.props.setdefault(key, _Shape()).add(v, depth - 1)
                self.present[key] = self.present.get(key, 0) + 1
        elif kind == "array":
            for v in value:
                if self.items is None:
                    self.items = _Shape()
                self.items.add(v, depth - 1)

    def schema(self) -> dict:
        types = set(self.types)
        if {"integer", "number"} <= types:
            types.discard("integer")  # an integer is a number
        out: dict[str, Any] = {}
        if len(types) == 1:
            out["type"] = next(iter(types))
        elif types:
            out["type"] = sorted(types)
        if "object" in types and self.props:
            out["properties"] = {k: self.props[k].schema() for k in sorted(self.props)}
            required = sorted(k for k, n in self.present.items() if n == self.objects)
            if required:
                out["required"] = required
        if "array" in types and self.items is not None:
            out["items"] = self.items.schema()
        return out


def infer_definitions(calls: Iterable[tuple[str, str | None]]) -> dict[str, dict]:
    """name -> inferred definition, from (tool name, canonical JSON arguments) of the
    logged calls. Arguments that are not a JSON object (a bare string, unparsable text)
    make the schema accept any object for that call's tool."""
    shapes: dict[str, _Shape] = {}
    counts: dict[str, int] = {}
    loose: set[str] = set()
    for name, arguments in calls:
        if not name:
            continue
        counts[name] = counts.get(name, 0) + 1
        shape = shapes.setdefault(name, _Shape())
        try:
            value = {} if arguments is None else orjson.loads(arguments)
        except orjson.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            loose.add(name)
            continue
        shape.add(value, INFER_DEPTH)
    out = {}
    for name in sorted(shapes):
        n = counts[name]
        parameters = {"type": "object"}
        if name not in loose:
            parameters = {**shapes[name].schema(), "type": "object"}
            parameters.setdefault("properties", {})
        out[name] = {"type": "function", "function": {
            "name": name,
            "description": f"Parameters inferred by tracerl from {n} logged "
                           f"call{'s' if n != 1 else ''}; not the tool's own definition.",
            "parameters": parameters}}
    return out


def logged_calls(steps: pa.Table) -> list[tuple[str, str | None]]:
    """(tool, arguments) of every tool_call row of a step table."""
    action = steps.column("action")
    kind = pc.struct_field(action, "type")
    calls = pc.filter(action, pc.equal(kind, "tool_call"))
    return list(zip(pc.struct_field(calls, "tool").to_pylist(),
                    pc.struct_field(calls, "arguments").to_pylist(), strict=True))


def undefined(name: str) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": "Offered in the log, never called and no definition "
                                     "given: parameters unknown.",
        "parameters": {"type": "object", "properties": {}}}}


class ToolCatalog:
    """A dataset's tool definitions: given ones first, else inferred; `specs` gives a
    record's list (the tools the conversation was offered, else every known tool)."""

    def __init__(self, given: Mapping[str, dict] | None, inferred: Mapping[str, dict]) -> None:
        self.given = dict(given or {})
        self.inferred = dict(inferred)
        self.known = {**self.given, **{n: d for n, d in self.inferred.items()
                                      if n not in self.given}}
        self.used: set[str] = set()
        self._cache: dict[tuple[str, ...] | None, list[dict] | None] = {}

    @classmethod
    def of(cls, steps: pa.Table, given: Mapping[str, dict] | None) -> ToolCatalog:
        return cls(given, infer_definitions(logged_calls(steps)))

    def specs(self, names: Sequence[str] | None) -> list[dict] | None:
        """The record's `tools`: the offered ones in the log's order, else every known
        tool (the given definitions in their order, then the inferred ones by name); None
        when no tool is known at all."""
        key = None if names is None else tuple(names)
        if key not in self._cache:
            wanted = list(self.known) if names is None else list(dict.fromkeys(names))
            self.used.update(wanted)
            self._cache[key] = [self.known.get(n) or undefined(n) for n in wanted] or None
        return self._cache[key]

    def sources(self) -> dict[str, str]:
        """Per tool put in a record: where its definition came from."""
        out = {}
        for name in sorted(self.used):
            if name in self.given:
                out[name] = "definition"
            elif name in self.inferred:
                out[name] = "inferred from logged calls"
            else:
                out[name] = "none: offered, never called, no definition"
        return out
