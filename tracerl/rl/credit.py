"""Step credit under the logging policy: Q, V, advantage, intervals, support and flags.

The logging policy's critic is the one critic (`tracerl.ope.critic.Critic`), fitted with
the behaviour model pi_hat_b (`tracerl.rl.learners.behavior_model`) as its target over the
dataset's critic features:

    Q(s, a) = Q^{pi_b}(s, a),   V(s) = sum_a pi_b(a|s) Q(s, a),   A(s_t, a_t) = Q - V

Interval: the critic's per-episode influence (the delta method, as the critic's own value
interval; no refit). LSTD-Q's theta_hat - theta ~ A^-1 sum_i u_i, u_i = sum_{t in i}
phi_t delta_t (delta_t the TD error of the fitted critic), so any linear read w . theta --
Q(s, a): w = phi(s, a); the advantage: w = phi(s, a) - sum_b pi_b(b|s) phi(s, b) -- has
per-episode influence g . u_i with g = A^-T w, and variance n/(n-1) sum_i (g . u_i -
mean)^2. The interval is normal at `level`; with a value range it is widened to hold one
unseen outcome at the worst and at the best return per (state, action) (n logged steps
there: Q's ends at least (n Q + worst) / (n + 1) and (n Q + best) / (n + 1), A's shifted
alike), so n identical outcomes do not give a point interval, and kept inside the range (Q
in [worst, best], A in [worst - best, best - worst]; a value outside is projected and
flagged out_of_range). pi_b is held fixed: the behaviour model's own error is not in the
interval.

Support of each step: n logged at its (state, action), n logged at its state, pi_hat_b(a|s)
and the logged probability where one was logged. Flags: few_observations (n < min_count:
the delta method's interval is not to be trusted on a handful of steps), rare_action
(pi_hat_b(a|s) < min_behavior_prob), not_converged (the tabular critic stopped before its
tolerance), out_of_range, no_interval (fewer than two episodes: the interval is null).

Per episode, the realised change of value at each step, r_t + gamma V(s_{t+1}) - V(s_t)
(V = 0 after the end; NaN where the log is cut short): the step where the value dropped
most is its minimum.

Used by the exports (`tracerl.export.credit`: weights, the report's step credit, preference
pairs) and by the guard (`tracerl.guard.core`: a proposed call's Q, advantage, interval,
support and flags), so both read one estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from tracerl.ope.critic import Critic, Design
from tracerl.ope.intervals import normal_quantile
from tracerl.rl.features import FeatureMap
from tracerl.rl.transitions import Transitions

FEW_OBSERVATIONS = "few_observations"
RARE_ACTION = "rare_action"
NOT_CONVERGED = "not_converged"
OUT_OF_RANGE = "out_of_range"
NO_INTERVAL = "no_interval"  # fewer than two episodes: no spread to measure
INTERVAL = "delta method (the critic's per-episode influence), normal"
_CHUNK = 512  # queries solved at a time (memory d x _CHUNK)


@dataclass
class StepCredit:
    """Credit of every step of `tr` (its order: episode, then t). Per distinct logged
    (state, action) pair j: pair_s, pair_a, q, q_low, q_high, advantage, adv_low, adv_high,
    count, flags; per step: `pair` (its j), drop (the realised change of value)."""

    tr: Transitions
    v: np.ndarray            # V(s) per distinct state
    pair_s: np.ndarray
    pair_a: np.ndarray
    q: np.ndarray
    q_low: np.ndarray
    q_high: np.ndarray
    advantage: np.ndarray
    adv_low: np.ndarray
    adv_high: np.ndarray
    count: np.ndarray        # steps logged at the pair
    state_count: np.ndarray  # steps logged at the pair's state
    behavior_prob: np.ndarray  # pi_hat_b(a|s) of the pair
    flags: list[list[str]]   # per pair
    pair: np.ndarray         # per step: its pair
    drop: np.ndarray         # per step: r + gamma V(s') - V(s)
    converged: bool
    level: float
    value_range: tuple[float, float] | None
    min_count: int

    @property
    def n_episodes(self) -> int:
        return self.tr.n_episodes

    def step(self, i: int) -> dict[str, Any]:
        """What an exported record says of step i (tr order)."""
        j = int(self.pair[i])
        logged = float(self.tr.behavior_prob[i])
        return {"t": int(self.tr.t[i]), "action": self.tr.actions[int(self.tr.a[i])],
                "state": str(self.tr.labels[int(self.tr.s[i])]),
                "q": float(self.q[j]), "q_ci": [float(self.q_low[j]), float(self.q_high[j])],
                "v": float(self.v[int(self.tr.s[i])]),
                "advantage": float(self.advantage[j]),
                "advantage_ci": [float(self.adv_low[j]), float(self.adv_high[j])],
                "n": int(self.count[j]), "n_state": int(self.state_count[j]),
                "behavior_prob": float(self.behavior_prob[j]),
                "logged_prob": None if math.isnan(logged) else logged,
                "flags": list(self.flags[j])}


def _queries(design: Design, pi: np.ndarray, s: np.ndarray, a: np.ndarray
             ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(phi(s_j, a_j), phi(s_j, a_j) - sum_b pi(b|s_j) phi(s_j, b)) of each pair, rows over
    the d used columns (column d, never logged, dropped: its weight is 0)."""
    k, pos, d = design.k, design.pos, design.d
    m, n_a = len(s), pi.shape[1]
    rows_q = np.repeat(np.arange(m), k)
    q = sp.csr_matrix((np.ones(m * k), (rows_q, pos[s, a].reshape(-1))), shape=(m, d + 1))
    expected = sp.csr_matrix((np.repeat(pi[s], k, axis=1).reshape(-1),
                              (np.repeat(np.arange(m), n_a * k), pos[s].reshape(-1))),
                             shape=(m, d + 1))
    return q[:, :d].tocsr(), (q - expected)[:, :d].tocsr()


