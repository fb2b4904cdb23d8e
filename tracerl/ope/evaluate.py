"""Layered off-policy evaluation of any candidate policy on one logged dataset.

Layers (shared/seeds/000, "OPE for Agents"), each returning `Estimate` records
(`tracerl.ope.estimate`) that say how much support they had:

- ``replay/return`` and ``verifier/success``: the candidate replayed over the logged
  episodes against the recorded tool responses (the fixture's replay adapter,
  `tracerl.ope.replay`), the replays scored by the relabel stage's verifiers. No survivor
  bias: a replay that stops at a call with no recorded response counts as the worst value
  at the interval's lower end and the best at its upper end;
- ``critic/fqe``: FQE of the candidate over the critic's feature map
  (`tracerl.ope.critic`);
- ``importance/<is|pdis|wis|pdwis|dr|wdr>``: the IS family (`tracerl.ope.importance`) with
  the logged behaviour probabilities, or pi_hat_b(a_t|s_t) when none were logged (flag
  ``estimated_propensities``); DR and WDR corrected by critics fitted on the other folds
  of episodes (cross-fitting).

One support notion (`tracerl.ope.support`), one set of interval rules
(`tracerl.ope.intervals`). The critic's interval is chosen by measurement
(`critic.interval: auto`): a one-hot critic whose log has few enough distinct transitions
(`tracerl.ope.grouped.refit_affordable`) is refitted on every resample (with one unseen
outcome per logged cell at the worst / best return); any other critic's interval is the
delta method's. Either way the same critic gives the value, and the same code runs for a
simulator's logs and for real ones.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tracerl.ope import grouped
from tracerl.ope.candidate import Candidate
from tracerl.ope.critic import Critic, Design
from tracerl.ope.estimate import (
    DISAGREES_WITH,
    ESTIMATED_PROPENSITIES,
    NOT_APPLICABLE,
    NOT_CONVERGED,
    UNREPLAYED_CALLS,
    ContributionSpec,
    Estimate,
    bootstrap_sums,
    estimates_from_contributions,
    flag_disagreements,
)
from tracerl.ope.importance import (
    IS_ESTIMATORS,
    EpisodeBatch,
    dr_contributions,
    estimate_is_family,
    not_applicable_reason,
    weight_report,
)
from tracerl.ope.intervals import interval_flags, normal_quantile, prior_interval, widen
from tracerl.ope.replay import ReplayAdapter, ReplayLog, replay_sums
from tracerl.ope.support import MASS_TOL, Support, measure, support_flags
from tracerl.rl.features import FeatureMap
from tracerl.rl.policy import Policy
from tracerl.rl.transitions import Transitions

LAYERS = ("replay", "verifier", "critic", "importance")
MAX_EPISODE_RATIO = 10.0  # tracerl.config.learning.Ope.max_episode_ratio's default
NEEDS_DISTRIBUTION = "needs the candidate's distribution at each logged step (step_probs)"
NEEDS_LOGGED = ("needs the candidate's log-probability of each logged action "
                "(logged_logprob) or its distribution (step_probs)")
NEEDS_POLICY = "needs a policy callable on the logged states (policy)"


@dataclass(frozen=True)
class Settings:
    """What the layers read of the `ope` params (tracerl.config.learning.Ope, where every
    default lives), the discount and the relabel stage's verifiers."""

    gamma: float
    verifiers: Sequence[str]
    weights: Mapping[str, float]
    layers: Sequence[str]
    is_estimators: Sequence[str]
    level: float
    n_boot: int
    boot_chunk: int
    min_support: float
    min_behavior_prob: float
    min_ess_fraction: float
    min_n_eff: float
    dr_folds: int
    return_range: tuple[float, float] | None
    success_component: str
    critic_alpha: float
    critic_iterations: int
    critic_interval: str  # auto | refit | delta
    replay_samples: int   # replays per logged episode of a stochastic candidate
    replay_max_steps: int
    max_episode_ratio: float = MAX_EPISODE_RATIO  # support: the largest episode ratio

    @classmethod
    def of(cls, ope: Any, *, gamma: float, verifiers: Sequence[str],
           weights: Mapping[str, float], n_episodes: int) -> Settings:
        """From the typed `ope` params; replays per episode min(max_samples,
        ceil(min_draws / episodes))."""
        samples = min(int(ope.replay.max_samples),
                      max(1, math.ceil(ope.replay.min_draws / max(n_episodes, 1))))
        return cls(gamma=float(gamma), verifiers=list(verifiers), weights=dict(weights),
                   layers=list(ope.layers), is_estimators=list(ope.is_estimators),
                   level=ope.confidence, n_boot=ope.n_boot, boot_chunk=ope.boot_chunk,
                   min_support=ope.min_support, min_behavior_prob=ope.min_behavior_prob,
                   max_episode_ratio=getattr(ope, "max_episode_ratio", MAX_EPISODE_RATIO),
                   min_ess_fraction=ope.min_ess_fraction, min_n_eff=ope.min_n_eff,
                   dr_folds=ope.dr_folds, return_range=None if ope.return_range is None
                   else tuple(float(x) for x in ope.return_range),
                   success_component=ope.success_component, critic_alpha=ope.critic.alpha,
                   critic_iterations=ope.critic.iterations,
                   critic_interval=getattr(ope.critic, "interval", "auto"),
                   replay_samples=samples, replay_max_steps=ope.replay.max_steps)


BEHAVIOR_MISMATCH = "behavior_mismatch"  # re-derived behaviour log-probs differ from the logs'
LOGPROB_TOL = 1e-3  # |log pi| agreement of re-derived and logged log-probs (rounding, fp16)
ILL_CONDITIONED = "ill_conditioned"  # the critic's value rests on what only its ridge decides
MISCALIBRATED = "critic_miscalibrated"  # its value of the behaviour misses the logged return
UNCORROBORATED = "uncorroborated"  # the critic disagrees with an unflagged IS estimate
# Conditioning is judged by what it does to the value, not by cond(A) alone: a ridge-
# regularised system over hashed or redundant features has cond(A) ~ 1 / alpha even where the
# data pin the value down (the null directions do not reach the start states). The critic is
# refitted with RIDGE_PROBE x its ridge; when the value moves by more than
# MAX_RIDGE_SHIFT_SE of its delta-method standard errors, the data do not decide it.
RIDGE_PROBE = 100.0
MAX_RIDGE_SHIFT_SE = 0.5
# A shift below this share of the value range never shows in the 3 decimals a report
# prints, whatever the standard error (a noiseless log has SE ~ 0).
RIDGE_SHIFT_FLOOR = 1e-4
JACKKNIFE_GROUPS = 20  # delete-a-group jackknife of the linear critic (leave-one-out below)
CALIBRATION_FOLDS = 5  # held-out task folds of the behaviour check (fewer tasks: fewer)
CRITIC_BIASED = "critic_biased"  # a significant DR correction bounds its bias too widely
# A bound on the critic's bias (a significant held-out calibration gap; the upper confidence
# bound |c| + z s_c of the cross-fitted DR correction) widens its interval by the bound on
# each side (pi_hat_b is a model of the logger, a linear critic a model of Q: a small bias
# is expected). It blocks the estimate (`critic_biased` where the correction is
# significant, else `uncorroborated`) only where it could change the decision: over both
# this share of the value range and the critic's gap to the logged value. A bound under
# the gap leaves the widened interval on the same side of the logged value.
MAX_BIAS_SHARE = 0.05


