"""Step credit under the logging policy, and preference pairs mined from logged alternatives.

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

Preference pairs (`mine_pairs`): two logged steps at one encoded state whose actions differ
and whose Q intervals do not overlap, within one dataset or across datasets (agents) on the
same task; each dataset's steps read its own critic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.stats import norm

from tracerl.ope.critic import Critic, Design
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


def _system(design: Design, pi: np.ndarray, gamma: float, alpha: float) -> sp.csc_matrix:
    """LSTD-Q's A = Phi^T Phi - gamma sum_t phi_t e(s_{t+1})^T + alpha I for target pi, as
    the critic solves it (tracerl.ope.critic.Critic._fit_linear)."""
    d, k, pos = design.d, design.k, design.pos
    n_s, n_a = pi.shape
    width = n_a * k
    e = sp.csr_matrix((np.repeat(pi, k, axis=1).reshape(-1), pos.reshape(-1),
                       np.arange(0, n_s * width + 1, width)), shape=(n_s, d + 1))
    return (design.gram - gamma * (design.next_by_state @ e)[:, :d]
            + alpha * sp.identity(d, format="csr")).tocsc()


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
    lu = _transposed_solver(_system(design, pi, gamma, alpha))
    q_rows, adv_rows = _queries(design, pi, s, a)
    z = float(norm.ppf(0.5 + level / 2))
    q_se, adv_se = _influence_se(lu, influence, q_rows), _influence_se(lu, influence, adv_rows)
    flags: list[list[str]] = [[] for _ in range(len(pairs))]
    q_span = None if value_range is None else (float(value_range[0]), float(value_range[1]))
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


# --- weights ------------------------------------------------------------------------------
def step_weights(credit: StepCredit, rule: str, beta: float = 1.0,
                 max_weight: float = 20.0) -> np.ndarray:
    """Per step (tr order): exp: min(exp(A / beta), max_weight); positive: A > 0;
    positive_ci: A's interval above 0 (tracerl.config.export.Weighting)."""
    adv = credit.advantage[credit.pair]
    if rule == "exp":
        return np.minimum(np.exp(np.minimum(adv / beta, 700.0)), max_weight)
    if rule == "positive":
        return (adv > 0).astype(np.float64)
    if rule == "positive_ci":
        return (credit.adv_low[credit.pair] > 0).astype(np.float64)
    raise ValueError(f"unknown weighting rule {rule!r}; rules: exp, positive, positive_ci")


# --- what the report shows ------------------------------------------------------------------
def _num(x: float) -> str:
    return f"{x:+.2f}".replace("-", "\u2212")


def worst_pairs(credit: StepCredit, top: int) -> list[dict[str, Any]]:
    """The (state, action) pairs with the most negative advantage among those logged at
    least min_count times, each with a sentence saying it."""
    tr = credit.tr
    ok = np.flatnonzero(credit.count >= credit.min_count)
    order = ok[np.lexsort((credit.pair_a[ok], credit.pair_s[ok], credit.advantage[ok]))]
    out = []
    for j in order[:top]:
        if credit.advantage[j] >= 0:
            break
        action, state = tr.actions[int(credit.pair_a[j])], str(tr.labels[int(credit.pair_s[j])])
        clear = credit.adv_high[j] < 0
        sentence = (f"calling `{action}` at `{state}` is followed by a "
                    f"{'worse' if clear else 'possibly worse'} outcome than the logging "
                    f"policy's average there: advantage {_num(credit.advantage[j])} "
                    f"({credit.level:.0%} CI {_num(credit.adv_low[j])} to "
                    f"{_num(credit.adv_high[j])}), n = {int(credit.count[j])}")
        out.append({"state": state, "action": action, "advantage": float(credit.advantage[j]),
                    "advantage_ci": [float(credit.adv_low[j]), float(credit.adv_high[j])],
                    "q": float(credit.q[j]), "v": float(credit.v[int(credit.pair_s[j])]),
                    "n": int(credit.count[j]), "n_state": int(credit.state_count[j]),
                    "behavior_prob": float(credit.behavior_prob[j]),
                    "flags": list(credit.flags[j]), "interval_excludes_zero": bool(clear),
                    "sentence": sentence})
    return out


