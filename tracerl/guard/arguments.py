"""What the logs say of a call's arguments: per tool, every argument path it was logged
with and the range of each numeric one.

A path is a dotted walk into the arguments object (`refund.amount`; `items[].qty` for the
elements of a list). A proposed call is *unseen* when it holds a path the logs never showed
with that tool, or a number outside the range the logs showed at that path; strings are
not judged (identifiers and free text are new in every conversation). Each numeric argument
is also scored: where its value falls among the logged ones (the share at or below it), so
`issue_refund` of 0 and of 1e12 get different answers even where both are unseen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf of a JSON value (an empty object or list is a leaf)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value:
        for item in value:
            yield from leaves(item, f"{path}[]")
    elif path:
        yield path, value


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


@dataclass
class ToolArguments:
    """One tool's logged argument paths, and the sorted values of each numeric one."""

    calls: int = 0
    paths: set[str] = field(default_factory=set)
    numbers: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class ArgumentRanges:
    """Per tool, what its logged calls' arguments held (`fit` from a step table)."""

    tools: dict[str, ToolArguments]

    @classmethod
    def fit(cls, steps: pa.Table) -> ArgumentRanges:
        """From the tool_call rows of a step table (action.tool, action.arguments: canonical
        JSON text); each distinct (tool, arguments) pair is parsed once."""
        action = steps.column("action")
        calls = pc.equal(pc.struct_field(action, "type"), "tool_call")
        pairs = pa.table({"tool": pc.struct_field(action, "tool"),
                          "arguments": pc.struct_field(action, "arguments")}).filter(
            pc.fill_null(calls, False))
        counted = pairs.group_by(["tool", "arguments"]).aggregate([([], "count_all")])
        tools: dict[str, ToolArguments] = {}
        numbers: dict[tuple[str, str], list[tuple[float, int]]] = {}
        for tool, text, n in zip(*(counted.column(c).to_pylist() for c in (
                "tool", "arguments", "count_all")), strict=True):
            if tool is None:
                continue
            entry = tools.setdefault(tool, ToolArguments())
            entry.calls += n
            try:
                value = orjson.loads(text) if text else {}
            except orjson.JSONDecodeError:
                continue
            for path, leaf in leaves(value):
                entry.paths.add(path)
                number = _number(leaf)
                if number is not None:
                    numbers.setdefault((tool, path), []).append((number, n))
        for (tool, path), values in numbers.items():
            v, n = np.asarray(values).T
            tools[tool].numbers[path] = np.sort(np.repeat(v, n.astype(np.int64)))
        return cls(tools)

    def judge(self, tool: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """(per numeric argument: its value, the logged range and where it falls; the
        reasons the arguments are unseen, none when every path and number was logged)."""
        logged = self.tools.get(tool)
        scored: dict[str, Any] = {}
        unseen: list[str] = []
        if logged is None:
            return scored, unseen  # the tool itself is unseen: judged by the caller
        for path, leaf in leaves(dict(arguments)):
            if path not in logged.paths:
                unseen.append(f"argument {path!r} is never logged with {tool}")
                continue
            number, values = _number(leaf), logged.numbers.get(path)
            if number is None or values is None or not len(values):
                continue
            low, high = float(values[0]), float(values[-1])
            inside = bool(low <= number <= high) and np.isfinite(number)
            scored[path] = {"value": number, "logged_min": low, "logged_max": high,
                            "logged_calls": int(len(values)),
                            "quantile": float(np.searchsorted(values, number, "right")
                                              / len(values)),
                            "inside": inside}
            if not inside:
                unseen.append(f"argument {path}={number:g} is outside the logged range "
                              f"[{low:g}, {high:g}] of {tool} ({len(values)} calls)")
        return scored, unseen