def episode_returns(tr: Transitions, gamma: float) -> np.ndarray:
    """sum_t gamma^t r_t of each logged episode, (n_episodes,)."""
    return np.bincount(tr.episode, weights=tr.r * gamma ** tr.t.astype(np.float64),
                       minlength=tr.n_episodes)


def behavior_self_check(tr: Transitions, behavior_probs: np.ndarray, level: float) -> dict:
    """The behaviour's own importance weights on its logs must average 1: with logged
    propensities pi_b, the behaviour model's weights w_i = prod_t pi_hat_b / pi_b are an
    unbiased estimate of 1 when pi_b is what generated the log (and pi_hat_b fits it). The
    check passes when |mean w - 1| <= z x SE (z of the interval level; SE of the mean),
    and reports what it saw; without logged propensities there is nothing to check.

    It is a diagnostic of the state encoder and the model fitted over it (a state that
    merges what the logger told apart, or a model too coarse for it), never of the logs:
    estimators that divide by the logged propensities do not use the fitted model, and
    support reads the logged propensities where the log shows them
    (`tracerl.ope.support.observed_propensities`)."""
    if not tr.logged_propensities or not tr.n:
        return {"checked": False, "reason": "no behaviour log-probs logged"}
    from tracerl.ope.support import episode_weights

    w = episode_weights(tr, behavior_probs[tr.s, tr.a], tr.behavior_prob)
    finite = w[np.isfinite(w)]
    mean = float(finite.mean()) if len(finite) else math.inf
    se = float(finite.std(ddof=1) / math.sqrt(len(finite))) if len(finite) > 1 else math.inf
    z = normal_quantile(level)
    ok = bool(len(finite) == len(w) and abs(mean - 1.0) <= z * se + 1e-9)
    out = {"checked": True, "passed": ok, "mean_weight": mean, "se": se, "z": z,
           "episodes": int(len(w))}
    if not ok:
        out["diagnosis"] = (f"encoder: the behaviour model fitted over the encoded states "
                            f"gives the logged actions weights averaging {mean:.3f} (SE "
                            f"{se:.3f}), not 1; the logged propensities are used wherever "
                            "they apply, the fitted model only as a fallback")
    return out


def critic_calibration(tr: Transitions, features: FeatureMap, behavior_probs: np.ndarray,
                       settings: Settings, seed: int, design: Design | None = None) -> dict:
    """The linear critic's value of the behaviour model on held-out tasks against the
    logged return there: fitted on the other tasks' episodes (grouped folds), its V at each
    held-out episode's start must match the episode's return on average, within z x SE of
    the differences. A critic that cannot reproduce the one value the logs show directly
    has no claim on a candidate's. `design`: the log's (features, tr) design, if made."""
    from tracerl.rl.learners import grouped_folds

    task_of = tr.task[tr.first]
    n_tasks = len(np.unique(task_of))
    # Tasks are held out when there are many (tau2: a task is a scenario whose episodes are
    # near-copies, so holding out episodes would leak). A log of a few large tasks (the
    # support desk's intents) holds out episodes: without one whole task the critic would be
    # tested on states it is never asked about, not on its calibration.
    by_task = n_tasks >= 2 * CALIBRATION_FOLDS
    if tr.n_episodes < 2:
        return {"checked": False, "reason": "fewer than 2 episodes to hold out"}
    fold = grouped_folds(task_of if by_task else np.arange(tr.n_episodes),
                         CALIBRATION_FOLDS, seed)
    returns = episode_returns(tr, settings.gamma)
    predicted = np.zeros(tr.n_episodes)
    design = Design(features, tr) if design is None else design
    for k in range(int(fold.max()) + 1):  # over the few folds
        held_in = design.of_episodes(fold != k)
        critic = Critic(features, settings.gamma, settings.critic_alpha).fit_value(
            held_in, behavior_probs)
        predicted[fold == k] = critic.v_[tr.s[tr.first][fold == k]]
    diff = predicted - returns
    mean = float(diff.mean())
    se = float(diff.std(ddof=1) / math.sqrt(len(diff)))
    z = normal_quantile(settings.level)
    return {"checked": True, "passed": bool(abs(mean) <= z * se + 1e-9),
            "heldout_value": float(predicted.mean()), "heldout_logged": float(returns.mean()),
            "mean_difference": mean, "se": se, "z": z, "folds": int(fold.max()) + 1,
            "held_out": "tasks" if by_task else "episodes"}


def value_range(tr: Transitions, gamma: float, given: tuple[float, float] | None
                ) -> tuple[float, float]:
    """(worst, best) discounted return from any step to the end: `given` (params), else the
    extremes the logs show (weaker: an unseen outcome could lie outside them)."""
    if given is not None:
        return float(given[0]), float(given[1])
    if not tr.n:
        return 0.0, 0.0
    # The return to go of every step: after one pass per step of the longest episode the
    # sum over its later steps is exact (steps are in (episode, t) order).
    follows = np.r_[tr.episode[1:] == tr.episode[:-1], False]
    to_go = tr.r.copy()
    for _ in range(int(tr.t.max())):  # over the horizon, not the steps
        to_go = tr.r + gamma * np.where(follows, np.r_[to_go[1:], 0.0], 0.0)
    return float(to_go.min()), float(to_go.max())


