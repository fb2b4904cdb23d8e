"""Logged episodes grouped into distinct trajectories, for estimators that cost O(distinct).

Tabular logs repeat a few hundred distinct trajectories (the same states, actions, rewards
and logged propensities, step for step) many thousand times. Every estimator here is a
function of the trajectory, so it is computed once per distinct trajectory and weighted by
how often it was logged; a bootstrap resample of episodes is a Multinomial draw of those
counts, exactly. This is also what makes refitting the critic on every resample
affordable: the interval of FQE and of DR/WDR then carries the critic's own uncertainty.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracerl.ope.episodes import EpisodeBatch
from tracerl.policies.bellman import BellmanBackup, evaluate

_MAX_CELLS = 2_000_000  # replicate x (cell, kind or trajectory step) values held at once


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


class TrajectoryGroups:
    """Episodes of integer-coded transitions, grouped by identical trajectory."""

    def __init__(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s_next: np.ndarray,
                 done: np.ndarray, behavior_prob: np.ndarray, episode: np.ndarray,
                 t: np.ndarray, n_states: int, n_actions: int) -> None:
        self.n_states, self.n_actions = n_states, n_actions
        pi_b = np.where(np.isnan(behavior_prob), -1.0, behavior_prob)  # NaN never groups
        steps = np.column_stack([s, a, r, s_next, done, pi_b]).astype(float)
        tid, first_step = distinct_rows(steps)
        self.kinds = steps[first_step]
        n_episodes = int(episode.max()) + 1 if len(episode) else 0
        horizon = int(t.max()) + 1 if len(t) else 0
        padded = np.full((n_episodes, horizon), -1, dtype=np.int64)
        padded[episode, t] = tid
        path_code, first = distinct_rows(padded)
        self.paths = padded[first]
        self.counts = np.bincount(path_code, minlength=len(first))
        self.n = n_episodes
        self.mask = self.paths >= 0
        kind = np.where(self.mask, self.paths, 0)
        self.s = np.where(self.mask, self.kinds[kind, 0], 0).astype(np.int64)
        self.a = np.where(self.mask, self.kinds[kind, 1], 0).astype(np.int64)
        self.r = np.where(self.mask, self.kinds[kind, 2], 0.0)
        raw_pi_b = self.kinds[kind, 5]
        self.pi_b = np.where(self.mask, np.where(raw_pi_b < 0, np.nan, raw_pi_b), 1.0)
        self.start = self.s[:, 0]
        # uses[j, u]: how often trajectory j takes transition kind u.
        self.uses = np.zeros((len(self.paths), len(self.kinds)))
        rows, cols = np.nonzero(self.mask)
        np.add.at(self.uses, (rows, self.paths[rows, cols]), 1.0)
        # The distinct (s, a) cells of the transition kinds: one prior atom each.
        self.n_cells = len(np.unique(self.kinds[:, 0] * n_actions + self.kinds[:, 1]))

    @property
    def n_distinct(self) -> int:
        return len(self.paths)

    def batch(self, target_probs: np.ndarray, q: np.ndarray | None, gamma: float
              ) -> EpisodeBatch:
        """The distinct trajectories as an EpisodeBatch (rows weighted by `counts`)."""
        pi_e = np.where(self.mask, target_probs[self.s, self.a], 1.0)
        q_hat = v_hat = None
        if q is not None:
            v = (q * target_probs).sum(axis=1)
            q_hat = np.where(self.mask, q[self.s, self.a], 0.0)
            v_hat = np.where(self.mask, v[self.s], 0.0)
        return EpisodeBatch(reward=self.r, pi_b=self.pi_b, pi_e=pi_e, q_hat=q_hat,
                            v_hat=v_hat, mask=self.mask, gamma=gamma)

    def draws(self, n_boot: int, seed: int) -> np.ndarray:
        """Bootstrap resamples of episodes as counts per distinct trajectory, (n_boot, k)."""
        rng = np.random.default_rng(seed)
        return rng.multinomial(self.n, self.counts / self.n, size=n_boot).astype(float)

    def refit_q(self, target_probs: np.ndarray, draws: np.ndarray, gamma: float,
                n_iterations: int = 1000, tol: float = 1e-10,
                prior_weight: np.ndarray | None = None, prior_target: float = 0.0
                ) -> np.ndarray:
        """FQE's Q refitted on each resample (rows of `draws`), (b, n_states, n_actions).

        Q(s, a) = mean over the resample's transitions at (s, a) of
        r + γ (1 - done) Σ_a' π(a'|s') Q(s', a') (the one backup, tracerl.policies.bellman);
        a pair absent from it keeps Q = 0. prior_weight (b, n_cells): one unseen outcome
        per logged cell, worth prior_target, of that weight (the critic's prior atom).
        """
        weight = draws @ self.uses  # (b, kinds): transitions of each kind in the resample
        backup = BellmanBackup(self.kinds[:, 0], self.kinds[:, 1], self.kinds[:, 2],
                               self.kinds[:, 3], self.kinds[:, 4] != 0, self.n_states,
                               self.n_actions, gamma, weights=np.atleast_2d(weight))
        q, _, _ = evaluate(backup, target_probs, n_iterations, tol, prior_weight,
                           prior_target)
        return q

    def folds(self, n_folds: int, seed: int) -> np.ndarray:
        """Episodes dealt at random into n_folds folds: (n_folds, k) counts per distinct
        trajectory (each trajectory's count split multinomially)."""
        rng = np.random.default_rng(seed)
        return rng.multinomial(self.counts, np.full(n_folds, 1.0 / n_folds)).T.astype(float)

    @property
    def rows_per_chunk(self) -> int:
        """Replicates refitted at once, so (replicate x cell) arrays stay bounded."""
        widest = max(self.n_states * self.n_actions, len(self.kinds), self.paths.size, 1)
        return max(1, _MAX_CELLS // widest)

    def chunks(self, draws: np.ndarray) -> list[np.ndarray]:
        """Split replicates so a chunk's (replicate x cell) arrays stay bounded."""
        per = self.rows_per_chunk
        return [draws[i:i + per] for i in range(0, len(draws), per)]


def fqe_bootstrap_values(s: np.ndarray, a: np.ndarray, r: np.ndarray, s_next: np.ndarray,
                         done: np.ndarray, episode: np.ndarray, t: np.ndarray,
                         target_probs: np.ndarray, *, gamma: float, n_boot: int, seed: int,
                         n_iterations: int = 1000, tol: float = 1e-10) -> np.ndarray:
    """FQE's value (mean V̂(s_0), s_0 each episode's first state) refitted on `n_boot`
    resamples of episodes, (n_boot,)."""
    pi = np.asarray(target_probs, dtype=float)
    groups = TrajectoryGroups(s, a, r, s_next, done, np.full(len(s), np.nan), episode, t,
                              *pi.shape)
    draws = groups.draws(n_boot, seed)
    values = []
    for chunk in groups.chunks(draws):
        q = groups.refit_q(pi, chunk, gamma, n_iterations, tol)
        v = (q * pi).sum(axis=2)  # (b, n_states)
        values.append((chunk * v[:, groups.start]).sum(axis=1) / groups.n)
    return np.concatenate(values) if values else np.zeros(0)
