"""Layered OPE that needs no repetition: LSTD-Q critic and the IS family over flat
transitions, for function-approximation policies on logs where no two episodes are alike.

Per candidate (all arrays one entry per logged step, or (episodes x max length) padded for
the IS family; nothing is episodes x transitions):

- support: the behaviour model pi_hat_b (estimated from the log, e.g. `LogisticBC`) says
  which actions the data covers at a state: a with pi_hat_b(a|s) >= min_behavior_prob.
  Decision support at s is sum_a pi_e(a|s) [a covered]; an episode's support is the product
  over its logged states (the target, placed on the logged path, never leaves the covered
  actions); `support` is its mean over episodes, the decision-level mean is in details.
- critic: `LinearFQE` (LSTD-Q, expectation under the target), interval by the delta method.
- importance family: IS, PDIS, WIS, PDWIS, DR, WDR from `tracerl.ope.importance`, with the
  logged behaviour probabilities, or pi_hat_b(a_t|s_t) when none were logged (flag
  `estimated_propensities`). Self-normalised estimators with per-step normalisers (PDWIS,
  WDR) enter the bootstrap linearised: c_i = sum_k V_k + (N_ik - V_k D_ik) / mean_j D_jk,
  whose mean is exactly their value; IS, PDIS, DR are plain means and WIS its exact ratio.

Intervals: one percentile bootstrap over episodes of these per-episode contributions, shared
by all estimators of all candidates (`bootstrap_estimates`): O(n_boot x episodes x
columns), no refit. Where an interval cannot know its uncertainty it is widened by a stated rule and
flagged `interval_unreliable`:
- ESS of the trajectory weights below min_ess_fraction * n (IS family), or the critic's
  answer resting on few steps (Kish ESS of its dual weights n g.phi_t, the estimated
  visitation ratios, below min_dual_ess_fraction of the steps): the resamples never see
  the rare heavy weights, so the interval is widened to at least the Hoeffding half-width
  with the ESS as sample size, range * sqrt(ln(2 / (1 - level)) / (2 ESS)) (for the
  critic ESS = dual ESS fraction x episodes);
- support < min_support (every layer): the value on uncovered decisions is unknown, so the
  interval is widened by (1 - support) * range on both sides (the most the uncovered mass
  can move a value bounded in the range);
- a zero-width interval: widened by the Hoeffding half-width with n.
`range` is the width of the return's range: given by the fixture, else the range of the
logged discounted returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tracerl.hashed_features import HashedFeaturizer
from tracerl.ope import importance as imp
from tracerl.ope.episodes import EpisodeBatch
from tracerl.ope.estimate import (
    BOOT_CHUNK_BYTES,
    LOW_ESS,
    LOW_SUPPORT,
    ZERO_WEIGHT,
    ContributionSpec,
    Estimate,
    flag_disagreements,
    support_flags,
)
from tracerl.ope.fa_data import FATransitions
from tracerl.ope.linear_fqe import CriticDesign, LinearFQE

ESTIMATED_PROPENSITIES = "estimated_propensities"
INTERVAL_UNRELIABLE = "interval_unreliable"
CRITIC = ("critic", "lstdq")
IS_FAMILY = ("is", "pdis", "wis", "pdwis", "dr", "wdr")


@dataclass(frozen=True)
class FAOPEConfig:
    """Knobs of the FA OPE layers (the `ope` block of a fixture's params)."""

    gamma: float = 0.99
    n_boot: int = 500
    level: float = 0.95
    seed: int = 0
    min_support: float = 0.95
    min_behavior_prob: float = 0.01
    min_ess_fraction: float = 0.01
    min_dual_ess_fraction: float = 0.05  # critic: share of steps its answer rests on
    critic_alpha: float = 1e-6
    value_range: tuple[float, float] | None = None


def episode_support(tr: FATransitions, target: np.ndarray, covered: np.ndarray) -> tuple:
    """(episode support mean, decision support mean, per-step covered mass)."""
    mass = np.einsum("ij,ij->i", target, covered)
    n = tr.n_episodes
    with np.errstate(divide="ignore"):
        log_mass = np.log(np.clip(mass, 0.0, 1.0))
    per_episode = np.exp(np.bincount(tr.episode, weights=log_mass, minlength=n))
    return float(per_episode.mean()), float(mass.mean()), mass


@dataclass
class _Pending:
    """One candidate's specs before the shared bootstrap."""

    specs: list[ContributionSpec]
    not_applicable: list[Estimate]
    support: float
    ess: float | None
    width: float


def _policy_specs(tr: FATransitions, target: np.ndarray, *, design: CriticDesign,
                  behavior_probs: np.ndarray, config: FAOPEConfig,
                  logged_propensities: bool | None, name: str = "") -> _Pending:
    cfg = config
    n = tr.n_episodes
    rows = np.arange(tr.n_steps)
    covered = (behavior_probs >= cfg.min_behavior_prob).astype(np.float64)
    support, decision_support, _ = episode_support(tr, target, covered)
    if logged_propensities is None:
        logged_propensities = bool(np.all(np.isfinite(tr.behavior_logp)))
    pi_b = (np.exp(tr.behavior_logp) if logged_propensities
            else behavior_probs[rows, tr.actions])
    pi_e = target[rows, tr.actions]

    critic = LinearFQE(design.featurizer, gamma=cfg.gamma, alpha=cfg.critic_alpha).fit(
        tr, target, design)
    batch = EpisodeBatch.from_steps(tr.episode, tr.t, tr.rewards, pi_b, pi_e,
                                    q_hat=critic.q_hat_, v_hat=critic.v_hat_, gamma=cfg.gamma)
    returns = imp.discounted_returns(batch)
    lo_r, hi_r = cfg.value_range or (float(returns.min()), float(returns.max()))
    width = max(hi_r - lo_r, 1e-12)

    base_flags = support_flags(support, min_support=cfg.min_support)
    base_details = {"candidate": name, "decision_support": decision_support,
                    "episode_support": support, "min_behavior_prob": cfg.min_behavior_prob,
                    "value_range": [lo_r, hi_r]}
    critic_flags = list(base_flags)
    if critic.dual_ess_fraction_ < cfg.min_dual_ess_fraction:
        critic_flags.append(LOW_ESS)
    specs = [ContributionSpec(
        *CRITIC, critic.contributions_, support=support, flags=tuple(critic_flags),
        ess=critic.dual_ess_fraction_ * n,
        details={**base_details, "interval": "delta method (per-episode influence)",
                 "max_dual_weight": critic.max_dual_weight_,
                 "dual_ess_fraction": critic.dual_ess_fraction_,
                 "features_used": critic.n_features_used_})]

    is_flags = list(base_flags)
    if not logged_propensities:
        is_flags.append(ESTIMATED_PROPENSITIES)
    reason = imp.not_applicable_reason(batch)
    w = imp.trajectory_weights(batch)
    ess = imp.effective_sample_size(w) if reason is None else None
    if ess is not None and ess < cfg.min_ess_fraction * n:
        is_flags.append(LOW_ESS)
    is_details = {**base_details, "propensities": "logged" if logged_propensities
                  else "estimated", "ess_fraction": None if ess is None else ess / n,
                  "max_trajectory_weight": float(np.max(w)) if reason is None else None,
                  "convention": imp.CONVENTION}
    not_applicable = []
    if reason is None:
        terms = is_family_contributions(batch)
        for est in IS_FAMILY:  # over estimators, not episodes
            num, den = terms[est]
            specs.append(ContributionSpec(
                "importance", est, num, support=support, ratio_denominators=den, ess=ess,
                flags=tuple(is_flags),
                details={**is_details, "interval": "bootstrap of linearised contributions"
                         if est in ("pdwis", "wdr") else "bootstrap"}))
    else:
        not_applicable = [Estimate.not_applicable("importance", est, reason, support=support,
                                                  n=n, flags=is_flags, level=cfg.level)
                          for est in IS_FAMILY]
    return _Pending(specs, not_applicable, support, ess, width)


def evaluate_candidates(
    tr: FATransitions,
    candidates: Mapping[str, object],
    *,
    critic_featurizer: HashedFeaturizer,
    behavior_model: object,
    config: FAOPEConfig,
    logged_propensities: bool | None = None,
) -> dict[str, list[Estimate]]:
    """Every layer's Estimates for each candidate (objects with action_probs(states)).

    The critic's dataset-level design and the behaviour model's probabilities are computed
    once; all candidates' intervals come from ONE bootstrap of per-episode contributions
    (common resamples: differences between candidates are not blurred by resampling).
    """
    cfg = config
    design = CriticDesign(critic_featurizer, tr)

    def probs(policy: object) -> np.ndarray:  # once per distinct state, gathered per step
        out = np.asarray(policy.action_probs(design.distinct_states), dtype=np.float64)
        return out[design.state_id]

    behavior_probs = probs(behavior_model)
    pending = {name: _policy_specs(tr, probs(pol),
                                   design=design, behavior_probs=behavior_probs, config=cfg,
                                   logged_propensities=logged_propensities, name=name)
               for name, pol in candidates.items()}
    all_specs = [spec for p in pending.values() for spec in p.specs]
    made = iter(bootstrap_estimates(all_specs, seed=cfg.seed, level=cfg.level,
                                    n_boot=cfg.n_boot))
    out = {}
    for name, p in pending.items():  # over candidates
        records = [next(made) for _ in p.specs]
        for e in records:
            _widen(e, support=p.support, ess=e.ess,
                   n=tr.n_episodes, width=p.width, cfg=cfg)
        records += p.not_applicable
        flag_disagreements([e for e in records if e.applicable])
        out[name] = records
    return out


def evaluate_policy(tr: FATransitions, target: np.ndarray, *,
                    critic_featurizer: HashedFeaturizer, behavior_probs: np.ndarray,
                    config: FAOPEConfig, logged_propensities: bool | None = None
                    ) -> list[Estimate]:
    """Every layer's Estimate for one target given as (N, n_actions) pi_e(.|s_t)."""

    class _Fixed:
        def action_probs(self, states: np.ndarray) -> np.ndarray:
            return target

    class _Behavior:
        def action_probs(self, states: np.ndarray) -> np.ndarray:
            return behavior_probs

    return evaluate_candidates(tr, {"target": _Fixed()}, critic_featurizer=critic_featurizer,
                               behavior_model=_Behavior(), config=config,
                               logged_propensities=logged_propensities)["target"]


def is_family_contributions(batch: EpisodeBatch) -> dict[str, tuple]:
    """Per-episode terms of IS, PDIS, WIS, PDWIS, DR, WDR from ONE pass over the weights
    (the formulas and the absorbing convention of `tracerl.ope.importance`): name ->
    (numerators, denominators or None); PDWIS and WDR come linearised to one column."""
    rho = np.divide(batch.pi_e, batch.pi_b, out=np.ones_like(batch.pi_e), where=batch.mask)
    w = np.cumprod(rho, axis=1)  # w_{0:t}
    disc = batch.discounts
    r = batch.reward
    g = r @ disc
    w_last = w[:, -1]
    out = {"is": (w_last * g, None), "pdis": ((w * r) @ disc, None), "wis": (w_last * g, w_last),
           "pdwis": (_linearise(disc * w * r, w), None)}
    if batch.q_hat is not None:
        q, v = batch.q_hat, batch.v_hat
        w_prev = np.ones_like(w)
        w_prev[:, 1:] = w[:, :-1]
        out["dr"] = ((w * (r - q) + w_prev * v) @ disc, None)
        v_next = np.zeros_like(v)
        v_next[:, :-1] = v[:, 1:]
        num = np.empty((batch.n_episodes, batch.horizon + 1))
        num[:, 0] = v[:, 0]
        num[:, 1:] = w * (disc * (r - q) + batch.gamma * disc * v_next)
        den = np.empty_like(num)
        den[:, 0] = 1.0
        den[:, 1:] = w
        out["wdr"] = (_linearise(num, den), None)
    return out


def bootstrap_estimates(specs: list[ContributionSpec], *, seed: int, level: float = 0.95,
                        n_boot: int = 500) -> list[Estimate]:
    """Estimates from per-episode contributions (1-D, a mean, or with 1-D denominators, a
    ratio of sums), with percentile intervals from ONE set of n_boot resamples of the
    episodes shared by every spec (common random numbers).

    The same resampling as `tracerl.ope.estimate.bootstrap_sums` (n indices drawn uniformly
    per resample, taken BOOT_CHUNK_BYTES at a time: memory O(n x columns + chunk)) without
    its search for repeated rows, which costs a sort of the whole contribution matrix and
    finds nothing when episodes never repeat. Cost O(n_boot x n x columns).
    """
    if not specs:
        return []
    cols, refs = [], []
    for spec in specs:
        num = np.asarray(spec.contributions, dtype=np.float64)
        den = spec.ratio_denominators
        if num.ndim != 1 or (den is not None and np.shape(den) != num.shape):
            raise ValueError(f"{spec.estimator}: contributions must be 1-D per episode")
        refs.append((len(cols), None if den is None else len(cols) + 1))
        cols.append(num)
        if den is not None:
            cols.append(np.asarray(den, dtype=np.float64))
    x = np.column_stack(cols)
    if not np.all(np.isfinite(x)):
        raise ValueError("contributions have NaN or infinite entries")
    n = x.shape[0]
    full = x.sum(axis=0)
    sums = np.empty((n_boot, x.shape[1]))
    rng = np.random.default_rng(seed)
    chunk = max(1, BOOT_CHUNK_BYTES // (8 * n))
    for start in range(0, n_boot, chunk):  # chunks of resamples, not episodes
        m = min(chunk, n_boot - start)
        idx = rng.integers(0, n, size=(m, n))
        idx += np.arange(m)[:, None] * n
        counts = np.bincount(idx.ravel(), minlength=m * n).reshape(m, n)
        sums[start:start + m] = counts.astype(np.float64) @ x
    lo_q, hi_q = (1.0 - level) / 2.0, (1.0 + level) / 2.0
    out = []
    for spec, (j, k) in zip(specs, refs, strict=True):
        flags = list(spec.flags)
        if k is None:
            value, boot = full[j] / n, sums[:, j] / n
        else:
            if full[k] == 0:
                flags.append(ZERO_WEIGHT)
            value = full[j] / full[k] if full[k] != 0 else 0.0
            boot = np.divide(sums[:, j], sums[:, k], out=np.zeros(n_boot), where=sums[:, k] != 0)
        lo, hi = (float(q) for q in np.quantile(boot, [lo_q, hi_q])) if n_boot else (None,
                                                                                    None)
        out.append(Estimate(layer=spec.layer, estimator=spec.estimator, value=float(value),
                            ci_low=lo, ci_high=hi, ci_level=level, support=float(spec.support),
                            n=n, ess=None if spec.ess is None else float(spec.ess),
                            flags=flags, details={"n_boot": n_boot, "seed": seed,
                                                  **(spec.details or {})}))
    return out


def _linearise(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Per-episode c_i = sum_k V_k + (N_ik - V_k D_ik) / mean_j D_jk, V_k = sum N / sum D."""
    num = num.reshape(len(num), -1)
    den = den.reshape(len(den), -1)
    d_bar = den.mean(axis=0)
    ok = d_bar != 0
    v = np.divide(num.sum(axis=0), den.sum(axis=0), out=np.zeros(num.shape[1]),
                  where=den.sum(axis=0) != 0)
    infl = np.divide(num - v * den, d_bar, out=np.zeros_like(num), where=ok)
    return v.sum() + infl.sum(axis=1)


def _hoeffding(width: float, n_eff: float, level: float) -> float:
    return width * math.sqrt(math.log(2.0 / (1.0 - level)) / (2.0 * max(n_eff, 1.0)))


def _widen(e: Estimate, *, support: float, ess: float | None, n: int, width: float,
           cfg: FAOPEConfig) -> None:
    """Apply the documented widening rules (module docstring) in place."""
    if e.ci_low is None or e.ci_high is None:
        return
    rules = []
    lo, hi = e.ci_low, e.ci_high
    if ess is not None and LOW_ESS in e.flags:
        h = _hoeffding(width, ess, cfg.level)
        lo, hi = min(lo, e.value - h), max(hi, e.value + h)
        rules.append("hoeffding_ess")
    if hi - lo <= 1e-9 * max(1.0, abs(e.value)):  # zero width up to rounding
        h = _hoeffding(width, n, cfg.level)
        lo, hi = e.value - h, e.value + h
        rules.append("hoeffding_n")
    if support < 1.0:
        lo, hi = lo - (1.0 - support) * width, hi + (1.0 - support) * width
        rules.append("unsupported_mass")
    if rules:
        e.details["interval_widened"] = rules
        e.details["interval_unwidened"] = [e.ci_low, e.ci_high]
        e.ci_low, e.ci_high = lo, hi
    if LOW_SUPPORT in e.flags or "hoeffding_ess" in rules or "hoeffding_n" in rules:
        e.add_flag(INTERVAL_UNRELIABLE)


def select(estimates: Mapping[str, list[Estimate]], *, layer: str = "critic",
           estimator: str = "lstdq") -> str | None:
    """The candidate with the highest headline value among those whose headline is neither
    LOW_SUPPORT nor INTERVAL_UNRELIABLE (an unsupported candidate, or one the estimator
    cannot judge, is never selected); None when none qualifies."""
    best, best_value = None, -math.inf
    for name, records in estimates.items():
        for e in records:
            if (e.layer, e.estimator) == (layer, estimator) and e.applicable \
                    and LOW_SUPPORT not in e.flags and INTERVAL_UNRELIABLE not in e.flags \
                    and e.value > best_value:
                best, best_value = name, e.value
    return best