@dataclass
class LoggedData:
    """One logged dataset, prepared once and shared by every candidate."""

    tr: Transitions            # the evaluated log, the encoder's states
    features: FeatureMap       # the critic's
    behavior_probs: np.ndarray  # pi_hat_b at each state of tr
    pi_b: np.ndarray           # per step: logged, else estimated, behaviour probability
    estimated_propensities: bool
    value_range: tuple[float, float]
    design: Design | None      # linear critic (or a one-hot critic's delta interval)
    fold: np.ndarray           # cross-fitting fold of each episode
    fold_designs: list         # the other folds' transitions (and designs)
    view: Transitions | None = None   # a refitted one-hot critic: its states
    groups: grouped.TrajectoryGroups | None = None
    replay_log: ReplayLog | None = None
    view_rep: np.ndarray | None = None  # one state of tr in each view state
    # The seed of the episode resamples every candidate's critic (delta method) and IS
    # family share where the log does not repeat: common random numbers, drawn once
    # (tracerl.ope.estimate.bootstrap_sums). The refit path draws per candidate.
    seed: int = 0
    self_check: dict = field(default_factory=dict)  # `behavior_self_check` of the log
    critic_check: dict = field(default_factory=dict)  # `critic_calibration` of the log
    jackknife: list | None = None  # (kept steps, kept episodes, statistics) per group
    gamma: float = 1.0  # the discount of the returns (`logged_return`)

    @classmethod
    def prepare(cls, tr: Transitions, features: FeatureMap, behavior: Policy,
                settings: Settings, seed: int, steps: pa.Table | None = None,
                adapter: ReplayAdapter | None = None,
                replay_log: ReplayLog | None = None) -> LoggedData:
        """The critic's design, the behaviour model's probabilities and support, the
        replay log (`replay_log`, or made of `steps` by `adapter`), and for a one-hot critic
        whose refit is affordable its trajectories. A caller that makes the replay log
        first can drop the step table before the numeric work (the ope stage does)."""
        behavior_probs = np.asarray(behavior.action_probs(tr.rows), dtype=np.float64)
        estimated = not tr.logged_propensities
        pi_b = behavior_probs[tr.s, tr.a] if estimated else tr.behavior_prob
        view = groups = view_rep = None
        if features.one_hot and settings.critic_interval != "delta":
            view = tr.project(features.used)
            candidate = grouped.TrajectoryGroups(view.s, view.a, view.r, view.s_next, view.done,
                                                 pi_b, view.episode, view.t, view.n_states,
                                                 view.n_actions)
            if settings.critic_interval == "refit" or grouped.refit_affordable(candidate):
                groups = candidate
                view_rep = np.zeros(view.n_states, dtype=np.int64)
                view_rep[view.s] = tr.s
            else:
                view = None
        design = None if groups is not None else Design(features, tr)
        k = max(2, int(settings.dr_folds))
        fold = np.random.default_rng([seed, 3]).permutation(tr.n_episodes) % k
        fold_designs = []
        if groups is None:  # the other folds' critics (the refit path draws its own folds)
            for j in range(k):
                other = tr.select_episodes(fold != j)
                fold_designs.append((other, None if features.one_hot
                                     else Design(features, other)))
        log = replay_log if replay_log is not None else None if adapter is None or \
            steps is None else ReplayLog(steps, adapter)
        return cls(tr, features, behavior_probs, np.asarray(pi_b, dtype=np.float64),
                   estimated, value_range(tr, settings.gamma, settings.return_range), design,
                   fold, fold_designs, view, groups, log, view_rep, seed,
                   behavior_self_check(tr, behavior_probs, settings.level),
                   {} if design is None else critic_calibration(
                       tr, features, behavior_probs, settings, seed, design),
                   gamma=settings.gamma)

    @property
    def n(self) -> int:
        return self.tr.n_episodes

    @property
    def logged_return(self) -> float:
        """The logged episodes' mean discounted return (the value every candidate's decision
        is measured against)."""
        tr = self.tr
        if not tr.n_episodes:
            return math.nan
        return float(episode_returns(tr, self.gamma).mean())

    def linear_design(self) -> Design:
        """The linear critic's design of the log (made once, on first use: a candidate
        whose distribution is per step always takes the linear solve)."""
        if self.design is None:
            self.design = Design(self.features, self.tr)
        return self.design

    def jackknife_groups(self) -> list:
        """(steps kept, episodes kept, design statistics) of each delete-a-group jackknife
        replicate of the linear critic: min(JACKKNIFE_GROUPS, episodes) groups of episodes
        (seeded), made once per log and shared by every candidate. Only the statistics are
        kept (`Design.statistics`: O(d x states) each, not a copy of the log per group)."""
        if self.jackknife is None:
            g = min(JACKKNIFE_GROUPS, self.n)
            group = np.random.default_rng([self.seed, 5]).permutation(self.n) % max(g, 1)
            self.jackknife = []
            for j in range(g if g >= 2 else 0):
                keep = group != j
                self.jackknife.append((keep[self.tr.episode], keep,
                                       self.linear_design().of_episodes(keep)))
        return self.jackknife

    def other_folds(self, linear: bool = False) -> list:
        """(the other folds' transitions, their design) per cross-fitting fold; `linear`:
        with a linear design also over one-hot features (the per-step solve)."""
        if not self.fold_designs:
            k = int(self.fold.max()) + 1 if len(self.fold) else 2
            self.fold_designs = [(self.tr.select_episodes(self.fold != j), None)
                                 for j in range(max(k, 2))]
        if linear:
            self.fold_designs = [(other, design if design is not None
                                  else Design(self.features, other))
                                 for other, design in self.fold_designs]
        return self.fold_designs


@dataclass
class Target:
    """What the layers read of one candidate on one log: its distribution per step (None:
    not given) and per distinct state (None: it depends on more than the encoded state),
    its and the behaviour's probability of each logged action."""

    candidate: Candidate
    steps: np.ndarray | None
    per_state: np.ndarray | None
    pi_e: np.ndarray | None
    pi_b: np.ndarray
    behavior_given: bool

    def fit_critic(self, features: FeatureMap, tr: Transitions | None, gamma: float,
                   alpha: float, *, design: Design | None, keep: np.ndarray | None = None,
                   iterations: int | None = None, value_only: bool = False) -> Critic:
        """The candidate's critic on `tr` (the log, or the episodes `keep` selects of its
        steps): over its per-state distribution where it has one (iterated on a one-hot
        table when `iterations` is given, else the linear solve), else the per-step solve
        over `steps`. value_only: only Q, V and the value are read (a refit: no delta
        method; a per-state linear solve from the design's statistics alone, `tr` unread)."""
        if self.per_state is not None:
            table = iterations is not None and features.one_hot
            critic = Critic(features, gamma, alpha, iterations, solver="auto") \
                if iterations is not None else Critic(features, gamma, alpha, solver="lstd")
            if value_only and not table and design is not None:
                return critic.fit_value(design, self.per_state)
            return critic.fit(tr, self.per_state, design=design, delta=not value_only)
        steps = self.steps if keep is None else self.steps[keep]
        return Critic(features, gamma, alpha, solver="lstd").fit(
            tr, design=design, step_target=steps, delta=not value_only)

    @property
    def grouped_ok(self) -> bool:
        """The one-hot refit path (distinct trajectories over states) applies: the
        distribution is per state and the behaviour is the log's own."""
        return self.per_state is not None and not self.behavior_given


