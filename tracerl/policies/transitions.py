"""Integer-coded transitions (s, a, r, s', done) built from a step table and a featurizer.

Rows are ordered by (episode, t); the next state of a row is the state of the following
row of the same episode. A row with no following row has ``s_next = -1``: if it is not
``done`` the log was cut short (``n_truncated``) and learners bootstrap nothing from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.features import Featurizer

NO_NEXT = -1


@dataclass(frozen=True, eq=False)
class Transitions:
    """One transition per logged step, ordered by (episode, t).

    s, s_next: int32 codes into `state_keys` (s_next = -1: no following row);
    a: int32 index into `actions`; r: float64; done: bool; episode: int64 code;
    t: int64; behavior_prob: exp(action_logprobs), NaN where not logged;
    task: int32 code into `tasks`; valid: (n_states, n_actions) bool, the featurizer's
    valid actions of each state key.
    """

    s: np.ndarray
    a: np.ndarray
    r: np.ndarray
    s_next: np.ndarray
    done: np.ndarray
    episode: np.ndarray
    t: np.ndarray
    behavior_prob: np.ndarray
    task: np.ndarray
    state_keys: np.ndarray
    tasks: np.ndarray
    actions: tuple[str, ...]
    valid: np.ndarray
    featurizer: Any  # a tracerl.features.Featurizer

    @property
    def n(self) -> int:
        """Number of transitions."""
        return len(self.s)

    @property
    def n_states(self) -> int:
        """Size of the state vocabulary."""
        return len(self.state_keys)

    @property
    def n_actions(self) -> int:
        """Size of the action vocabulary."""
        return len(self.actions)

    @property
    def n_truncated(self) -> int:
        """Last rows of episodes that are not done (the log ends mid-episode)."""
        return int(np.count_nonzero((self.s_next == NO_NEXT) & ~self.done))

    @classmethod
    def from_steps(cls, steps: pa.Table, featurizer: Featurizer) -> Transitions:
        """Transitions of a step table (STEP_SCHEMA) under `featurizer`."""
        s, state_keys = featurizer.state_codes(steps)
        a = featurizer.action_codes(steps)
        reward = steps.column("reward")
        if reward.null_count:
            raise ValueError(f"reward is null in {reward.null_count} row(s); relabel first")
        logprob = pc.fill_null(steps.column("action_logprobs").cast(pa.float64()), np.nan)
        task_col = pc.fill_null(steps.column("task"), "").combine_chunks().dictionary_encode()
        tasks, task_code = np.unique(
            np.asarray(task_col.dictionary.to_pylist(), dtype=str), return_inverse=True
        )
        episode = steps.column("episode_id").combine_chunks().dictionary_encode().indices
        return cls.from_arrays(
            s=s,
            a=a,
            r=reward.to_numpy(),
            done=steps.column("done").to_numpy(),
            episode=episode.to_numpy(),
            t=steps.column("t").to_numpy(),
            state_keys=state_keys,
            featurizer=featurizer,
            behavior_prob=np.exp(logprob.to_numpy()),
            task=task_code[task_col.indices.to_numpy()] if len(tasks) else None,
            tasks=tasks,
        )

    @classmethod
    def from_arrays(
        cls,
        *,
        s: np.ndarray,
        a: np.ndarray,
        r: np.ndarray,
        done: np.ndarray,
        episode: np.ndarray,
        t: np.ndarray,
        state_keys: np.ndarray | list[str] | tuple[str, ...],
        featurizer: Featurizer,
        behavior_prob: np.ndarray | None = None,
        task: np.ndarray | None = None,
        tasks: np.ndarray | list[str] | tuple[str, ...] | None = None,
    ) -> Transitions:
        """Transitions from per-step arrays (any order); `s` codes index `state_keys`."""
        n = len(s)
        for name, arr in (("a", a), ("r", r), ("done", done), ("episode", episode), ("t", t)):
            if len(arr) != n:
                raise ValueError(f"{name} has {len(arr)} rows, s has {n}")
        state_keys = np.asarray(state_keys, dtype=str)
        if len(np.unique(state_keys)) != len(state_keys):
            raise ValueError("state_keys has duplicates")
        actions = tuple(featurizer.actions)
        _check_codes("s", s, len(state_keys))
        _check_codes("a", a, len(actions))
        episode = np.asarray(episode, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        # Rows already in (episode, t) order (e.g. simulator output) skip the sort and copy.
        order = np.lexsort((t, episode)) if n and not _is_sorted(episode, t) else slice(None)
        episode, t = episode[order], t[order]
        s = np.asarray(s, dtype=np.int32)[order]
        same_episode = episode[1:] == episode[:-1]
        if np.any(same_episode & (t[1:] == t[:-1])):
            raise ValueError("duplicate (episode, t) rows")
        s_next = np.full(n, NO_NEXT, dtype=np.int32)
        s_next[:-1] = np.where(same_episode, s[1:], NO_NEXT)

        if behavior_prob is None:
            behavior_prob = np.full(n, np.nan)
        if task is None:
            task = np.zeros(n, dtype=np.int32)
            tasks = np.array([""] if n else [], dtype=str)  # one unnamed task
        valid = np.zeros((len(state_keys), len(actions)), dtype=bool)
        for i, key in enumerate(state_keys.tolist()):  # once per distinct state
            valid[i, list(featurizer.valid_actions(key))] = True
        return cls(
            s=s,
            a=np.asarray(a, dtype=np.int32)[order],
            r=np.asarray(r, dtype=np.float64)[order],
            s_next=s_next,
            done=np.asarray(done, dtype=bool)[order],
            episode=episode,
            t=t,
            behavior_prob=np.asarray(behavior_prob, dtype=np.float64)[order],
            task=np.asarray(task, dtype=np.int32)[order],
            state_keys=state_keys,
            tasks=np.asarray(tasks, dtype=str),
            actions=actions,
            valid=valid,
            featurizer=featurizer,
        )


def _check_codes(name: str, codes: np.ndarray, size: int) -> None:
    if len(codes) and (np.min(codes) < 0 or np.max(codes) >= size):
        raise ValueError(f"{name} codes must lie in [0, {size})")


def _is_sorted(episode: np.ndarray, t: np.ndarray) -> bool:
    step = np.diff(episode)
    return bool(np.all((step > 0) | ((step == 0) & (np.diff(t) > 0))))


def build_transitions(steps: pa.Table, featurizer: Featurizer) -> Transitions:
    """Shorthand for `Transitions.from_steps`."""
    return Transitions.from_steps(steps, featurizer)
