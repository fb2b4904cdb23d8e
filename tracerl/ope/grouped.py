"""The one-hot critic refitted on every bootstrap resample, on distinct trajectories.

A one-hot critic (`tracerl.ope.critic`) is a table over the distinct (state, action,
reward, next state) transition *kinds* of a log, so refitting it on a resample of episodes
is one weighted backup over those kinds (`tracerl.rl.bellman`), vectorised over the
replicates: the interval of FQE and of the cross-fitted DR/WDR then carries the critic's
own uncertainty, with one unseen outcome per logged cell at the worst / best return
(`critic_bootstrap`). Its cost grows with the kinds, not the episodes.

Logs that repeat (a few hundred distinct trajectories, step for step, among 300,000
episodes) are also grouped into distinct trajectories: every estimator is a function of
the trajectory, so it is computed once per distinct one, weighted by how often it was
logged, and a resample of episodes is a Multinomial draw of those counts, exactly. Where
nothing repeats each trajectory is one episode and the same code runs. Whether the critic
refits at all is measured (`refit_affordable`), never assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from tracerl.ope.estimate import resample_counts
from tracerl.ope.importance import EpisodeBatch
from tracerl.ope.intervals import prior_interval
from tracerl.rl.bellman import BellmanBackup, evaluate
from tracerl.rl.transitions import Transitions, distinct_rows

_MAX_CELLS = 2_000_000  # replicate x (cell, kind or trajectory step) values held at once
MAX_REFIT_KINDS = 200_000  # beyond: the critic's interval is the delta method's


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
        # uses[j, u]: how often trajectory j takes transition kind u (sparse: a trajectory
        # takes a few kinds).
        rows, cols = np.nonzero(self.mask)
        self.uses = sp.csr_matrix((np.ones(len(rows)), (rows, self.paths[rows, cols])),
                                  shape=(len(self.paths), len(self.kinds)))
        # The distinct (s, a) cells of the transition kinds: one prior atom each.
        self.n_cells = len(np.unique(self.kinds[:, 0] * n_actions + self.kinds[:, 1]))

    @classmethod
    def of(cls, view: Transitions) -> TrajectoryGroups:
        """The trajectories of `view` (transitions over a one-hot critic's states)."""
        return cls(view.s, view.a, view.r, view.s_next, view.done, view.behavior_prob,
                   view.episode, view.t, view.n_states, view.n_actions)

    @property
    def n_distinct(self) -> int:
        return len(self.paths)

    def kind_weights(self, draws: np.ndarray) -> np.ndarray:
        """(b, kinds): transitions of each kind in each resample (rows of `draws`)."""
        return np.asarray(self.uses.T @ np.atleast_2d(draws).T).T

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
        return resample_counts(self.counts, n_boot, seed)

    def refit_q(self, target_probs: np.ndarray, draws: np.ndarray, gamma: float,
                n_iterations: int = 1000, tol: float = 1e-10,
                prior_weight: np.ndarray | None = None, prior_target: float = 0.0
                ) -> np.ndarray:
        """FQE's Q refitted on each resample (rows of `draws`), (b, n_states, n_actions).

        Q(s, a) = mean over the resample's transitions at (s, a) of
        r + γ (1 - done) Σ_a' π(a'|s') Q(s', a') (the one backup, tracerl.rl.bellman);
        a pair absent from it keeps Q = 0. prior_weight (b, n_cells): one unseen outcome
        per logged cell, worth prior_target, of that weight (the critic's prior atom).
        """
        weight = self.kind_weights(draws)
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


def refit_affordable(groups: TrajectoryGroups) -> bool:
    """A refit per resample costs a backup over the transition kinds: affordable while the
    log holds at most MAX_REFIT_KINDS of them (repetition or not)."""
    return len(groups.kinds) <= MAX_REFIT_KINDS


def critic_n_eff(groups: TrajectoryGroups, target: np.ndarray, iterations: int) -> float:
    """Effective observations behind the one-hot critic: the harmonic mean of the logged
    counts N(s, a) of the cells the target's backups read, weighted by the target's
    expected visits d(s, a). A cell of N transitions can hide an unseen outcome of
    probability about 1/N; the critic's exposure to such outcomes is sum d(s, a) / N(s, a).

    Both sums are E_target[sum_t reward(s_t, a_t)] (gamma = 1) by the one backup, on the
    distinct transition kinds weighted by how often they were logged (O(kinds))."""
    g = groups
    weight = g.kind_weights(g.counts[None, :])[0]  # transitions of each kind in the log
    cell = g.kinds[:, 0].astype(np.int64) * g.n_actions + g.kinds[:, 1].astype(np.int64)
    per_cell = np.bincount(cell, weights=weight, minlength=g.n_states * g.n_actions)
    sums = []
    for reward in (np.ones(len(cell)), 1.0 / per_cell[cell]):  # visits, exposure
        backup = BellmanBackup(g.kinds[:, 0], g.kinds[:, 1], reward, g.kinds[:, 3],
                               g.kinds[:, 4] != 0, g.n_states, g.n_actions, 1.0,
                               weights=weight[None, :])
        q, _, _ = evaluate(backup, target, iterations)
        v = (q[0] * target).sum(axis=1)
        sums.append(float(g.counts @ v[g.start]) / g.n)
    visits, exposure = sums
    return visits / exposure if exposure > 0 else float("inf")


def cross_fitted(groups: TrajectoryGroups, target: np.ndarray, gamma: float, folds: int,
                 iterations: int, seed: int) -> tuple[EpisodeBatch, np.ndarray]:
    """The distinct trajectories once per fold, each fold's rows carrying the critic fitted
    on the other folds (q_hat, v_hat) and the fold's episode counts as multiplicity.

    Why: a one-hot critic fitted on the same episodes satisfies the empirical Bellman
    equation in every cell, so DR's correction sums to zero wherever the state holds the
    history (the calculator): DR would be FQE again, never a second opinion."""
    k = max(2, int(folds))
    split = groups.folds(k, seed)  # (k, trajectories)
    q = groups.refit_q(target, groups.counts[None, :] - split, gamma, iterations)
    v = (q * target).sum(axis=2)
    base = groups.batch(target, None, gamma)
    rows = np.arange(k)[:, None, None]
    mask = np.tile(base.mask, (k, 1))
    q_hat = np.where(mask, q[rows, groups.s, groups.a].reshape(mask.shape), 0.0)
    v_hat = np.where(mask, v[rows, groups.s].reshape(mask.shape), 0.0)
    batch = EpisodeBatch(reward=np.tile(base.reward, (k, 1)), pi_b=np.tile(base.pi_b, (k, 1)),
                         pi_e=np.tile(base.pi_e, (k, 1)), q_hat=q_hat, v_hat=v_hat,
                         mask=mask, gamma=gamma)
    return batch, split.reshape(-1)


@dataclass
class CriticBootstrap:
    """The critic's bootstrap, planned: resamples of episodes (counts per distinct
    trajectory) and their prior atoms' weights, drawn in one stream each and split into
    chunks of consecutive replicates. Each chunk is refitted on its own
    (`critic_boot_values`, any order, anywhere); `critic_interval` joins them in chunk
    order, so the interval is the same for any chunk size."""

    target: np.ndarray  # the target's probabilities on the critic's states
    value_range: tuple[float, float]
    gamma: float
    iterations: int
    chunks: list[tuple[np.ndarray, np.ndarray]]  # (draws (b, trajectories), atoms (b, cells))


def critic_bootstrap(groups: TrajectoryGroups, target: np.ndarray,
                     value_range: tuple[float, float], gamma: float, iterations: int,
                     n_boot: int, seed: int, chunk: int | None = None) -> CriticBootstrap:
    """Draw the critic's `n_boot` resamples and prior weights, in chunks of `chunk`
    replicates (None: one chunk): one unseen outcome per logged cell (weight ~ Exp(1), one
    pseudo-transition) worth the worst return (lower end) or the best (upper end), so the
    branch a sample never showed widens the interval instead of vanishing from every
    resample."""
    draws = groups.draws(n_boot, seed)
    atoms = np.random.default_rng([seed, 2]).exponential(size=(n_boot, groups.n_cells))
    size = max(1, n_boot if chunk is None else int(chunk))
    return CriticBootstrap(target, value_range, gamma, iterations,
                           [(draws[i:i + size], atoms[i:i + size])
                            for i in range(0, n_boot, size)])


def critic_boot_values(groups: TrajectoryGroups, boot: CriticBootstrap,
                       index: int) -> np.ndarray:
    """FQE's value refitted on chunk `index`'s resamples, with the prior atom at the worst
    return (row 0) and at the best (row 1): (2, replicates of the chunk)."""
    draws, atoms = boot.chunks[index]
    per, out = groups.rows_per_chunk, []
    for start in range(0, len(draws), per):  # memory-bounded batches of replicates
        part, weight = draws[start:start + per], atoms[start:start + per]
        ends = []
        for end in boot.value_range:
            q = groups.refit_q(boot.target, part, boot.gamma, boot.iterations,
                               prior_weight=weight, prior_target=end)
            v = (q * boot.target).sum(axis=2)
            ends.append((part * v[:, groups.start]).sum(axis=1) / groups.n)
        out.append(np.stack(ends))
    return np.concatenate(out, axis=1) if out else np.zeros((2, 0))


def critic_interval(boot: CriticBootstrap, values: Sequence[np.ndarray], n: float,
                    level: float, seed: int) -> tuple[float, float]:
    """The critic's interval from its chunks' values, joined in chunk order."""
    if len(values) != len(boot.chunks):
        raise ValueError(f"critic bootstrap: {len(values)} chunk results for "
                         f"{len(boot.chunks)} chunks")
    joined = np.concatenate(values, axis=1)
    return prior_interval(joined[0], joined[1], n, boot.value_range, level, seed)
