"""The importance-sampling family (IS, PDIS, WIS, PDWIS, DR, WDR) over logged episodes as
padded arrays (`EpisodeBatch`), as per-episode contributions.

Notation: rho_t = pi_e(a_t|s_t) / pi_b(a_t|s_t), w_{0:t} = prod_{k<=t} rho_k, w_{0:-1} = 1.

Convention for episodes of unequal length: an episode that has ended sits in an absorbing
state where both policies take the same action (rho = 1) with reward 0 and q_hat = v_hat = 0.
So w_{0:t} past the end stays at the episode's full-trajectory weight. For the plain
estimators (IS, PDIS, DR) this changes nothing (every term past the end is 0); for the
per-decision self-normalised ones (PDWIS, WDR) it keeps an ended episode's weight in the
normaliser at every later t, which is what makes them consistent: sum_i w_{i,0:t} / n
estimates 1 for every t, whereas a normaliser over live episodes only estimates
P_e(episode still running at t) and would inflate late rewards.

Each contribution function returns numerators (and denominators for self-normalised
estimators) in the form `Estimate.from_contributions` takes; `estimate_is_family` makes the
records, all bootstrapped on the same resamples of episodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tracerl.ope.estimate import ContributionSpec, Estimate, estimates_from_contributions
from tracerl.ope.intervals import interval_flags, widen

PROB_TOL = 1e-9  # exp(logprob) may overshoot 1 by rounding
EXP_SAFE = 700.0  # exp(x) <= e^700 ~ 1e304: no overflow, even summed over a PSIS grid
HEAVY_TAIL = "heavy_tailed_weights"  # PSIS k-hat of the weights above its threshold
NO_ESTIMATE = "no estimate: ESS 0"   # every trajectory weight is 0


@dataclass(frozen=True, eq=False)
class EpisodeBatch:
    """Logged episodes as padded arrays of shape (n_episodes, horizon).

    reward: r_t; pi_b: behaviour prob of the logged action (NaN where not logged);
    pi_e: target prob of the logged action; q_hat: critic's Q(s_t, a_t); v_hat: critic's
    V(s_t) = sum_a pi_e(a|s_t) Q(s_t, a) (both None when no critic was given);
    mask: True where a step exists; gamma: discount.
    """

    reward: np.ndarray
    pi_b: np.ndarray
    pi_e: np.ndarray
    q_hat: np.ndarray | None
    v_hat: np.ndarray | None
    mask: np.ndarray
    gamma: float
    # Truncation: every cumulative weight w_{0:t} is capped at this (None: none). The mass
    # cut off is candidate mass the estimate does not see, which the support's episode bound
    # already counts against it (tracerl.ope.support: the same M), so rule 4's widening
    # by (1 - support) x width covers the bias it makes.
    max_weight: float | None = None

    @property
    def n_episodes(self) -> int:
        """Number of episodes (rows)."""
        return self.mask.shape[0]

    @property
    def horizon(self) -> int:
        """Length of the longest episode (columns)."""
        return self.mask.shape[1]

    @property
    def lengths(self) -> np.ndarray:
        """Number of steps of each episode."""
        return self.mask.sum(axis=1)

    @cached_property
    def discounts(self) -> np.ndarray:
        """gamma^t for t = 0..horizon-1."""
        return _read_only(self.gamma ** np.arange(self.horizon, dtype=np.float64))

    @cached_property
    def weights(self) -> np.ndarray:
        """w_{0:t} = prod_{k<=t} rho_k, (n, horizon), computed once (every estimator of the
        family reads them), truncated at `max_weight` when given."""
        w = self._untruncated
        if self.max_weight is not None:
            w = np.minimum(w, self.max_weight)
        return _read_only(w)

    @cached_property
    def raw_weights(self) -> np.ndarray:
        """The untruncated trajectory weights w_i (what the truncation report reads)."""
        return _read_only(self._untruncated[:, -1].copy())

    @cached_property
    def _untruncated(self) -> np.ndarray:
        """prod_{k<=t} rho_k, untruncated: one cumulative product for both of the above."""
        return _read_only(np.cumprod(importance_ratios(self), axis=1))

    @classmethod
    def from_steps(
        cls,
        episode: np.ndarray,
        t: np.ndarray,
        reward: np.ndarray,
        behavior_prob: np.ndarray,
        target_prob: np.ndarray,
        q_hat: np.ndarray | None = None,
        v_hat: np.ndarray | None = None,
        gamma: float = 0.99,
        max_weight: float | None = None,
    ) -> EpisodeBatch:
        """Pad flat per-step arrays (one entry per logged step, any order).

        `episode` codes must be 0..n-1, each used; `t` must run 0..len-1 within an episode.
        """
        episode = np.asarray(episode)
        t = np.asarray(t)
        n_steps = len(episode)
        if n_steps == 0:
            raise ValueError("no steps given")
        named = {"t": t, "reward": reward, "behavior_prob": behavior_prob,
                 "target_prob": target_prob, "q_hat": q_hat, "v_hat": v_hat}
        for name, arr in named.items():
            if arr is not None and len(arr) != n_steps:
                raise ValueError(f"{name} has {len(arr)} entries, episode has {n_steps}")
        if (q_hat is None) != (v_hat is None):
            raise ValueError("give both q_hat and v_hat, or neither")
        if not (np.issubdtype(episode.dtype, np.integer) and np.issubdtype(t.dtype, np.integer)):
            raise ValueError("episode and t must be integer arrays")
        if episode.min() < 0 or t.min() < 0:
            raise ValueError("episode codes and t must be non-negative")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma}")

        n, horizon = int(episode.max()) + 1, int(t.max()) + 1
        flat = episode.astype(np.int64) * horizon + t
        counts = np.bincount(flat, minlength=n * horizon).reshape(n, horizon)
        if counts.max() > 1:
            raise ValueError("duplicate (episode, t) steps")
        mask = counts > 0
        lengths = mask.sum(axis=1)
        if np.any(lengths == 0):
            raise ValueError("episode codes must be 0..n-1 with every code used")
        if not np.array_equal(mask, np.arange(horizon) < lengths[:, None]):
            raise ValueError("t must run 0..len-1 within each episode (a step is missing)")

        for name in ("reward", "q_hat", "v_hat"):
            if named[name] is not None and not np.all(np.isfinite(named[name])):
                raise ValueError(f"{name} has NaN or infinite entries")
        pi_b = np.asarray(behavior_prob, dtype=np.float64)
        pi_e = np.asarray(target_prob, dtype=np.float64)
        if np.any(np.isnan(pi_e)) or np.any((pi_e < 0) | (pi_e > 1 + PROB_TOL)):
            raise ValueError("target_prob must lie in [0, 1] (no NaN)")
        known = pi_b[~np.isnan(pi_b)]
        if np.any((known < 0) | (known > 1 + PROB_TOL)):
            raise ValueError("behavior_prob must lie in [0, 1] where given")

        def pad(values: np.ndarray | None) -> np.ndarray | None:
            if values is None:
                return None
            out = np.zeros(n * horizon)
            out[flat] = values  # one flat scatter (the (episode, t) pairs are distinct)
            return out.reshape(n, horizon)

        return cls(reward=pad(np.asarray(reward, dtype=np.float64)), pi_b=pad(pi_b),
                   pi_e=pad(pi_e), q_hat=pad(q_hat), v_hat=pad(v_hat), mask=mask,
                   gamma=float(gamma), max_weight=max_weight)


IS_ESTIMATORS = ("is", "pdis", "wis", "pdwis", "dr", "wdr")
SELF_NORMALISED = frozenset({"wis", "pdwis", "wdr"})
CONVENTION = "ended episodes absorb: rho = 1, reward 0, weight kept in normalisers"


def importance_ratios(batch: EpisodeBatch) -> np.ndarray:
    """rho_t = pi_e / pi_b, (n, horizon); 1 past the end of an episode (absorbing)."""
    return np.divide(batch.pi_e, batch.pi_b, out=np.ones_like(batch.pi_e), where=batch.mask)


def cumulative_weights(batch: EpisodeBatch) -> np.ndarray:
    """w_{0:t} = prod_{k<=t} rho_k, (n, horizon); constant past the end of an episode."""
    return batch.weights


def trajectory_weights(batch: EpisodeBatch) -> np.ndarray:
    """Full-trajectory weights w_i = w_{i,0:T_i-1}, (n,)."""
    return cumulative_weights(batch)[:, -1]


def discounted_returns(batch: EpisodeBatch) -> np.ndarray:
    """G_i = sum_t gamma^t r_{i,t}, (n,)."""
    return batch.reward @ batch.discounts


def effective_sample_size(weights: np.ndarray, multiplicity: np.ndarray | None = None) -> float:
    """Kish's ESS = (sum w)^2 / sum w^2 (0 when every weight is 0); rows count
    `multiplicity` times when given."""
    m = np.ones(len(weights)) if multiplicity is None else np.asarray(multiplicity, float)
    total_sq = float(m @ np.square(weights))
    return float(m @ weights) ** 2 / total_sq if total_sq > 0 else 0.0


def gpd_fit(x: np.ndarray) -> tuple[float, float]:
    """(k, sigma) of a generalized Pareto distribution fitted to `x` >= 0: the empirical
    Bayes estimate of Zhang & Stephens (2009) as the PSIS reference implementation makes it
    (stan-dev/loo `gpdfit`: a grid of 30 + floor(sqrt(n)) values of b, the profile
    likelihood's weights, k the negative of their k), with loo's weakly informative prior
    pulling k towards 0.5 with the weight of 10 observations."""
    x = np.sort(np.asarray(x, dtype=np.float64))
    n = len(x)
    prior, m = 3.0, 30 + int(math.floor(math.sqrt(n)))
    j = np.arange(1, m + 1, dtype=np.float64)
    quartile = x[max(int(math.floor(n / 4 + 0.5)) - 1, 0)]
    b = 1.0 / x[-1] + (1.0 - np.sqrt(m / (j - 0.5))) / prior / quartile
    k_b = np.mean(np.log1p(-b[:, None] * x[None, :]), axis=1)
    profile = n * (np.log(-b / k_b) - k_b - 1.0)
    weights = _profile_weights(profile)
    b_hat = float(np.sum(b * weights) / np.sum(weights))
    k = float(np.mean(np.log1p(-b_hat * x)))
    sigma = -k / b_hat
    k = (n * k + 10 * 0.5) / (n + 10)
    return k, sigma


def _profile_weights(profile: np.ndarray) -> np.ndarray:
    """w_i = 1 / sum_j exp(l_j - l_i) = exp(l_i - logsumexp(l)), the profile likelihood's
    normalised weights. A row whose exponents stay below EXP_SAFE is summed as written
    (loo's formula, the same numbers); a row with a larger one (a grid point far less
    likely than the best: its exp would overflow) is taken in log space, exp(l_i - lse),
    a weight below e^-EXP_SAFE that no longer overflows on the way."""
    diff = profile[None, :] - profile[:, None]
    safe = diff.max(axis=1) <= EXP_SAFE
    weights = np.empty(len(profile))
    weights[safe] = 1.0 / np.exp(diff[safe]).sum(axis=1)
    if not np.all(safe):
        top = profile.max()
        lse = top + np.log(np.exp(profile - top).sum())
        weights[~safe] = np.exp(profile[~safe] - lse)
    return weights


def pareto_khat(weights: np.ndarray) -> float | None:
    """The tail index of importance weights (PSIS, Vehtari et al. 2024): k of a generalized
    Pareto fitted to the M = ceil(min(S / 5, 3 sqrt(S))) largest of the S weights above
    the next largest. None when it cannot be fitted (fewer than 10 weights, or a tail with
    no spread: bounded weights have no Pareto tail)."""
    w = np.sort(np.asarray(weights, dtype=np.float64))
    s = len(w)
    if s < 10 or not np.all(np.isfinite(w)):
        return None
    m = int(math.ceil(min(0.2 * s, 3.0 * math.sqrt(s))))
    tail, cutoff = w[-m:], w[-m - 1]
    x = tail - cutoff
    x = x[x > 0]  # ties with the cutoff carry no tail
    if len(x) < 5:
        return None
    return gpd_fit(x)[0]


def khat_threshold(s: int) -> float:
    """Vehtari et al. (2024), eq. (13): k-hat above min(1 - 1 / log10(S), 0.7) leaves the
    estimate with a large error with high probability."""
    return min(1.0 - 1.0 / math.log10(s), 0.7) if s > 10 else 0.0


def weight_report(batch: EpisodeBatch, multiplicity: np.ndarray | None = None
                  ) -> dict[str, float | int | None]:
    """What the trajectory weights say before they are trusted: ESS, the largest weight,
    the truncation's count and mass, the PSIS tail index and its threshold (made once per
    batch without multiplicity: the critic's bias check and the IS family read the same)."""
    if multiplicity is None:
        return dict(_once(batch, "weight_report", lambda: _weight_report(batch, None)))
    return _weight_report(batch, multiplicity)


def _weight_report(batch: EpisodeBatch, multiplicity: np.ndarray | None
                   ) -> dict[str, float | int | None]:
    raw = batch.raw_weights
    w = trajectory_weights(batch)
    m = np.ones(len(raw)) if multiplicity is None else np.asarray(multiplicity, float)
    n = float(m.sum())
    expanded = np.repeat(raw, m.astype(np.int64)) if multiplicity is not None else raw
    cut = np.maximum(raw - w, 0.0)
    return {"ess": effective_sample_size(w, multiplicity),
            "max_weight": float(np.max(raw)) if len(raw) else 0.0,
            "truncated_at": batch.max_weight,
            "truncated_episodes": int(m @ (cut > 0)),
            "truncated_mass": float(m @ cut / n) if n else 0.0,
            "pareto_k": pareto_khat(expanded), "pareto_k_threshold": khat_threshold(int(n))}


def is_contributions(batch: EpisodeBatch) -> np.ndarray:
    """Trajectory IS: w_{0:T-1} G_i per episode."""
    return trajectory_weights(batch) * discounted_returns(batch)


def pdis_contributions(batch: EpisodeBatch) -> np.ndarray:
    """Per-decision IS: sum_t gamma^t w_{0:t} r_t per episode."""
    return (cumulative_weights(batch) * batch.reward) @ batch.discounts


def wis_contributions(batch: EpisodeBatch) -> tuple[np.ndarray, np.ndarray]:
    """Weighted IS: V = sum_i w_i G_i / sum_i w_i; returns (w_i G_i, w_i)."""
    w = trajectory_weights(batch)
    return w * discounted_returns(batch), w


def pdwis_contributions(batch: EpisodeBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per-decision weighted IS, both (n, horizon):

    V = sum_t gamma^t (sum_i w_{i,0:t} r_{i,t}) / (sum_i w_{i,0:t}), the sum over ALL
    episodes (ended ones keep their final weight, with reward 0: see the module docstring).
    Returns (gamma^t w_{i,0:t} r_{i,t}, w_{i,0:t}).
    """
    w = cumulative_weights(batch)
    return batch.discounts * w * batch.reward, w


def dr_contributions(batch: EpisodeBatch) -> np.ndarray:
    """Doubly robust (Jiang & Li 2016), per episode:

    sum_t gamma^t [ w_{0:t} (r_t - q_hat_t) + w_{0:t-1} v_hat_t ], with w_{0:-1} = 1.

    Made once per batch (read-only): the critic's bias check and the IS family's DR read
    the same batch."""
    def made() -> np.ndarray:
        q_hat, v_hat = _critic(batch)
        w = cumulative_weights(batch)
        terms = np.subtract(batch.reward, q_hat)
        terms *= w  # w_{0:t} (r_t - q_hat_t)
        carried = np.empty_like(terms)  # w_{0:t-1} v_hat_t, w_{0:-1} = 1
        carried[:, 0] = v_hat[:, 0]
        np.multiply(w[:, :-1], v_hat[:, 1:], out=carried[:, 1:])
        terms += carried
        return _read_only(terms @ batch.discounts)
    return _once(batch, "dr_contributions", made)


def wdr_contributions(batch: EpisodeBatch) -> tuple[np.ndarray, np.ndarray]:
    """Weighted doubly robust (Thomas & Brunskill 2016), both (n, horizon + 1):

    V = sum_t gamma^t [ sum_i wn_{i,0:t} (r_{i,t} - q_hat_{i,t}) + sum_i wn_{i,0:t-1} v_hat_{i,t} ]
    with wn_{i,0:t} = w_{i,0:t} / sum_j w_{j,0:t} over all episodes (absorbing convention)
    and wn_{i,0:-1} = 1/n. Terms sharing a normaliser are grouped: column 0 is v_hat_0 over
    n; column t+1 is gamma^t w_{0:t} (r_t - q_hat_t) + gamma^{t+1} w_{0:t} v_hat_{t+1} over
    sum_j w_{j,0:t} (v_hat_horizon = 0). Returns (numerators, denominators).
    """
    q_hat, v_hat = _critic(batch)
    w = cumulative_weights(batch)
    disc = batch.discounts
    num = np.empty((batch.n_episodes, batch.horizon + 1))
    num[:, 0] = v_hat[:, 0]
    step = np.subtract(batch.reward, q_hat)
    step *= disc  # gamma^t (r_t - q_hat_t)
    step[:, :-1] += (batch.gamma * disc)[:-1] * v_hat[:, 1:]  # + gamma^{t+1} v_hat_{t+1}
    step[:, -1] += 0.0  # v_hat_horizon = 0 (as the sum with it makes a -0.0 a 0.0)
    np.multiply(w, step, out=num[:, 1:])
    den = np.empty_like(num)
    den[:, 0] = 1.0
    den[:, 1:] = w
    return num, den


def not_applicable_reason(batch: EpisodeBatch) -> str | None:
    """Why the IS family cannot run on `batch` (None when it can; asked once per batch)."""
    def made() -> str | None:
        pi_b = batch.pi_b[batch.mask]
        if np.any(np.isnan(pi_b)):
            return "behaviour log-probs missing"
        if np.any(pi_b <= 0):
            return "behaviour prob 0 for a logged action"
        return None
    return _once(batch, "not_applicable_reason", made)


def estimate_is_family(
    batch: EpisodeBatch,
    estimators: Sequence[str] = IS_ESTIMATORS,
    *,
    support: float,
    flags: Sequence[str] = (),
    seed: int,
    level: float,
    n_boot: int,
    min_ess_fraction: float,
    min_n_eff: float,
    value_range: tuple[float, float] | None,
    multiplicity: np.ndarray | None = None,
    layer: str = "importance",
    details: dict | None = None,
    covered: float | None = None,
) -> list[Estimate]:
    """One Estimate per requested estimator, in order, bootstrapped on shared resamples,
    then the interval rules (tracerl.ope.intervals: the prior atom at the ends of
    `value_range`, interval_unreliable below min_n_eff, Hoeffding widening with the ESS of
    the trajectory weights below min_ess_fraction x n, the unsupported mass; without a
    range, only the bootstrap and the n_eff flag).

    multiplicity: episodes each row of `batch` stands for (distinct trajectories). covered:
    the share of the target's play the data covers, which rule 4 widens by (None: support). `flags`
    (the support's, estimated propensities) go on every record: self-normalised IS can look
    right by luck when unsupported episodes get weight 0. DR and WDR are not applicable
    without q_hat / v_hat; give them critics fitted on other episodes than each row's
    (cross-fitting, tracerl.ope.evaluate): a one-hot critic fitted on the same rows makes
    DR equal FQE whenever the state holds the history.
    """
    unknown = sorted(set(estimators) - set(IS_ESTIMATORS))
    if unknown:
        raise ValueError(f"unknown estimators {unknown}; choose from {IS_ESTIMATORS}")
    flags = list(flags)
    n = batch.n_episodes if multiplicity is None else int(round(np.sum(multiplicity)))

    reason = not_applicable_reason(batch)
    if reason is not None:
        return [Estimate.not_applicable(layer, name, reason, support=support, n=n,
                                        flags=flags, level=level) for name in estimators]

    w = trajectory_weights(batch)
    report = weight_report(batch, multiplicity)
    ess = report["ess"]
    if ess == 0.0:  # no logged episode the candidate could have played: nothing to say
        return [Estimate(layer=layer, estimator=name, value=None, ci_low=None, ci_high=None,
                         ci_level=level, support=support, n=n, ess=0.0,
                         flags=[f"{NO_ESTIMATE} (every logged episode has weight 0)",
                                *flags],
                         details={**(details or {}), "weights": report})
                for name in estimators]
    flags += interval_flags(ess, min_n_eff)
    k_hat = report["pareto_k"]
    if k_hat is not None and k_hat > report["pareto_k_threshold"]:
        flags.append(f"{HEAVY_TAIL}: pareto_k={k_hat:.2f} > "
                     f"{report['pareto_k_threshold']:.2f}")
    details = {**(details or {}), "ess_of": "trajectory_weights", "ess_fraction": ess / n,
               "max_trajectory_weight": float(np.max(w)), "horizon": batch.horizon,
               "convention": CONVENTION, "weights": report}

    out: list[Estimate | None] = []
    specs, slots = [], []
    for name in estimators:  # over estimator names, not episodes
        if name in ("dr", "wdr") and batch.q_hat is None:
            out.append(Estimate.not_applicable(layer, name, "critic q_hat/v_hat missing",
                                               support=support, n=n, flags=flags, level=level))
            continue
        contributions = _CONTRIBUTIONS[name](batch)
        num, den = contributions if name in SELF_NORMALISED else (contributions, None)
        specs.append(ContributionSpec(
            layer, name, num, support=support, ratio_denominators=den, ess=ess,
            flags=tuple(flags), details={**details, "self_normalised": den is not None},
            value_range=value_range))
        slots.append(len(out))
        out.append(None)
    if specs:
        made = estimates_from_contributions(specs, seed=seed, level=level, n_boot=n_boot,
                                            multiplicity=multiplicity)
        for slot, estimate in zip(slots, made, strict=True):
            estimate.covered = covered  # rule 4's share (tracerl.ope.support)
            if value_range is not None:
                widen(estimate, n_eff=ess, value_range=value_range,
                      min_ess_fraction=min_ess_fraction, level=level,
                      term_width=None if estimate.estimator in SELF_NORMALISED
                      else _term_width(w, value_range, estimate.estimator),
                      bias=report["truncated_mass"] * max(abs(value_range[0]),
                                                          abs(value_range[1])))
            out[slot] = estimate
    return out


_CONTRIBUTIONS = {
    "is": is_contributions,
    "pdis": pdis_contributions,
    "wis": wis_contributions,
    "pdwis": pdwis_contributions,
    "dr": dr_contributions,
    "wdr": wdr_contributions,
}


def _term_width(w: np.ndarray, value_range: tuple[float, float], estimator: str) -> float:
    """The width of the interval an unnormalised estimator's per-episode terms lie in, for
    a Hoeffding bound valid for them: w G with G in the range and 0 <= w <= max w lies in
    [min(0, w_max lo), max(0, w_max hi)]; DR adds a critic term (v_hat in the range, weight
    up to w_max again), so twice that."""
    lo, hi = value_range
    w_max = float(np.max(w)) if len(w) else 0.0
    width = max(0.0, w_max * hi) - min(0.0, w_max * lo)
    return (2.0 if estimator in ("dr", "wdr") else 1.0) * max(width, hi - lo)


def _once(batch: EpisodeBatch, key: str, make):
    """make(), kept on the (immutable) batch under `key` and returned on later calls, like
    its cached properties."""
    memo = batch.__dict__.setdefault("_memo", {})
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _critic(batch: EpisodeBatch) -> tuple[np.ndarray, np.ndarray]:
    if batch.q_hat is None or batch.v_hat is None:
        raise ValueError("this estimator needs q_hat and v_hat in the EpisodeBatch")
    return batch.q_hat, batch.v_hat
