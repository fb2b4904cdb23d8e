"""Featurizers: turn a step table into state keys and action keys for tabular RL.

A featurizer names, for every row of a step table (``tracerl.data.schema.STEP_SCHEMA``), the
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

from tracerl.config.registries import FEATURIZERS


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


def _codes_in(vocabulary: Sequence[str], idx: np.ndarray, keys: Sequence[str]) -> np.ndarray:
    """Index into `vocabulary` of each row, given each row's index `idx` into its distinct
    action `keys`; a key outside the vocabulary is an error, not a silent new action."""
    index = {a: i for i, a in enumerate(vocabulary)}
    unknown = sorted(set(keys) - set(index))
    if unknown:
        raise ValueError(f"action keys outside the vocabulary: {unknown[:5]}")
    lookup = np.array([index[k] for k in keys], dtype=np.int32)
    return lookup[idx] if len(keys) else np.empty(0, dtype=np.int32)


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
        return _codes_in(self.actions, *self._signature_codes(steps))

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


RESPOND = "respond"  # the action key of a message to the user
DIALOGUE_PARTS = ("prev_action", "n_calls", "last_error", "after_user", "domain", "task")


class DialogueFeaturizer:
    """Generic featurizer for dialogue logs (tau2-bench, OpenAI chat, ...).

    Action key: the tool name of a tool call, ``respond`` for any other action (a message
    to the user, a final answer). State key: the parts named in `parts`, each read from the
    log before the row's action, so it generalises across episodes and tasks:

    - ``prev_action``: the episode's previous action key (``start`` at t=0);
    - ``n_calls``: tool calls so far in the episode, capped at `max_calls` (``5+``);
    - ``last_error``: whether the episode's latest tool call so far returned an error;
    - ``after_user``: whether the user spoke since the previous action (a user message in
      its observation; at t=0, a logged user goal);
    - ``domain``: ``episode.domain``; ``task``: the task id (episode-specific: use with
      care, it does not generalise).

    e.g. ``prev=get_reservation_details|calls=3|err=0|user=1|domain=airline``. Every action
    of the vocabulary is valid everywhere (a log carries no environment rules).
    """

    name: ClassVar[str] = "dialogue"
    _LABELS: ClassVar[dict[str, str]] = {"prev_action": "prev", "n_calls": "calls",
                                         "last_error": "err", "after_user": "user",
                                         "domain": "domain", "task": "task"}

    def __init__(self, actions: Sequence[str] = (),
                 parts: Sequence[str] = ("prev_action", "n_calls", "last_error", "after_user",
                                         "domain"),
                 max_calls: int = 5) -> None:
        unknown = sorted(set(parts) - set(DIALOGUE_PARTS))
        if unknown or not parts:
            raise ValueError(f"state parts {unknown or '[]'} not among {list(DIALOGUE_PARTS)}")
        self.actions = tuple(actions)
        self.parts = tuple(parts)
        self.max_calls = int(max_calls)

    @classmethod
    def from_steps(cls, steps: pa.Table, **params: Any) -> DialogueFeaturizer:
        """A featurizer whose vocabulary is the sorted action keys found in `steps`."""
        _, keys = cls._action_index(steps)
        return cls(sorted(set(keys)), **params)

    def get_params(self) -> dict[str, Any]:
        """Vocabulary and state parts."""
        return {"actions": list(self.actions), "parts": list(self.parts),
                "max_calls": self.max_calls}

    @staticmethod
    def _action_index(steps: pa.Table) -> tuple[np.ndarray, list[str]]:
        """(index per row, distinct action keys)."""
        action = steps.column("action")
        is_call = pc.fill_null(pc.equal(pc.struct_field(action, "type"), "tool_call"), False)
        key = pc.if_else(is_call, pc.struct_field(action, "tool"), RESPOND)
        return _dictionary(pc.fill_null(key, RESPOND), "action key")

    def action_keys(self, steps: pa.Table) -> np.ndarray:
        """Tool name, or ``respond``, of each row."""
        idx, keys = self._action_index(steps)
        return np.asarray(keys, dtype=str)[idx] if keys else np.empty(0, dtype=str)

    def action_codes(self, steps: pa.Table) -> np.ndarray:
        """Index into `actions` of each row's action key."""
        return _codes_in(self.actions, *self._action_index(steps))

    def state_codes(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(code per row into the sorted key vocabulary, the vocabulary)."""
        n = steps.num_rows
        if n == 0:
            return np.empty(0, dtype=np.int32), np.empty(0, dtype=str)
        order, _, columns, labels = self.state_columns(steps)
        combo, combo_idx = np.unique(np.column_stack(columns), axis=0, return_inverse=True)
        names = [self._LABELS[p] for p in self.parts]
        keys = ["|".join(f"{name}={labels[j][v]}" for j, (name, v) in
                         enumerate(zip(names, row, strict=True))) for row in combo.tolist()]
        codes_sorted, vocab = _recode(combo_idx.reshape(-1), keys)
        codes = np.empty(n, dtype=np.int32)
        codes[order] = codes_sorted
        return codes, vocab

    def state_columns(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray, list, list]:
        """(row order by (episode, t), episode code per sorted row, one int column per part
        in sorted row order, the labels of each column's values). Labels are this table's
        own (e.g. the action keys it contains): map them to a fixed vocabulary to compare
        tables (`tracerl.fa_encoders.DialogueStepEncoder` does)."""
        n = steps.num_rows
        order, episode = _episode_order(steps)
        ep = episode[order]
        first = np.ones(n, dtype=bool)
        first[1:] = ep[1:] != ep[:-1]
        position = np.arange(n)
        start = np.maximum.accumulate(np.where(first, position, 0))
        act_idx, act_keys = self._action_index(steps)
        act = act_idx[order]
        is_call = pc.fill_null(pc.equal(_struct_field(steps, "action", "type"), "tool_call"),
                               False).to_numpy(zero_copy_only=False)[order]
        columns, labels = [], []
        for part in self.parts:
            if part == "prev_action":
                prev = np.where(first, len(act_keys), np.r_[0, act[:-1]])
                columns.append(prev)
                labels.append([*act_keys, "start"])
            elif part == "n_calls":
                calls = np.cumsum(is_call) - is_call  # calls strictly before each row
                before = calls - (calls[start] - 0)
                capped = np.minimum(before, self.max_calls)
                columns.append(capped)
                labels.append([str(k) if k < self.max_calls else f"{k}+"
                               for k in range(self.max_calls + 1)])
            elif part == "last_error":
                erred = _struct_field(steps, "observation", "error").is_valid()
                erred = erred.to_numpy(zero_copy_only=False)[order] & is_call
                last_call = np.maximum.accumulate(np.where(is_call, position, -1))
                previous = np.r_[-1, last_call[:-1]]  # latest call strictly before the row
                has = previous >= start
                columns.append((has & erred[np.maximum(previous, 0)]).astype(np.int64))
                labels.append(["0", "1"])
            elif part == "after_user":
                columns.append(self._after_user(steps, order, first))
                labels.append(["0", "1"])
            else:  # domain, task
                source = steps.column("task") if part == "task" else \
                    _struct_field(steps, "episode", "domain")
                idx, values = _dictionary(pc.fill_null(source, ""), part)
                columns.append(idx[order])
                labels.append(values)
        return order, ep, columns, labels

    @staticmethod
    def _after_user(steps: pa.Table, order: np.ndarray, first: np.ndarray) -> np.ndarray:
        """Per sorted row: the user spoke since the previous action."""
        n = steps.num_rows
        spoke = np.zeros(n, dtype=bool)  # in the row's own observation (after its action)
        events = _struct_field(steps, "observation", "events")
        offset = 0
        for chunk in events.chunks:
            flat = pc.list_flatten(chunk)
            if len(flat):
                parents = pc.list_parent_indices(chunk).to_numpy() + offset
                user_msg = pc.and_(pc.equal(pc.struct_field(flat, "actor"), "user"),
                                   pc.equal(pc.struct_field(flat, "kind"), "message"))
                spoke[parents[pc.fill_null(user_msg, False).to_numpy(zero_copy_only=False)]] = True
            offset += len(chunk)
        goal = _struct_field(steps, "state", "user_goal").is_valid().to_numpy(
            zero_copy_only=False)
        spoke, goal = spoke[order], goal[order]
        return np.where(first, goal, np.r_[False, spoke[:-1]]).astype(np.int64)

    def state_keys(self, steps: pa.Table) -> np.ndarray:
        """Key of the state before each row's action."""
        return _keys(*self.state_codes(steps))

    def valid_actions(self, state_key: str) -> tuple[int, ...]:
        """Every action: a generic log carries no environment rules."""
        return tuple(range(len(self.actions)))


def get_featurizer(name: str, **params: Any) -> Featurizer:
    """A featurizer by name (``tracerl.config.registries.FEATURIZERS``: the generic
    ``"tool_signature"``, ``"dialogue"``, or a fixture's such as ``"calculator"``) and
    parameters."""
    return FEATURIZERS.get(name)(**params)


def featurizer_for(steps: pa.Table, name: str, **params: Any) -> Featurizer:
    """A featurizer for `steps`: one whose action vocabulary is learnt from the data
    (`from_steps`) gets it from `steps` unless params give `actions`."""
    cls = FEATURIZERS.get(name)
    if hasattr(cls, "from_steps") and "actions" not in params:
        return cls.from_steps(steps, **params)
    return cls(**params)
