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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.schema import SCHEMA_VERSION, STEP_SCHEMA
from tracerl.rl.policy import Policy, sample_actions
from tracerl.rl.transitions import distinct_rows

PURE, EPISODE, TERMINAL = "pure", "episode", "terminal"
SCOPES = (PURE, EPISODE, TERMINAL)  # a scope's code is its position


class ReplayAdapter(Protocol):
    """What replay must know about an environment: its tools and how responses move the
    state. State is a dict of per-episode numpy arrays; `state_codes` gives the encoded
    rows (the fixture's encoder's) a policy acts on."""

    actions: tuple[str, ...]
    tool_scope: Mapping[str, str]
    # Optional: `replay_steps(steps) -> steps`, the log as replay should record its calls;
    # `trace_steps(steps) -> steps`, the replayed trace (every action written as a call) as
    # the environment's own logs record it, for its verifiers to read.
    # Optional, for tools whose answer depends on the session as well as the arguments
    # (authenticated yet?): `sessions` (an int), `recorded_session(steps)` -> the session
    # code (0..sessions-1) of every step row, and `session(state, rows, actions)` -> the
    # replay's; an episode tool is then served only a recording made in the same session.
    # Optional: `parse_results(texts) -> array`, what `apply` reads of each distinct
    # recorded answer (None: not recorded), decoded once per log; `apply` then gets those
    # values instead of the texts.

    def initial_state(self, first_steps: pa.Table) -> dict[str, np.ndarray]: ...

    def state_codes(self, state: dict[str, np.ndarray], rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, the distinct encoded states (k, n_variables))."""
        ...

    def arguments(self, state: dict[str, np.ndarray], rows: np.ndarray,
                  actions: np.ndarray) -> np.ndarray: ...

    def apply(self, state: dict[str, np.ndarray], rows: np.ndarray, actions: np.ndarray,
              results: np.ndarray) -> None: ...


@dataclass
class ReplayResult:
    steps: pa.Table  # each distinct replayed trajectory, STEP_SCHEMA (rewards not labelled)
    episode_index: np.ndarray  # per trace row: its distinct trajectory (0..k-1)
    complete: np.ndarray  # per logged episode: replayed to its end
    unsupported: np.ndarray  # per logged episode: stopped at a call with no recording
    truncated: np.ndarray  # per logged episode: still running at max_steps
    decisions: int  # target decisions made
    unsupported_calls: Counter = field(default_factory=Counter)  # "tool(args)" -> count
    conflicting_pure_calls: int = 0  # pure calls recorded with different responses
    deterministic: bool = True  # every decision the target made had probability 1
    trajectory_of: np.ndarray | None = None  # per logged episode: its distinct trajectory

    @property
    def support(self) -> float:
        """Share of logged episodes the replay could follow to the end."""
        return float(self.complete.mean()) if len(self.complete) else 0.0


@dataclass
class ReplaySums:
    """Per logged episode, summed over the replays that reached its end: the discounted
    return and the success (0 when no success component is named); `complete` counts those
    replays out of `runs`."""

    returns: np.ndarray
    successes: np.ndarray
    complete: np.ndarray
    runs: int
    unreplayed_calls: dict[str, int]
    success_scored: bool = False  # some replayed step carried the success component

    @property
    def replayed_share(self) -> float:
        n = len(self.complete)
        return float(self.complete.sum() / (self.runs * n)) if n else 0.0


def replay_sums(log: ReplayLog, policy: Any, *, replays: int, seed: int, max_steps: int,
                verifiers: Sequence[str], weights: Mapping[str, float], gamma: float,
                success_component: str | None) -> ReplaySums:
    """Up to `replays` replays of every logged episode (one when the target is
    deterministic), each vectorised over episodes and scored once per distinct replayed
    trajectory by the verifiers."""
    from tracerl.data.relabel import relabel  # the verifiers score the replayed traces

    n = log.n
    sums = ReplaySums(np.zeros(n), np.zeros(n), np.zeros(n), 0, {})
    while sums.runs < max(1, replays):
        result = replay(log, policy, seed=seed + sums.runs, max_steps=max_steps)
        sums.runs += 1
        scored = relabel(result.steps, verifiers, weights)
        t = scored.column("t").to_numpy().astype(float)
        reward = scored.column("reward").to_numpy()
        k = int(result.trajectory_of.max()) + 1 if n else 0
        ret = np.bincount(result.episode_index, weights=reward * gamma ** t, minlength=k)
        done = result.complete.astype(float)
        sums.returns += done * ret[result.trajectory_of]
        if success_component:
            found = pc.list_element(pc.map_lookup(
                scored.column("reward_components"), success_component, "all"), 0)
            sums.success_scored = sums.success_scored or found.null_count < len(found)
            success = pc.fill_null(found, 0.0).to_numpy()
            won = np.bincount(result.episode_index, weights=success, minlength=k) > 0
            sums.successes += done * won[result.trajectory_of]
        sums.complete += done
        for call, count in result.unsupported_calls.items():
            sums.unreplayed_calls[call] = sums.unreplayed_calls.get(call, 0) + count
        if result.deterministic:
            break  # every decision had probability 1: another replay repeats this one
    return sums


def _arrow(steps: pa.Table, path: str) -> pa.ChunkedArray:
    if path in steps.column_names:  # a leaf taken out of its struct already
        return steps.column(path)
    name, *rest = path.split(".")
    arr = steps.column(name)
    for child in rest:
        arr = pc.struct_field(arr, child)
    return arr


def _codes(values: pa.ChunkedArray, null: str | None = None) -> tuple[np.ndarray, list]:
    """(int code per row, the distinct values), encoded by Arrow: no Python object per
    row. Nulls get code -1 unless `null` names the text that stands for them."""
    if null is not None:
        values = pc.fill_null(values, null)
    encoded = pc.dictionary_encode(values).combine_chunks()
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64), encoded.dictionary.to_pylist()


def _index_in(values: pa.ChunkedArray, value_set: list | pa.Array) -> np.ndarray:
    if not isinstance(value_set, pa.Array):
        value_set = pa.array(value_set, type=pa.string())
    found = pc.index_in(values, value_set=value_set)
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)


class ReplayLog:
    """Logged episodes prepared once, then replayed for any number of target policies.

    Every recorded call is coded as integers: (environment_version, tool, canonical
    arguments) for pure tools and (episode, tool, canonical arguments) for episode tools,
    so a replay step is a hash lookup of integers, not of strings. Recorded answers are
    kept as codes into their few distinct texts.
    """

    def __init__(self, steps: pa.Table, adapter: ReplayAdapter) -> None:
        self.adapter = adapter
        # An adapter may say how its log records calls (e.g. questions to a user answered
        # like tool calls) before the calls are indexed.
        recorded = getattr(adapter, "replay_steps", None)
        if recorded is not None:
            steps = recorded(steps)
        # Only the columns replay reads: filtering copies, and step tables are wide.
        # Only the leaves replay reads: filtering copies, and step tables are wide.
        first = pa.table({
            **{k: steps.column(k) for k in ("episode_id", "t", "task", "environment_version",
                                            "split")},
            "available_tools": _arrow(steps, "state.available_tools")}).filter(
            pc.equal(steps.column("t"), 0))
        self.available_tools = first.column("available_tools")
        self.first = first.drop_columns(["available_tools"])
        self.n = self.first.num_rows
        call_of = pc.equal(_arrow(steps, "action.type"), "tool_call")
        calls = pa.table({"episode_id": steps.column("episode_id"),
                          "environment_version": steps.column("environment_version"),
                          **{path: _arrow(steps, path) for path in (
                              "action.tool", "action.arguments", "observation.tool_result",
                              "observation.error")}}).filter(call_of)
        env_first, envs = _codes(pc.fill_null(self.first.column("environment_version"), ""))
        self.env_code = env_first
        call_env = _index_in(pc.fill_null(calls.column("environment_version"), ""), envs)
        self.n_tools = len(adapter.actions) + 1  # the last code: a tool we cannot replay
        tool = _index_in(_arrow(calls, "action.tool"), list(adapter.actions))
        tool = np.where(tool < 0, self.n_tools - 1, tool)
        args_code, args_values = _codes(_arrow(calls, "action.arguments"), null="null")
        self.args_index = pd.Index(args_values)
        self.n_args = len(self.args_index) + 1  # the last code: never recorded
        episode = _index_in(calls.column("episode_id"),
                            self.first.column("episode_id").combine_chunks())
        self.scope_of_tool = _scope_codes(adapter)  # per tool code, the last: EPISODE
        scope = self.scope_of_tool[tool]
        self.result_code, results = _codes(_arrow(calls, "observation.tool_result"))
        self.error_code, errors = _codes(_arrow(calls, "observation.error"))
        # Code -1 (null) indexes the last slot: None.
        self.result_values = np.array(results + [None], dtype=object)
        self.error_values = np.array(errors + [None], dtype=object)
        parse = getattr(adapter, "parse_results", None)
        self.result_read = self.result_values if parse is None else \
            np.asarray(parse(self.result_values))  # what apply reads, per result code
        pure = scope == _PURE
        pure_keys = self.pure_key(call_env[pure], tool[pure], args_code[pure])
        self.pure = self._index(pure_keys, np.flatnonzero(pure))
        self.n_sessions = int(getattr(adapter, "sessions", 1))
        session = np.zeros(len(tool), dtype=np.int64)
        if hasattr(adapter, "recorded_session"):
            is_call = pc.fill_null(call_of, False).to_numpy(zero_copy_only=False)
            session = np.asarray(adapter.recorded_session(steps), dtype=np.int64)[is_call]
        own = episode >= 0  # calls of episodes whose first step was logged
        self.own = self._index(self.episode_key(episode[own], tool[own], args_code[own],
                                                session[own]), np.flatnonzero(own))
        # The same pure call recorded with different answers: the tool is not pure after all.
        answers = pd.DataFrame({"key": pure_keys,
                                "answer": self.result_code[pure] * (len(errors) + 1)
                                + self.error_code[pure]})
        self.conflicts = int((answers.groupby("key")["answer"].nunique() > 1).sum())
        # What the verifiers read of an episode's start, as one code per episode.
        context = [pc.fill_null(self.first.column("task"), ""),
                   pc.fill_null(pc.binary_join(self.available_tools, "\x1f"), "\x00"),
                   pc.fill_null(self.first.column("environment_version"), "")]
        self.context = distinct_rows(np.column_stack([_codes(c)[0] for c in context]))[0] \
            if self.n else np.zeros(0, int)  # integer pair codes, no tuples

    def pure_key(self, env: np.ndarray, tool: np.ndarray, args: np.ndarray) -> np.ndarray:
        return (env.astype(np.int64) * self.n_tools + tool) * self.n_args + args

    def episode_key(self, episode: np.ndarray, tool: np.ndarray, args: np.ndarray,
                    session: np.ndarray | None = None) -> np.ndarray:
        key = (episode.astype(np.int64) * self.n_tools + tool) * self.n_args + args
        return key if session is None else key * self.n_sessions + session

    @staticmethod
    def _index(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys, first = np.unique(keys, return_index=True)  # the first recording serves
        return keys, rows[first]  # keys sorted: looked up by np.searchsorted

    def lookup(self, episode: np.ndarray, tool: np.ndarray, args: np.ndarray,
               scope: np.ndarray, session: np.ndarray | None = None) -> np.ndarray:
        """Row of the recorded response for each call, -1 where none was recorded
        (episode tools: in the same session, when the adapter codes sessions). `scope`
        holds each call's scope, as text or as its code (position in SCOPES)."""
        scope = np.asarray(scope)
        if not np.issubdtype(scope.dtype, np.integer):
            scope = pd.Index(SCOPES).get_indexer(scope)
        rows = np.full(len(scope), -1, dtype=np.int64)
        for which, (index, recorded) in ((_PURE, self.pure), (_EPISODE, self.own)):
            mask = scope == which
            if not len(index) or not mask.any():
                continue
            keys = (self.pure_key(self.env_code[episode[mask]], tool[mask], args[mask])
                    if which == _PURE else
                    self.episode_key(episode[mask], tool[mask], args[mask],
                                     np.zeros(int(mask.sum()), dtype=np.int64)
                                     if session is None else session[mask]))
            at = np.minimum(np.searchsorted(index, keys), len(index) - 1)
            rows[mask] = np.where(index[at] == keys, recorded[at], -1)
        return rows


