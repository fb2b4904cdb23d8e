"""Step encoders: a schema-v2 step table -> the flat transition arrays (``FATransitions``)
that the function-approximation learners and OPE read.

An encoder turns each step's observable state into a fixed-width row of small integers
(``cardinality[i]`` values for variable i), which ``HashedFeaturizer`` hashes into sparse
features, and each step's action into a code of ``actions``. Generic encoders (over any
agent's dialogue) and a fixture's are found by name in
``tracerl.config.registries.ENCODERS``; this module never imports an environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.config.registries import ENCODERS
from tracerl.features import DialogueFeaturizer
from tracerl.ope.fa_data import FATransitions


class StepEncoder(Protocol):
    name: str
    cardinality: tuple[int, ...]  # values per state variable: states[:, i] < cardinality[i]
    actions: list[str]            # action vocabulary: code k is actions[k]

    def transitions(self, steps: pa.Table) -> FATransitions:
        """One row per step, ordered by (episode_id, t) ascending, episodes numbered 0.. in
        that order (so `episode_groups` lines up); behaviour log-probs NaN if not logged."""
        ...


def episode_groups(steps: pa.Table, key: str = "task") -> np.ndarray:
    """Per episode, in ascending episode_id order (the numbering of every encoder's
    `transitions`): the value of column `key` on its first step (null -> ""), e.g. the task
    id a held-out split groups by."""
    if key not in steps.column_names:
        raise ValueError(f"cannot group episodes by {key!r}: the step table has no such "
                         f"column")
    order = pc.sort_indices(steps.select(["episode_id", "t"]),
                            sort_keys=[("episode_id", "ascending"), ("t", "ascending")])
    ids = steps.column("episode_id").take(order).to_numpy(zero_copy_only=False)
    first = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, dtype=bool)
    values = pc.fill_null(steps.column(key).cast(pa.string()), "").take(order)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)[first]


def get_encoder(name: str, **params: Any) -> StepEncoder:
    """A step encoder by name (``tracerl.config.registries.ENCODERS``) and parameters."""
    return ENCODERS.get(name)(**params)


def encoder_for(tables: Sequence[pa.Table], name: str, **params: Any) -> StepEncoder:
    """An encoder for `tables`: one with `from_steps` learns the vocabularies params do not
    give from all of them (so every table is encoded alike)."""
    cls = ENCODERS.get(name)
    if hasattr(cls, "from_steps"):
        return cls.from_steps(list(tables), **params)
    return cls(**params)


# --- the generic dialogue encoder -------------------------------------------------------

START = "start"  # prev_action of an episode's first step


class DialogueStepEncoder:
    """Any schema-v2 dialogue step table (tau2, OpenAI chat) -> `FATransitions`.

    State variables are `DialogueFeaturizer`'s parts, each a small int over a fixed
    vocabulary so that two tables (two agents' logs) are encoded alike:
    prev_action (actions + ``start``), n_calls (0..max_calls, the last meaning "or more"),
    last_error (0/1), after_user (0/1), domain / task (the `values` learnt or given).
    Actions: the tool name of a call, ``respond`` for any message; codes index `actions`.
    Rewards are the table's (relabelled) `reward`; behaviour log-probs `action_logprobs`
    (NaN where not logged). A value outside the vocabulary is an error naming the row.
    """

    name = "dialogue"

    def __init__(self, actions: Sequence[str], parts: Sequence[str] = (
            "prev_action", "n_calls", "last_error", "after_user", "domain"),
                 max_calls: int = 5, values: Mapping[str, Sequence[str]] | None = None) -> None:
        self.featurizer = DialogueFeaturizer(actions, parts=parts, max_calls=max_calls)
        self.actions = list(actions)
        self.parts = tuple(parts)
        self.max_calls = int(max_calls)
        self.values = {p: list((values or {}).get(p, ())) for p in self.parts
                       if p in _CATEGORICAL}
        self.cardinality = tuple(self._cardinality(p) for p in self.parts)

    def _cardinality(self, part: str) -> int:
        fixed = {"prev_action": len(self.actions) + 1, "n_calls": self.max_calls + 1,
                 "last_error": 2, "after_user": 2}
        return fixed[part] if part in fixed else max(1, len(self.values[part]))

    @classmethod
    def from_steps(cls, tables: Sequence[pa.Table], **params: Any) -> DialogueStepEncoder:
        """An encoder whose vocabularies (actions, domains, ...) are the sorted values found
        in `tables` (several agents' logs share one encoding), unless params give them."""
        if "actions" not in params:
            keys = set()
            for steps in tables:
                keys.update(DialogueFeaturizer._action_index(steps)[1])
            params["actions"] = sorted(keys)
        parts = params.get("parts", ("prev_action", "n_calls", "last_error", "after_user",
                                     "domain"))
        values = dict(params.get("values") or {})
        for part in parts:
            if part in _CATEGORICAL and part not in values:
                found = set()
                for steps in tables:
                    found.update(_categorical(steps, part)[1])
                values[part] = sorted(found)
        params["values"] = values
        return cls(**params)

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments, JSON-ready (saved with each policy)."""
        return {"actions": list(self.actions), "parts": list(self.parts),
                "max_calls": self.max_calls, "values": {k: list(v) for k, v in
                                                        self.values.items()}}

    def transitions(self, steps: pa.Table) -> FATransitions:
        """One row per step, ordered by (episode, t); episodes numbered 0.. in that order."""
        n = steps.num_rows
        order, ep, columns, labels = self.featurizer.state_columns(steps)
        # The featurizer orders episodes by first appearance; the contract is ascending
        # episode_id: one permutation of the (episode-contiguous) sorted rows.
        ids = steps.column("episode_id").combine_chunks().to_numpy(zero_copy_only=False)
        ids = np.asarray(ids, dtype=object)[order]
        perm = np.lexsort((np.arange(n), ids.astype(str))) if n else np.zeros(0, np.int64)
        order, ep = order[perm], ep[perm]
        columns = [c[perm] for c in columns]
        # the action first: an unknown one is reported at the row that took it
        act_idx, act_keys = self.featurizer._action_index(steps)
        actions = self._remap(act_idx[order], act_keys, self.actions, steps, order, "action")
        states = np.zeros((n, len(self.parts)), dtype=np.int64)
        for j, part in enumerate(self.parts):  # over state variables, not rows
            if part == "prev_action":
                vocab = [*self.actions, START]
                states[:, j] = self._remap(columns[j], labels[j], vocab, steps, order,
                                           "action (previous)")
            elif part in _CATEGORICAL:
                states[:, j] = self._remap(columns[j], labels[j], self.values[part], steps,
                                           order, _CATEGORICAL[part])
            else:
                states[:, j] = columns[j]
        first = np.ones(n, dtype=bool)
        first[1:] = ep[1:] != ep[:-1]
        episode = np.cumsum(first) - 1
        position = np.arange(n)
        t = position - np.maximum.accumulate(np.where(first, position, 0))
        has_next = np.zeros(n, dtype=bool)
        has_next[:-1] = ~first[1:]
        next_states = states.copy()
        next_states[:-1][has_next[:-1]] = states[1:][has_next[:-1]]
        reward = steps.column("reward")
        if reward.null_count:
            bad = order[np.flatnonzero(~reward.is_valid().to_numpy(zero_copy_only=False)[order])]
            raise ValueError(f"field reward is null in {reward.null_count} row(s), e.g. "
                             f"{_where(steps, int(bad[0]))}: relabel the table first")
        logp = pc.fill_null(steps.column("action_logprobs").cast(pa.float64()), np.nan)
        return FATransitions(
            episode=episode.astype(np.int64), t=t.astype(np.int64), states=states,
            actions=actions.astype(np.int64),
            rewards=reward.to_numpy().astype(np.float64)[order],
            done=steps.column("done").to_numpy(zero_copy_only=False)[order].astype(bool),
            has_next=has_next, next_states=next_states,
            behavior_logp=logp.to_numpy().astype(np.float64)[order],
            n_actions=len(self.actions))

    @staticmethod
    def _remap(codes: np.ndarray, labels: Sequence[str], vocab: Sequence[str],
               steps: pa.Table, order: np.ndarray, what: str) -> np.ndarray:
        """Table-local codes -> positions in `vocab` (one lookup per distinct label)."""
        index = {v: i for i, v in enumerate(vocab)}
        lookup = np.array([index.get(lab, -1) for lab in labels], dtype=np.int64)
        out = lookup[codes] if len(lookup) else np.zeros(len(codes), dtype=np.int64)
        bad = np.flatnonzero(out < 0)
        if len(bad):
            row = int(order[bad[0]])
            raise ValueError(f"{what} {labels[codes[bad[0]]]!r} is not in the encoder's "
                             f"vocabulary {list(vocab)[:8]} ({len(bad)} row(s), e.g. "
                             f"{_where(steps, row)}); learn the vocabulary from every table "
                             f"encoded together (DialogueStepEncoder.from_steps)")
        return out


_CATEGORICAL = {"domain": "episode.domain", "task": "task"}


def _categorical(steps: pa.Table, part: str) -> tuple[np.ndarray, list]:
    source = steps.column("task") if part == "task" else pc.struct_field(
        steps.column("episode"), "domain")
    encoded = pc.fill_null(source, "").combine_chunks().dictionary_encode()
    return encoded.indices.to_numpy(), encoded.dictionary.to_pylist()


def _where(steps: pa.Table, row: int) -> str:
    """'file <f> record <r> (episode <e>, t <t>)' of one row, for error messages."""
    def cell(name: str) -> Any:
        return steps.column(name)[row].as_py() if name in steps.column_names else "?"
    return (f"file {cell('source_file')} record {cell('source_record')} (episode "
            f"{cell('episode_id')}, t {cell('t')})")