def episode_drops(credit: StepCredit, episode_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per episode (ascending episode_id, as tr numbers them): the step where the value
    dropped most (None when no step has a value after it)."""
    tr = credit.tr
    drop = np.where(np.isnan(credit.drop), np.inf, credit.drop)
    order = np.lexsort((tr.t, drop, tr.episode))  # per episode: smallest drop first
    first = order[np.r_[True, tr.episode[order][1:] != tr.episode[order][:-1]]] \
        if tr.n else order
    out = []
    for i in first:  # one per episode
        e = int(tr.episode[i])
        if not np.isfinite(drop[i]):
            out.append({"episode_id": episode_ids[e], "t": None})
            continue
        step = credit.step(int(i))
        out.append({"episode_id": episode_ids[e], "t": step["t"], "action": step["action"],
                    "state": step["state"], "value_change": float(credit.drop[i]),
                    "v_before": step["v"], "q": step["q"], "advantage": step["advantage"],
                    "n": step["n"], "flags": step["flags"]})
    return out


def summary(credit: StepCredit, episode_ids: Sequence[str], top: int) -> dict[str, Any]:
    """What the report and the UI show of one dataset's credit."""
    drops = episode_drops(credit, episode_ids)
    ranked = sorted((d for d in drops if d["t"] is not None),
                    key=lambda d: (d["value_change"], d["episode_id"]))
    return {"interval": INTERVAL, "level": credit.level, "steps": credit.tr.n,
            "episodes": credit.n_episodes, "state_action_pairs": len(credit.pair_s),
            "min_count": credit.min_count, "converged": credit.converged,
            "value_range": None if credit.value_range is None else list(credit.value_range),
            "value": float(credit.v[credit.tr.initial_states].mean()) if credit.tr.n else 0.0,
            "worst_pairs": worst_pairs(credit, top), "largest_drops": ranked[:top]}


# --- preference pairs ------------------------------------------------------------------------
@dataclass(frozen=True)
class PairSpec:
    """One preference record to write: at the anchor step (its prompt), the logged action
    `rejected` lost to `chosen`, a logged step of another action at the same encoded state
    (`chosen_dataset`, `chosen_row`; rows in tr order)."""

    scope: str
    dataset: str
    row: int
    chosen_dataset: str
    chosen_row: int
    state: str
    chosen_action: str
    rejected_action: str
    chosen_q: tuple[float, float, float]    # (q, low, high)
    rejected_q: tuple[float, float, float]
    chosen_n: int
    rejected_n: int


def _frame(name: str, credit: StepCredit, split: np.ndarray, task: np.ndarray,
           single: np.ndarray) -> pd.DataFrame:
    tr, j = credit.tr, credit.pair
    return pd.DataFrame({
        "dataset": name, "row": np.arange(tr.n), "state": tr.labels[tr.s],
        "action": np.asarray(tr.actions, dtype=object)[tr.a], "q": credit.q[j],
        "low": credit.q_low[j], "high": credit.q_high[j], "n": credit.count[j],
        "split": split, "task": task, "single": single})


def mine_pairs(steps: Mapping[str, tuple[StepCredit, np.ndarray, np.ndarray, np.ndarray]],
               scope: Sequence[str], min_count: int = 1) -> list[PairSpec]:
    """The pair records of every dataset. steps: dataset -> (its credit, and per step of
    its tr: split, task (split key), whether its turn is that step alone). A pair: at one
    state (label) two actions with non-overlapping Q intervals, each logged at least
    min_count times (in its dataset); its records are anchored on every single-step turn
    of the worse action (its prompt), one per anchor and scope (the better action whose
    lower bound is highest), the better action's message taken from a logged single-step
    turn in the same split (within: the same dataset, the same task preferred; across:
    another dataset, the same task). Sorted, so deterministic."""
    frames = [_frame(n, *v) for n, v in steps.items()]
    if not frames:
        return []
    df = pd.concat(frames, ignore_index=True)
    df = df[df["n"] >= min_count]
    out: list[PairSpec] = []
    side = ["dataset", "state", "action", "q", "low", "high", "n"]
    for kind in scope:
        keys = ["dataset", "state", "action"] + (["task"] if kind == "across" else [])
        level = df.drop_duplicates(keys)[side + (["task"] if kind == "across" else [])]
        on = ["state"] + (["dataset"] if kind == "within" else ["task"])
        m = level.merge(level, on=on, suffixes=("_hi", "_lo"))
        m = m[(m["action_hi"] != m["action_lo"]) & (m["low_hi"] > m["high_lo"])]
        if kind == "across":
            m = m[m["dataset_hi"] != m["dataset_lo"]]
        else:
            m = m.assign(dataset_hi=m["dataset"], dataset_lo=m["dataset"]).drop(
                columns="dataset")
        if m.empty:
            continue
        cand = df[df["single"]]
        anchors = cand.merge(m, left_on=["dataset", "state", "action"] +
                             (["task"] if kind == "across" else []),
                             right_on=["dataset_lo", "state", "action_lo"] +
                             (["task"] if kind == "across" else []))
        reps = cand.sort_values(["dataset", "row"])
        by_task = reps.drop_duplicates(["dataset", "state", "action", "split", "task"])
        by_split = reps.drop_duplicates(["dataset", "state", "action", "split"])
        join = ["dataset_hi", "state", "action_hi", "split"]
        rep_cols = {"dataset": "dataset_hi", "action": "action_hi", "row": "rep_row"}
        t = anchors.merge(by_task[["dataset", "state", "action", "split", "task", "row"]]
                          .rename(columns=rep_cols), on=[*join, "task"], how="left")
        if kind == "within":
            any_task = by_split[["dataset", "state", "action", "split", "row"]].rename(
                columns={**rep_cols, "row": "rep_any"})
            t = t.merge(any_task, on=join, how="left")
            t["rep_row"] = t["rep_row"].fillna(t["rep_any"])
        # One record per anchor: the better action with the highest lower bound (ties by
        # name, then dataset), so a step's prompt is not repeated once per alternative.
        t = t[t["rep_row"].notna()].sort_values(
            ["dataset", "row", "low_hi", "action_hi", "dataset_hi"],
            ascending=[True, True, False, True, True]).drop_duplicates(["dataset", "row"])
        for r in t.itertuples(index=False):  # over the records written
            out.append(PairSpec(kind, r.dataset, int(r.row), r.dataset_hi, int(r.rep_row),
                                r.state, r.action_hi, r.action_lo,
                                (float(r.q_hi), float(r.low_hi), float(r.high_hi)),
                                (float(r.q_lo), float(r.low_lo), float(r.high_lo)),
                                int(r.n_hi), int(r.n_lo)))
    return out
