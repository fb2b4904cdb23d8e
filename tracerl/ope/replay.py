"""Replay: re-run a target policy over logged episodes, serving every tool call from the
responses the logs recorded.

Tools declare their scope. A *pure* tool (add(3, 4)) may be served from any episode with
the same environment_version and canonical arguments; an *episode* tool (lookup_x) only
from its own episode; a *terminal* tool (final) needs no response and ends the episode.
A call with no recorded response makes the episode unsupported: its replay stops there
and is counted, never guessed. Vectorised across episodes: the loop runs over steps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.schema import SCHEMA_VERSION, STEP_SCHEMA

PURE, EPISODE, TERMINAL = "pure", "episode", "terminal"
_SEP = "\x1f"  # joins key parts; never appears in canonical JSON or tool names


class ReplayAdapter(Protocol):
    """What replay must know about an environment: its tools and how responses move the
    state. State is a dict of per-episode numpy arrays."""

    actions: tuple[str, ...]
    tool_scope: Mapping[str, str]

    def initial_state(self, first_steps: pa.Table) -> dict[str, np.ndarray]: ...

    def state_keys(self, state: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray: ...

    def arguments(self, state: dict[str, np.ndarray], rows: np.ndarray,
                  actions: np.ndarray) -> np.ndarray: ...

    def apply(self, state: dict[str, np.ndarray], rows: np.ndarray, actions: np.ndarray,
              results: np.ndarray) -> None: ...


class Policy(Protocol):
    def action_probs(self, state_keys: Any) -> np.ndarray: ...


@dataclass
class ReplayResult:
    steps: pa.Table  # the replayed trace, STEP_SCHEMA (rewards not yet labelled)
    episode_index: np.ndarray  # per trace row: which logged episode (0..n-1) it replays
    complete: np.ndarray  # per logged episode: replayed to its end
    unsupported: np.ndarray  # per logged episode: stopped at a call with no recording
    truncated: np.ndarray  # per logged episode: still running at max_steps
    decisions: int  # target decisions made
    unsupported_calls: Counter = field(default_factory=Counter)  # "tool(args)" -> count
    conflicting_pure_calls: int = 0  # pure calls recorded with different responses
    deterministic: bool = True  # every decision the target made had probability 1

    @property
    def support(self) -> float:
        """Share of logged episodes the replay could follow to the end."""
        return float(self.complete.mean()) if len(self.complete) else 0.0


def _col(steps: pa.Table, path: str) -> np.ndarray:
    name, *rest = path.split(".")
    arr = steps.column(name)
    for child in rest:
        arr = pc.struct_field(arr, child)
    return arr.to_numpy(zero_copy_only=False)


@dataclass
class ResponseStore:
    """Recorded tool responses, keyed by scope."""

    pure: pd.Series  # "env|tool|args" -> "tool_result|error" row index into values
    episode: pd.Series
    tool_result: np.ndarray
    error: np.ndarray
    conflicts: int

    @classmethod
    def from_steps(cls, steps: pa.Table, tool_scope: Mapping[str, str]) -> ResponseStore:
        calls = steps.filter(pc.equal(pc.struct_field(steps.column("action"), "type"),
                                      "tool_call"))
        tool = _col(calls, "action.tool").astype(str)
        args = _col(calls, "action.arguments")
        args = np.where(pd.isna(args), "null", args).astype(str)
        env = np.where(pd.isna(e := _col(calls, "environment_version")), "", e).astype(str)
        episode = _col(calls, "episode_id").astype(str)
        result = _col(calls, "observation.tool_result")
        error = _col(calls, "observation.error")
        scope = np.array([tool_scope.get(t, EPISODE) for t in np.unique(tool)], dtype=object)
        scope_of = dict(zip(np.unique(tool), scope, strict=True))
        is_pure = np.array([scope_of[t] == PURE for t in tool], dtype=bool) if len(tool) \
            else np.zeros(0, dtype=bool)
        call = np.char.add(np.char.add(tool, _SEP), args)
        pure_key = pd.Series(np.char.add(np.char.add(env, _SEP), call)[is_pure])
        episode_key = pd.Series(np.char.add(np.char.add(episode, _SEP), call))
        answer = pd.Series(np.char.add(np.char.add(
            np.where(pd.isna(result), "\x00", result).astype(str), _SEP),
            np.where(pd.isna(error), "\x00", error).astype(str)))
        pure_rows = np.flatnonzero(is_pure)
        frame = pd.DataFrame({"key": pure_key.to_numpy(), "answer": answer.to_numpy()[is_pure],
                              "row": pure_rows})
        conflicts = int((frame.groupby("key")["answer"].nunique() > 1).sum()) if len(frame) \
            else 0
        first_pure = frame.drop_duplicates("key")
        first_episode = pd.DataFrame({"key": episode_key, "row": np.arange(len(tool))}
                                     ).drop_duplicates("key")
        return cls(
            pure=pd.Series(first_pure["row"].to_numpy(), index=first_pure["key"].to_numpy()),
            episode=pd.Series(first_episode["row"].to_numpy(),
                              index=first_episode["key"].to_numpy()),
            tool_result=result, error=error, conflicts=conflicts)

    def lookup(self, keys_pure: np.ndarray, keys_episode: np.ndarray,
               scope: np.ndarray) -> np.ndarray:
        """Row of the recorded response for each call, -1 where none was recorded."""
        rows = np.full(len(scope), -1, dtype=np.int64)
        for which, index, keys in ((PURE, self.pure, keys_pure),
                                   (EPISODE, self.episode, keys_episode)):
            mask = scope == which
            if mask.any() and len(index):
                at = index.index.get_indexer(keys[mask])
                rows[mask] = np.where(at >= 0, index.to_numpy()[np.maximum(at, 0)], -1)
        return rows


def _sample(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cum = np.cumsum(probs, axis=1)
    cum /= cum[:, -1:]
    return (cum <= rng.random(len(probs))[:, None]).sum(axis=1)


def replay(steps: pa.Table, policy: Policy, adapter: ReplayAdapter, *, seed: int,
           max_steps: int = 50) -> ReplayResult:
    """Replay `policy` from the first state of every logged episode in `steps`."""
    store = ResponseStore.from_steps(steps, adapter.tool_scope)
    first = steps.filter(pc.equal(steps.column("t"), 0))
    n = first.num_rows
    episode_id = _col(first, "episode_id").astype(str)
    env = np.where(pd.isna(e := _col(first, "environment_version")), "", e).astype(str)
    state = adapter.initial_state(first)
    rng = np.random.default_rng(seed)
    scope_of_action = np.array([adapter.tool_scope.get(a, EPISODE) for a in adapter.actions],
                               dtype=object)
    actions_arr = np.asarray(adapter.actions, dtype=object)

    active = np.arange(n)
    complete = np.zeros(n, dtype=bool)
    unsupported = np.zeros(n, dtype=bool)
    missing: Counter = Counter()
    trace: list[dict[str, np.ndarray]] = []
    decisions = 0
    certain = True
    for t in range(max_steps):
        if not active.size:
            break
        keys = adapter.state_keys(state, active)
        uniq, inverse = np.unique(keys, return_inverse=True)
        probs = np.asarray(policy.action_probs(list(uniq)), dtype=float)[inverse]
        act = _sample(probs, rng)
        decisions += active.size
        certain = certain and bool(np.all(probs[np.arange(len(act)), act] == 1.0))
        tool = actions_arr[act].astype(str)
        args = adapter.arguments(state, active, act).astype(str)
        scope = scope_of_action[act]
        call = np.char.add(np.char.add(tool, _SEP), args)
        rows = store.lookup(np.char.add(np.char.add(env[active], _SEP), call),
                            np.char.add(np.char.add(episode_id[active], _SEP), call), scope)
        terminal = scope == TERMINAL
        served = terminal | (rows >= 0)
        for c in call[~served]:
            missing[c.replace(_SEP, "(", 1) + ")"] += 1
        unsupported[active[~served]] = True

        ok = np.flatnonzero(served)
        result = np.full(len(act), None, dtype=object)
        error = np.full(len(act), None, dtype=object)
        hit = ok[~terminal[ok]]
        result[hit] = store.tool_result[rows[hit]]
        error[hit] = store.error[rows[hit]]
        trace.append({"row": active[ok], "t": np.full(len(ok), t), "tool": tool[ok],
                      "args": args[ok], "result": result[ok], "error": error[ok],
                      "prob": probs[ok, act[ok]]})
        adapter.apply(state, active[ok], act[ok], result[ok])
        ended = terminal[ok] | pd.notna(error[ok])  # an error ends the episode, as it did live
        complete[active[ok][ended]] = True
        active = active[ok][~ended]
    truncated = np.zeros(n, dtype=bool)
    truncated[active] = True
    table, episode_index = _trace_table(trace, first, episode_id)
    return ReplayResult(table, episode_index, complete, unsupported, truncated, decisions,
                        missing, store.conflicts, certain)


def _trace_table(trace: list[dict[str, np.ndarray]], first: pa.Table,
                 episode_id: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """The replayed calls as a step table the verifiers can score."""
    parts = {k: np.concatenate([c[k] for c in trace]) if trace else np.zeros(0)
             for k in ("row", "t", "tool", "args", "result", "error", "prob")}
    order = np.lexsort((parts["t"], parts["row"]))
    parts = {k: v[order] for k, v in parts.items()}
    rows = parts["row"].astype(np.int64)
    m = len(rows)
    take = pa.array(rows, type=pa.int64())
    n_done = np.r_[rows[1:] != rows[:-1], True] if m else np.zeros(0, dtype=bool)

    def struct(name: str, values: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Array:
        type_ = STEP_SCHEMA.field(name).type
        return pa.StructArray.from_arrays(
            [_flat(values.get(f.name, pa.nulls(m, f.type))) for f in type_], fields=list(type_))

    columns: dict[str, Any] = {
        "episode_id": pa.array(episode_id[rows], type=pa.string()),
        "t": pa.array(parts["t"], type=pa.int32()),
        "task": first.column("task").take(take),
        "state": struct("state", {"available_tools": pc.struct_field(
            first.column("state"), "available_tools").take(take)}),
        "action": struct("action", {"type": pa.array(["tool_call"] * m, type=pa.string()),
                                    "tool": pa.array(parts["tool"], type=pa.string()),
                                    "arguments": pa.array(parts["args"], type=pa.string())}),
        "observation": struct("observation", {
            "tool_result": pa.array(parts["result"], type=pa.string()),
            "error": pa.array(parts["error"], type=pa.string())}),
        "done": pa.array(n_done, type=pa.bool_()),
        "environment_version": first.column("environment_version").take(take),
        "action_logprobs": pa.array(np.log(np.maximum(parts["prob"].astype(float), 1e-300)),
                                    type=pa.float64()),
        "split": first.column("split").take(take),
        "source_file": pa.array(["<replay>"] * m, type=pa.string()),
        "source_record": pa.array(np.arange(1, m + 1), type=pa.int64()),
        "schema_version": pa.array(np.full(m, SCHEMA_VERSION, dtype=np.int16)),
    }
    arrays = [_flat(columns.get(f.name, pa.nulls(m, f.type))) for f in STEP_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=STEP_SCHEMA), rows


def _flat(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def discounted_returns(rewards: np.ndarray, episode: np.ndarray, t: np.ndarray,
                       n_episodes: int, gamma: float) -> np.ndarray:
    """Σ_t γ^t r_t per episode."""
    return np.bincount(episode, weights=rewards * gamma ** t.astype(float),
                       minlength=n_episodes)
