"""State encoders: a step table (``tracerl.data.schema.STEP_SCHEMA``) -> `Transitions`.

An encoder names, for every logged step, the state before its action as a row of small
integers (``variables``, value i of variable j below ``cardinality[j]``) and the action as
a code into ``actions``; it knows which actions are valid in a state (``valid_actions``)
and how to show one (``labels``). ``policy_variables`` are the variables a policy reads
(the calculator's critic reads one more: whether the stored result is right); coverage
counts states as a policy sees them. Work is done per distinct value, never per row in
Python.

Encoders are found by name in `tracerl.config.registries.ENCODERS`: the generic encoder of
any agent's dialogue (`DialogueEncoder`, ``dialogue``) is declared there, a fixture's
(``calculator``, ``support_desk``) by its fixture; this module never imports an
environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.rl.transitions import Transitions


class StateEncoder(Protocol):
    name: str
    variables: tuple[str, ...]
    cardinality: tuple[int, ...]
    actions: tuple[str, ...]
    policy_variables: tuple[int, ...]

    def transitions(self, steps: pa.Table) -> Transitions: ...

    def valid_actions(self, rows: np.ndarray) -> np.ndarray:
        """(m, n_actions) bool: the actions the environment accepts in each state."""
        ...

    def labels(self, rows: np.ndarray, variables: Sequence[int] | None = None) -> list[str]:
        """A readable key per row of `variables` (default all; full rows also do)."""
        ...

    def get_params(self) -> dict[str, Any]: ...


class Encoder:
    """Defaults of the protocol: every action valid, labels ``name=value|...``, a policy
    reads every variable, no parameters."""

    name: ClassVar[str]
    variables: tuple[str, ...] = ()
    cardinality: tuple[int, ...] = ()
    actions: tuple[str, ...] = ()

    @property
    def policy_variables(self) -> tuple[int, ...]:
        return tuple(range(len(self.variables)))

    def valid_actions(self, rows: np.ndarray) -> np.ndarray:
        return np.ones((len(rows), len(self.actions)), dtype=bool)

    def labels(self, rows: np.ndarray, variables: Sequence[int] | None = None) -> list[str]:
        cols = list(range(len(self.variables)) if variables is None else variables)
        names = [self.variables[c] for c in cols]
        return ["|".join(f"{n}={v}" for n, v in zip(names, row, strict=True))
                for row in of_variables(rows, cols).tolist()]

    def get_params(self) -> dict[str, Any]:
        return {}

    def spec(self) -> dict[str, Any]:
        """{name, params}: what `encoder_of` rebuilds it from (saved with every policy)."""
        return {"name": self.name, "params": self.get_params()}

    def build(self, steps: pa.Table, order: np.ndarray, rows: np.ndarray,
              actions: np.ndarray, reward: np.ndarray | None = None,
              behavior_logp: np.ndarray | None = None) -> Transitions:
        """Transitions of `steps` taken in `order` (by episode_id, then t), with the state
        rows and action codes of those ordered steps."""
        take = pa.array(order, type=pa.int64())
        ids = steps.column("episode_id").take(take)
        episode = pc.dictionary_encode(ids).combine_chunks().indices.to_numpy() \
            if len(order) else np.zeros(0, dtype=np.int64)
        first = np.r_[True, episode[1:] != episode[:-1]] if len(order) else episode.astype(bool)
        if reward is None:
            column = steps.column("reward").take(take)
            if column.null_count:
                bad = int(order[np.flatnonzero(~column.is_valid().to_numpy(
                    zero_copy_only=False))[0]])
                raise ValueError(f"field reward is null in {column.null_count} row(s), e.g. "
                                 f"{where(steps, bad)}: relabel the table first")
            reward = column.to_numpy().astype(np.float64)
        if behavior_logp is None:
            logp = pc.fill_null(steps.column("action_logprobs").cast(pa.float64()), np.nan)
            behavior_logp = logp.take(take).to_numpy().astype(np.float64)
        task = pc.fill_null(steps.column("task"), "").take(take).to_numpy(zero_copy_only=False)
        return Transitions.build(
            episode=np.cumsum(first) - 1, t=steps.column("t").take(take).to_numpy(),
            rows=rows, a=actions, r=reward,
            done=steps.column("done").take(take).to_numpy(zero_copy_only=False),
            actions=self.actions, variables=self.variables, behavior_logp=behavior_logp,
            task=task, valid=self.valid_actions, labels=self.labels, encoder=self)


def of_variables(rows: np.ndarray, variables: Sequence[int]) -> np.ndarray:
    """Rows of `variables`: as given when they hold exactly those, else taken from full rows."""
    rows = np.asarray(rows)
    return rows if rows.shape[1] == len(variables) else rows[:, list(variables)]


def step_order(steps: pa.Table) -> np.ndarray:
    """Row order by (episode_id, t) ascending: the order of every encoder's transitions."""
    if not steps.num_rows:
        return np.zeros(0, dtype=np.int64)
    return pc.sort_indices(steps.select(["episode_id", "t"]), sort_keys=[
        ("episode_id", "ascending"), ("t", "ascending")]).to_numpy().astype(np.int64)


