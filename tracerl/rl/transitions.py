"""The one representation of logged decisions: `Transitions`, integer state rows and actions.

A state encoder (`tracerl.rl.encoding`) turns each logged step into a row of small integers
(its state variables, ``rows[:, i] < cardinality[i]``) and an action code. `Transitions`
keeps, per step (ordered by episode, then t; episodes numbered 0.. in ascending
episode_id): the index `s` of its state among the distinct states, the action `a`, the
reward `r`, `done`, `episode`, `t`, the next state `s_next` (-1: no following step; if the
step is not done the log was cut short and nothing is bootstrapped from it), the behaviour
log-probability (NaN where not logged) and the task. Per distinct state (sorted rows): the
row, a human-readable label (the calculator's ``mul|1|1|12``), and the valid-action mask.

Nothing grows with episodes x transitions: per-step arrays and one row per distinct state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

NO_NEXT = -1


def distinct_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row's distinct value, first row of each code), codes in order of first
    appearance. Exact and hash-based: columns are folded in one at a time, each fold one
    factorisation of an int64 pair code, so no row sort (np.unique(axis=0) sorts, slowly)."""
    n = len(matrix)
    code = np.zeros(n, dtype=np.int64)
    count = 1
    for column in np.asarray(matrix).T:
        col_code, col_values = pd.factorize(column)
        code, uniques = pd.factorize(code * (len(col_values) + 1) + (col_code + 1))
        count = len(uniques)
    _, first = np.unique(code, return_index=True)
    return code, first if count else np.zeros(0, dtype=np.int64)