def as_candidate(candidate: Policy | Candidate, name: str = "candidate") -> Candidate:
    """A `Candidate` of a plain policy (all three inputs), or the candidate itself."""
    return candidate if isinstance(candidate, Candidate) else Candidate(name, policy=candidate)


def target_of(data: LoggedData, candidate: Policy | Candidate) -> Target:
    """The candidate's inputs on `data`; `behavior_logprob`, when given, overrides the
    logged or estimated behaviour."""
    c = as_candidate(candidate)
    tr = data.tr
    per_state = c.state_distribution(tr)
    steps = per_state[tr.s] if per_state is not None else c.distribution(tr)
    pi_e = c.logged_probs(tr)
    if pi_e is None and steps is not None:
        pi_e = steps[np.arange(tr.n), tr.a]
    given = c.behavior_probs(tr)
    return Target(c, steps, per_state, pi_e, data.pi_b if given is None else given,
                  given is not None)


def support_of(data: LoggedData, target: Target, settings: Settings) -> Support | None:
    """The candidate's `Support` (tracerl.ope.support); None when it gives neither its
    distribution nor its logged-action probabilities."""
    if target.pi_e is None:
        return None
    design = data.design if target.per_state is not None else None
    return measure(data.tr, behavior_probs=data.behavior_probs, pi_b=target.pi_b,
                   pi_e_logged=target.pi_e, steps=target.steps, per_state=target.per_state,
                   features=data.features, min_behavior_prob=settings.min_behavior_prob,
                   max_episode_ratio=settings.max_episode_ratio, min_n_eff=settings.min_n_eff,
                   iterations=settings.critic_iterations, alpha=settings.critic_alpha,
                   design=design, gamma=settings.gamma)


def supports(data: LoggedData, target: np.ndarray, settings: Settings) -> tuple[float, float]:
    """(support, decisions) of a per-state target on the logged data (tracerl.ope.support)."""
    class _Fixed:
        def action_probs(self, states: np.ndarray) -> np.ndarray:
            return target
    sup = support_of(data, target_of(data, _Fixed()), settings)
    return sup.support, sup.decisions