DENSE_MAX = 4096  # columns up to which A is factored dense (d^2 floats; many RHS at once)


def _transposed_solver(a_mat: sp.csc_matrix) -> Any:
    """x -> A^-T x for a block of columns: LAPACK's dense LU where A is small enough (a
    block of right-hand sides is BLAS work; side by side on the support desk's A, 1,864
    columns x 512 right-hand sides: SuperLU 3.7-4.5 s, dense 1.0-1.2 s, standard errors
    equal to 1e-11), SuperLU otherwise."""
    if a_mat.shape[0] <= DENSE_MAX:
        factor = sla.lu_factor(a_mat.toarray())
        return lambda rhs: sla.lu_solve(factor, rhs, trans=1)
    lu = spla.splu(a_mat)
    return lambda rhs: lu.solve(rhs, trans="T")


def _influence_se(solve_t: Any, influence: sp.csr_matrix, queries: sp.csr_matrix
                  ) -> np.ndarray:
    """Standard error of each query row w . theta: sqrt(n/(n-1) sum_i (g . u_i)^2) over
    episodes (centred), g = A^-T w."""
    n = influence.shape[0]
    out = np.zeros(queries.shape[0])
    if n < 2:
        return np.full(queries.shape[0], np.nan)
    for lo in range(0, queries.shape[0], _CHUNK):  # over chunks of queries, not steps
        rhs = queries[lo:lo + _CHUNK].T.toarray()
        g = solve_t(rhs)
        per_episode = np.asarray(influence @ g)
        per_episode -= per_episode.mean(axis=0)
        out[lo:lo + _CHUNK] = np.sqrt((per_episode ** 2).sum(axis=0) * n / (n - 1))
    return out


