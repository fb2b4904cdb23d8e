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

from tracerl.hashed_features import HashedFeaturizer, column_positions, row_sums
from tracerl.ope.fa_data import FATransitions


class CriticDesign:
    """What LSTD-Q needs of a dataset whatever the target policy, computed once.

    The logged states are indexed by their distinct rows (state_id, with `rep` a row of each
    distinct state): a policy's probabilities and the critic's Q are functions of the state
    row, so they are computed once per distinct state and gathered per step. This is exact
    and needs no repetition: with every state distinct it is the plain per-step computation
    (n_states = steps); when the featurized dialogue states repeat (they do, while the
    conversations never do) it is that much cheaper.

    phi: (N x d) CSR over the d hashed columns the logged (s, a) use; pos: the positions of
    phi(s, a) for every distinct state and action (n_states x n_actions x k; d = a column no
    logged pair uses, whose weight is 0); gram = Phi^T Phi; next_by_state = Phi_b^T C
    (d x n_states), C the one-hot of each bootstrapping step's next state, so that
    sum_t phi_t e_{t+1}^T = next_by_state @ E with E the (n_states x d) expected features.
    """

    def __init__(self, featurizer: HashedFeaturizer, tr: FATransitions) -> None:
        f = featurizer
        self.featurizer, self.tr = featurizer, tr
        n_steps, n_a = tr.n_steps, tr.n_actions
        states = np.ascontiguousarray(tr.states)
        rows = states.view(np.dtype((np.void, states.dtype.itemsize * states.shape[1])))
        _, self.rep, state_id = np.unique(rows.reshape(-1), return_index=True,
                                          return_inverse=True)
        self.state_id = state_id.reshape(-1)
        self.n_states = len(self.rep)
        self.distinct_states = states[self.rep]
        codes = f.codes(self.distinct_states)
        cols = f.sa_index(codes[self.state_id], tr.actions)
        used, inverse = np.unique(cols, return_inverse=True)
        self.used, self.d, self.k = used, len(used), cols.shape[1]
        self.inverse = inverse.reshape(n_steps, self.k).astype(np.int32)
        k = self.k
        self.phi = sp.csr_matrix((np.ones(n_steps * k), self.inverse.reshape(-1),
                                  np.arange(0, n_steps * k + 1, k)), shape=(n_steps, self.d))
        self.pos = np.empty((self.n_states, n_a, k), dtype=np.int32)
        for a in range(n_a):  # over actions, vectorised over distinct states
            self.pos[:, a] = column_positions(used, f.sa_index(codes, a))
        self.gram = (self.phi.T @ self.phi).tocsr()
        self.boot = np.flatnonzero(tr.has_next & ~tr.done)  # next state = row t + 1
        nxt = self.state_id[self.boot + 1]
        self.next_by_state = sp.csr_matrix(
            (np.ones(len(self.boot) * k), (self.inverse[self.boot].reshape(-1),
                                           np.repeat(nxt, k))),
            shape=(self.d, self.n_states))
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
        """target_probs: (N, n_actions) pi_e(.|s_t) at every logged state, a function of the
        state row (the next state of row t is row t + 1 of the same episode). `design`: a
        CriticDesign of (featurizer, tr) to share between target policies."""
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
        d, k, pos, sid = design.d, design.k, design.pos, design.state_id
        pi_s = pi[design.rep]  # (n_states, n_a)

        # A = Phi^T Phi - gamma sum_t phi_t e_{t+1}^T + alpha I, with
        # e(s') = sum_a' pi(a'|s') phi(s', a') per distinct state (column d: pairs never
        # logged, dropped: their weight is 0).
        width = n_a * k
        e = sp.csr_matrix((np.repeat(pi_s, k, axis=1).reshape(-1), pos.reshape(-1),
                           np.arange(0, design.n_states * width + 1, width)),
                          shape=(design.n_states, d + 1))
        next_part = (design.next_by_state @ e)[:, :d]
        a_mat = (design.gram - self.gamma * next_part
                 + self.alpha * sp.identity(d, format="csr")).tocsc()
        lu = spla.splu(a_mat)
        theta = lu.solve(design.b)
        theta_pad = np.append(theta, 0.0)

        q_s = np.empty((design.n_states, n_a))
        for a in range(n_a):
            q_s[:, a] = row_sums(theta_pad, pos[:, a])
        v_s = np.einsum("ij,ij->i", pi_s, q_s)
        q_hat = row_sums(theta_pad, design.inverse)
        v_hat = v_s[sid]
        first = np.flatnonzero(tr.first)
        n = len(first)

        boot = design.boot
        v_next = np.zeros(n_steps)
        v_next[boot] = v_hat[boot + 1]
        delta = tr.rewards + self.gamma * v_next - q_hat
        # z_bar = mean_i sum_a pi(a|s_i0) phi(s_i0, a), over used columns
        start_counts = np.bincount(sid[first], minlength=design.n_states)
        z = np.bincount(pos.reshape(-1), weights=(np.repeat(pi_s, k, axis=1)
                                                  * start_counts[:, None]).reshape(-1),
                        minlength=d + 1)
        z_bar = z[:d] / n
        g = lu.solve(z_bar, trans="T")
        dual = n * row_sums(g, design.inverse)  # n g . phi_t
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
        # Kish's ESS of the dual weights, as a share of the steps: how many logged steps the
        # critic's answer effectively rests on (1: spread like the data; small: a few).
        sq = float(dual @ dual)
        self.dual_ess_fraction_ = (float(np.abs(dual).sum()) ** 2 / sq / n_steps
                                   if sq > 0 else 1.0)
        self.n_features_used_ = int(d)
        return self

    def q_values(self, states: np.ndarray, n_actions: int) -> np.ndarray:
        """(m, n_actions) Q of the fitted critic (0 on pairs the data never showed)."""
        f = self.featurizer
        codes = f.codes(states)
        pad = np.append(self.theta_, 0.0)
        return np.stack([row_sums(pad, column_positions(self.used_, f.sa_index(codes, a)))
                         for a in range(n_actions)], axis=1)


def lstdq_closed_form(phi: np.ndarray, psi: np.ndarray, r: np.ndarray,
                      alpha: float = 0.0) -> np.ndarray:
    """Dense reference: theta = (Phi^T (Phi - Psi) + alpha I)^-1 Phi^T r (for tests)."""
    a = phi.T @ (phi - psi) + alpha * np.eye(phi.shape[1])
    return np.linalg.solve(a, phi.T @ r)
