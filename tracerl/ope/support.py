"""Support: which of a candidate's decisions the data covers, and how much of its play.

The one notion (issue 17), in terms of the density ratio of the candidate pi_e to the
behaviour pi_b, used by every layer (`tracerl.ope.evaluate`) and by selection (the flags
it sets, `tracerl.ope.select`):

- a *decision* (s, a) is covered when the logs show action a at all, pi_hat_b(a|s) > 0 and
  the ratio is bounded, pi_e(a|s) / pi_hat_b(a|s) <= 1 / min_behavior_prob. pi_hat_b is the
  maximum-likelihood fit of the logged action distribution (`tracerl.rl.learners.
  behavior_model`: the frequencies N(s, a) / N(s) over one-hot features, so an action never
  logged at s is never covered there; a logistic regression otherwise). `decisions` is the
  share of the candidate's mass, at the logged steps, on covered actions. The logging
  policy and its clone put their mass where the logs are (ratio about 1): `decisions` = 1;
  mass moved to actions the logs never show is not covered.
- an *episode* is covered when every decision is covered (`reach`: the candidate's
  probability, from the logged starts, of finishing without an uncovered decision, the
  critic's value of the reach problem: reward 1 on reaching the end, gamma = 1, the target
  restricted to covered actions, over one-hot features; over others, where a linear fit of
  a probability is not exact, the mean over logged episodes of the product of the covered
  mass along them; 1 without solving anything when every logged decision is covered).
  Decision coverage alone is too lax: a deterministic policy whose every action
  the logs show somewhere can still be followed by almost no logged episode. So the play
  must also rest on enough logged episodes: `consistent_episodes`, the Kish ESS of the
  trajectory density ratios w_i = prod_t pi_e / pi_b (for a deterministic candidate, the
  number of logged episodes that follow it; the logging policy: every episode), must reach
  min(min_n_eff, n), the same minimum the intervals use (`tracerl.ope.intervals` rule 2;
  a log shorter than that asks for all of it; `bounded_share`, reported beside). It is
  measured per task, each task needing its share of that minimum (`enough_per_task`,
  tasks falling short named in `tasks_lacking`: where more episodes would tell): that
  is the one number, `support` (below).

Where the logs carry the behaviour's propensities, coverage uses them: pi_b(a|s) at a
(state, action) the log shows is the logged probability there, the fitted pi_hat_b only
where the log never shows it (`observed_propensities`). A fitted model that disagrees with
the logged propensities is a diagnostic of the encoder or the model
(`tracerl.ope.evaluate.behavior_self_check`), never a reason to call a candidate
unsupported.

`support`, the number each layer reports and selection compares with min_support, is
"enough effective episodes for this candidate", measured per layer: the share of the log's
episodes whose task has its share of min(min_n_eff, n) effective episodes, the effective
episodes the layer's own (`Support.of_layer`):

- importance (and replay): the Kish ESS of the candidate's trajectory weights over that
  task's episodes (`enough_per_task`): the IS family's variance is those weights'. The
  logging policy (w = 1) has support 1; a deterministic candidate that few logged episodes
  follow end to end, or one whose weights sit on one task's episodes, has less.
- critic: FQE is accurate where each (s, a) the candidate visits has enough logged samples
  (state-action concentrability), so its effective episodes are those of the candidate's
  state-action occupancy over the log's empirical model (`occupancy_ess`, marginalized
  weights: one sparse solve per candidate, the tasks' starts its right-hand sides), or the
  trajectory ESS where larger (`critic_support`). A deterministic candidate whose every
  step the logs show often, on paths that recombine, has its episodes there even when few
  logged episodes follow it end to end. Over the encoder's distinct states, so for any
  critic features (a feature map over (s, a) only pools what the states tell apart); a
  candidate whose distribution depends on more than the encoded state (`per_state` None)
  keeps the trajectory ESS for the critic too. It is not a per-action
indicator of any model: where the candidate's mass goes that the logs do not cover is
`covered` (the `reach` above; min(1, mean_i w_i) without a distribution), the share of
its play the estimates can see: every interval is widened by (1 - covered) x the range's
width on both sides (`tracerl.ope.intervals` rule 4), and a candidate with uncovered
decision mass is flagged `unsupported_actions`. A candidate given only by the log-probs of
the logged actions (a scored table without its distribution) cannot say where else its
mass goes: its covered share is min(1, mean_i w_i) (an unbiased estimate of the mass the
logs can see: mass on actions they never show is missing from it) and its decisions
mean_t rho_t 1[rho_t <= 1 / min_behavior_prob], flagged `basis: importance weights`.

`max_episode_ratio` (M = max(ope.max_episode_ratio, n / min_n_eff)) is where the IS family
truncates trajectory weights (`tracerl.ope.importance`); the candidate mass above it is
reported (`truncated_mass`) and bounds the bias the truncation makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tracerl.ope.critic import Critic, Design
from tracerl.ope.estimate import LOW_SUPPORT, UNSUPPORTED_ACTIONS
from tracerl.rl.features import FeatureMap
from tracerl.rl.transitions import Transitions

# Uncovered decision mass below this share of the decisions is the estimated behaviour
# model's rounding (a logistic pi_hat_b a hair under the ratio bound), not decisions the data
# cannot vouch for: it moves a value by under a thousandth of its range per decision, and
# any real loss of coverage still lowers `reach` and with it `support`.
MASS_TOL = 1e-3


def shown_actions(tr: Transitions) -> np.ndarray:
    """(n_actions,) bool: the actions the logs show at least once."""
    return np.bincount(tr.a, minlength=tr.n_actions) > 0


def covered(behavior_probs: np.ndarray, valid: np.ndarray, target: np.ndarray,
            min_behavior_prob: float, shown: np.ndarray | None = None) -> np.ndarray:
    """(rows, n_actions) bool: pi_hat_b(a|s) >= min_behavior_prob x pi_e(a|s) > 0 (the ratio
    bounded by 1 / min_behavior_prob), a valid, and a shown in the logs when `shown` is
    given. Rows: distinct states, or logged steps (then every argument per step)."""
    behavior_probs = np.asarray(behavior_probs)
    out = ((behavior_probs > 0) & (behavior_probs >= min_behavior_prob * np.asarray(target))
           & np.asarray(valid, dtype=bool))
    return out if shown is None else out & np.asarray(shown, dtype=bool)[None, :]


def decision_support(tr: Transitions, target: np.ndarray, cover: np.ndarray) -> float:
    """Share of the target's mass, at the logged steps' states, on covered actions."""
    mass = (target * cover).sum(axis=1)
    return float(mass[tr.s].mean()) if tr.n else 1.0


def episode_support(tr: Transitions, target: np.ndarray, cover: np.ndarray,
                    features: FeatureMap, *, iterations: int = 1000, alpha: float = 1e-6,
                    design: Design | None = None, per_step: bool = False) -> float:
    """The target's probability of an episode whose every decision is covered (`reach`,
    see the module docstring); 1 without solving anything when every logged decision is
    covered. `per_step`: target and cover are per logged step.

    Over one-hot features the reach critic is exact on the logged transitions. Over any
    other features a linear fit of a probability is not (its approximation error alone
    can put a candidate that covers all but 1e-5 of its mass at 0.9): there the reach is
    the mean over logged episodes of prod_t m_t, m_t the candidate's covered mass at step
    t, its chance of staying covered along each logged episode's states."""
    mass = (target * cover).sum(axis=1)
    step_mass = mass if per_step else mass[tr.s]
    if np.all(step_mass >= 1.0 - 1e-12):
        return 1.0
    if per_step or not features.one_hot:
        with np.errstate(divide="ignore"):
            log_mass = np.log(np.clip(step_mass, 0.0, 1.0))
        per_episode = np.zeros(tr.n_episodes)
        np.add.at(per_episode, tr.episode, log_mass)
        return float(np.clip(np.exp(per_episode).mean(), 0.0, 1.0)) if tr.n_episodes else 1.0
    visited = np.zeros(tr.n_states, dtype=bool)
    visited[tr.s] = True
    if np.all(mass[visited] >= 1.0 - 1e-12):
        return 1.0
    reach = Critic(features, gamma=1.0, alpha=alpha, iterations=iterations).fit(
        tr, target * cover, reward=tr.done.astype(np.float64), design=design)
    return float(np.clip(reach.value_, 0.0, 1.0))