def where(steps: pa.Table, row: int) -> str:
    """'file <f> record <r> (episode <e>, t <t>)' of one row, for error messages."""
    def cell(name: str) -> Any:
        return steps.column(name)[row].as_py() if name in steps.column_names else "?"
    return (f"file {cell('source_file')} record {cell('source_record')} (episode "
            f"{cell('episode_id')}, t {cell('t')})")


def episode_groups(steps: pa.Table, key: str = "task") -> np.ndarray:
    """Per episode, in ascending episode_id order (the numbering of every encoder's
    transitions): the value of column `key` on its first step (null -> ""), e.g. the task
    id a held-out split groups by."""
    if key not in steps.column_names:
        raise ValueError(f"cannot group episodes by {key!r}: the step table has no such "
                         f"column")
    order = step_order(steps)
    ids = steps.column("episode_id").take(pa.array(order)).to_numpy(zero_copy_only=False)
    first = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, dtype=bool)
    values = pc.fill_null(steps.column(key).cast(pa.string()), "").take(pa.array(order))
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)[first]


# --- by name -----------------------------------------------------------------------


def get_encoder(name: str, **params: Any) -> Encoder:
    """The encoder `name` (tracerl.config.registries.ENCODERS) with `params`."""
    from tracerl.config.registries import ENCODERS

    return ENCODERS.get(name)(**params)


def encoder_for(tables: Sequence[pa.Table], name: str, **params: Any) -> Encoder:
    """The encoder `name` for `tables`: one with `from_steps` learns the vocabularies that
    params do not give from all of them (so every table is encoded alike)."""
    from tracerl.config.registries import ENCODERS

    cls = ENCODERS.get(name)
    return cls.from_steps(list(tables), **params) if hasattr(cls, "from_steps") \
        else cls(**params)


def policy_view(steps: pa.Table, name: str, params: Mapping[str, Any] | None = None
                ) -> Transitions:
    """A step table's transitions over the states a policy sees (encoder `name`'s policy
    variables), its vocabularies learnt from the table itself (coverage's view)."""
    encoder = encoder_for([steps], name, **dict(params or {}))
    return encoder.transitions(steps).project(encoder.policy_variables)


def encoder_of(spec: Mapping[str, Any]) -> Encoder:
    """The encoder of a saved spec ({name, params}, `Encoder.spec`)."""
    return get_encoder(spec["name"], **dict(spec.get("params") or {}))


# --- the generic dialogue encoder ------------------------------------------------------

RESPOND = "respond"  # the action of a message to the user (or a final answer)
START = "start"      # prev_action of an episode's first step
DIALOGUE_PARTS = ("prev_action", "n_calls", "last_error", "after_user", "domain", "task")
_LABEL = {"prev_action": "prev", "n_calls": "calls", "last_error": "err",
          "after_user": "user", "domain": "domain", "task": "task"}
_CATEGORICAL = {"domain": "episode.domain", "task": "task"}


def _field(steps: pa.Table, path: str) -> pa.ChunkedArray:
    name, *rest = path.split(".")
    arr = steps.column(name)
    for child in rest:
        arr = pc.struct_field(arr, child)
    return arr


