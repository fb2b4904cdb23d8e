"""The critic: fitted Q evaluation (FQE) of a target policy over any feature map.

    Q(s, a) = phi(s, a) . theta,   V(s) = sum_a pi_e(a|s) Q(s, a),   V_hat = mean_i V(s_i0)

with theta the fixed point of FQE's least-squares backups

    Q_{k+1} = LS-fit of  r_t + gamma (1 - done_t) V_k(s'_t)

(the EXPECTATION under the target at the next state, not the greedy action: d3rlpy's FQE
takes the max, which for a stochastic target evaluates another policy). The one solver:

- one-hot features (`tracerl.rl.features.OneHot`): the fit is the per-cell mean, so the
  backups are iterated exactly (`tracerl.rl.bellman`, until the change is below `tol`): the
  tabular FQE; a pair never logged keeps Q = 0;
- any other features: LSTD-Q, the fixed point solved at once,
      A = sum_t phi_t (phi_t - psi_t)^T + alpha I,  b = sum_t phi_t r_t,  theta = A^-1 b,
      psi_t = gamma (1 - done_t) sum_a' pi_e(a'|s_{t+1}) phi(s_{t+1}, a'),
  memory O(steps x templates) for the features and O(nnz(A)) for the solve.
Both give the same value on one-hot features (to ~1e-12).

Interval, delta method (`contributions_`, any features, cost O(steps)): theta_hat - theta ~
A^-1 sum_i u_i, u_i = sum_{t in i} phi_t delta_t (delta_t the TD error), so the estimate
is, to first order, the mean of per-episode contributions

    c_i = V(s_i0) + n g . u_i,   g = A^-T z_bar,   z_bar = mean_i sum_a pi_e(a|s_i0) phi(s_i0, a)

(one more solve with A^T); n g.phi(s, a) estimates the discounted visitation ratio of the
target to the data (`dual weights`), whose Kish ESS says how many steps the answer rests on.
A one-hot critic is instead refitted on every resample (`tracerl.ope.grouped`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from tracerl.rl.bellman import BellmanBackup, evaluate
from tracerl.rl.features import FeatureMap, column_positions, matrix, row_sums
from tracerl.rl.transitions import Transitions


class Design:
    """What LSTD-Q needs of a dataset whatever the target policy, computed once.

    phi: (N x d) CSR over the d columns the logged (s, a) use; pos: the positions of
    phi(s, a) for every distinct state and action (n_states x n_actions x k; d = a column no
    logged pair uses, whose weight is 0); gram = Phi^T Phi; next_by_state = Phi_b^T C
    (d x n_states), C the one-hot of each bootstrapping step's next state, so that
    sum_t phi_t e_{t+1}^T = next_by_state @ E with E the (n_states x d) expected features.
    Exact and with no repetition needed: a target's probabilities and Q are asked once per
    distinct state and gathered per step. `statistics()` keeps only what a per-state target's
    Q and value need (O(d x states), nothing per step): the refits of a log's subsets.
    """

    def __init__(self, features: FeatureMap, tr: Transitions) -> None:
        by_state = np.stack([features.sa_columns(tr.rows, a) for a in range(tr.n_actions)],
                            axis=1)  # (n_states, n_actions, k)
        cols = by_state[tr.s, tr.a]  # (N, k)
        used, inverse = np.unique(cols, return_inverse=True)
        self.features, self.tr = features, tr
        self.n_actions, self.n_states = tr.n_actions, tr.n_states
        self.used, self.d, self.k = used, len(used), cols.shape[1]
        self.inverse, self.pos = inverse.reshape(cols.shape), column_positions(used, by_state)
        self.phi = matrix(self.inverse, self.d)
        self.gram = (self.phi.T @ self.phi).tocsr()
        self.boot = np.flatnonzero((tr.s_next >= 0) & ~tr.done)  # steps that bootstrap
        self.next_by_state = self._next_counts(self.boot)
        self.b = self.phi.T @ tr.r  # LSTD-Q's b = Phi^T r for the logged reward
        self.starts = tr.s[tr.first]  # each episode's first state, in episode order
        self.column_counts = np.bincount(self.inverse.reshape(-1), minlength=self.d)

    def _next_counts(self, boot: np.ndarray) -> sp.csr_matrix:
        """Phi_b^T C over the bootstrapping steps `boot` (d x n_states, integer counts)."""
        k = self.k
        return sp.csr_matrix((np.ones(len(boot) * k), (self.inverse[boot].reshape(-1),
                                                        np.repeat(self.tr.s_next[boot], k))),
                             shape=(self.d, self.n_states))

    def of_episodes(self, keep: np.ndarray) -> Design:
        """The statistics (`statistics()`) of Design(features, tr.select_episodes(keep))
        (keep: one bool per episode), from this design: its counts (gram, next-state sums,
        columns used) less the left-out steps' (integers: exact, O(left-out steps)), b
        summed over the kept steps in their order (the very sums Phi^T r makes).
        Left-out columns leave the numbering (the kept ones keep their order)."""
        tr, d = self.tr, self.d
        steps = keep[tr.episode]
        left_cols = self.inverse[~steps]
        left = matrix(left_cols, d)
        present = self.column_counts - np.bincount(left_cols.reshape(-1), minlength=d) > 0
        kept = np.flatnonzero(present)
        remap = np.append(np.where(present, np.cumsum(present) - 1, len(kept)), len(kept))
        out = self.statistics()
        out.used, out.d, out.pos = self.used[kept], len(kept), remap[self.pos]
        # Entries the subtraction makes 0 are dropped (scipy keeps no explicit zeros).
        out.gram = (self.gram - (left.T @ left).tocsr())[kept][:, kept]
        out.next_by_state = (self.next_by_state
                             - self._next_counts(self.boot[~steps[self.boot]]))[kept]
        out.b = np.bincount(self.inverse[steps].reshape(-1), minlength=d,
                            weights=np.repeat(tr.r[steps], self.k))[kept]
        out.starts = self.starts[keep]
        out.column_counts = None
        return out

    def statistics(self) -> Design:
        """This design without its per-step arrays (the transitions, phi): what
        `Critic.fit_value` reads, kept for many subsets of a log at O(d x states) each."""
        out = object.__new__(Design)
        out.__dict__.update({k: v for k, v in self.__dict__.items()
                             if k not in ("tr", "phi", "inverse", "boot")})
        out.tr = out.phi = out.inverse = out.boot = None
        return out

    def system(self, pi: np.ndarray, gamma: float, alpha: float,
               per_step: bool = False) -> sp.csc_matrix:
        """LSTD-Q's A = Phi^T Phi - gamma sum_t phi_t e_{t+1}^T + alpha I for target pi,
        e(s') = sum_a' pi(a'|s') phi(s', a'): pi per distinct state, or per step (its rows
        the steps of tr, each step's successor its episode's next step). Column d (pairs
        never logged, weight 0) is dropped."""
        tr, d, k = self.tr, self.d, self.k
        rows_pos = self.pos if not per_step else self.pos[tr.s]
        n_rows, width = len(pi), self.n_actions * k
        e = sp.csr_matrix((np.repeat(pi, k, axis=1).reshape(-1), rows_pos.reshape(-1),
                           np.arange(0, n_rows * width + 1, width)), shape=(n_rows, d + 1))
        if per_step:
            following = self.boot + 1  # the next step of each bootstrapping step
            if len(following) and (following.max() >= tr.n or np.any(
                    tr.s[following] != tr.s_next[self.boot])):
                raise ValueError("a step's s_next is not the state of the episode's next step")
            nxt = sp.csr_matrix(
                (np.ones(len(self.boot) * k), (self.inverse[self.boot].reshape(-1),
                                               np.repeat(following, k))),
                shape=(d, tr.n))
        else:
            nxt = self.next_by_state
        return (self.gram - gamma * (nxt @ e)[:, :d]
                + alpha * sp.identity(d, format="csr")).tocsc()


class Critic:
    """FQE over a feature map (see the module docstring); `fit` learns q_ and v_ (per
    distinct state of the transitions), value_, and for linear features contributions_
    and dual_ess_fraction_."""

    def __init__(self, features: FeatureMap, gamma: float = 0.99, alpha: float = 1e-6,
                 iterations: int = 1000, tol: float = 1e-10, solver: str = "auto") -> None:
        self.features = features
        self.gamma = gamma
        self.alpha = alpha
        self.iterations = iterations
        self.tol = tol
        self.solver = solver  # auto: one-hot features iterate the table; lstd: always solve

    def fit(self, tr: Transitions, target: np.ndarray | None = None,
            reward: np.ndarray | None = None, design: Design | None = None, *,
            step_target: np.ndarray | None = None, delta: bool = True) -> Critic:
        """target: (n_states, n_actions) pi_e at each distinct state of `tr`; or instead
        step_target: (n_steps, n_actions) pi_e(. | history_t) at every logged step (a
        candidate whose distribution depends on more than the encoded state: the next
        step's row is the distribution at the next state; always the linear solve).
        reward: per step (default tr.r; the support's reach problem rewards `done`).
        `design`: a `Design` of (features, tr) shared between targets (linear features).
        delta: False skips the linear critic's delta method and condition number (a refit
        of which only Q, V and the value are read; the same Q, V and value)."""
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")
        if (target is None) == (step_target is None):
            raise ValueError("give target (per state) or step_target (per step), not both")
        shape = (tr.n_states, tr.n_actions) if step_target is None else (tr.n, tr.n_actions)
        pi = np.asarray(target if step_target is None else step_target, dtype=np.float64)
        if pi.shape != shape:
            which = "target" if step_target is None else "step_target"
            raise ValueError(f"{which} must be {shape}, got {pi.shape}")
        if np.any(pi < 0) or np.any(pi.sum(axis=1) > 1 + 1e-6):
            raise ValueError("target rows must be (sub-)probabilities")
        r = tr.r if reward is None else np.asarray(reward, dtype=np.float64)
        self.tr_ = tr
        self.per_step_ = step_target is not None
        if self.per_step_:
            # The per-state view other helpers read: the mean of each state's step rows.
            counts = np.bincount(tr.s, minlength=tr.n_states).astype(np.float64)
            per_state = np.zeros((tr.n_states, tr.n_actions))
            np.add.at(per_state, tr.s, pi)
            self.target_ = per_state / np.maximum(counts, 1.0)[:, None]
            self.step_target_ = pi
            self._fit_linear(tr, pi, r, design, per_step=True, delta=delta)
        elif self.features.one_hot and self.solver == "auto":
            self.target_ = pi
            self._fit_table(tr, pi, r)
        else:
            self.target_ = pi
            self._fit_linear(tr, pi, r, design, delta=delta)
        if not self.per_step_:
            self.v_steps_ = self.v_[tr.s]
        self.value_ = float(self.v_steps_[tr.first].mean()) if tr.n else 0.0
        return self

    def _fit_table(self, tr: Transitions, pi: np.ndarray, r: np.ndarray) -> None:
        view = tr.project(self.features.used)
        state_of = np.zeros(tr.n_states, dtype=np.int64)
        state_of[tr.s] = view.s  # every state of tr is some step's state
        rep = np.zeros(view.n_states, dtype=np.int64)
        rep[state_of] = np.arange(tr.n_states)  # the target read at one state of each cell
        backup = BellmanBackup(view.s, view.a, r, view.s_next, view.done, view.n_states,
                               view.n_actions, self.gamma)
        q, self.n_iter_, self.bellman_residual_ = evaluate(backup, pi[rep], self.iterations,
                                                           self.tol)
        self.converged_ = self.bellman_residual_ <= self.tol
        self.q_ = q[state_of]
        self.v_ = (self.q_ * pi).sum(axis=1)
        self.counts_ = backup.counts()[state_of]  # N(s, a) of each state's cell
        self.contributions_ = None

    def fit_value(self, design: Design, target: np.ndarray) -> Critic:
        """q_, v_ and value_ of a per-state target (n_states, n_actions) on the logged
        reward from a design's sufficient statistics alone (`Design.statistics`: no steps,
        no delta method): the refits of which only these are read (jackknife, held-out
        calibration, cross-fitting, the ridge probe), the same numbers `fit` gives."""
        pi = np.asarray(target, dtype=np.float64)
        if pi.shape != (design.n_states, design.n_actions):
            raise ValueError(f"target must be {(design.n_states, design.n_actions)}, got "
                             f"{pi.shape}")
        if design.features != self.features:
            raise ValueError("design was made for other features")
        self.target_, self.tr_, self.per_step_, self.contributions_ = pi, None, False, None
        self._solve(design, pi, design.b, per_step=False)
        self.v_ = np.einsum("ij,ij->i", pi, self.q_)
        self.value_ = float(self.v_[design.starts].mean()) if len(design.starts) else 0.0
        return self

    def _solve(self, design: Design, pi: np.ndarray, b: np.ndarray, per_step: bool,
               condition: bool = False) -> spla.SuperLU:
        """theta_ and q_ (per distinct state) of LSTD-Q's A theta = b; the factorisation."""
        a_mat = design.system(pi, self.gamma, self.alpha, per_step)
        lu = spla.splu(a_mat)
        self.condition_ = _condition(a_mat, lu) if condition else math.nan
        theta = np.append(lu.solve(b), 0.0)
        self.q_ = row_sums(theta, design.pos)  # (n_states, n_actions), every action at once
        self.theta_, self.used_ = theta[:-1], design.used
        self.n_iter_, self.bellman_residual_, self.converged_ = 1, 0.0, True
        return lu

    def _fit_linear(self, tr: Transitions, pi: np.ndarray, r: np.ndarray,
                    design: Design | None, per_step: bool = False, delta: bool = True
                    ) -> None:
        if design is None or design.tr is not tr:
            design = Design(self.features, tr)
        elif design.features != self.features:
            raise ValueError("design was made for other features")
        d, k, pos = design.d, design.k, design.pos
        n_s = tr.n_states
        rows_pos = pos if not per_step else pos[tr.s]
        lu = self._solve(design, pi, design.b if r is tr.r else design.phi.T @ r, per_step,
                         condition=delta)
        theta = np.append(self.theta_, 0.0)
        if per_step:
            self.v_steps_ = np.einsum("ij,ij->i", pi, self.q_[tr.s])
            counts = np.bincount(tr.s, minlength=n_s).astype(np.float64)
            self.v_ = np.bincount(tr.s, weights=self.v_steps_, minlength=n_s) / np.maximum(
                counts, 1.0)
        else:
            self.v_ = np.einsum("ij,ij->i", pi, self.q_)
            self.v_steps_ = self.v_[tr.s]
        if not delta:
            self.contributions_ = None
            return
        # The delta method: per-episode contributions (module docstring).
        first = np.flatnonzero(tr.first)
        n = len(first)
        q_hat = row_sums(theta, design.inverse)
        v_next = np.zeros(tr.n)
        v_next[design.boot] = (self.v_steps_[design.boot + 1] if per_step
                               else self.v_[tr.s_next[design.boot]])
        delta = r + self.gamma * v_next - q_hat
        if per_step:
            z = np.bincount(rows_pos[first].reshape(-1),
                            weights=np.repeat(pi[first], k, axis=1).reshape(-1),
                            minlength=d + 1)
        else:
            start_counts = np.bincount(tr.s[first], minlength=n_s)
            z = np.bincount(pos.reshape(-1), weights=(np.repeat(pi, k, axis=1)
                                                      * start_counts[:, None]).reshape(-1),
                            minlength=d + 1)
        g = np.append(lu.solve(z[:d] / max(n, 1), trans="T"), 0.0)
        dual = n * row_sums(g, design.inverse)  # n g . phi_t
        v_start = self.v_steps_[first]
        c = v_start + np.bincount(tr.episode, weights=dual * delta, minlength=n)
        self.contributions_ = c - c.mean() + float(v_start.mean())
        self.max_dual_weight_ = float(np.max(np.abs(dual))) if tr.n else 0.0
        # Kish's ESS of the dual weights, as a share of the steps: how many logged steps the
        # critic's answer effectively rests on (1: spread like the data; small: a few).
        sq = float(dual @ dual)
        self.dual_ess_fraction_ = (float(np.abs(dual).sum()) ** 2 / sq / tr.n
                                   if sq > 0 else 1.0)
        # ... and how many episodes: Kish's ESS of the per-episode sums of |dual weights|.
        per_episode = np.bincount(tr.episode, weights=np.abs(dual), minlength=n)
        sq_ep = float(per_episode @ per_episode)
        self.dual_ess_episodes_ = (float(per_episode.sum()) ** 2 / sq_ep if sq_ep > 0
                                   else float(n))
        self.n_features_used_ = int(d)

    def step_values(self, tr: Transitions | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(Q(s_t, a_t), V(s_t)) per step of `tr` (default: the fitted ones), the q_hat and
        v_hat of DR and WDR; `tr` must share the fitted transitions' states."""
        if tr is None or tr is self.tr_:
            return self.q_[self.tr_.s, self.tr_.a], self.v_steps_
        return self.q_[tr.s, tr.a], self.v_[tr.s]

    def share_on_logged(self) -> float:
        """Share of the target's decisions, at the logged steps' states, on (s, a) pairs the
        data shows (one-hot features; NaN otherwise)."""
        if not self.features.one_hot:
            return float("nan")
        covered = (self.target_ * (self.counts_ > 0)).sum(axis=1)
        return float(covered[self.tr_.s].mean()) if self.tr_.n else 1.0


def _condition(a_mat: sp.csc_matrix, lu: spla.SuperLU) -> float:
    """An estimate of the 1-norm condition number of the critic's system, ||A|| ||A^-1||
    (Higham's estimator, `scipy.sparse.linalg.onenormest`, from the LU already made)."""
    d = a_mat.shape[0]
    if d == 0:
        return 1.0
    inverse = spla.LinearOperator((d, d), matvec=lu.solve,
                                  rmatvec=lambda x: lu.solve(x, trans="T"), dtype=np.float64)
    norm = float(abs(a_mat).sum(axis=0).max())  # ||A||_1 exactly: the largest column sum
    # onenormest draws its probe vectors from NumPy's global generator: seeded here (and the
    # caller's state restored) so the same log gives the same report, byte for byte.
    state = np.random.get_state()
    np.random.seed(0)
    try:
        return norm * float(spla.onenormest(inverse))
    except (ValueError, RuntimeError):  # pragma: no cover - degenerate systems
        return float("inf")
    finally:
        np.random.set_state(state)


def lstdq_closed_form(phi: np.ndarray, psi: np.ndarray, r: np.ndarray,
                      alpha: float = 0.0) -> np.ndarray:
    """Dense reference: theta = (Phi^T (Phi - Psi) + alpha I)^-1 Phi^T r (for tests)."""
    a = phi.T @ (phi - psi) + alpha * np.eye(phi.shape[1])
    return np.linalg.solve(a, phi.T @ r)
