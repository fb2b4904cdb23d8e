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


class CriticDesign:
    """What LSTD-Q needs of a dataset whatever the target policy, computed once:

    phi (N x d CSR over the d hashed columns the logged (s, a) use), the positions of
    phi(s_t, a) for every action a (N x n_actions x k, d = a column no logged pair uses,
    whose weight is 0), Phi^T Phi, and the bootstrapping rows in chunks (bounded memory).
    """

    def __init__(self, featurizer: HashedFeaturizer, tr: FATransitions,
                 chunk_rows: int = 250_000) -> None:
        f = featurizer
        self.featurizer, self.tr = featurizer, tr
        n_steps, n_a = tr.n_steps, tr.n_actions
        codes = f.codes(tr.states)
        cols = f.sa_index(codes, tr.actions)
        used, inverse = np.unique(cols, return_inverse=True)
        self.used, self.d, self.k = used, len(used), cols.shape[1]
        self.inverse = inverse.reshape(n_steps, self.k).astype(np.int32)
        k = self.k
        self.phi = sp.csr_matrix((np.ones(n_steps * k), self.inverse.reshape(-1),
                                  np.arange(0, n_steps * k + 1, k)), shape=(n_steps, self.d))
        self.pos = np.empty((n_steps, n_a, k), dtype=np.int32)
        for a in range(n_a):  # over actions, vectorised over steps
            self.pos[:, a] = _positions(used, f.sa_index(codes, a))
        self.gram = (self.phi.T @ self.phi).tocsr()
        self.boot = np.flatnonzero(tr.has_next & ~tr.done)  # next state = row t + 1
        self.chunks = [self.boot[i:i + chunk_rows] for i in range(0, len(self.boot), chunk_rows)]
        self.phi_t_chunks = [self.phi[c].T.tocsr() for c in self.chunks]
        self.b = self.phi.T @ tr.rewards


class LinearFQE:
    """LSTD-Q of a target policy; `fit` learns theta_, q_hat_, v_hat_, contributions_."""

    def __init__(self, featurizer: HashedFeaturizer, gamma: float = 0.99,
                 alpha: float = 1e-6) -> None:
        self.featurizer = featurizer
        self.gamma = gamma
        self.alpha = alpha

    def fit(self, tr: FATransitions, target_probs: np.ndarray,
            design: CriticDesign | None = None) -> LinearFQE:
        """target_probs: (N, n_actions) pi_e(.|s_t) at every logged state (the next state of
        row t is row t + 1 of the same episode). `design`: a CriticDesign of (featurizer,
        tr) to share between target policies."""
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")
        pi = np.asarray(target_probs, dtype=np.float64)
        if pi.shape != (tr.n_steps, tr.n_actions):
            raise ValueError(f"target_probs must be ({tr.n_steps}, {tr.n_actions})")
        if design is None:
            design = CriticDesign(self.featurizer, tr)
        elif design.tr is not tr or design.featurizer != self.featurizer:
            raise ValueError("design was made for other transitions or features")
        n_steps, n_a = pi.shape
        d, k, pos = design.d, design.k, design.pos

        # A = Phi^T Phi - gamma Phi_b^T E_next + alpha I, E_next row t: sum_a' pi(a'|s_{t+1})
        # phi(s_{t+1}, a') (columns d = unlogged pairs are dropped: their weight is 0).
        a_mat = design.gram.copy()
        width = n_a * k
        for rows, phi_t in zip(design.chunks, design.phi_t_chunks, strict=True):
            m = len(rows)
            nxt = rows + 1
            e_next = sp.csr_matrix((np.repeat(self.gamma * pi[nxt], k, axis=1).reshape(-1),
                                    pos[nxt].reshape(-1), np.arange(0, m * width + 1, width)),
                                   shape=(m, d + 1))
            a_mat = a_mat - (phi_t @ e_next)[:, :d]
        a_mat = (a_mat + self.alpha * sp.identity(d, format="csr")).tocsc()
        lu = spla.splu(a_mat)
        theta = lu.solve(design.b)
        theta_pad = np.append(theta, 0.0)

        q_all = np.empty((n_steps, n_a))
        for a in range(n_a):
            q_all[:, a] = _row_sums(theta_pad, pos[:, a])
        q_hat = _row_sums(theta_pad, design.inverse)
        v_hat = np.einsum("ij,ij->i", pi, q_all)
        first = np.flatnonzero(tr.first)
        n = len(first)

        boot = design.boot
        v_next = np.zeros(n_steps)
        v_next[boot] = v_hat[boot + 1]
        delta = tr.rewards + self.gamma * v_next - q_hat
        # z_bar = mean_i sum_a pi(a|s_i0) phi(s_i0, a), over used columns
        z = np.bincount(pos[first].reshape(-1), weights=np.repeat(pi[first], k, axis=1)
                        .reshape(-1), minlength=d + 1)
        z_bar = z[:d] / n
        g = lu.solve(z_bar, trans="T")
        dual = n * _row_sums(g, design.inverse)  # n g . phi_t
        c = v_hat[first] + np.bincount(tr.episode, weights=dual * delta, minlength=n)
        value = float(v_hat[first].mean())
        self.theta_ = theta
        self.used_ = design.used
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
