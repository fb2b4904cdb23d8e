"""Fitted Q iteration over any feature map, naive or support-constrained.

Each iteration fits Q(s, a) = phi(s, a) . w to the targets of the logged transitions,

    w_{k+1} = argmin_w sum_t (phi(s_t, a_t) . w - y_t)^2 + alpha |w|^2,
    y_t = r_t + gamma (1 - done_t) max_{a' in A(s'_t)} Q_k(s'_t, a'),

one solve per iteration. With one-hot features the normal equations are diagonal and the
fit is the per-cell mean (`tracerl.rl.bellman.BellmanBackup`: one bincount, exact; a pair
never logged keeps Q = 0, and alpha is not needed); otherwise the ridge system is
factorised once and each iteration is one sparse solve.

A(s) is the valid actions of s (the encoder's mask) that the support rule allows:
- ``none``: every valid action (the chapter's naive FQI: an unlogged action at Q = 0 can
  beat logged actions with negative Q);
- ``logged`` (one-hot features): the valid actions logged at s; a seen state with no logged
  valid action falls back to its valid actions and is listed in `unsupported_states_`;
- ``behavior``: the valid actions whose estimated behaviour probability pi_hat_b(a|s) (a
  `LogisticBC` fitted on the log) is at least `min_behavior_prob`; where none passes, the
  most probable behaviour action.
The same A(s) serves the bootstrap max and acting; `epsilon` spreads that much mass
uniformly over A(s) (a stochastic target). A one-hot policy acts uniformly over the valid
actions of a state the data never showed. Rows whose log ends without done bootstrap
nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from tracerl.config.learning import MIN_BEHAVIOR_PROB
from tracerl.rl.bc import OneHotModel
from tracerl.rl.bellman import TIE_BREAKS, BellmanBackup, greedy
from tracerl.rl.features import FeatureMap, column_positions, matrix, row_sums
from tracerl.rl.transitions import Transitions

SUPPORTS = ("none", "logged", "behavior")


def behavior_allowed(behavior_model: Any, states: np.ndarray, valid: np.ndarray,
                     min_prob: float) -> np.ndarray:
    """Valid actions with pi_hat_b(a|s) >= min_prob; the most probable one where none."""
    pb = np.asarray(behavior_model.action_probs(states), dtype=np.float64) * valid
    ok = (pb >= min_prob) & valid
    none = ~ok.any(axis=1)
    ok[np.flatnonzero(none), pb[none].argmax(axis=1)] = True
    return ok


class FittedQIteration(OneHotModel):
    """FQI (see the module docstring); `fit` learns the Q-function and the greedy policy."""

    def __init__(self, features: FeatureMap, gamma: float = 0.99, n_iterations: int = 50,
                 alpha: float = 0.0, support: str = "none", behavior_model: Any = None,
                 min_behavior_prob: float = MIN_BEHAVIOR_PROB, epsilon: float = 0.0,
                 tol: float = 1e-9, tie_break: str = "lowest_index", seed: int = 0) -> None:
        self.features = features
        self.gamma = gamma
        self.n_iterations = n_iterations
        self.alpha = alpha
        self.support = support
        self.behavior_model = behavior_model
        self.min_behavior_prob = min_behavior_prob
        self.epsilon = epsilon
        self.tol = tol
        self.tie_break = tie_break
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "n_iterations": self.n_iterations, "alpha": self.alpha,
                "support": self.support, "min_behavior_prob": self.min_behavior_prob,
                "epsilon": self.epsilon, "tol": self.tol, "tie_break": self.tie_break,
                "seed": self.seed}

    def _check(self) -> None:
        if self.support not in SUPPORTS:
            raise ValueError(f"support must be one of {SUPPORTS}, got {self.support!r}")
        if self.support == "behavior" and self.behavior_model is None:
            raise ValueError("support='behavior' needs a fitted behavior_model")
        if self.support == "logged" and not self.features.one_hot:
            raise ValueError("support='logged' needs one-hot features (use 'behavior')")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}")

    def fit(self, tr: Transitions) -> FittedQIteration:
        """Up to `n_iterations` of FQI (until the largest change is <= tol)."""
        self._check()
        self.actions_ = tr.actions
        self.n_actions = tr.n_actions
        self.encoder_ = tr.encoder
        if self.features.one_hot:
            return self._fit_table(tr.project(self.features.used))
        return self._fit_linear(tr)

    def _allowed(self, states: np.ndarray, valid: np.ndarray,
                 logged: np.ndarray | None = None) -> np.ndarray:
        if self.support == "behavior":
            return behavior_allowed(self.behavior_model, states, valid, self.min_behavior_prob)
        if self.support == "logged":
            ok = valid & logged
            return np.where(ok.any(axis=1, keepdims=True), ok, valid)
        return valid

    def _fit_table(self, view: Transitions) -> FittedQIteration:
        """The one-hot solve: FQI over the projected states' table."""
        n_s, n_a = view.n_states, view.n_actions
        n_sa = np.bincount(view.s.astype(np.int64) * n_a + view.a,
                           minlength=n_s * n_a).reshape(n_s, n_a)
        seen = n_sa.sum(axis=1) > 0
        logged = (n_sa > 0) & view.valid
        allowed = self._allowed(view.rows, view.valid, logged)
        if np.any(seen & ~allowed.any(axis=1)):
            raise ValueError("the encoder gives a seen state no valid action")
        backup = BellmanBackup(view.s, view.a, view.r, view.s_next, view.done, n_s, n_a,
                               self.gamma)
        no_action = ~allowed.any(axis=1)  # only unused vocabulary entries can have none
        q, residual, self.n_iter_ = np.zeros((n_s, n_a)), 0.0, 0
        for _ in range(self.n_iterations):
            v = np.where(allowed, q, -np.inf).max(axis=1)  # max_{a'} Q(s', a')
            v[no_action] = 0.0
            q_new = backup(v)
            residual = float(np.max(np.abs(q_new - q))) if q.size else 0.0
            q = q_new
            self.n_iter_ += 1
            if residual <= self.tol:
                break
        action = greedy(q, allowed, self.tie_break, np.random.default_rng(self.seed))
        keep = self._keep(view, seen)
        self.action_, self.q_, self.counts_ = action[keep].astype(np.int64), q[keep], n_sa[keep]
        self.allowed_ = allowed[keep]
        self.unsupported_states_ = sorted(view.labels[seen & ~logged.any(axis=1)].tolist())
        self.bellman_residual_ = residual  # max |Q_k - Q_{k-1}| of the last iteration
        self.converged_ = residual <= self.tol
        return self

    def _fit_linear(self, tr: Transitions) -> FittedQIteration:
        """The ridge solve over any feature map (the Gram matrix factorised once)."""
        f, n_a = self.features, tr.n_actions
        cols = f.sa_columns(tr.rows[tr.s], tr.a)  # (N, k)
        used, inverse = np.unique(cols, return_inverse=True)
        phi = matrix(inverse.reshape(cols.shape), len(used))
        solve = spla.factorized((phi.T @ phi + self.alpha * sp.identity(len(used))).tocsc())
        boot = np.flatnonzero((tr.s_next >= 0) & ~tr.done)  # rows that bootstrap
        nxt = tr.s_next[boot]
        states = np.unique(nxt)  # the distinct next states: Q asked once per state
        at = np.searchsorted(states, nxt)
        allowed = self._allowed(tr.rows[states], tr.valid[states])
        # phi(s', a') of every action at the distinct next states, as positions in `used`
        # (len(used): a column the data never showed, whose weight is 0), computed once;
        # each iteration's max_{a'} Q(s', a') is per distinct state, then spread to the rows.
        next_cols = [column_positions(used, f.sa_columns(tr.rows[states], a))
                     for a in range(n_a)]
        w = np.zeros(len(used) + 1)
        residual, self.n_iter_ = np.inf, 0
        for _ in range(self.n_iterations):  # iterations, each one vectorised solve
            q_next = np.column_stack([row_sums(w, c) for c in next_cols])
            y = tr.r.copy()
            y[boot] += self.gamma * np.where(allowed, q_next, -np.inf).max(axis=1)[at]
            new = np.append(solve(phi.T @ y), 0.0)
            residual = float(np.max(np.abs(new - w)))
            w = new
            self.n_iter_ += 1
            if residual <= self.tol:
                break
        self.columns_, self.weights_ = used, w[:-1]
        self.bellman_residual_ = residual
        self.converged_ = residual <= self.tol
        return self

    def q_values(self, states: np.ndarray) -> np.ndarray:
        """(m, n_actions) learned Q; with one-hot features NaN for states never seen."""
        states = np.asarray(states)
        if self.features.one_hot:
            row = self.lookup(states)
            out = np.full((len(states), self.n_actions), np.nan)
            out[row >= 0] = self.q_[row[row >= 0]]
            return out
        pad = np.append(self.weights_, 0.0)
        return np.stack([row_sums(pad, column_positions(
            self.columns_, self.features.sa_columns(states, a)))
            for a in range(self.n_actions)], axis=1)

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """Greedy over the allowed actions, with epsilon spread uniformly over them."""
        states = np.asarray(states)
        if self.features.one_hot:
            row = self.lookup(states)
            seen = np.flatnonzero(row >= 0)
            probs = np.zeros((len(states), self.n_actions))
            allowed = self.allowed_[row[seen]]
            probs[seen] = allowed / allowed.sum(axis=1, keepdims=True) * self.epsilon
            probs[seen, self.action_[row[seen]]] += 1.0 - self.epsilon
            self._unseen_uniform(states, probs, row)
            return probs
        allowed = self._allowed(states, self.valid(states))
        best = greedy(self.q_values(states), allowed, self.tie_break,
                      np.random.default_rng(self.seed))
        probs = allowed / allowed.sum(axis=1, keepdims=True) * self.epsilon
        probs[np.arange(len(states)), best] += 1.0 - self.epsilon
        return probs
