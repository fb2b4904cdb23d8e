"""A bootstrap interval for FQE that refits the critic on every resample of episodes.

Holding the fitted critic fixed and resampling only V̂(s_0) over episodes gives an interval
of almost zero width (a few distinct starts), which says nothing about how well Q was
estimated. Here each resample of episodes refits Q. Tabular logs repeat a few hundred
distinct trajectories many times over, so resamples are drawn as multinomial counts over
the distinct trajectories (the same distribution as drawing episodes), and all replicates
iterate together on the distinct transitions: cost does not grow with the episode count.
"""

from __future__ import annotations

import numpy as np

NO_NEXT = -1
_MAX_CELLS = 50_000_000  # replicates x distinct transitions held at once


def _distinct_trajectories(tid: np.ndarray, episode: np.ndarray, t: np.ndarray,
                           n_episodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct trajectories as padded rows of transition ids, their counts, the
    trajectory of each episode)."""
    horizon = int(t.max()) + 1 if len(t) else 0
    padded = np.full((n_episodes, horizon), -1, dtype=np.int64)
    padded[episode, t] = tid
    rows, inverse, counts = np.unique(padded, axis=0, return_inverse=True,
                                      return_counts=True)
    return rows, counts, inverse.reshape(-1)


def fqe_bootstrap_values(s: np.ndarray, a: np.ndarray, r: np.ndarray, s_next: np.ndarray,
                         done: np.ndarray, episode: np.ndarray, t: np.ndarray,
                         initial_states: np.ndarray, target_probs: np.ndarray, *,
                         gamma: float, n_boot: int, seed: int,
                         n_iterations: int = 1000, tol: float = 1e-10) -> np.ndarray:
    """FQE's value (mean V̂(s_0)) refitted on `n_boot` resamples of episodes, shape (n_boot,).

    Episodes are 0..n-1 in `episode`, steps 0..len-1 in `t`; initial_states[e] is the
    state of episode e's first step. A pair (s, a) absent from a resample keeps Q = 0 there,
    exactly as in the full fit.
    """
    pi = np.asarray(target_probs, dtype=float)
    n_s, n_a = pi.shape
    n_ep = len(initial_states)
    # Distinct transitions (s, a, r, s', done) and distinct whole trajectories.
    table = np.column_stack([s, a, r, s_next, done]).astype(float)
    kinds, tid = np.unique(table, axis=0, return_inverse=True)
    tid = tid.reshape(-1)
    trajectories, counts, trajectory_of = _distinct_trajectories(tid, episode, t, n_ep)
    k, n_tt = len(trajectories), len(kinds)
    _, first_episode = np.unique(trajectory_of, return_index=True)
    first_of = np.asarray(initial_states)[first_episode]  # start state of each trajectory
    # uses[j, u]: how often trajectory j takes transition u.
    uses = np.zeros((k, n_tt))
    rows, cols = np.nonzero(trajectories >= 0)
    np.add.at(uses, (rows, trajectories[rows, cols]), 1.0)

    rng = np.random.default_rng(seed)
    values = np.empty(n_boot)
    per_chunk = max(1, _MAX_CELLS // max(n_tt * 4, k, 1))
    u_s, u_a = kinds[:, 0].astype(np.int64), kinds[:, 1].astype(np.int64)
    u_r, u_next, u_done = kinds[:, 2], kinds[:, 3].astype(np.int64), kinds[:, 4] > 0
    discount = gamma * (~u_done & (u_next != NO_NEXT))
    u_next = np.where(u_next == NO_NEXT, 0, u_next)
    sa = u_s * n_a + u_a
    order = np.argsort(sa, kind="stable")
    sa_sorted = sa[order]
    starts = np.flatnonzero(np.r_[True, sa_sorted[1:] != sa_sorted[:-1]])
    sa_of_group = sa_sorted[starts]
    for lo in range(0, n_boot, per_chunk):
        b = min(per_chunk, n_boot - lo)
        draws = rng.multinomial(n_ep, counts / n_ep, size=b).astype(float)  # (b, k)
        weight = draws @ uses  # (b, n_tt): how often each transition is in the resample
        denom = np.zeros((b, n_s * n_a))
        denom[:, sa_of_group] = np.add.reduceat(weight[:, order], starts, axis=1)
        safe = np.where(denom > 0, denom, 1.0)
        q = np.zeros((b, n_s * n_a))
        for _ in range(n_iterations):  # iterations, all replicates at once
            v = (q.reshape(b, n_s, n_a) * pi).sum(axis=2)  # V(s) = sum_a pi(a|s) Q(s, a)
            target = u_r + discount * v[:, u_next]  # (b, n_tt)
            num = np.zeros((b, n_s * n_a))
            num[:, sa_of_group] = np.add.reduceat((weight * target)[:, order], starts, axis=1)
            q_new = num / safe
            change = float(np.max(np.abs(q_new - q))) if q.size else 0.0
            q = q_new
            if change <= tol:
                break
        v = (q.reshape(b, n_s, n_a) * pi).sum(axis=2)
        values[lo:lo + b] = (draws * v[:, first_of]).sum(axis=1) / n_ep
    return values
