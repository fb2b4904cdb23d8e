"""Logged transitions as flat arrays for function-approximation learners and OPE.

No field grows with episodes x transitions: every array has one entry (or one row of the
fixed state width) per logged step.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class FATransitions:
    """One row per logged step, ordered by (episode, t), t = 0..len-1 in each episode.

    states / next_states: (N, k) int observable states before / after the action (the next
    state is the episode's next step's state); done: the episode ended at this step;
    has_next: a next step exists (False on an episode's last row, whether it ended or the
    log stopped); behavior_logp: log pi_b(a_t|s_t), NaN where not logged.
    """

    episode: np.ndarray
    t: np.ndarray
    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    done: np.ndarray
    has_next: np.ndarray
    next_states: np.ndarray
    behavior_logp: np.ndarray
    n_actions: int

    @property
    def n_steps(self) -> int:
        return len(self.actions)

    @property
    def n_episodes(self) -> int:
        return int(self.episode[-1]) + 1 if len(self.episode) else 0

    @property
    def first(self) -> np.ndarray:
        """True on each episode's first step."""
        return self.t == 0

    def data_hash(self) -> str:
        """sha256 over the arrays' bytes (what a policy artifact records)."""
        d = hashlib.sha256(b"tracerl.fa_transitions/1")
        for x in (self.episode, self.t, self.states, self.actions, self.rewards, self.done,
                  self.has_next, self.behavior_logp):
            d.update(np.ascontiguousarray(x).tobytes())
        return d.hexdigest()

    def episodes(self, start: int, stop: int) -> FATransitions:
        """Episodes start..stop-1, renumbered from 0 (e.g. a train / evaluation split)."""
        keep = (self.episode >= start) & (self.episode < stop)
        parts = {k: getattr(self, k)[keep] for k in self.__dataclass_fields__
                 if k != "n_actions"}
        parts["episode"] = parts["episode"] - start
        return FATransitions(**parts, n_actions=self.n_actions)

    def select_episodes(self, keep: np.ndarray) -> FATransitions:
        """The episodes where `keep` (one bool per episode) holds, renumbered 0.. in order
        (e.g. one fold of a grouped split)."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n_episodes,):
            raise ValueError(f"keep must hold one bool per episode ({self.n_episodes})")
        rows = keep[self.episode]
        renumber = np.cumsum(keep) - 1
        parts = {k: getattr(self, k)[rows] for k in self.__dataclass_fields__
                 if k != "n_actions"}
        parts["episode"] = renumber[parts["episode"]]
        return FATransitions(**parts, n_actions=self.n_actions)
