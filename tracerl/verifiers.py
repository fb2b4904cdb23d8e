"""Versioned verifiers: functions of the logged step table that produce one reward component.

Generic verifiers live here; a fixture registers its own (``tracerl.envs``), and the
registry is the one source of verifier versions for relabel and OPE.

A verifier is named ``name@version`` and reads only what the log recorded (never hidden
environment state), so rewards can be recomputed offline and audited. ``score`` returns one
float per row, aligned with the table's rows; tables may hold many episodes in any row order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

# --- Column helpers ----------------------------------------------------------------------
# Columns stay chunked (a concatenated table has one chunk per part); only numpy results
# are concatenated, so no wide column is copied.


def column(steps: pa.Table, path: str) -> pa.ChunkedArray:
    """One (possibly nested, dotted) column; a null parent struct gives null children."""
    name, *rest = path.split(".")
    arr = steps.column(name)
    for child in rest:
        arr = pc.struct_field(arr, child)  # honours parent validity, unlike .field()
    return arr


def as_numpy(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An Arrow array as numpy (nulls become NaN or None per type); empty gives float64."""
    return arr.to_numpy(zero_copy_only=False) if len(arr) else np.zeros(0)


def _bool(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean array as numpy, null counting as False."""
    return as_numpy(pc.fill_null(arr, False)).astype(bool)


def encode(arr: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dense int code per value (-1 for null) and the distinct values they index."""
    enc = pc.dictionary_encode(arr)  # one dictionary shared by all chunks
    chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
    if not chunks:
        return np.zeros(0, dtype=np.int64), pa.array([], type=arr.type)
    codes = np.concatenate([as_numpy(pc.fill_null(c.indices, -1)) for c in chunks])
    return codes.astype(np.int64), chunks[0].dictionary


def episode_codes(steps: pa.Table) -> tuple[np.ndarray, int]:
    """Dense integer code of each row's episode_id, and the number of episodes."""
    codes, names = encode(column(steps, "episode_id"))
    return codes, len(names)


def flatten_lists(arr: pa.ChunkedArray) -> tuple[np.ndarray, pa.ChunkedArray]:
    """(row index of each element, the elements) of a list or map column.

    Built from value lengths, not list_parent_indices: the latter counts the hidden
    values of a null list while list_flatten drops them.
    """
    list_type = arr.type
    if pa.types.is_map(list_type):  # list_flatten does not take maps; same layout as lists
        list_type = pa.list_(pa.struct([list_type.key_field, list_type.item_field]))
    parents, values, start = [np.zeros(0, dtype=np.int64)], [], 0
    for chunk in arr.cast(list_type).chunks:
        lengths = as_numpy(pc.fill_null(pc.list_value_length(chunk), 0)).astype(np.int64)
        parents.append(np.repeat(np.arange(start, start + len(chunk)), lengths))
        values.append(pc.list_flatten(chunk))
        start += len(chunk)
    return np.concatenate(parents), pa.chunked_array(values, type=list_type.value_type)


def _json_numbers(text: pa.ChunkedArray, key: str | None = None) -> np.ndarray:
    """Numeric value of each JSON text (or of its ``key`` field); NaN when absent/non-numeric.

    Parses only the distinct texts: logs repeat a handful of values many times.
    """
    codes, distinct = encode(text)
    values = np.full(len(distinct) + 1, np.nan)  # last slot, index -1: null text
    for i, raw in enumerate(distinct.to_pylist()):
        try:
            v: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if key is not None:
            v = v.get(key) if isinstance(v, dict) else None
        # bool is an int subclass but is not a number here.
        if isinstance(v, int | float) and not isinstance(v, bool):
            values[i] = float(v)
    return values[codes]


def _last_per_episode(codes: np.ndarray, t: np.ndarray, mask: np.ndarray,
                      values: np.ndarray, n_episodes: int) -> np.ndarray:
    """Per episode, `values` at the latest-t row where `mask` holds; NaN if none."""
    out = np.full(n_episodes, np.nan)
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return out
    rows = rows[np.lexsort((t[rows], codes[rows]))]
    ep = codes[rows]
    last = np.r_[ep[1:] != ep[:-1], True]
    out[ep[last]] = values[rows[last]]
    return out


def no_error(steps: pa.Table) -> np.ndarray:
    """True where observation.error is null (the call was accepted)."""
    return as_numpy(column(steps, "observation.error").is_null()).astype(bool)


def call_valid(steps: pa.Table) -> np.ndarray:
    """A valid call: action.type is tool_call, the tool is offered, no observation.error."""
    n = steps.num_rows
    parent, offered_names = flatten_lists(column(steps, "state.available_tools"))
    # Compare integer codes, not strings: code each offered name, then look the row's
    # tool up in the same dictionary (-1 when never offered anywhere).
    offered_code, names = encode(offered_names)
    offered_code[offered_code < 0] = -2  # a null name matches nothing, not a null tool
    tool_code = as_numpy(pc.fill_null(pc.index_in(column(steps, "action.tool"),
                                                value_set=names), -1)).astype(np.int64)
    same = offered_code == tool_code[parent]
    offered = np.bincount(parent[same], minlength=n) > 0
    is_call = _bool(pc.equal(column(steps, "action.type"), "tool_call"))
    return is_call & offered & no_error(steps)


# --- Verifiers ---------------------------------------------------------------------------


class Verifier(ABC):
    """A versioned scorer of step rows producing one reward component."""

    name: str
    version: str
    component: str
    inputs: str  # one line: which logged fields it reads, for provenance

    @property
    def id(self) -> str:
        """The registry key, ``name@version``."""
        return f"{self.name}@{self.version}"

    @abstractmethod
    def score(self, steps: pa.Table) -> np.ndarray:
        """One float per row of `steps`, aligned with its rows."""

    def __repr__(self) -> str:
        return f"<Verifier {self.id} -> {self.component}>"


class FormatValid(Verifier):
    """1.0 for a valid call (tool_call, tool in state.available_tools, no error), else 0.0."""

    name, version, component = "format_valid", "1", "format_valid"
    inputs = "action.type; action.tool; state.available_tools; observation.error"

    def score(self, steps: pa.Table) -> np.ndarray:
        return call_valid(steps).astype(np.float64)


class ToolErrorPenalty(Verifier):
    """-1.0 where observation.error is set, else 0.0."""

    name, version, component = "tool_error_penalty", "1", "tool_error_penalty"
    inputs = "observation.error"

    def score(self, steps: pa.Table) -> np.ndarray:
        return np.where(no_error(steps), 0.0, -1.0)


class CostPenalty(Verifier):
    """-cost on each valid call (as format_valid judges it), 0.0 on an invalid one.

    A different cost is a different reward: register it under its own version.
    """

    name, component = "cost_penalty", "cost_penalty"

    def __init__(self, cost: float = 0.02, version: str = "1") -> None:
        self.cost = float(cost)
        self.version = version
        self.inputs = (f"action.type; action.tool; state.available_tools; observation.error "
                       f"(cost {self.cost:g} per valid call)")

    def score(self, steps: pa.Table) -> np.ndarray:
        return np.where(call_valid(steps), -self.cost, 0.0)


# --- Registry ----------------------------------------------------------------------------

REGISTRY: dict[str, Verifier] = {}


def register(verifier: Verifier, *, replace: bool = False) -> Verifier:
    """Add `verifier` under its id; an id already taken needs replace=True."""
    if verifier.id in REGISTRY and not replace and REGISTRY[verifier.id] is not verifier:
        raise ValueError(f"verifier {verifier.id!r} is already registered")
    REGISTRY[verifier.id] = verifier
    return verifier


def get_verifier(verifier_id: str) -> Verifier:
    """The registered verifier `name@version`; KeyError listing known ids otherwise."""
    try:
        return REGISTRY[verifier_id]
    except KeyError:
        raise KeyError(f"unknown verifier {verifier_id!r}; known: {sorted(REGISTRY)}") from None


for _v in (FormatValid(), ToolErrorPenalty(), CostPenalty()):
    register(_v)
