"""Least-squares fitted Q evaluation (LSTD-Q) over hashed sparse features, for data that
never repeats, with a per-episode influence decomposition for bounded-cost intervals.

With phi_t = phi(s_t, a_t) and psi_t = gamma (1 - done_t) sum_a' pi_e(a'|s_{t+1}) phi(s_{t+1}, a')
(the EXPECTATION under the target policy at the next state, not the greedy action):

    A = sum_t phi_t (phi_t - psi_t)^T + alpha I,   b = sum_t phi_t r_t,   theta = A^-1 b
    Q(s, a) = phi(s, a) . theta,   V(s) = sum_a pi_e(a|s) Q(s, a),   V_hat = mean_i V(s_i0)

This is the fixed point of FQE with a linear regressor (the limit of its iterations), solved
once. A and b are sums over steps, so memory is O(steps x templates) for the features and
O(nnz(A)) for the solve; nothing is episodes x transitions.

Interval (delta method, cost O(steps)): theta_hat - theta ~ A^-1 sum_i u_i with
u_i = sum_{t in i} phi_t delta_t (delta_t the TD error), so the estimate is, to first order,
the mean of per-episode contributions

    c_i = V(s_i0) + n g . u_i,   g = A^-T z_bar,   z_bar = mean_i sum_a pi_e(a|s_i0) phi(s_i0, a)

(one extra solve with A^T). Their mean is V_hat (up to the ridge term alpha g.theta, which is
removed by centring), and a percentile bootstrap of their mean is a bootstrap of the critic
that re-solves nothing. n g.phi(s, a) is the critic's estimate of the discounted visitation
ratio of the target to the data; `max_dual_weight` reports its largest value.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from tracerl.hashed_features import HashedFeaturizer
from tracerl.ope.fa_data import FATransitions


class LinearFQE:
    """LSTD-Q of a target policy; `fit` learns theta_, q_hat_, v_hat_, contributions_."""

    def __init__(self, featurizer: HashedFeaturizer, gamma: float = 0.99,
                 alpha: float = 1e-6) -> None:
        self.featurizer = featurizer
        self.gamma = gamma
        self.alpha = alpha

    def fit(self, tr: FATransitions, target_probs: np.ndarray) -> LinearFQE:
        """target_probs: (N, n_actions) pi_e(.|s_t) at every logged state (the next state of
        row t is row t + 1 of the same episode)."""
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")
        pi = np.asarray(target_probs, dtype=np.float64)
        if pi.shape != (tr.n_steps, tr.n_actions):
            raise ValueError(f"target_probs must be ({tr.n_steps}, {tr.n_actions})")
        f = self.featurizer
        n_steps, n_a = pi.shape
        codes = f.codes(tr.states)
        cols = f.sa_index(codes, tr.actions)
        used, inverse = np.unique(cols, return_inverse=True)
        d, k = len(used), cols.shape[1]
        phi = sp.csr_matrix((np.ones(n_steps * k), inverse.reshape(-1),
                             np.arange(0, n_steps * k + 1, k)), shape=(n_steps, d))

        # phi(s_t, a) positions for every action (len(used) = never logged: theta 0 there).
        pos = np.stack([_positions(used, f.sa_index(codes, a)) for a in range(n_a)], axis=1)

        boot = np.flatnonzero(tr.has_next & ~tr.done)  # rows t whose s_{t+1} is row t + 1
        phi_b = phi[boot]
        a_mat = (phi.T @ phi).tocsr()
        for a in range(n_a):  # sum_a' Phi^T diag(gamma pi(a'|s')) Phi'_{a'}, one action at a time
            w = self.gamma * pi[boot + 1, a]
            rows = np.flatnonzero(w > 0)
            if not len(rows):
                continue
            p = pos[boot[rows] + 1, a]  # (m, k)
            keep = p < d
            r_idx = np.repeat(rows, k)[keep.reshape(-1)]
            psi = sp.csr_matrix((np.repeat(w[rows], k)[keep.reshape(-1)],
                                 (r_idx, p.reshape(-1)[keep.reshape(-1)])),
                                shape=(len(boot), d))
            a_mat = a_mat - (phi_b.T @ psi).tocsr()
        a_mat = (a_mat + self.alpha * sp.identity(d, format="csr")).tocsc()
        b = phi.T @ tr.rewards
        lu = spla.splu(a_mat)
        theta = lu.solve(b)
        theta_pad = np.append(theta, 0.0)

        q_all = np.stack([_row_sums(theta_pad, pos[:, a]) for a in range(n_a)], axis=1)
        q_hat = q_all[np.arange(n_steps), tr.actions]
        v_hat = np.einsum("ij,ij->i", pi, q_all)
        first = np.flatnonzero(tr.first)
        episode = tr.episode
        n = len(first)

        v_next = np.zeros(n_steps)
        v_next[boot] = v_hat[boot + 1]
        delta = tr.rewards + self.gamma * v_next - q_hat
        # z_bar = mean_i sum_a pi(a|s_i0) phi(s_i0, a), over used columns
        z = np.zeros(d + 1)
        for a in range(n_a):
            np.add.at(z, pos[first, a].reshape(-1), np.repeat(pi[first, a], k))
        z_bar = z[:d] / n
        g = lu.solve(z_bar, trans="T")
        dual = n * _row_sums(g, inverse.reshape(n_steps, k))  # n g . phi_t
        c = v_hat[first] + np.bincount(episode, weights=dual * delta, minlength=n)
        value = float(v_hat[first].mean())
        self.theta_ = theta
        self.used_ = used
        self.q_hat_ = q_hat
        self.v_hat_ = v_hat
        self.td_error_ = delta
        self.value_ = value
        self.contributions_ = c - c.mean() + value
        self.max_dual_weight_ = float(np.max(np.abs(dual))) if n_steps else 0.0
        self.n_features_used_ = int(d)
        return self

    def q_values(self, states: np.ndarray, n_actions: int) -> np.ndarray:
        """(m, n_actions) Q of the fitted critic (0 on pairs the data never showed)."""
        f = self.featurizer
        codes = f.codes(states)
        pad = np.append(self.theta_, 0.0)
        return np.stack([_row_sums(pad, _positions(self.used_, f.sa_index(codes, a)))
                         for a in range(n_actions)], axis=1)


def lstdq_closed_form(phi: np.ndarray, psi: np.ndarray, r: np.ndarray,
                      alpha: float = 0.0) -> np.ndarray:
    """Dense reference: theta = (Phi^T (Phi - Psi) + alpha I)^-1 Phi^T r (for tests)."""
    a = phi.T @ (phi - psi) + alpha * np.eye(phi.shape[1])
    return np.linalg.solve(a, phi.T @ r)


def _positions(used: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Position of each column in sorted `used`; len(used) where it is not there."""
    pos = np.minimum(np.searchsorted(used, cols), len(used) - 1)
    return np.where(used[pos] == cols, pos, len(used)).astype(np.int32)


def _row_sums(w: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """sum_j w[cols[:, j]]."""
    out = w[cols[:, 0]].copy()
    for j in range(1, cols.shape[1]):
        out += w[cols[:, j]]
    return out