_PURE, _EPISODE, _TERMINAL = (SCOPES.index(x) for x in (PURE, EPISODE, TERMINAL))


def _scope_codes(adapter: ReplayAdapter) -> np.ndarray:
    """The scope code of each tool the adapter names, and a last one (EPISODE) for a tool
    it does not."""
    return np.array([SCOPES.index(adapter.tool_scope.get(t, EPISODE)) for t in adapter.actions]
                    + [_EPISODE], dtype=np.int64)


def _first_seen(code: np.ndarray) -> np.ndarray:
    """First position of each code of a coding in order of first appearance (0, 1, ... as
    pd.factorize gives them), in code order: the running maximum grows exactly there."""
    if not len(code):
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(code)
    return np.flatnonzero(np.r_[True, seen[1:] > seen[:-1]])


def _groups(state: dict[str, np.ndarray], rows: np.ndarray,
            actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of a representative row per distinct (state, action), group of each row).

    Arguments depend only on the state and the action, and a few hundred distinct pairs
    stand for 300,000 episodes: the adapter formats arguments for those alone.
    """
    columns = [actions.astype(np.int64)] + [np.asarray(state[k][rows]) for k in sorted(state)]
    if all(np.issubdtype(c.dtype, np.integer) for c in columns):
        key = np.zeros(len(rows), dtype=np.int64)
        radix = 1
        for c in columns:  # mixed-radix code of the row, exact while it fits 62 bits
            lo, span = (int(c.min()), int(c.max()) - int(c.min()) + 1) if len(c) else (0, 1)
            if radix * span >= 2**62:
                break
            key = key + (c - lo) * radix
            radix *= span
        else:
            group, _ = pd.factorize(key)
            return _first_seen(group), group
    combined = np.column_stack([c.astype(object) for c in columns])
    _, representative, group = np.unique(combined.astype(str), axis=0, return_index=True,
                                         return_inverse=True)
    return representative, group.reshape(-1)


def replay(log: ReplayLog | pa.Table, policy: Policy, adapter: ReplayAdapter | None = None,
           *, seed: int, max_steps: int = 50) -> ReplayResult:
    """Replay `policy` from the first state of every logged episode.

    `log` is a ReplayLog (prepare it once when replaying many policies) or a step table.
    Episodes whose replays came out identical (same start, same calls, same answers) share
    one trace: `steps` holds each distinct replayed trajectory once, and `trajectory_of`
    says which one each logged episode followed. Every step works on integer codes: the
    policy is asked once per distinct state, arguments are formatted once per distinct
    (state, action), recorded answers are decoded once per log.
    """
    if not isinstance(log, ReplayLog):
        if adapter is None:
            raise ValueError("replaying a step table needs its adapter")
        log = ReplayLog(log, adapter)
    adapter = log.adapter
    n = log.n
    state = adapter.initial_state(log.first)
    rng = np.random.default_rng(seed)
    scope_of_action = log.scope_of_tool[:-1]

    active = np.arange(n)
    complete = np.zeros(n, dtype=bool)
    unsupported = np.zeros(n, dtype=bool)
    missing: Counter = Counter()
    trace: list[dict[str, Any]] = []
    decisions = 0
    certain = True
    for t in range(max_steps):
        if not active.size:
            break
        key_code, distinct = adapter.state_codes(state, active)
        probs = np.asarray(policy.action_probs(distinct), dtype=float)  # per distinct state
        act = sample_actions(probs, rng, rows=key_code)
        decisions += active.size
        chosen = probs[key_code, act]
        certain = certain and bool(np.all(chosen == 1.0))
        representative, group = _groups(state, active, act)
        text = np.asarray(adapter.arguments(state, active[representative],
                                            act[representative]), dtype=object)
        args = np.asarray(log.args_index.get_indexer(text))
        args = np.where(args < 0, log.n_args - 1, args)[group]
        scope = scope_of_action[act]
        session = adapter.session(state, active, act) if hasattr(adapter, "session") \
            else None
        rows = log.lookup(active, act, args, scope, session)
        terminal = scope == _TERMINAL
        served = terminal | (rows >= 0)
        if not served.all():
            gone = np.flatnonzero(~served)
            for g, count in zip(*np.unique(group[gone], return_counts=True), strict=True):
                missing[f"{adapter.actions[act[representative[g]]]}({text[g]})"] += int(count)
            unsupported[active[gone]] = True

        ok = np.flatnonzero(served)
        hit = np.where(terminal[ok], -1, rows[ok])  # -1: a terminal call has no answer
        result = np.where(hit >= 0, log.result_code[np.maximum(hit, 0)], -1)
        error = np.where(hit >= 0, log.error_code[np.maximum(hit, 0)], -1)
        # Per served call; its argument text is texts[group] (texts: one per group).
        trace.append({"row": active[ok], "t": t, "act": act[ok], "args": args[ok],
                      "group": group[ok], "texts": text, "result": result, "error": error,
                      "prob": chosen[ok]})
        adapter.apply(state, active[ok], act[ok], log.result_read[result])
        ended = terminal[ok] | (error >= 0)  # an error ends the episode, as it did live
        complete[active[ok][ended]] = True
        active = active[ok][~ended]
    truncated = np.zeros(n, dtype=bool)
    truncated[active] = True
    trajectory_of, representatives = _distinct_replays(trace, log, complete, unsupported)
    table, episode_index = _trace_table(trace, representatives, log, adapter.actions)
    as_logged = getattr(adapter, "trace_steps", None)
    if as_logged is not None:
        table = as_logged(table)
    return ReplayResult(table, episode_index, complete, unsupported, truncated, decisions,
                        missing, log.conflicts, certain, trajectory_of)


def _call_codes(step: dict[str, Any], log: ReplayLog) -> np.ndarray:
    """One code per served call of a step, equal where (tool, arguments, answer, error)
    are."""
    columns = [step["act"], step["args"], step["result"] + 1, step["error"] + 1]
    spans = [log.n_tools, log.n_args, len(log.result_values), len(log.error_values)]
    if int(np.prod(np.array(spans, dtype=float))) < 2**62:
        key = np.zeros(len(step["row"]), dtype=np.int64)
        for c, span in zip(columns, spans, strict=True):
            key = key * span + c
        return key
    return distinct_rows(np.column_stack(columns))[0]


def _distinct_replays(trace: list[dict[str, Any]], log: ReplayLog, complete: np.ndarray,
                      unsupported: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct replayed trajectory of each episode, one episode standing for each):
    episodes are the same trajectory when their start (log.context), their calls step by
    step and how they ended are. Codes in order of first appearance, folded one step at a
    time (no episodes x steps matrix)."""
    code = np.asarray(log.context, dtype=np.int64)
    for step in trace:
        calls, distinct = pd.factorize(_call_codes(step, log))
        seen = np.zeros(len(code), dtype=np.int64)  # 0: no call at this step
        seen[step["row"]] = calls + 1
        code = pd.factorize(code * (len(distinct) + 1) + seen)[0]
    code = pd.factorize(code * 4 + complete * 2 + unsupported)[0].astype(np.int64)
    return code, _first_seen(code)