def replay_estimates(data: LoggedData, policy: Policy, settings: Settings, seed: int,
                     support: float, decisions: float,
                     support_details: dict | None = None) -> list[Estimate]:
    """``replay/return`` and ``verifier/success`` from K replays per logged episode (one
    when the target is deterministic).

    The value is the mean over replays that reached the episode's end, given only when
    `replayed_share` >= min_support; the interval is a bootstrap of the bounds where an
    unreplayed replay counts at the range's worst (lower end) and best (upper end) value,
    with one unseen pseudo-episode (rule 1 of tracerl.ope.intervals)."""
    log, n = data.replay_log, data.n
    flags = support_flags(support, min_support=settings.min_support,
                          unsupported=decisions < 1.0 - MASS_TOL)
    sums = replay_sums(log, policy, replays=settings.replay_samples, seed=seed,
                       max_steps=settings.replay_max_steps, verifiers=settings.verifiers,
                       weights=settings.weights, gamma=settings.gamma,
                       success_component=settings.success_component)
    runs, replayed = sums.runs, sums.replayed_share
    n_eff = float(sums.complete.sum() / runs)  # episodes replayed to the end
    flags += interval_flags(n_eff, settings.min_n_eff)
    if replayed < 1.0:
        flags.append(f"{UNREPLAYED_CALLS}: replayed_share={replayed:.3f}")
    top = dict(sorted(sums.unreplayed_calls.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    details = {"replays_per_episode": runs, "unreplayed_calls": top,
               "replayed_share": replayed, "episodes_fully_replayed": n_eff,
               "share_of_decisions_covered": decisions, **(support_details or {})}
    specs = [spec for spec in (("replay", "return", sums.returns, data.value_range),
                               ("verifier", "success", sums.successes, (0.0, 1.0)))
             if spec[0] in settings.layers]
    missing_success = None
    if "verifier" in settings.layers and not sums.success_scored:
        specs = [spec for spec in specs if spec[0] != "verifier"]
        missing_success = Estimate.not_applicable(
            "verifier", "success", f"the verifiers give no {settings.success_component!r} "
            "component (ope.success_component)", support=support, n=n, level=settings.level)
    if not specs or n == 0:
        return [Estimate.not_applicable(layer, name, "no logged episode", support=support,
                                        flags=flags) for layer, name, *_ in specs] + \
            ([missing_success] if missing_success else [])
    missing = runs - sums.complete  # replays of each episode that stopped early
    columns = np.column_stack([c for _, _, total, (worst, best) in specs
                               for c in ((total + missing * worst) / runs,
                                         (total + missing * best) / runs)])
    boot = bootstrap_sums(columns, n_boot=settings.n_boot, seed=seed)
    out = []
    for j, (layer, name, total, span) in enumerate(specs):
        low_sum, high_sum = columns[:, 2 * j].sum(), columns[:, 2 * j + 1].sum()
        value = float(total.sum() / sums.complete.sum()) \
            if replayed >= settings.min_support and sums.complete.sum() > 0 else None
        ci_low = ci_high = None
        if settings.n_boot:
            ci_low, ci_high = prior_interval(boot[:, 2 * j] / n, boot[:, 2 * j + 1] / n, n,
                                             span, settings.level, seed)
        out.append(Estimate(
            layer=layer, estimator=name, value=value, ci_low=ci_low, ci_high=ci_high,
            ci_level=settings.level, support=support, n=n, ess=n_eff, flags=list(flags),
            details={**details, "n_boot": settings.n_boot, "seed": seed,
                     "bounds": [float(low_sum / n), float(high_sum / n)],
                     "interval": "bootstrap of the bounds (unreplayed replays at the worst/"
                                 "best value) with one unseen pseudo-episode",
                     "value_range": list(span),
                     **({} if value is not None else {
                         "no_value": f"replayed_share {replayed:.3f} < min_support "
                                     f"{settings.min_support}: only the bounds"})}))
    return out + ([missing_success] if missing_success else [])


@dataclass
class PendingEvaluation:
    """Every layer's records for one target policy, the critic's interval still to come
    from its bootstrap chunks (`boot`: None when there is none to run)."""

    estimates: list[Estimate]
    critic: Estimate | None = None
    boot: grouped.CriticBootstrap | None = None
    n: float = 0.0
    level: float = 0.95
    seed: int = 0
    widen_args: dict = field(default_factory=dict)

    @property
    def n_chunks(self) -> int:
        return 0 if self.boot is None else len(self.boot.chunks)


def _critic_records(data: LoggedData, tgt: Target, sup: Support | None, settings: Settings,
                    seed: int) -> tuple[list[Estimate], Any, Any]:
    """(critic and importance records, the critic record to finish, its bootstrap plan)."""
    tr, s = data.tr, settings
    # Support per layer (tracerl.ope.support): the critic's from its occupancy ESS, the
    # IS family's from the trajectory weights'.
    support = math.nan if sup is None else sup.support
    critic_support = math.nan if sup is None else sup.of_layer("critic")
    covered = None if sup is None else sup.covered
    base_flags = [] if sup is None else sup.flags(s.min_support)
    critic_flags = [] if sup is None else sup.flags(s.min_support, "critic")
    about_support = {} if sup is None else sup.details()
    widen_args = {"value_range": data.value_range, "min_ess_fraction": s.min_ess_fraction,
                  "level": s.level}
    out: list[Estimate] = []
    pending, boot = None, None
    per_state = tgt.per_state
    wants_dr = bool({"dr", "wdr"} & set(s.is_estimators))
    refit = data.groups is not None and tgt.grouped_ok
    critic = cross_fitted = None
    if "critic" in s.layers and tgt.steps is not None:
        # A distribution that depends on more than the state takes the per-step solve.
        critic = tgt.fit_critic(data.features, tr, s.gamma, s.critic_alpha,
                                design=data.design if per_state is not None
                                else data.linear_design(), iterations=s.critic_iterations)
    if "critic" in s.layers and critic is None:
        out.append(Estimate.not_applicable("critic", "fqe", NEEDS_DISTRIBUTION,
                                           support=critic_support, n=data.n,
                                           flags=critic_flags,
                                           level=s.level, details=about_support))
    elif "critic" in s.layers:
        details = {**about_support, "n_iter": critic.n_iter_,
                   "bellman_residual": critic.bellman_residual_,
                   "backup": "expectation under the target policy"}
        flags = list(critic_flags) + ([] if critic.converged_ else [NOT_CONVERGED])
        if refit:
            target_view = per_state[data.view_rep]
            n_eff = grouped.critic_n_eff(data.groups, target_view, s.critic_iterations)
            pending = Estimate(layer="critic", estimator="fqe", value=critic.value_,
                               ci_low=None, ci_high=None, ci_level=s.level,
                               support=critic_support,
                               n=data.n, ess=n_eff, covered=covered,
                               flags=flags + interval_flags(n_eff, s.min_n_eff),
                               details={**details, "n_boot": s.n_boot, "seed": seed,
                                        "n_eff": n_eff, "value_range": list(data.value_range),
                                        "interval": "refit per resample, one unseen outcome "
                                                    "per cell at the worst/best return"})
            if s.n_boot:
                boot = grouped.critic_bootstrap(data.groups, target_view, data.value_range,
                                                s.gamma, s.critic_iterations, s.n_boot, seed,
                                                s.boot_chunk)
            out.append(pending)
        else:
            linear = critic if critic.contributions_ is not None else tgt.fit_critic(
                data.features, tr, s.gamma, s.critic_alpha, design=data.design)
            # Effective episodes: the dual weights' Kish ESS over steps (as a share of the
            # episodes) and over episodes, whichever is fewer; the same min_n_eff as the
            # refit path's (rule 2).
            n_eff = min(linear.dual_ess_fraction_ * data.n, linear.dual_ess_episodes_)
            if tgt.pi_e is not None:
                # One cross-fitted batch for the bias check and DR (the same numbers).
                cross_fitted = cross_fitted_batch(data, tgt, sup,
                                                  cross_fitted_steps(data, tgt, s), s)
            credibility = _critic_credibility(data, tgt, sup, linear, cross_fitted, s)
            flags += credibility.pop("flags")
            estimate = Estimate.from_contributions(
                "critic", "fqe", linear.contributions_, support=critic_support, ess=n_eff,
                flags=flags + interval_flags(n_eff, s.min_n_eff), level=s.level,
                n_boot=s.n_boot, seed=data.seed, value_range=data.value_range,
                details={**details, "interval": "delta method (per-episode influence)",
                         "max_dual_weight": linear.max_dual_weight_,
                         "dual_ess_fraction": linear.dual_ess_fraction_,
                         "dual_ess_episodes": linear.dual_ess_episodes_,
                         "condition_number": linear.condition_,
                         "features_used": linear.n_features_used_,
                         "credibility": credibility,
                         **({} if per_state is not None else
                            {"target": "per logged step (step_probs)"})})
            estimate.value = critic.value_  # the one critic's value (the solves agree)
            estimate.covered = covered
            jack = credibility.get("jackknife")
            if jack and estimate.ci_low is not None:
                # The delta method's interval, at least as wide as the refit-per-replicate
                # (delete-a-group jackknife) one: the linearisation can be far too narrow.
                estimate.details["delta_interval"] = [estimate.ci_low, estimate.ci_high]
                estimate.ci_low = min(estimate.ci_low, jack["interval"][0])
                estimate.ci_high = max(estimate.ci_high, jack["interval"][1])
            # The bias bounds (held-out calibration, DR correction), where small, on both
            # sides. Rule 3 (tracerl.ope.intervals: can the resamples see the heavy weights?)
            # reads the critic's effective episodes: its dual weights' (the visitation
            # ratio d_e / d_b as the linear fit estimates it) or, where more, the same ratio
            # computed over the encoder's states, the candidate's occupancy ESS on the
            # log's empirical model (the critic's support, tracerl.ope.support).
            occupancy = None if sup is None else sup.occupancy_episodes
            widen(estimate, n_eff=n_eff if occupancy is None else max(n_eff, occupancy),
                  bias=credibility.get("bias_widening", 0.0), **widen_args)
            out.append(estimate)
    if "importance" in s.layers:
        estimated = data.estimated_propensities and not tgt.behavior_given
        flags = list(base_flags) + ([ESTIMATED_PROPENSITIES] if estimated else [])
        # The self-check compares the fitted behaviour model with the logged propensities:
        # the IS family divides by the logged ones, so a failed check is a diagnostic of
        # the encoder (or the model over it), reported beside the estimate, never a flag.
        check = data.self_check
        if tgt.behavior_given and tr.logged_propensities:
            gap = float(np.max(np.abs(np.log(tgt.pi_b) - tr.behavior_logp))) if tr.n else 0.0
            if not gap <= LOGPROB_TOL:
                flags.append(f"{BEHAVIOR_MISMATCH}: the given behaviour log-probs differ from "
                             f"the logged ones by up to {gap:.3g}")
        propensities = ("the candidate's behavior_logprob" if tgt.behavior_given
                        else "estimated" if estimated else "logged")
        if tgt.pi_e is None:
            out += [Estimate.not_applicable("importance", name, NEEDS_LOGGED,
                                            support=support, n=data.n, flags=flags,
                                            level=s.level) for name in s.is_estimators]
            return out, pending, boot
        if refit:
            g = data.groups
            batch, multiplicity = g.batch(per_state[data.view_rep], None, s.gamma), g.counts
            if wants_dr:
                batch, multiplicity = grouped.cross_fitted(g, per_state[data.view_rep],
                                                           s.gamma, s.dr_folds,
                                                           s.critic_iterations, seed)
            # Weights truncated at M = max(max_episode_ratio, n / min_n_eff) (tracerl.ope.
            # support); the interval widens by the truncated mass x the largest |return|.
            batch = truncated(batch, sup)
        else:
            multiplicity = None
            if wants_dr and tgt.steps is not None:
                batch = cross_fitted if cross_fitted is not None else cross_fitted_batch(
                    data, tgt, sup, cross_fitted_steps(data, tgt, s), s)
            else:
                batch = truncated(EpisodeBatch.from_steps(tr.episode, tr.t, tr.r, tgt.pi_b,
                                                          tgt.pi_e, gamma=s.gamma), sup)
        family = estimate_is_family(batch, tuple(s.is_estimators), support=support,
                                    flags=flags, level=s.level,
                                    seed=seed + 1 if refit else data.seed,
                                    n_boot=s.n_boot, min_ess_fraction=s.min_ess_fraction,
                                    min_n_eff=s.min_n_eff, value_range=data.value_range,
                                    multiplicity=multiplicity, covered=covered,
                                    details={**about_support, "propensities": propensities,
                                             "behavior_self_check": check})
        for k, estimate in enumerate(family):
            if estimate.estimator not in ("dr", "wdr"):
                continue
            if tgt.steps is None:
                family[k] = Estimate.not_applicable("importance", estimate.estimator,
                                                    NEEDS_DISTRIBUTION, support=support,
                                                    n=data.n, flags=flags, level=s.level)
            elif estimate.applicable:
                estimate.details["critic"] = (f"cross-fitted: {max(2, s.dr_folds)} folds of "
                                              "episodes, each corrected by a critic fitted "
                                              "on the others")
        out += family
    return out, pending, boot


def cross_fitted_steps(data: LoggedData, tgt: Target, s: Settings
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(q_hat, v_hat) per logged step from critics fitted on the other folds of episodes
    (cross-fitting: a step is never corrected by a critic that saw its episode)."""
    tr = data.tr
    q_hat, v_hat = np.zeros(tr.n), np.zeros(tr.n)
    for j, (other, design) in enumerate(data.other_folds(tgt.per_state is None)):
        mine = data.fold[tr.episode] == j
        fold_critic = tgt.fit_critic(data.features, other, s.gamma, s.critic_alpha,
                                     design=design, keep=~mine,
                                     iterations=s.critic_iterations, value_only=True)
        q_hat[mine] = fold_critic.q_[tr.s[mine], tr.a[mine]]
        v_hat[mine] = (fold_critic.v_[tr.s[mine]] if tgt.per_state is not None
                       else (fold_critic.q_[tr.s[mine]] * tgt.steps[mine]).sum(1))
    return q_hat, v_hat


def truncated(batch: EpisodeBatch, sup: Support | None) -> EpisodeBatch:
    """The batch with its weights truncated at the support's M (tracerl.ope.support)."""
    return batch if sup is None else dataclasses.replace(batch,
                                                         max_weight=sup.max_episode_ratio)


def cross_fitted_batch(data: LoggedData, tgt: Target, sup: Support | None,
                       cross_fitted: tuple[np.ndarray, np.ndarray], s: Settings
                       ) -> EpisodeBatch:
    """The log's episodes with the cross-fitted critics (`cross_fitted_steps`), weights
    truncated at the support's M: DR's and the critic's bias check's one batch."""
    tr = data.tr
    q_hat, v_hat = cross_fitted
    return truncated(EpisodeBatch.from_steps(tr.episode, tr.t, tr.r, tgt.pi_b, tgt.pi_e,
                                             q_hat=q_hat, v_hat=v_hat, gamma=s.gamma), sup)


def critic_bias_check(data: LoggedData, tgt: Target, sup: Support | None, critic: Critic,
                      batch: EpisodeBatch, s: Settings) -> dict[str, Any]:
    """The critic's bias as the cross-fitted DR correction measures it, on `batch`
    (`cross_fitted_batch`, the one DR reads too).

    DR_i = V_fold(s_0) + sum_t gamma^t w_{0:t} (r_t + gamma V_fold(s_{t+1}) - Q_fold(s_t,
    a_t)): the importance-weighted TD errors of a critic that never saw episode i correct
    its value towards the candidate's. So d_i = DR_i - V(s_{0,i}) (V the critic on all the
    log) has mean c, an estimate of the critic's bias with its SE s_c over episodes. The
    correction's weights are truncated like the IS family's: it can be off by at most the
    truncated mass x the width of a TD term (2 x the range's width); that adds to the
    bound. The bias bound is the upper confidence bound on |bias|, |c| + z s_c + that, which
    widens the critic's interval whether or not c is significant (`_critic_credibility`).
    Without support (the weights' ESS below min_n_eff) nothing corroborates the critic:
    `checked` is False and the reason said."""
    tr = data.tr
    reason = not_applicable_reason(batch)
    if reason is not None:
        return {"checked": False, "reason": f"no DR correction: {reason}"}
    report = weight_report(batch)
    if not report["ess"] >= s.min_n_eff or tr.n_episodes < 2:
        return {"checked": False, "reason": f"the correction's weights have ESS "
                f"{report['ess']:.1f} < min_n_eff {s.min_n_eff:g}: nothing corroborates "
                "the critic's value", "ess": report["ess"]}
    d = dr_contributions(batch) - critic.v_steps_[tr.first]
    c = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(len(d)))
    z = normal_quantile(s.level)
    width = data.value_range[1] - data.value_range[0]
    truncation = float(report["truncated_mass"]) * 2.0 * width
    propensities = ("the candidate's behavior_logprob" if tgt.behavior_given else
                    "estimated" if data.estimated_propensities else "logged")
    return {"checked": True, "correction": c, "se": se, "z": z, "ess": report["ess"],
            "propensities": propensities,
            "truncation_bound": truncation, "significant": bool(abs(c) > z * se + truncation),
            "bias_bound": abs(c) + z * se + truncation,
            "max_bias_share": MAX_BIAS_SHARE}


def _critic_credibility(data: LoggedData, tgt: Target, sup: Support | None, linear: Critic,
                        cross_fitted: EpisodeBatch | None, s: Settings) -> dict[str, Any]:
    """The linear critic's checks before it may headline: the conditioning of its system,
    a delete-a-group jackknife (the critic refitted without each group of episodes), its
    value of the behaviour on held-out tasks (`critic_calibration`) and its bias as the
    cross-fitted DR correction measures it (`critic_bias_check`). Returns details, the
    flags of the checks it fails and `bias_widening`, the largest bias bound to widen by."""
    flags: list[str] = []
    out: dict[str, Any] = {"condition_number": linear.condition_}
    alpha = max(s.critic_alpha, 1e-12) * RIDGE_PROBE
    probe = tgt.fit_critic(data.features, data.tr, s.gamma, alpha, design=data.design,
                           value_only=True)
    contributions = np.asarray(linear.contributions_, dtype=np.float64)
    se = float(contributions.std(ddof=1) / np.sqrt(len(contributions))) \
        if len(contributions) > 1 else math.inf
    shift = abs(float(probe.value_) - float(linear.value_))
    out["ridge_probe"] = {"alpha": alpha, "value": float(probe.value_), "shift": shift,
                          "delta_se": se, "max_shift_se": MAX_RIDGE_SHIFT_SE}
    floor = RIDGE_SHIFT_FLOOR * (data.value_range[1] - data.value_range[0])
    if not shift <= max(MAX_RIDGE_SHIFT_SE * se, floor):
        flags.append(f"{ILL_CONDITIONED}: the value moves by {shift:.3g} "
                     f"({shift / se if se > 0 else math.inf:.2g} SE) when the ridge is "
                     f"{RIDGE_PROBE:g}x larger (cond(A)={linear.condition_:.2g})")
    groups = data.jackknife_groups()
    if groups:
        values = []
        for keep, episodes, statistics in groups:  # over the few groups
            # A per-step target needs the kept steps themselves (made again, not kept).
            other, design = (None, statistics) if tgt.per_state is not None else (
                data.tr.select_episodes(episodes), None)
            values.append(tgt.fit_critic(data.features, other, s.gamma, s.critic_alpha,
                                         design=design, keep=keep, value_only=True).value_)
        values = np.asarray(values)
        g = len(values)
        sd = float(np.sqrt((g - 1) / g * np.sum((values - values.mean()) ** 2)))
        z = normal_quantile(s.level)
        out["jackknife"] = {"groups": g, "sd": sd, "z": z,
                            "replicates": [float(values.min()), float(values.max())],
                            "interval": [linear.value_ - z * sd, linear.value_ + z * sd]}
    check = data.critic_check
    out["behavior_heldout"] = check
    width = data.value_range[1] - data.value_range[0]
    # The decision rule (README, "Off-policy evaluation, honestly"): a bound on the
    # critic's bias widens its interval on both sides; it blocks the estimate only when it
    # could change the decision, i.e. when it exceeds both MAX_BIAS_SHARE of the range and
    # the critic's gap to the logged value (the widened interval would reach across it).
    gap = abs(float(linear.value_) - data.logged_return)
    tolerated = max(MAX_BIAS_SHARE * width, gap)
    out["decision_gap"] = gap
    bias = 0.0
    if check.get("checked") and not check.get("passed"):
        calibration = abs(float(check["mean_difference"]))
        if calibration <= tolerated:
            bias = calibration
        else:
            flags.append(f"{MISCALIBRATED}: its value of the behaviour on held-out "
                         f"{check.get('held_out', 'tasks')} {check['heldout_value']:.3f} vs "
                         f"logged {check['heldout_logged']:.3f} (gap {calibration:.3f} over "
                         f"both {MAX_BIAS_SHARE:g} of the value range and the decision gap "
                         f"{gap:.3f})")
    correction = ({"checked": False, "reason": NEEDS_LOGGED} if cross_fitted is None
                  else critic_bias_check(data, tgt, sup, linear, cross_fitted, s))
    out["dr_correction"] = correction
    # The bound applies whether or not the correction is significant: a test that fails to
    # reject "no bias" does not make the bias 0, and a critic whose interval is narrower than
    # what the correction can vouch for claims more than the data corroborate (measured: the
    # support desk's scored-table candidates, benchmarks/support_desk_candidates.py).
    if correction.get("checked"):
        bound = correction["bias_bound"]
        if bound <= tolerated:
            bias = max(bias, bound)
        else:
            name = CRITIC_BIASED if correction["significant"] else UNCORROBORATED
            flags.append(f"{name}: the cross-fitted DR correction is "
                         f"{correction['correction']:+.3f} (SE {correction['se']:.3f}); its "
                         f"bias bound {bound:.3f} exceeds both {MAX_BIAS_SHARE:g} of the "
                         f"value range and the gap {gap:.3f} to the logged value: it could "
                         "change the decision")
    out["bias_widening"] = bias
    out["flags"] = flags
    return out


def start_evaluation(data: LoggedData, candidate: Policy | Candidate, settings: Settings,
                     seed: int) -> PendingEvaluation:
    """Every requested layer for one candidate (a `Candidate`, or a plain policy) except a
    refitted critic's bootstrap, which is planned in chunks of `settings.boot_chunk`
    replicates. A layer whose input the candidate does not give says so."""
    tgt = target_of(data, candidate)
    sup = support_of(data, tgt, settings)
    support = math.nan if sup is None else sup.support
    out: list[Estimate] = []
    if data.replay_log is not None and {"replay", "verifier"} & set(settings.layers):
        if tgt.candidate.policy is None:
            out += not_applicable(NEEDS_POLICY, settings.layers, data.n, settings.level,
                                  support)
        else:
            out += replay_estimates(data, tgt.candidate.policy, settings, seed, support,
                                    sup.decisions, sup.details())
    critic = boot = None
    if {"critic", "importance"} & set(settings.layers):
        more, critic, boot = _critic_records(data, tgt, sup, settings, seed + 100)
        out += more
    return PendingEvaluation(out, critic, boot, data.n, settings.level, seed + 100, {
        "value_range": data.value_range, "min_ess_fraction": settings.min_ess_fraction,
        "level": settings.level})


def boot_chunk_values(data: LoggedData, pending: PendingEvaluation, index: int) -> np.ndarray:
    """The critic's refits on chunk `index` of a pending evaluation."""
    if pending.boot is None:
        raise ValueError("this evaluation has no critic bootstrap")
    return grouped.critic_boot_values(data.groups, pending.boot, index)


def finish_evaluation(pending: PendingEvaluation,
                      values: Sequence[np.ndarray]) -> list[Estimate]:
    """The records, the critic's interval from its chunks' values (in chunk order); layers
    whose value intervals do not overlap are flagged as disagreeing."""
    if pending.boot is not None:
        pending.critic.ci_low, pending.critic.ci_high = grouped.critic_interval(
            pending.boot, values, pending.n, pending.level, pending.seed)
        widen(pending.critic, n_eff=None, **pending.widen_args)
    elif values:
        raise ValueError("chunk values given for an evaluation with no critic bootstrap")
    out = pending.estimates
    flag_disagreements([e for e in out if e.applicable and e.layer != "verifier"])
    _corroborate(out)
    return out


def _corroborate(estimates: list[Estimate]) -> None:
    """The critic agrees with the IS family where both apply: a critic whose interval
    misses that of an importance estimate carrying no blocking flag is flagged
    UNCORROBORATED (never the pick); the checks it passed are listed in its details."""
    from tracerl.ope.select import blocking_flags

    for critic in (e for e in estimates if e.layer == "critic" and e.applicable):
        trusted = [e for e in estimates if e.layer == "importance" and e.applicable
                   and not blocking_flags(e.flags)]
        against = [f"importance/{e.estimator}" for e in trusted
                   if f"{DISAGREES_WITH}:importance/{e.estimator}" in critic.flags]
        critic.details["corroborated_by"] = [f"importance/{e.estimator}" for e in trusted
                                             if f"importance/{e.estimator}" not in against]
        if against:
            critic.add_flag(f"{UNCORROBORATED}: disagrees with {', '.join(against)}")


def evaluate_policy(data: LoggedData, policy: Policy | Candidate, settings: Settings,
                    seed: int) -> list[Estimate]:
    """Every requested layer for one candidate (the same records for any chunking)."""
    pending = start_evaluation(data, policy, settings, seed)
    return finish_evaluation(pending, [boot_chunk_values(data, pending, i)
                                       for i in range(pending.n_chunks)])


def evaluate_candidates(data: LoggedData, candidates: Mapping[str, Policy | Candidate],
                        settings: Settings, seed: int) -> dict[str, list[Estimate]]:
    """Every candidate's records (a `Candidate` or a plain policy each); candidate k (in
    order) evaluated with seed + 1000 k."""
    return {name: evaluate_policy(data, as_candidate(c, name), settings, seed + 1000 * k)
            for k, (name, c) in enumerate(candidates.items())}


def logged_value(tr: Transitions, *, gamma: float, seed: int, n_boot: int,
                 level: float) -> Estimate:
    """The logged behaviour's own value: mean over episodes of sum_t gamma^t r_t, with a
    percentile bootstrap interval (support 1: it is the data itself)."""
    returns = episode_returns(tr, gamma)
    spec = ContributionSpec("logged", "on_policy", returns, support=1.0,
                            details={"episodes": tr.n_episodes, "steps": tr.n})
    return estimates_from_contributions([spec], seed=seed, level=level, n_boot=n_boot)[0]


def task_returns(tr: Transitions, gamma: float) -> dict[str, float]:
    """Each task's mean discounted return over its logged episodes (the agents' ranking
    pairs agents on the tasks both ran); {} when the log names no task."""
    if not tr.n_episodes or not len(tr.tasks):
        return {}
    returns = episode_returns(tr, gamma)
    task_of = tr.task[tr.first]
    total = np.bincount(task_of, weights=returns, minlength=len(tr.tasks))
    count = np.bincount(task_of, minlength=len(tr.tasks))
    return {str(tr.tasks[k]): float(total[k] / count[k]) for k in np.flatnonzero(count)
            if str(tr.tasks[k])}


def logged_model(steps: pa.Table) -> str | None:
    """The model the logs name (metadata.behavior_policy; several: joined by " + ")."""
    if "metadata" not in steps.column_names:
        return None
    import pyarrow.compute as pc

    meta = steps.column("metadata")
    if "behavior_policy" not in {f.name for f in meta.type}:
        return None
    names = pc.unique(pc.drop_null(pc.struct_field(meta, "behavior_policy"))).to_pylist()
    return " + ".join(sorted(str(n) for n in names if n)) or None


def not_applicable(reason: str, layers: Sequence[str], n: int, level: float,
                   support: float = math.nan) -> list[Estimate]:
    """Replay and verifier records that say why they do not apply (real logs: no
    simulator answers a call the log did not record)."""
    names = {"replay": "return", "verifier": "success"}
    return [Estimate.not_applicable(layer, names[layer], reason, support=support, n=n,
                                    level=level) for layer in ("replay", "verifier")
            if layer in layers]


__all__ = ["IS_ESTIMATORS", "LAYERS", "NOT_APPLICABLE", "LoggedData",
           "PendingEvaluation", "Settings", "boot_chunk_values", "evaluate_candidates",
           "evaluate_policy", "finish_evaluation", "logged_model", "logged_value",
           "not_applicable", "task_returns",
           "start_evaluation", "supports", "value_range"]