def dialogue_actions(steps: pa.Table) -> pa.ChunkedArray:
    """The action of each row: the tool name of a tool call, ``respond`` for any other."""
    is_call = pc.fill_null(pc.equal(_field(steps, "action.type"), "tool_call"), False)
    return pc.fill_null(pc.if_else(is_call, _field(steps, "action.tool"), RESPOND), RESPOND)


def _categorical(steps: pa.Table, part: str) -> pa.ChunkedArray:
    return pc.fill_null(_field(steps, _CATEGORICAL[part]), "")


class DialogueEncoder(Encoder):
    """Any dialogue log (tau2, OpenAI chat): the parts `parts` names, each read from the log
    before the row's action, so states generalise across episodes and tasks:

    - ``prev_action``: the episode's previous action (``start`` at t=0);
    - ``n_calls``: tool calls so far in the episode, capped at `max_calls` (``5+``);
    - ``last_error``: whether the episode's latest tool call so far returned an error;
    - ``after_user``: whether the user spoke since the previous action (a user message in
      its observation; at t=0, a logged user goal);
    - ``domain``: ``episode.domain``; ``task``: the task id (episode-specific: use with care).

    Actions: the tool name of a call, ``respond`` for any message. The vocabularies (actions,
    domains, tasks) are fixed so two tables (two agents' logs) are encoded alike: learn them
    from every table with `from_steps`; a value outside them is an error naming the row.
    Labels read e.g. ``prev=get_reservation_details|calls=3|err=0|user=1|domain=airline``;
    every action is valid everywhere (a log carries no environment rules).
    """

    name: ClassVar[str] = "dialogue"

    def __init__(self, actions: Sequence[str], parts: Sequence[str] = (
            "prev_action", "n_calls", "last_error", "after_user", "domain"),
                 max_calls: int = 5, values: Mapping[str, Sequence[str]] | None = None) -> None:
        unknown = sorted(set(parts) - set(DIALOGUE_PARTS))
        if unknown or not parts:
            raise ValueError(f"state parts {unknown or '[]'} not among {list(DIALOGUE_PARTS)}")
        self.actions = tuple(actions)
        self.parts = tuple(parts)
        self.max_calls = int(max_calls)
        self.values = {p: list((values or {}).get(p, ())) for p in self.parts
                       if p in _CATEGORICAL}
        self.variables = self.parts
        fixed = {"prev_action": len(self.actions) + 1, "n_calls": self.max_calls + 1,
                 "last_error": 2, "after_user": 2}
        self.cardinality = tuple(fixed.get(p) or max(1, len(self.values[p]))
                                 for p in self.parts)

    @classmethod
    def from_steps(cls, tables: Sequence[pa.Table], **params: Any) -> DialogueEncoder:
        """An encoder whose vocabularies are the sorted values found in `tables` (several
        agents' logs share one encoding), unless params give them."""
        params = dict(params)
        if "actions" not in params:
            params["actions"] = sorted({a for steps in tables
                                        for a in pc.unique(dialogue_actions(steps)).to_pylist()})
        values = dict(params.get("values") or {})
        for part in params.get("parts", DIALOGUE_PARTS[:5]):
            if part in _CATEGORICAL and part not in values:
                values[part] = sorted({v for steps in tables
                                       for v in pc.unique(_categorical(steps, part)).to_pylist()})
        params["values"] = values
        return cls(**params)

    def get_params(self) -> dict[str, Any]:
        return {"actions": list(self.actions), "parts": list(self.parts),
                "max_calls": self.max_calls,
                "values": {k: list(v) for k, v in self.values.items()}}

    def labels(self, rows: np.ndarray, variables: Sequence[int] | None = None) -> list[str]:
        cols = list(range(len(self.parts)) if variables is None else variables)
        vocab = {"prev_action": [*self.actions, START],
                 "n_calls": [str(k) if k < self.max_calls else f"{k}+"
                             for k in range(self.max_calls + 1)],
                 "last_error": ["0", "1"], "after_user": ["0", "1"], **self.values}
        parts = [self.parts[c] for c in cols]
        return ["|".join(f"{_LABEL[p]}={vocab[p][v]}" for p, v in zip(parts, row, strict=True))
                for row in of_variables(rows, cols).tolist()]

    def transitions(self, steps: pa.Table) -> Transitions:
        """One row per step, ordered by (episode_id, t)."""
        order = step_order(steps)
        n = len(order)
        take = pa.array(order, type=pa.int64())
        ids = steps.column("episode_id").take(take)
        ep = pc.dictionary_encode(ids).combine_chunks().indices.to_numpy() if n \
            else np.zeros(0, np.int64)
        first = np.r_[True, ep[1:] != ep[:-1]] if n else np.zeros(0, dtype=bool)
        position = np.arange(n)
        start = np.maximum.accumulate(np.where(first, position, 0)) if n else position
        act = self._codes(dialogue_actions(steps).take(take), self.actions, steps, order,
                          "action")
        is_call = pc.fill_null(pc.equal(_field(steps, "action.type"), "tool_call"), False)
        is_call = is_call.take(take).to_numpy(zero_copy_only=False).astype(bool)
        states = np.zeros((n, len(self.parts)), dtype=np.int64)
        for j, part in enumerate(self.parts):  # over state variables, not rows
            if part == "prev_action":
                states[:, j] = np.where(first, len(self.actions), np.r_[0, act[:-1]])
            elif part == "n_calls":
                calls = np.cumsum(is_call) - is_call  # calls strictly before each row
                states[:, j] = np.minimum(calls - calls[start], self.max_calls)
            elif part == "last_error":
                erred = _field(steps, "observation.error").is_valid().take(take)
                erred = erred.to_numpy(zero_copy_only=False) & is_call
                last_call = np.maximum.accumulate(np.where(is_call, position, -1))
                previous = np.r_[-1, last_call[:-1]]  # latest call strictly before the row
                erred_before = erred[np.maximum(previous, 0)] if n else erred  # none: empty
                states[:, j] = (previous >= start) & erred_before
            elif part == "after_user":
                states[:, j] = _after_user(steps, take, first)
            else:
                states[:, j] = self._codes(_categorical(steps, part).take(take),
                                           self.values[part], steps, order, _CATEGORICAL[part])
        return self.build(steps, order, states, act)

    @staticmethod
    def _codes(values: pa.ChunkedArray, vocab: Sequence[str], steps: pa.Table,
               order: np.ndarray, what: str) -> np.ndarray:
        """Positions in `vocab` of each (ordered) row's value; outside it: an error."""
        out = pc.fill_null(pc.index_in(values, value_set=pa.array(list(vocab), pa.string())),
                           -1).to_numpy(zero_copy_only=False).astype(np.int64) \
            if len(values) else np.zeros(0, dtype=np.int64)
        bad = np.flatnonzero(out < 0)
        if len(bad):
            raise ValueError(f"{what} {values[int(bad[0])].as_py()!r} is not in the encoder's "
                             f"vocabulary {list(vocab)[:8]} ({len(bad)} row(s), e.g. "
                             f"{where(steps, int(order[bad[0]]))}); learn the vocabulary from "
                             f"every table encoded together (DialogueEncoder.from_steps)")
        return out


def _after_user(steps: pa.Table, take: pa.Array, first: np.ndarray) -> np.ndarray:
    """Per ordered row: the user spoke since the previous action (a user message in the
    previous row's observation; on the first row, a logged user goal)."""
    spoke = np.zeros(steps.num_rows, dtype=bool)  # in the row's own observation
    offset = 0
    for chunk in _field(steps, "observation.events").chunks:
        flat = pc.list_flatten(chunk)
        if len(flat):
            parents = pc.list_parent_indices(chunk).to_numpy() + offset
            user = pc.and_(pc.equal(pc.struct_field(flat, "actor"), "user"),
                           pc.equal(pc.struct_field(flat, "kind"), "message"))
            spoke[parents[pc.fill_null(user, False).to_numpy(zero_copy_only=False)]] = True
        offset += len(chunk)
    goal = _field(steps, "state.user_goal").is_valid().to_numpy(zero_copy_only=False)
    order = take.to_numpy()
    spoke, goal = spoke[order], goal[order]
    return np.where(first, goal, np.r_[False, spoke[:-1]]).astype(np.int64)