def episode_weights(tr: Transitions, pi_e: np.ndarray, pi_b: np.ndarray) -> np.ndarray:
    """w_i = prod_t pi_e(a_t) / pi_b(a_t) per episode, in log space (inf where pi_b = 0 <
    pi_e; 0 where pi_e = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(np.asarray(pi_e, dtype=np.float64)) - np.log(
            np.asarray(pi_b, dtype=np.float64))
    log_ratio = np.where(np.asarray(pi_e) == 0, -np.inf, log_ratio)
    total = np.zeros(tr.n_episodes)
    np.add.at(total, tr.episode, log_ratio)
    with np.errstate(over="ignore"):
        return np.exp(total)


@dataclass(frozen=True)
class Support:
    """One candidate's support on one log (see the module docstring)."""

    support: float            # the one number: enough effective episodes, per task
    decisions: float          # share of the candidate's decision mass on covered actions
    reach: float | None       # P_e(every decision covered); None without a distribution
    bounded_share: float      # min(1, consistent_episodes / min(min_n_eff, n))
    max_episode_ratio: float  # M, the IS family's truncation (module docstring)
    consistent_episodes: float  # Kish ESS of the trajectory density ratios
    max_ratio_seen: float
    basis: str                # "distribution" | "importance weights"
    tasks_lacking: tuple[str, ...] = ()  # tasks with the most uncovered logged episodes
    covered: float = 1.0      # share of its play on covered decisions (intervals widen by
                              # 1 - covered; `reach`, or min(1, mean w) without a distribution)
    critic: float | None = None  # the critic layer's support (occupancy ESS per task); None:
                                 # the trajectory one, `support`
    occupancy_episodes: float | None = None  # the occupancy ESS over the whole log

    def of_layer(self, layer: str) -> float:
        """The support of `layer`'s estimates: the critic's occupancy ESS per task for
        ``critic``, the trajectory weights' for every other layer (module docstring)."""
        return self.critic if layer == "critic" and self.critic is not None else self.support

    @property
    def unsupported(self) -> bool:
        """The candidate puts decision mass the logs do not cover."""
        return self.decisions < 1.0 - MASS_TOL

    def flags(self, min_support: float, layer: str = "importance") -> list[str]:
        return support_flags(self.of_layer(layer), min_support=min_support,
                             unsupported=self.unsupported)

    def details(self) -> dict[str, Any]:
        return {"share_of_decisions_covered": self.decisions,
                "support": {"episodes": self.support, "decisions": self.decisions,
                            "reach": self.reach, "covered": self.covered,
                            "enough_episodes": self.bounded_share,
                            "truncation": self.max_episode_ratio,
                            "largest_episode_ratio": self.max_ratio_seen,
                            "consistent_episodes": self.consistent_episodes,
                            "basis": self.basis,
                            "enough_episodes_per_task": self.support,
                            "critic": self.of_layer("critic"),
                            "occupancy_episodes": self.occupancy_episodes,
                            "tasks_lacking": list(self.tasks_lacking)}}