_PARTS = ("row", "t", "act", "args", "text", "result", "error", "prob")


def _trace_table(trace: list[dict[str, Any]], representatives: np.ndarray, log: ReplayLog,
                 actions: tuple[str, ...]) -> tuple[pa.Table, np.ndarray]:
    """The replayed calls of each distinct trajectory, as a step table the verifiers can
    score; the second value gives each row's trajectory (0..k-1)."""
    trajectory = np.full(log.n, -1, dtype=np.int64)
    trajectory[representatives] = np.arange(len(representatives))
    kept = []
    for step in trace:  # the calls of the representatives only, before any concatenation
        keep = np.flatnonzero(trajectory[step["row"]] >= 0)
        kept.append({"t": np.full(len(keep), step["t"]), "text": step["texts"][step["group"][keep]],
                     **{k: step[k][keep] for k in ("row", "act", "args", "result", "error",
                                                   "prob")}})
    parts = {k: np.concatenate([c[k] for c in kept]) if kept else np.zeros(0, dtype=int)
             for k in _PARTS}
    order = np.lexsort((parts["t"], trajectory[parts["row"]]))
    parts = {k: v[order] for k, v in parts.items()}
    rows = parts["row"].astype(np.int64)
    m = len(rows)
    take = pa.array(rows, type=pa.int64())
    last = np.r_[rows[1:] != rows[:-1], True] if m else np.zeros(0, dtype=bool)

    def struct(name: str, values: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Array:
        type_ = STEP_SCHEMA.field(name).type
        return pa.StructArray.from_arrays(
            [_flat(values.get(f.name, pa.nulls(m, f.type))) for f in type_], fields=list(type_))

    columns: dict[str, Any] = {
        "episode_id": log.first.column("episode_id").take(take),
        "t": pa.array(parts["t"], type=pa.int32()),
        "task": log.first.column("task").take(take),
        "state": struct("state", {"available_tools": log.available_tools.take(take)}),
        "action": struct("action", {
            "type": pa.array(["tool_call"] * m, type=pa.string()),
            "tool": pa.array(np.asarray(actions, dtype=object)[parts["act"].astype(np.int64)],
                             type=pa.string()),
            "arguments": pa.array(parts["text"], type=pa.string())}),
        "observation": struct("observation", {
            "tool_result": pa.array(log.result_values[parts["result"]], type=pa.string()),
            "error": pa.array(log.error_values[parts["error"]], type=pa.string())}),
        "done": pa.array(last, type=pa.bool_()),
        "environment_version": log.first.column("environment_version").take(take),
        "action_logprobs": pa.array(np.log(np.maximum(parts["prob"].astype(float), 1e-300)),
                                    type=pa.float64()),
        "split": log.first.column("split").take(take),
        "source_file": pa.array(["<replay>"] * m, type=pa.string()),
        "source_record": pa.array(np.arange(1, m + 1), type=pa.int64()),
        "schema_version": pa.array(np.full(m, SCHEMA_VERSION, dtype=np.int16)),
    }
    arrays = [_flat(columns.get(f.name, pa.nulls(m, f.type))) for f in STEP_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=STEP_SCHEMA), trajectory[rows]


def _flat(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
