"""Tabular Fitted Q Evaluation of a (stochastic) target policy on integer-coded transitions.

    Q_{k+1}(s, a) = mean over logged (s, a, r, s', done) of r + gamma (1 - done) V_k(s'),
    V_k(s') = sum_{a'} pi_e(a'|s') Q_k(s', a')

The bootstrap uses the EXPECTATION under the target policy, not the greedy action (d3rlpy's
FQE takes the max; for a stochastic target that evaluates a different policy). Unlogged
(s, a) pairs have no data and keep Q = 0; `support_fraction` says how much of the target's
probability mass falls on them. The backup is the one of tracerl.policies.bellman (shared
with FQI and the refits); a row with s_next = -1 (the log ends without done) bootstraps
nothing.
"""

from __future__ import annotations

import numpy as np

from tracerl.ope.estimate import DEFAULT_MIN_SUPPORT, Estimate, support_flags
from tracerl.policies.bellman import NO_NEXT, BellmanBackup, evaluate

NOT_CONVERGED = "not_converged"


class FittedQEvaluation:
    """Tabular FQE; `fit` learns q_, v_, logged_mask_, n_iter_, bellman_residual_."""

    def __init__(self, gamma: float = 0.99, n_iterations: int = 1000, tol: float = 1e-10) -> None:
        self.gamma = gamma
        self.n_iterations = n_iterations
        self.tol = tol

    def fit(
        self,
        s: np.ndarray,
        a: np.ndarray,
        r: np.ndarray,
        s_next: np.ndarray,
        done: np.ndarray,
        target_probs: np.ndarray,
    ) -> FittedQEvaluation:
        """Iterate the expected-target Bellman backup until max |Q_{k+1} - Q_k| <= tol."""
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")
        if self.n_iterations < 1:
            raise ValueError("n_iterations must be >= 1")
        pi = np.asarray(target_probs, dtype=np.float64)
        if pi.ndim != 2 or np.any(pi < 0) or not np.allclose(pi.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError("target_probs must be (n_states, n_actions) rows of probabilities")
        n_s, n_a = pi.shape
        s, a, s_next = (np.asarray(x, dtype=np.int64) for x in (s, a, s_next))
        r = np.asarray(r, dtype=np.float64)
        done = np.asarray(done, dtype=bool)
        if not len(s) == len(a) == len(r) == len(s_next) == len(done):
            raise ValueError("s, a, r, s_next, done must have the same length")
        if len(s) == 0:
            raise ValueError("no transitions")
        _check_codes("s", s, n_s)
        _check_codes("a", a, n_a)
        has_next = s_next != NO_NEXT
        _check_codes("s_next", s_next[has_next], n_s)
        if not np.all(np.isfinite(r)):
            raise ValueError("r has NaN or infinite entries")

        backup = BellmanBackup(s, a, r, s_next, done, n_s, n_a, self.gamma)
        q, n_iter, residual = evaluate(backup, pi, self.n_iterations, self.tol)
        n_sa = backup.counts()

        self.q_ = q
        self.v_ = np.sum(pi * q, axis=1)
        self.logged_mask_ = n_sa > 0
        self.counts_ = n_sa  # N(s, a): logged transitions per cell
        self.target_probs_ = pi
        self.n_iter_ = n_iter
        self.bellman_residual_ = residual  # max |Q_k - Q_{k-1}| of the last iteration
        self.converged_ = residual <= self.tol
        self.support_ = self.support_fraction(s)  # over the logged steps' states
        self._reach = (s, a, done.astype(float), s_next, done)  # for episode_support
        return self

    def episode_support(self, initial_states: np.ndarray) -> float:
        """The support of every OPE layer: the target's probability, from the given start
        states, of an episode whose every decision is on a logged (s, a) pair (the same
        backup with reward 1 at the end, γ = 1 and Q = 0 on unlogged pairs)."""
        s, a, _, s_next, done = self._reach
        return episode_support(s, a, s_next, done, self.target_probs_, initial_states,
                               self.n_iterations, self.tol)

    def value(self, initial_states: np.ndarray) -> float:
        """Mean V(s_0) over the given initial states."""
        return float(np.mean(self.contributions(initial_states)))

    def contributions(self, initial_states: np.ndarray) -> np.ndarray:
        """Per-episode contributions V(s_0) for `Estimate.from_contributions`."""
        states = np.asarray(initial_states, dtype=np.int64)
        _check_codes("initial_states", states, len(self.v_))
        return self.v_[states]

    def support_fraction(self, states: np.ndarray) -> float:
        """Target probability mass on logged (s, a) pairs, averaged over `states`."""
        states = np.asarray(states, dtype=np.int64)
        _check_codes("states", states, len(self.v_))
        covered = np.sum(self.target_probs_ * self.logged_mask_, axis=1)  # per state
        return float(np.mean(covered[states]))

    def step_estimates(self, s: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q(s_t, a_t), V(s_t)) per logged step, the q_hat / v_hat of DR and WDR."""
        s = np.asarray(s, dtype=np.int64)
        return self.q_[s, np.asarray(a, dtype=np.int64)], self.v_[s]

    def estimate(
        self,
        initial_states: np.ndarray,
        *,
        seed: int,
        level: float = 0.95,
        n_boot: int = 2000,
        support: float | None = None,
        min_support: float = DEFAULT_MIN_SUPPORT,
        layer: str = "critic",
    ) -> Estimate:
        """FQE record: mean V(s_0) over episodes, bootstrapped like every other estimator.

        support defaults to `episode_support` (the one notion of tracerl.ope.layers); the
        share of decisions on logged pairs is in the details; below 1 the record says so.

        The interval resamples only the start states and holds the fitted critic fixed, so
        it leaves out the critic's own estimation error; the ope stage refits the critic on
        every resample instead (tracerl.ope.layers, tracerl.ope.grouped).
        """
        support = self.episode_support(initial_states) if support is None else support
        flags = support_flags(support, unsupported=self.support_ < 1.0,
                              min_support=min_support)
        if not self.converged_:
            flags.append(NOT_CONVERGED)
        details = {"n_iter": self.n_iter_, "bellman_residual": self.bellman_residual_,
                   "interval": "start states resampled, critic held fixed",
                   "unlogged_pairs_q": 0.0, "backup": "expectation under the target policy",
                   "share_of_decisions_on_logged_pairs": self.support_}
        return Estimate.from_contributions(
            layer, "fqe", self.contributions(initial_states), support=support, flags=flags,
            level=level, n_boot=n_boot, seed=seed, details=details)


def episode_support(s: np.ndarray, a: np.ndarray, s_next: np.ndarray, done: np.ndarray,
                    target_probs: np.ndarray, initial_states: np.ndarray,
                    n_iterations: int = 1000, tol: float = 1e-10) -> float:
    """THE support of every OPE layer: the target's probability mass on episodes the data
    covers, i.e. its probability, from `initial_states` (averaged), of an episode whose
    every decision is a logged (s, a) pair.

    The one Bellman backup with reward 1 on reaching the end (done), γ = 1 and Q = 0 on
    unlogged pairs gives V(s) = P(finish from s without a decision the data never showed).
    """
    reach = FittedQEvaluation(1.0, n_iterations, tol).fit(
        s, a, np.asarray(done, dtype=float), s_next, done, target_probs)
    return float(np.clip(reach.value(initial_states), 0.0, 1.0))


def _check_codes(name: str, codes: np.ndarray, size: int) -> None:
    if len(codes) and (np.min(codes) < 0 or np.max(codes) >= size):
        raise ValueError(f"{name} codes must lie in [0, {size})")