def step_credit(tr: Transitions, features: FeatureMap, behavior_probs: np.ndarray, *,
                gamma: float, alpha: float = 1e-6, iterations: int = 1000,
                level: float = 0.95, value_range: tuple[float, float] | None = None,
                min_count: int = 5, min_behavior_prob: float = 0.05) -> StepCredit:
    """The logging policy's Q, V and advantage of every logged step, with intervals,
    support and flags (see the module docstring). behavior_probs: pi_hat_b at each
    distinct state of `tr` (n_states x n_actions)."""
    pi = np.asarray(behavior_probs, dtype=np.float64)
    q_span = None if value_range is None else (float(value_range[0]), float(value_range[1]))
    if not tr.n:  # nothing logged: no pair to credit, no critic to fit
        none, empty = np.zeros(0, dtype=np.int64), np.zeros(0)
        return StepCredit(tr=tr, v=np.zeros(tr.n_states), pair_s=none, pair_a=none, q=empty,
                          q_low=empty, q_high=empty, advantage=empty, adv_low=empty,
                          adv_high=empty, count=none, state_count=none, behavior_prob=empty,
                          flags=[], pair=none, drop=empty, converged=True,
                          level=float(level), value_range=q_span, min_count=int(min_count))
    design = Design(features, tr)
    critic = Critic(features, gamma, alpha, iterations).fit(tr, pi, design=design)
    code = tr.s.astype(np.int64) * tr.n_actions + tr.a
    pairs, pair_of_step, count = np.unique(code, return_inverse=True, return_counts=True)
    s, a = pairs // tr.n_actions, pairs % tr.n_actions
    q = critic.q_[s, a]
    advantage = q - critic.v_[s]
    # Per-episode influence of each step's TD error on theta (u_i, n_episodes x d).
    v_next = np.zeros(tr.n)
    v_next[design.boot] = critic.v_[tr.s_next[design.boot]]
    delta = tr.r + gamma * v_next - critic.q_[tr.s, tr.a]
    k = design.k
    influence = sp.csr_matrix((np.repeat(delta, k), (np.repeat(tr.episode, k),
                                                     design.inverse.reshape(-1))),
                              shape=(tr.n_episodes, design.d))
    lu = _transposed_solver(design.system(pi, gamma, alpha))
    q_rows, adv_rows = _queries(design, pi, s, a)
    z = normal_quantile(level)
    q_se, adv_se = _influence_se(lu, influence, q_rows), _influence_se(lu, influence, adv_rows)
    flags: list[list[str]] = [[] for _ in range(len(pairs))]
    outside = np.zeros(len(pairs), dtype=bool)
    q_low, q_high = q - z * q_se, q + z * q_se
    adv_low, adv_high = advantage - z * adv_se, advantage + z * adv_se
    if q_span is not None:
        # One unseen outcome per (state, action) at the worst and at the best return (the
        # refitted critic's rule, tracerl.ope.evaluate): n identical logged outcomes do
        # not make a point interval (the delta method's, when every TD error there is 0).
        lo, hi = q_span
        width = hi - lo
        down = np.maximum(q - (count * q + lo) / (count + 1), 0.0)
        up = np.maximum((count * q + hi) / (count + 1) - q, 0.0)
        q_low, q_high = np.minimum(q_low, q - down), np.maximum(q_high, q + up)
        adv_low = np.minimum(adv_low, advantage - down)
        adv_high = np.maximum(adv_high, advantage + up)
        outside = (q < lo - 1e-9) | (q > hi + 1e-9) | (advantage < -width - 1e-9) | \
            (advantage > width + 1e-9)
        q, q_low, q_high = (np.clip(x, lo, hi) for x in (q, q_low, q_high))
        advantage, adv_low, adv_high = (np.clip(x, -width, width)
                                        for x in (advantage, adv_low, adv_high))
    state_count = np.bincount(tr.s, minlength=tr.n_states)[s]
    b_prob = pi[s, a]
    for j in range(len(pairs)):  # over distinct (state, action) pairs, not steps
        if count[j] < min_count:
            flags[j].append(FEW_OBSERVATIONS)
        if b_prob[j] < min_behavior_prob:
            flags[j].append(RARE_ACTION)
        if not critic.converged_:
            flags[j].append(NOT_CONVERGED)
        if outside[j]:
            flags[j].append(OUT_OF_RANGE)
        if not (np.isfinite(q_se[j]) and np.isfinite(adv_se[j])):
            flags[j].append(NO_INTERVAL)
    drop = tr.r + gamma * v_next - critic.v_[tr.s]  # v_next: 0 where nothing follows
    drop[(tr.s_next < 0) & ~tr.done] = np.nan  # the log is cut short: no value after
    return StepCredit(tr=tr, v=critic.v_, pair_s=s, pair_a=a, q=q, q_low=q_low,
                      q_high=q_high, advantage=advantage, adv_low=adv_low, adv_high=adv_high,
                      count=count, state_count=state_count, behavior_prob=b_prob, flags=flags,
                      pair=pair_of_step, drop=drop, converged=bool(critic.converged_),
                      level=float(level), value_range=q_span, min_count=int(min_count))


def credit_weights(credit: StepCredit, rule: str, beta: float = 1.0,
                   max_weight: float = 20.0) -> np.ndarray:
    """Per step (tr order), from its advantage A under the logging policy: exp: min(exp(A /
    beta), max_weight) (advantage-weighted regression); positive: A > 0; positive_ci: A's
    interval above 0 (tracerl.config.export.Weighting). The weighted-steps export writes
    them and the advantage-weighted BC learner (tracerl.rl.learners) clones by them."""
    adv = credit.advantage[credit.pair]
    if rule == "exp":
        return np.minimum(np.exp(np.minimum(adv / beta, 700.0)), max_weight)
    if rule == "positive":
        return (adv > 0).astype(np.float64)
    if rule == "positive_ci":
        return (credit.adv_low[credit.pair] > 0).astype(np.float64)
    raise ValueError(f"unknown weighting rule {rule!r}; rules: exp, positive, positive_ci")


def logging_credit(tr: Transitions, features: FeatureMap, train: Any, ope: Any, *,
                   gamma: float, min_count: int = 5) -> StepCredit:
    """The step credit of `tr` as a pipeline computes it (the export and the train stage
    alike): pi_hat_b the behaviour model of `train.bc` (params model
    tracerl.config.learning.Train) over `features` (the critic's:
    tracerl.feature_maps.critic_features), the critic, level, value range and support
    threshold of the `ope` section (tracerl.config.learning.Ope)."""
    # tracerl.rl.learners reads this module (advantage-weighted BC): imported here.
    from tracerl.rl.learners import behavior_model

    probs = np.asarray(behavior_model(tr, features, C=train.bc.C, max_iter=train.bc.max_iter,
                                      seed=train.seed).action_probs(tr.rows)) if tr.n else \
        np.zeros((0, tr.n_actions))  # an empty log: nothing to fit pi_hat_b on
    return step_credit(tr, features, probs, gamma=gamma, alpha=ope.critic.alpha,
                       iterations=ope.critic.iterations, level=ope.confidence,
                       value_range=ope.return_range, min_count=min_count,
                       min_behavior_prob=ope.min_behavior_prob)
