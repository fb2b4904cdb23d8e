"""The interval rules: every OPE interval is a percentile bootstrap, then these rules.

1. Prior atom (every estimate with a known range). A bootstrap only resamples what was
   seen: a branch absent from the sample never appears in a resample, and a sample with no
   variance gives a zero-width interval. So each replicate is mixed with one unseen
   pseudo-episode at the range's end, V_b' = (1 - e_b) V_b + e_b * end, e_b ~ Beta(1, n)
   (the share of one Dirichlet(1) prior atom among n + 1): the lower end of the interval
   puts it at the worst return, the upper end at the best. For a mean this is Gaffke's
   (2005) bound for bounded variables (Learned-Miller & Thomas 2019), the bootstrap standing
   in for the Dirichlet weights of the data. A critic refitted per resample gets one such
   atom per logged (state, action) cell instead (tracerl.ope.grouped).
2. Few effective observations. Where the interval rests on n_eff < min_n_eff effective
   observations (an outcome of probability 10% could still be unseen at 30), the record
   says so: ``interval_unreliable: n_eff=...`` (never ranked first).
3. Low effective sample size (weighted estimators: IS, a critic's dual weights). Where
   n_eff < min_ess_fraction x n the resamples never see the rare heavy weights: the
   interval is widened to at least the Hoeffding half-width with n_eff as the sample size,
   width x sqrt(ln(2 / (1 - level)) / (2 n_eff)), and the record flagged ``low_ess`` and
   ``interval_unreliable`` (the interval leans on that bound, not on the data).
4. Unsupported mass. Where the share of the target's play on covered decisions is below 1
   (`covered`, tracerl.ope.support) the value on uncovered decisions is unknown: the
   interval is widened by (1 - covered) x width on both sides (the most the uncovered
   mass can move a value bounded in the range). (Replay has its own: an unreplayed replay
   counts at the range's ends.) IS weights truncated at M (tracerl.ope.importance) widen
   by the truncated mass x the largest |return|, the most that truncation can move them.
5. The value's range. Every interval is kept inside the range, and an estimate outside it
   (a critic extrapolating past any return the task can give, an unnormalised IS sum) is
   projected onto it (closer to the truth, which lies inside), the raw value kept in
   details and the record flagged ``out_of_range`` (never ranked first).

`width` is that of the value's range: the worst and best return (given by params, else
the extremes the logs show, `value_range`), [0, 1] for a success rate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

INTERVAL_UNRELIABLE = "interval_unreliable"
LOW_ESS = "low_ess"
OUT_OF_RANGE = "out_of_range"


def normal_quantile(level: float) -> float:
    """z of a two-sided normal interval at `level` (1.96 at 0.95): the one definition the
    delta, jackknife, calibration, self-check and credit intervals use."""
    from scipy.special import erfinv

    return float(np.sqrt(2.0) * erfinv(level))


def percentile(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = (1.0 - level) / 2.0, (1.0 + level) / 2.0
    return float(np.quantile(values, lo)), float(np.quantile(values, hi))


def prior_interval(values_low: np.ndarray, values_high: np.ndarray, n: float,
                   value_range: tuple[float, float] | None, level: float,
                   seed: int) -> tuple[float, float]:
    """Rule 1: percentile interval of bootstrap replicates, each mixed with one unseen
    pseudo-episode at the range's worst (lower end) or best (upper end) value with share
    e ~ Beta(1, n). Without a range: the plain percentiles."""
    if value_range is not None and len(values_low):
        share = np.random.default_rng([seed, 1]).beta(1.0, max(float(n), 1.0),
                                                      size=len(values_low))
        values_low = (1.0 - share) * values_low + share * value_range[0]
        values_high = (1.0 - share) * values_high + share * value_range[1]
    return percentile(values_low, level)[0], percentile(values_high, level)[1]


def interval_flags(n_eff: float, min_n_eff: float) -> list[str]:
    """Rule 2: INTERVAL_UNRELIABLE (with the n_eff) below min_n_eff."""
    return [f"{INTERVAL_UNRELIABLE}: n_eff={n_eff:.1f}"] if n_eff < min_n_eff else []


def hoeffding(width: float, n_eff: float, level: float) -> float:
    return width * math.sqrt(math.log(2.0 / (1.0 - level)) / (2.0 * max(n_eff, 1.0)))


def widen(estimate: Any, *, n_eff: float | None, value_range: tuple[float, float],
          min_ess_fraction: float, level: float, term_width: float | None = None,
          bias: float = 0.0) -> None:
    """Rules 3 to 5 on an Estimate, in place (the unwidened interval kept in details).
    `term_width`: for an unnormalised weighted mean (IS, PDIS, DR), the width of the
    interval its per-episode terms lie in (weights up to the largest, truncated); rule 3's
    bound is then also at least Hoeffding's over the n episodes with that width, which
    holds for those terms whatever their weights. `bias`: a bound on the estimate's known
    bias (the IS family's weight truncation: the truncated mass x the largest |return|; the
    critic's held-out calibration gap or the upper bound of its cross-fitted DR correction,
    tracerl.ope.evaluate.critic_bias_check), added on both sides."""
    if estimate.ci_low is None or estimate.ci_high is None or estimate.value is None:
        return
    width = max(value_range[1] - value_range[0], 1e-12)
    lo, hi, rules = estimate.ci_low, estimate.ci_high, []
    if n_eff is not None and n_eff < min_ess_fraction * estimate.n:
        h = hoeffding(width, n_eff, level)
        if term_width is not None:
            h = max(h, hoeffding(term_width, estimate.n, level))
        lo, hi = min(lo, estimate.value - h), max(hi, estimate.value + h)
        rules.append("hoeffding_ess")
        estimate.add_flag(LOW_ESS)
        if not any(f.startswith(INTERVAL_UNRELIABLE) for f in estimate.flags):
            estimate.add_flag(f"{INTERVAL_UNRELIABLE}: n_eff={n_eff:.1f}")
    covered = estimate.support if estimate.covered is None else estimate.covered
    if covered < 1.0:
        lo, hi = lo - (1.0 - covered) * width, hi + (1.0 - covered) * width
        rules.append("unsupported_mass")
    if bias > 0.0:
        lo, hi = lo - bias, hi + bias
        rules.append("bias_bound")
    if rules:
        estimate.details["interval_widened"] = rules
        estimate.details["interval_unwidened"] = [estimate.ci_low, estimate.ci_high]
    low, high = value_range
    if not low <= estimate.value <= high:
        estimate.details["unclipped_value"] = estimate.value
        estimate.value = min(max(estimate.value, low), high)
        estimate.add_flag(f"{OUT_OF_RANGE}: outside [{low:g}, {high:g}]")
    estimate.ci_low = min(max(lo, low), estimate.value)
    estimate.ci_high = max(min(hi, high), estimate.value)
