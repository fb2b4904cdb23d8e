"""Featurizers: turn a step table into state keys and action keys for tabular RL.

A featurizer names, for every row of a step table (``tracerl.schema.STEP_SCHEMA``), the
state BEFORE the row's action and the action taken, as stable strings. The integer-coded
forms (`state_codes`, `action_codes`) are what the learners use; the string forms are for
people, policies and artifacts. Work is done per unique value (unique memory strings,
unique tool names), never per row in Python.

- `DialogueFeaturizer`: real dialogue logs (tau2, OpenAI chat); a discrete state key of
  what generalises across episodes (the parts params choose: previous action, tool calls
  so far, whether the last call erred, domain, ...), action key the tool name or
  ``respond`` for a message.
- `ToolSignatureFeaturizer`: any tool-using agent; action key is the tool-call signature
  ``tool(arg1,arg2)`` (sorted argument names), state key the task plus the sorted set of
  tools called so far in the episode. It knows no environment rules: every action in its
  vocabulary is valid everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc


class Featurizer(Protocol):
    """What learners need from a featurizer."""

    name: str

    @property
    def actions(self) -> tuple[str, ...]:
        """The action vocabulary; action codes index into it."""
        ...

    def state_codes(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, sorted vocabulary of state keys)."""
        ...

    def action_codes(self, steps: pa.Table) -> np.ndarray:
        """Index into `actions` per row."""
        ...

    def valid_actions(self, state_key: str) -> tuple[int, ...]:
        """Indices into `actions` allowed in this state."""
        ...

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments, JSON-ready (for artifacts)."""
        ...


def _dictionary(column: pa.ChunkedArray | pa.Array, what: str) -> tuple[np.ndarray, list]:
    """(index per row, unique values) of a string column; nulls are an error."""
    if column.null_count:
        raise ValueError(f"{what} is null in {column.null_count} row(s)")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = column.dictionary_encode()
    return encoded.indices.to_numpy().astype(np.int64), encoded.dictionary.to_pylist()


def _struct_field(steps: pa.Table, struct: str, field: str) -> pa.ChunkedArray:
    return pc.struct_field(steps.column(struct), field)


def _recode(codes: np.ndarray, labels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Map codes whose labels may repeat onto a sorted vocabulary of distinct labels."""
    vocab, label_code = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
    return label_code[codes].astype(np.int32), vocab


def _keys(codes: np.ndarray, vocab: np.ndarray) -> np.ndarray:
    return vocab[codes] if len(vocab) else np.empty(len(codes), dtype=str)


def _signature(action_type: str, tool: str | None, arguments: str | None) -> str:
    if action_type != "tool_call":
        return action_type  # "message" / "final_answer": one action each
    args = orjson.loads(arguments) if arguments is not None else None
    names = sorted(args) if isinstance(args, dict) else []
    return f"{tool}({','.join(names)})"