def measure(tr: Transitions, *, behavior_probs: np.ndarray, pi_b: np.ndarray,
            pi_e_logged: np.ndarray, steps: np.ndarray | None,
            per_state: np.ndarray | None, features: FeatureMap, min_behavior_prob: float,
            max_episode_ratio: float, min_n_eff: float, iterations: int = 1000,
            alpha: float = 1e-6, design: Design | None = None, gamma: float = 1.0
            ) -> Support:
    """The candidate's `Support` on `tr`.

    behavior_probs: pi_hat_b per distinct state; pi_b, pi_e_logged: the behaviour's and
    the candidate's probability of each logged action (what the IS family uses); steps /
    per_state: the candidate's distribution per step / per state (None where not given;
    per_state, when given, is used for the exact per-state solve and the critic's occupancy
    support, `critic_support`; gamma: the discount it falls back to where the empirical
    model never ends an episode)."""
    shown = shown_actions(tr)
    behavior_probs = observed_propensities(tr, pi_b, behavior_probs)
    w = episode_weights(tr, pi_e_logged, pi_b)
    finite = np.isfinite(w)
    max_episode_ratio = max(float(max_episode_ratio), tr.n_episodes / float(min_n_eff))
    # pi_b = 0 < pi_e on a logged action (infinite weight): that episode is not evidence.
    w_ok = np.where(finite, w, 0.0)
    ess = kish_ess(w_ok)
    needed = min(float(min_n_eff), float(tr.n_episodes)) if tr.n_episodes else 1.0
    enough = float(min(1.0, ess / needed)) if needed > 0 else 1.0
    # Per task (`enough_per_task`): where the effective episodes fall short of a task's
    # share, more are needed there (`tasks_lacking`, the answer's next step).
    per_task, short = enough_per_task(tr, w_ok, min_n_eff)
    largest = float(np.max(w)) if len(w) else 0.0
    # Episodes it would not play (weight 0) or reaches through pi_b = 0, and the tasks
    # where its effective episodes fall short: more are needed there.
    lacking = (w == 0) | ~finite | short
    if steps is None and per_state is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(pi_e_logged == 0, 0.0, pi_e_logged / pi_b)
        ok = np.isfinite(rho) & (rho <= 1.0 / min_behavior_prob)
        decisions = float(min(1.0, np.mean(np.where(ok, rho, 0.0)))) if tr.n else 1.0
        seen = float(min(1.0, w_ok.mean())) if len(w_ok) else 1.0
        return Support(per_task, decisions, None, enough, max_episode_ratio, ess,
                       largest, "importance weights", _tasks(tr, lacking), seen)
    critic = occupancy = None
    if per_state is not None:
        cover = covered(behavior_probs, tr.valid, per_state, min_behavior_prob, shown)
        critic, occupancy = critic_support(tr, per_state * cover, w_ok, min_n_eff, gamma)
        decisions = decision_support(tr, per_state, cover)
        uncovered = 1.0 - (per_state * cover).sum(axis=1)[tr.s]
        reach = episode_support(tr, per_state, cover, features, iterations=iterations,
                                alpha=alpha, design=design)
    else:
        cover = covered(behavior_probs[tr.s], tr.valid[tr.s], steps, min_behavior_prob,
                        shown)
        decisions = float((steps * cover).sum(axis=1).mean()) if tr.n else 1.0
        uncovered = 1.0 - (steps * cover).sum(axis=1)
        reach = episode_support(tr, steps, cover, features, iterations=iterations,
                                alpha=alpha, design=design, per_step=True)
    lacking |= np.bincount(tr.episode, weights=uncovered, minlength=tr.n_episodes) > MASS_TOL
    return Support(per_task, decisions, reach, enough, max_episode_ratio, ess,
                   largest, "distribution", _tasks(tr, lacking), float(reach), critic,
                   occupancy)


