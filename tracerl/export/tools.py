"""The `tools` of an export record: each tool's definition, from where the logs or params
give one, else a JSON schema inferred from the tool's logged calls.

- given: `export.tool_definitions` (a JSON file of OpenAI-style tools), else the
  definitions the log carried (an adapter keeps them as `extra.tool_definitions` on an
  episode's done row: the OpenAI chat adapter its records' `tools`);
- inferred: from every logged call of the tool in the dataset, `parameters` is an object
  schema whose properties are the argument names seen, each typed by the JSON types of its
  values (several types: a list of them; objects and array items merged the same way,
  to `INFER_DEPTH` levels), `required` the names present in every call. The function's
  `description` says it was inferred and from how many calls; the manifest lists each
  tool's source (`tool_sources`);
- a record lists the tools its conversation was offered, then those it called without
  their being offered (a trainer's chat template needs a definition for every call);
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


def logged_definitions(steps: pa.Table) -> dict[str, dict]:
    """name -> definition, from the `extra.tool_definitions` lists adapters keep on an
    episode's done row (the log's own tool list: OpenAI `tools`); the first definition of
    a name in (episode_id, t) order wins."""
    if "extra" not in steps.column_names or steps.num_rows == 0:
        return {}
    extra = steps.column("extra")
    has = pc.fill_null(pc.match_substring(extra, '"tool_definitions"'), False)
    rows = steps.filter(has).select(["episode_id", "t", "extra"])
    rows = rows.sort_by([("episode_id", "ascending"), ("t", "ascending")])
    out: dict[str, dict] = {}
    for text in rows.column("extra").to_pylist():
        try:
            tools = orjson.loads(text).get("tool_definitions")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        for tool in tools if isinstance(tools, list) else ():
            function = tool.get("function", tool) if isinstance(tool, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str) and name and name not in out:
                parameters = function.get("parameters")
                if not isinstance(parameters, dict) or parameters.get("type") != "object":
                    parameters = {"type": "object", "properties": {}}
                out[name] = {"type": "function", "function": {**function,
                                                              "parameters": parameters}}
    return out


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
        self.from_log: set[str] = set()
        self._cache: dict[tuple[str, ...] | None, list[dict] | None] = {}

    @classmethod
    def of(cls, steps: pa.Table, given: Mapping[str, dict] | None) -> ToolCatalog:
        """Given definitions (params) first, then those the log carried, then inferred."""
        logged = logged_definitions(steps)
        catalog = cls({**logged, **(given or {})}, infer_definitions(logged_calls(steps)))
        catalog.from_log = set(logged) - set(given or {})
        return catalog

    def specs(self, names: Sequence[str] | None, called: Sequence[str] = ()) -> list[dict] | None:
        """The record's `tools`: the offered ones in the log's order, then any tool the
        conversation called that was not offered (`called`; its definition says where it
        came from), else every known tool (the given definitions in their order, then the
        inferred ones by name); None when no tool is known at all."""
        if names is None:
            key: tuple[str, ...] | None = None
        else:
            offered = list(dict.fromkeys(names))
            key = (*offered, *sorted(set(called) - set(offered)))
        if key not in self._cache:
            wanted = list(self.known) if key is None else list(key)
            self.used.update(wanted)
            self._cache[key] = [self.known.get(n) or undefined(n) for n in wanted] or None
        return self._cache[key]

    def sources(self) -> dict[str, str]:
        """Per tool put in a record: where its definition came from."""
        out = {}
        for name in sorted(self.used):
            if name in self.from_log:
                out[name] = "definition from the log"
            elif name in self.given:
                out[name] = "definition"
            elif name in self.inferred:
                out[name] = "inferred from logged calls"
            else:
                out[name] = "none: offered, never called, no definition"
        return out