def sorted_distinct(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows in lexicographic order, index of each input row among them)."""
    rows = np.asarray(rows, dtype=np.int64)
    rows = rows.reshape(len(rows), -1) if rows.ndim != 2 else rows
    code, first = distinct_rows(rows)
    distinct = rows[first]
    order = np.lexsort(distinct.T[::-1]) if len(distinct) else np.zeros(0, dtype=np.int64)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return distinct[order], rank[code]


@dataclass(frozen=True, eq=False)
class Transitions:
    """One transition per logged step (see the module docstring). `encoder` is the
    `tracerl.rl.encoding` encoder that made it (labels and valid actions of any row)."""

    s: np.ndarray
    a: np.ndarray
    r: np.ndarray
    done: np.ndarray
    episode: np.ndarray
    t: np.ndarray
    s_next: np.ndarray
    behavior_logp: np.ndarray
    task: np.ndarray
    rows: np.ndarray
    labels: np.ndarray
    valid: np.ndarray
    actions: tuple[str, ...]
    tasks: np.ndarray
    variables: tuple[str, ...]
    encoder: Any = None

    @property
    def n(self) -> int:
        """Number of transitions (logged steps)."""
        return len(self.s)

    @property
    def n_states(self) -> int:
        return len(self.rows)

    @property
    def n_actions(self) -> int:
        return len(self.actions)

    @property
    def n_episodes(self) -> int:
        return int(self.episode[-1]) + 1 if len(self.episode) else 0

    @property
    def n_truncated(self) -> int:
        """Last rows of episodes that are not done (the log ends mid-episode)."""
        return int(np.count_nonzero((self.s_next == NO_NEXT) & ~self.done))

    @property
    def first(self) -> np.ndarray:
        """True on each episode's first step."""
        return self.t == 0

    @property
    def initial_states(self) -> np.ndarray:
        """State index of each episode's first step, (n_episodes,)."""
        return self.s[self.first]

    @property
    def behavior_prob(self) -> np.ndarray:
        """exp(behaviour log-prob) per step, NaN where not logged."""
        return np.exp(self.behavior_logp)

    @property
    def logged_propensities(self) -> bool:
        """Every step carries its behaviour log-probability."""
        return bool(self.n) and bool(np.isfinite(self.behavior_logp).all())

    @property
    def state_keys(self) -> np.ndarray:
        """The label of each distinct state (what tables and reports show)."""
        return self.labels

    def states(self) -> np.ndarray:
        """The state row of every step, (n, k)."""
        return self.rows[self.s]

    def data_hash(self) -> str:
        """sha256 over what a learner reads (saved with each policy it fits)."""
        d = hashlib.sha256(b"tracerl.transitions/1")
        for x in (self.episode, self.t, self.states(), self.a, self.r, self.done,
                  self.s_next >= 0, self.behavior_logp):
            d.update(np.ascontiguousarray(x).tobytes())
        d.update("\x1f".join(self.actions).encode())
        return d.hexdigest()

    def select_episodes(self, keep: np.ndarray) -> Transitions:
        """The episodes where `keep` (one bool per episode) holds, renumbered 0.. in order
        (one fold of a grouped split); the state vocabulary is kept."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n_episodes,):
            raise ValueError(f"keep must hold one bool per episode ({self.n_episodes})")
        at = keep[self.episode]
        renumber = np.cumsum(keep) - 1
        return replace(self, s=self.s[at], a=self.a[at], r=self.r[at], done=self.done[at],
                       episode=renumber[self.episode[at]], t=self.t[at],
                       s_next=self.s_next[at], behavior_logp=self.behavior_logp[at],
                       task=self.task[at])

    def project(self, variables: Sequence[int] | None) -> Transitions:
        """The same steps over the states as `variables` (indices into `variables` of the
        encoder) see them: states that differ only elsewhere become one. A one-hot feature
        map over those variables is then a table over these states (the tabular case)."""
        if variables is None or tuple(variables) == tuple(range(len(self.variables))):
            return self
        cols = list(variables)
        rows, state_of = sorted_distinct(self.rows[:, cols])
        member = np.zeros(len(rows), dtype=np.int64)
        member[state_of] = np.arange(len(state_of))  # one old state of each new one
        valid = self.valid[member]
        if not np.array_equal(valid[state_of], self.valid):
            raise ValueError(f"the valid actions depend on variables outside {cols}: a "
                             "policy over them cannot know what it may do")
        labels = (np.asarray(self.encoder.labels(rows, cols), dtype=str)
                  if self.encoder is not None else _generic_labels(rows))
        s_next = np.where(self.s_next >= 0, state_of[np.maximum(self.s_next, 0)], NO_NEXT)
        return replace(self, s=state_of[self.s].astype(np.int32),
                       s_next=s_next.astype(np.int32), rows=rows, labels=labels,
                       valid=valid, variables=tuple(self.variables[c] for c in cols))

    @classmethod
    def build(cls, *, episode: np.ndarray, t: np.ndarray, rows: np.ndarray, a: np.ndarray,
              r: np.ndarray, done: np.ndarray, actions: Sequence[str],
              variables: Sequence[str], behavior_logp: np.ndarray | None = None,
              task: Sequence[str] | np.ndarray | None = None,
              valid: Callable[[np.ndarray], np.ndarray] | None = None,
              labels: Callable[[np.ndarray], Sequence[str]] | None = None,
              encoder: Any = None) -> Transitions:
        """Transitions from per-step arrays in any order: `episode` codes number the
        episodes in the order wanted (ascending episode_id), `rows` (n, k) the state
        before each step's action. `valid(rows)` / `labels(rows)` of the distinct states
        (default: every action valid, labels from the values)."""
        n = len(episode)
        for name, arr in (("t", t), ("rows", rows), ("a", a), ("r", r), ("done", done)):
            if len(arr) != n:
                raise ValueError(f"{name} has {len(arr)} entries, episode has {n}")
        r = np.asarray(r, dtype=np.float64)
        if not np.all(np.isfinite(r)):
            raise ValueError("reward has NaN or infinite entries: relabel the steps first")
        actions = tuple(actions)
        a = np.asarray(a, dtype=np.int64)
        if n and (a.min() < 0 or a.max() >= len(actions)):
            raise ValueError(f"action codes must lie in [0, {len(actions)})")
        episode = np.asarray(episode, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        step = np.diff(episode)
        in_order = bool(np.all((step > 0) | ((step == 0) & (np.diff(t) > 0))))
        order = slice(None) if in_order else np.lexsort((t, episode))
        episode, t = episode[order], t[order]
        same = episode[1:] == episode[:-1]
        if np.any(same & (t[1:] == t[:-1])):
            raise ValueError("duplicate (episode, t) steps")
        # Episodes renumbered 0..n-1 in their order (the codes given may have gaps).
        episode = np.cumsum(np.r_[True, ~same]) - 1 if n else episode
        distinct, s = sorted_distinct(np.asarray(rows)[order])
        s = s.astype(np.int32)
        s_next = np.full(n, NO_NEXT, dtype=np.int32)
        s_next[:-1] = np.where(same, s[1:], NO_NEXT)
        if task is None:
            tasks, task_code = np.array([""] if n else [], dtype=str), np.zeros(n, np.int32)
        else:
            codes, names = pd.factorize(np.asarray(task, dtype=object)[order])
            tasks = np.asarray(names, dtype=str)
            rank = np.argsort(np.argsort(tasks, kind="stable"), kind="stable")
            tasks, task_code = np.sort(tasks), rank[codes].astype(np.int32)
        logp = (np.full(n, np.nan) if behavior_logp is None
                else np.asarray(behavior_logp, dtype=np.float64)[order])
        mask = (np.ones((len(distinct), len(actions)), dtype=bool) if valid is None
                else np.asarray(valid(distinct), dtype=bool))
        names = (_generic_labels(distinct) if labels is None
                 else np.asarray(list(labels(distinct)), dtype=str))
        return cls(s=s, a=a[order], r=r[order], done=np.asarray(done, dtype=bool)[order],
                   episode=episode, t=t, s_next=s_next, behavior_logp=logp, task=task_code,
                   rows=distinct, labels=names, valid=mask, actions=actions, tasks=tasks,
                   variables=tuple(variables), encoder=encoder)


def _generic_labels(rows: np.ndarray) -> np.ndarray:
    return np.asarray(["|".join(map(str, row)) for row in rows.tolist()], dtype=str)