def critic_support(tr: Transitions, target: np.ndarray, w: np.ndarray, min_n_eff: float,
                   gamma: float = 1.0) -> tuple[float, float]:
    """(the critic layer's support, the occupancy ESS over the whole log) of a per-state
    target restricted to covered decisions, `target`; w: its trajectory weights.

    Per task (`task_groups`), the larger of two shares of enough effective episodes: the
    occupancy ESS's (`occupancy_ess`: what the critic's fit rests on, the logged samples at
    the (s, a) the candidate visits) and the trajectory weights' (episodes that follow the
    candidate end to end are evidence for any estimator; on states that never repeat, the
    empirical model's per-state frequencies are 0 or 1 and say nothing of the occupancy
    ratio, and the trajectory ESS is the floor)."""
    if not tr.n_episodes:
        return 1.0, 0.0
    task_of, k = task_groups(tr, min_n_eff)
    ess = occupancy_ess(tr, target, task_of, k)
    if not np.all(np.isfinite(ess)) and gamma < 1.0:
        ess = occupancy_ess(tr, target, task_of, k, gamma)
    ess_k, overall = ess[:k], ess[k]
    total = np.bincount(task_of, weights=w, minlength=k)
    square = np.bincount(task_of, weights=w * w, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        trajectory = np.where(square > 0, total ** 2 / square, 0.0)
    best = np.fmax(np.nan_to_num(ess_k, nan=0.0), trajectory)
    return pooled_share(task_of, task_shares(tr, task_of, best, min_n_eff)), float(
        np.nan_to_num(overall, nan=0.0))


def observed_propensities(tr: Transitions, pi_b: np.ndarray, fitted: np.ndarray
                          ) -> np.ndarray:
    """pi_b(a|s) per distinct state: where the log shows (s, a), the mean of the behaviour
    probabilities it carries there (logged, or a candidate's behavior_logprob: what the IS
    family divides by); the fitted model `fitted` only where the log never shows (s, a).
    Coverage then rests on what was logged, not on how well a model of the logger fits it
    (estimated propensities are the fitted model's own: the table is unchanged)."""
    out = np.array(fitted, dtype=np.float64, copy=True)
    pi_b = np.asarray(pi_b, dtype=np.float64)
    ok = np.isfinite(pi_b) & (pi_b > 0)
    if not np.any(ok):
        return out
    cell = tr.s[ok] * tr.n_actions + tr.a[ok]
    size = out.size
    total = np.bincount(cell, weights=pi_b[ok], minlength=size)
    count = np.bincount(cell, minlength=size)
    seen = count > 0
    flat = out.reshape(-1)
    flat[seen] = total[seen] / count[seen]
    return flat.reshape(out.shape)


def kish_ess(w: np.ndarray) -> float:
    """(sum w)^2 / sum w^2: the episodes a weighted mean effectively rests on (0 if none)."""
    sq = float(w @ w)
    return float(w.sum()) ** 2 / sq if sq > 0 else 0.0


def task_groups(tr: Transitions, min_n_eff: float) -> tuple[np.ndarray, int]:
    """(group of each episode, number of groups): the log's tasks, those too small to need
    one effective episode of their own (min_n_eff x n_k / n < 1: scenarios run a few times
    each) pooled into one, whose ESS one by one would ask every episode to follow."""
    n = tr.n_episodes
    task_of = tr.task[tr.first] if len(tr.tasks) else np.zeros(n, dtype=np.int64)
    codes, task_of = np.unique(task_of, return_inverse=True)
    n_k = np.bincount(task_of, minlength=len(codes))
    small = float(min_n_eff) * n_k / n < 1.0
    if np.any(small):
        relabel = np.cumsum(~small) - 1
        relabel[small] = int((~small).sum())
        task_of = relabel[task_of]
    return task_of, int(task_of.max()) + 1


def task_shares(tr: Transitions, task_of: np.ndarray, ess_k: np.ndarray, min_n_eff: float
                ) -> np.ndarray:
    """Each group's share of enough effective episodes, min(1, ESS_k / need_k),
    need_k = min(n_k, min_n_eff x n_k / n) (all of a short log)."""
    n_k = np.bincount(task_of, minlength=len(ess_k)).astype(np.float64)
    need_k = np.minimum(n_k, float(min_n_eff) * n_k / tr.n_episodes)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.minimum(1.0, np.where(need_k > 0, ess_k / need_k, 1.0))


def pooled_share(task_of: np.ndarray, share: np.ndarray) -> float:
    """The episodes' mean of their group's share: the one `support` number."""
    return float(np.clip(share[task_of].mean(), 0.0, 1.0)) if len(task_of) else 1.0


def enough_per_task(tr: Transitions, w: np.ndarray, min_n_eff: float
                    ) -> tuple[float, np.ndarray]:
    """(share of enough effective episodes, episodes of the tasks falling short), over the
    Kish ESS of the trajectory weights `w` of each task's episodes.

    Support is "enough effective episodes for this candidate" on every task, not overall
    only: a candidate whose weights sit on one task's episodes says nothing of the others.
    Task k of n_k of the n episodes needs its share of the interval's minimum,
    need_k = min(n_k, min_n_eff x n_k / n) (all of a short log), and contributes
    min(1, ESS_k / need_k) weighted by n_k / n (tasks needing less than one effective
    episode are pooled into one, `task_groups`). One task: the overall Kish ESS over
    min(min_n_eff, n)."""
    if not tr.n_episodes:
        return 1.0, np.zeros(0, dtype=bool)
    task_of, k = task_groups(tr, min_n_eff)
    total = np.bincount(task_of, weights=w, minlength=k)
    square = np.bincount(task_of, weights=w * w, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess_k = np.where(square > 0, total ** 2 / square, 0.0)
    share = task_shares(tr, task_of, ess_k, min_n_eff)
    return pooled_share(task_of, share), (share < 1.0)[task_of]


def occupancy_ess(tr: Transitions, target: np.ndarray, groups: np.ndarray, k: int,
                  gamma: float = 1.0) -> np.ndarray:
    """(k + 1,) the effective episodes of the target's state-action occupancy, per group of
    episodes (`groups`: 0..k-1 per episode), the last over all the log's (marginalized
    importance sampling: Liu et al. 2018, Xie et al. 2019).

    target: (n_states, n_actions), already restricted to the decisions the logs cover (mass
    elsewhere leaves the chain: it is `covered`'s, not this number's). Over the empirical
    model of the log, P(s'|s, a) = N(s, a, s') / N(s, a), from group g's logged starts,
    d_g(s, a) = the target's expected visits per episode (one sparse solve of
    (I - gamma P_pi^T) D = M0, the groups' start distributions its right-hand sides), and

        ESS_g = reach_g x E_g[T] / sum_{s,a} d_g(s, a)^2 / N(s, a),

    the Kish ESS of the occupancy weights d_g / (N / n) over the logged steps, in episodes
    (E_g[T] steps each), times reach_g, the share of the candidate's episodes that end on
    covered decisions (the flow through the logged endings; mass on decisions the logs do
    not cover leaves the chain, and those episodes are no evidence): the logging policy's
    own frequencies N(s, a) / N(s) give d = N / n, reach 1 and ESS = n; a candidate that
    lives where the logs are thin has few. gamma 1 counts every visit; a chain the
    empirical model never leaves (a loop of logged transitions) is solved at `gamma` < 1 by
    the caller (its reach then 0). Returns non-negative numbers, NaN where singular."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    S, A = tr.n_states, tr.n_actions
    count = np.bincount(tr.s * A + tr.a, minlength=S * A).astype(np.float64)
    pi = np.where(count.reshape(S, A) > 0, np.asarray(target, dtype=np.float64), 0.0)
    boot = np.flatnonzero((tr.s_next >= 0) & ~tr.done)
    cell = tr.s[boot] * A + tr.a[boot]
    flow = pi.reshape(-1)[cell] / count[cell]
    P = sp.csr_matrix((flow, (tr.s[boot], tr.s_next[boot])), shape=(S, S))
    starts = sp.csr_matrix((np.ones(tr.n_episodes), (tr.s[tr.first], groups)), shape=(S, k))
    starts = sp.hstack([starts, sp.csr_matrix(starts.sum(axis=1))]).tocsr()
    n_k = np.append(np.bincount(groups, minlength=k), tr.n_episodes).astype(np.float64)
    m0 = (starts @ sp.diags(1.0 / np.maximum(n_k, 1.0))).toarray()
    system = (sp.identity(S, format="csc") - gamma * P.T.tocsc()).tocsc()
    with np.errstate(all="ignore"):
        try:
            visits = spla.splu(system).solve(m0)
        except RuntimeError:  # singular: a closed loop of logged transitions at gamma = 1
            return np.full(k + 1, np.nan)
    if not np.all(np.isfinite(visits)):
        return np.full(k + 1, np.nan)
    visits = np.maximum(visits, 0.0)  # round-off below 0
    logged = np.flatnonzero(count > 0)
    d = visits[logged // A] * pi.reshape(-1)[logged][:, None]  # (logged cells, k + 1)
    length = d.sum(axis=0)
    spread = (d * d / count[logged][:, None]).sum(axis=0)
    # The share of its episodes that end on covered decisions: the flow out of the chain
    # through the logged endings (the rest leaves by uncovered decisions).
    ends = 1.0 - np.bincount(cell, minlength=S * A)[logged] / count[logged]
    reach = np.clip(ends @ d, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(spread > 0, reach * length / spread, 0.0)


def _tasks(tr: Transitions, episodes: np.ndarray, top: int = 5) -> tuple[str, ...]:
    """The `top` tasks with the most of `episodes` (one bool per episode), most first."""
    if not np.any(episodes) or not len(tr.tasks):
        return ()
    task_of = tr.task[tr.first]
    counts = np.bincount(task_of[episodes], minlength=len(tr.tasks))
    order = sorted((k for k in np.flatnonzero(counts) if str(tr.tasks[k])),
                   key=lambda k: (-counts[k], str(tr.tasks[k])))
    return tuple(str(tr.tasks[k]) for k in order[:top])


def support_flags(support: float, *, min_support: float, unsupported: bool = False
                  ) -> list[str]:
    """UNSUPPORTED_ACTIONS when the candidate puts decision mass the data does not cover
    (the caller says so: `Support.unsupported`); LOW_SUPPORT when support < min_support
    (never ranked first)."""
    if not 0.0 <= support <= 1.0:
        raise ValueError(f"support must lie in [0, 1], got {support}")
    flags = []
    if unsupported:
        flags.append(UNSUPPORTED_ACTIONS)
    if support < min_support:
        flags.append(LOW_SUPPORT)
    return flags
