"""The importance-sampling family over an EpisodeBatch, as per-episode contributions.

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

from collections.abc import Sequence

import numpy as np

from tracerl.ope.episodes import EpisodeBatch
from tracerl.ope.estimate import (
    DEFAULT_MIN_N_EFF,
    DEFAULT_MIN_SUPPORT,
    LOW_ESS,
    ContributionSpec,
    Estimate,
    estimates_from_contributions,
    interval_flags,
    support_flags,
)

IS_ESTIMATORS = ("is", "pdis", "wis", "pdwis", "dr", "wdr")
SELF_NORMALISED = frozenset({"wis", "pdwis", "wdr"})
CONVENTION = "ended episodes absorb: rho = 1, reward 0, weight kept in normalisers"


def importance_ratios(batch: EpisodeBatch) -> np.ndarray:
    """rho_t = pi_e / pi_b, (n, horizon); 1 past the end of an episode (absorbing)."""
    return np.divide(batch.pi_e, batch.pi_b, out=np.ones_like(batch.pi_e), where=batch.mask)


def cumulative_weights(batch: EpisodeBatch) -> np.ndarray:
    """w_{0:t} = prod_{k<=t} rho_k, (n, horizon); constant past the end of an episode."""
    return np.cumprod(importance_ratios(batch), axis=1)


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
    """
    q_hat, v_hat = _critic(batch)
    w = cumulative_weights(batch)
    w_prev = _shift_right(w)
    return (w * (batch.reward - q_hat) + w_prev * v_hat) @ batch.discounts


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
    v_next = np.zeros_like(v_hat)
    v_next[:, :-1] = v_hat[:, 1:]
    num = np.empty((batch.n_episodes, batch.horizon + 1))
    num[:, 0] = v_hat[:, 0]
    num[:, 1:] = w * (disc * (batch.reward - q_hat) + batch.gamma * disc * v_next)
    den = np.empty_like(num)
    den[:, 0] = 1.0
    den[:, 1:] = w
    return num, den


def not_applicable_reason(batch: EpisodeBatch) -> str | None:
    """Why the IS family cannot run on `batch` (None when it can)."""
    pi_b = batch.pi_b[batch.mask]
    if np.any(np.isnan(pi_b)):
        return "behaviour log-probs missing"
    if np.any(pi_b <= 0):
        return "behaviour prob 0 for a logged action"
    return None


def estimate_is_family(
    batch: EpisodeBatch,
    estimators: Sequence[str] = IS_ESTIMATORS,
    *,
    support: float,
    unsupported_flag: bool = False,
    seed: int,
    level: float = 0.95,
    n_boot: int = 2000,
    min_ess_fraction: float = 0.1,
    min_support: float = DEFAULT_MIN_SUPPORT,
    layer: str = "importance",
    multiplicity: np.ndarray | None = None,
    value_range: tuple[float, float] | None = None,
    min_n_eff: float = DEFAULT_MIN_N_EFF,
) -> list[Estimate]:
    """One Estimate per requested estimator, in order, bootstrapped on shared resamples.

    multiplicity: episodes each row of `batch` stands for (distinct trajectories).

    support: share of the target's probability mass at logged states on actions with
    pi_b > 0, computed by the caller from coverage; support < 1 or `unsupported_flag` puts
    UNSUPPORTED_ACTIONS on every record (self-normalised IS can look right by luck when
    unsupported episodes get weight 0). Missing pi_b makes every record not_applicable;
    DR and WDR are not_applicable without q_hat / v_hat. LOW_ESS when the ESS of the
    trajectory weights is below min_ess_fraction * n. value_range (worst, best return)
    widens every interval by one unseen pseudo-episode (tracerl.ope.estimate);
    INTERVAL_UNRELIABLE when the ESS is below min_n_eff.

    DR and WDR read the critic from the batch: give it critics fitted on other episodes
    than each row's (cross-fitting, tracerl.ope.layers) for a second opinion; a critic
    fitted on the same rows makes tabular DR equal FQE whenever the state holds the history.
    """
    unknown = sorted(set(estimators) - set(IS_ESTIMATORS))
    if unknown:
        raise ValueError(f"unknown estimators {unknown}; choose from {IS_ESTIMATORS}")
    flags = support_flags(support, unsupported=unsupported_flag, min_support=min_support)
    n = batch.n_episodes if multiplicity is None else int(round(np.sum(multiplicity)))

    reason = not_applicable_reason(batch)
    if reason is not None:
        return [Estimate.not_applicable(layer, name, reason, support=support, n=n,
                                        flags=flags, level=level) for name in estimators]

    w = trajectory_weights(batch)
    ess = effective_sample_size(w, multiplicity)
    if ess < min_ess_fraction * n:
        flags.append(LOW_ESS)
    flags += interval_flags(ess, min_n_eff)
    details = {"ess_of": "trajectory_weights", "ess_fraction": ess / n,
               "max_trajectory_weight": float(np.max(w)), "horizon": batch.horizon,
               "convention": CONVENTION}

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


def _critic(batch: EpisodeBatch) -> tuple[np.ndarray, np.ndarray]:
    if batch.q_hat is None or batch.v_hat is None:
        raise ValueError("this estimator needs q_hat and v_hat in the EpisodeBatch")
    return batch.q_hat, batch.v_hat


def _shift_right(w: np.ndarray) -> np.ndarray:
    """w_{0:t-1} for each t, with w_{0:-1} = 1."""
    prev = np.ones_like(w)
    prev[:, 1:] = w[:, :-1]
    return prev
