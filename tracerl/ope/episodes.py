"""Padded per-episode arrays for off-policy evaluation.

Every field is an (n_episodes, horizon) array; row i is episode i, column t its step t.
Past the end of an episode (``mask`` False) reward, q_hat and v_hat are 0 and pi_b, pi_e
are 0; estimators treat those cells as an absorbing state (see `tracerl.ope.importance`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PROB_TOL = 1e-9  # exp(logprob) may overshoot 1 by rounding


@dataclass(frozen=True, eq=False)
class EpisodeBatch:
    """Logged episodes as padded arrays of shape (n_episodes, horizon).

    reward: r_t; pi_b: behaviour prob of the logged action (NaN where not logged);
    pi_e: target prob of the logged action; q_hat: critic's Q(s_t, a_t); v_hat: critic's
    V(s_t) = sum_a pi_e(a|s_t) Q(s_t, a) (both None when no critic was given);
    mask: True where a step exists; gamma: discount.
    """

    reward: np.ndarray
    pi_b: np.ndarray
    pi_e: np.ndarray
    q_hat: np.ndarray | None
    v_hat: np.ndarray | None
    mask: np.ndarray
    gamma: float

    @property
    def n_episodes(self) -> int:
        """Number of episodes (rows)."""
        return self.mask.shape[0]

    @property
    def horizon(self) -> int:
        """Length of the longest episode (columns)."""
        return self.mask.shape[1]

    @property
    def lengths(self) -> np.ndarray:
        """Number of steps of each episode."""
        return self.mask.sum(axis=1)

    @property
    def discounts(self) -> np.ndarray:
        """gamma^t for t = 0..horizon-1."""
        return self.gamma ** np.arange(self.horizon, dtype=np.float64)

    @classmethod
    def from_steps(
        cls,
        episode: np.ndarray,
        t: np.ndarray,
        reward: np.ndarray,
        behavior_prob: np.ndarray,
        target_prob: np.ndarray,
        q_hat: np.ndarray | None = None,
        v_hat: np.ndarray | None = None,
        gamma: float = 0.99,
    ) -> EpisodeBatch:
        """Pad flat per-step arrays (one entry per logged step, any order).

        `episode` codes must be 0..n-1, each used; `t` must run 0..len-1 within an episode.
        """
        episode = np.asarray(episode)
        t = np.asarray(t)
        n_steps = len(episode)
        if n_steps == 0:
            raise ValueError("no steps given")
        named = {"t": t, "reward": reward, "behavior_prob": behavior_prob,
                 "target_prob": target_prob, "q_hat": q_hat, "v_hat": v_hat}
        for name, arr in named.items():
            if arr is not None and len(arr) != n_steps:
                raise ValueError(f"{name} has {len(arr)} entries, episode has {n_steps}")
        if (q_hat is None) != (v_hat is None):
            raise ValueError("give both q_hat and v_hat, or neither")
        if not (np.issubdtype(episode.dtype, np.integer) and np.issubdtype(t.dtype, np.integer)):
            raise ValueError("episode and t must be integer arrays")
        if episode.min() < 0 or t.min() < 0:
            raise ValueError("episode codes and t must be non-negative")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma}")

        n, horizon = int(episode.max()) + 1, int(t.max()) + 1
        flat = episode.astype(np.int64) * horizon + t
        counts = np.bincount(flat, minlength=n * horizon).reshape(n, horizon)
        if counts.max() > 1:
            raise ValueError("duplicate (episode, t) steps")
        mask = counts > 0
        lengths = mask.sum(axis=1)
        if np.any(lengths == 0):
            raise ValueError("episode codes must be 0..n-1 with every code used")
        if not np.array_equal(mask, np.arange(horizon) < lengths[:, None]):
            raise ValueError("t must run 0..len-1 within each episode (a step is missing)")

        for name in ("reward", "q_hat", "v_hat"):
            if named[name] is not None and not np.all(np.isfinite(named[name])):
                raise ValueError(f"{name} has NaN or infinite entries")
        pi_b = np.asarray(behavior_prob, dtype=np.float64)
        pi_e = np.asarray(target_prob, dtype=np.float64)
        if np.any(np.isnan(pi_e)) or np.any((pi_e < 0) | (pi_e > 1 + PROB_TOL)):
            raise ValueError("target_prob must lie in [0, 1] (no NaN)")
        known = pi_b[~np.isnan(pi_b)]
        if np.any((known < 0) | (known > 1 + PROB_TOL)):
            raise ValueError("behavior_prob must lie in [0, 1] where given")

        def pad(values: np.ndarray | None) -> np.ndarray | None:
            if values is None:
                return None
            out = np.zeros((n, horizon))
            out[episode, t] = values
            return out

        return cls(reward=pad(np.asarray(reward, dtype=np.float64)), pi_b=pad(pi_b),
                   pi_e=pad(pi_e), q_hat=pad(q_hat), v_hat=pad(v_hat), mask=mask,
                   gamma=float(gamma))