def _episode_order(steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(row order sorted by episode then t, episode code per row)."""
    episode, _ = _dictionary(steps.column("episode_id"), "episode_id")
    t = steps.column("t").to_numpy()
    return np.lexsort((t, episode)), episode


class ToolSignatureFeaturizer:
    """Generic featurizer for tool-using agents.

    Action key: ``tool(arg_a,arg_b)`` with the sorted top-level argument names (e.g.
    ``search(query)``), or the action type for non-tool actions (``final_answer``).
    State key: ``"<task>|<sorted tools called earlier in the episode>"``, e.g.
    ``"revenue|open_pdf,search"``. `actions` is the action vocabulary (build it with
    `from_steps`); every action is treated as valid in every state.
    """

    name: ClassVar[str] = "tool_signature"

    def __init__(self, actions: Sequence[str] = ()) -> None:
        self.actions = tuple(actions)

    @classmethod
    def from_steps(cls, steps: pa.Table) -> ToolSignatureFeaturizer:
        """A featurizer whose vocabulary is the sorted action keys found in `steps`."""
        _, signatures = cls._signature_codes(steps)
        return cls(sorted(set(signatures)))

    def get_params(self) -> dict[str, Any]:
        """The action vocabulary."""
        return {"actions": list(self.actions)}

    @staticmethod
    def _signature_codes(steps: pa.Table) -> tuple[np.ndarray, list[str]]:
        """(index per row, signature of each distinct (type, tool, arguments))."""
        action = steps.column("action")
        parts = [pc.struct_field(action, f) for f in ("type", "tool", "arguments")]
        # One string per row that determines the signature, so only distinct ones are parsed.
        joined = pc.binary_join_element_wise(*[pc.fill_null(p, "") for p in parts], "\x1f")
        idx, distinct = _dictionary(joined, "action")
        signatures = []
        for text in distinct:
            kind, tool, args = text.split("\x1f", 2)
            signatures.append(_signature(kind, tool or None, args or None))
        return idx, signatures

    def action_codes(self, steps: pa.Table) -> np.ndarray:
        """Index into `actions` of each row's signature."""
        idx, signatures = self._signature_codes(steps)
        index = {a: i for i, a in enumerate(self.actions)}
        unknown = sorted(set(signatures) - set(index))
        if unknown:
            raise ValueError(f"action keys outside the vocabulary: {unknown[:5]}")
        lookup = np.array([index[s] for s in signatures], dtype=np.int32)
        return lookup[idx] if len(signatures) else np.empty(0, dtype=np.int32)

    def action_keys(self, steps: pa.Table) -> np.ndarray:
        """Signature of each row, e.g. ``search(query)``."""
        idx, signatures = self._signature_codes(steps)
        return np.asarray(signatures, dtype=str)[idx] if signatures else np.empty(0, dtype=str)

    def state_codes(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(code per row into the sorted key vocabulary, the vocabulary)."""
        n = steps.num_rows
        if n == 0:
            return np.empty(0, dtype=np.int32), np.empty(0, dtype=str)
        task_idx, tasks = _dictionary(pc.fill_null(steps.column("task"), ""), "task")
        tool_idx, tools = _dictionary(
            pc.fill_null(_struct_field(steps, "action", "tool"), ""), "action.tool"
        )
        is_call = pc.equal(_struct_field(steps, "action", "type"), "tool_call")
        is_call = pc.fill_null(is_call, False).to_numpy(zero_copy_only=False)
        order, episode = _episode_order(steps)
        ep = episode[order]
        # Row index (in sorted order) where each row's episode starts.
        first = np.ones(n, dtype=bool)
        first[1:] = ep[1:] != ep[:-1]
        start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
        # Bit set of tools called strictly before each row: one pass per distinct tool.
        words = np.zeros((n, max(1, (len(tools) + 62) // 63)), dtype=np.int64)
        sorted_tool, sorted_call = tool_idx[order], is_call[order]
        for k in range(len(tools)):
            calls = np.cumsum(sorted_call & (sorted_tool == k))
            before = np.concatenate(([0], calls[:-1])) if n else calls
            words[:, k // 63] |= (before - before[start] > 0).astype(np.int64) << (k % 63)
        rows = np.column_stack([task_idx[order], words])
        combo, combo_idx = np.unique(rows, axis=0, return_inverse=True)
        combo_idx = combo_idx.reshape(-1)
        labels = []
        for row in combo:
            called = [tools[k] for k in range(len(tools)) if row[1 + k // 63] >> (k % 63) & 1]
            labels.append(f"{tasks[row[0]]}|{','.join(sorted(called))}")
        codes_sorted, vocab = _recode(combo_idx, labels)
        codes = np.empty(n, dtype=np.int32)
        codes[order] = codes_sorted
        return codes, vocab

    def state_keys(self, steps: pa.Table) -> np.ndarray:
        """Key of the state before each row's action."""
        return _keys(*self.state_codes(steps))

    def valid_actions(self, state_key: str) -> tuple[int, ...]:
        """Every action: a generic log carries no environment rules."""
        return tuple(range(len(self.actions)))


# Featurizers by name. Generic ones are registered here; a fixture (an environment under
# tracerl/envs/) registers its own when its package is imported, so this module never
# imports an environment.
FEATURIZERS: dict[str, type] = {ToolSignatureFeaturizer.name: ToolSignatureFeaturizer}


def register_featurizer(cls: type) -> type:
    """Add a featurizer class under its `name` (usable as a class decorator)."""
    if FEATURIZERS.get(cls.name, cls) is not cls:
        raise ValueError(f"featurizer {cls.name!r} is already registered")
    FEATURIZERS[cls.name] = cls
    return cls


def get_featurizer(name: str, **params: Any) -> Featurizer:
    """A registered featurizer by name (e.g. ``"tool_signature"``, ``"dialogue"``, or a
    fixture's such as ``"calculator"`` once ``tracerl.envs`` is imported) and parameters."""
    try:
        cls = FEATURIZERS[name]
    except KeyError:
        raise ValueError(f"unknown featurizer {name!r}; expected one of "
                         f"{sorted(FEATURIZERS)}") from None
    return cls(**params)
