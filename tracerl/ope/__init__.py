"""Off-policy evaluation: every layer returns the same `Estimate` record.

Estimators reduce to per-episode contributions; value, bootstrap interval and diagnostics
come from one shared mechanism (`tracerl.ope.estimate`).
"""

from tracerl.ope.episodes import EpisodeBatch
from tracerl.ope.estimate import (
    DISAGREES_WITH,
    LOW_ESS,
    LOW_SUPPORT,
    NOT_APPLICABLE,
    UNSUPPORTED_ACTIONS,
    ZERO_WEIGHT,
    ContributionSpec,
    Estimate,
    bootstrap_sums,
    estimates_from_contributions,
    flag_disagreements,
    support_flags,
)
from tracerl.ope.fqe import FittedQEvaluation
from tracerl.ope.importance import (
    IS_ESTIMATORS,
    cumulative_weights,
    discounted_returns,
    dr_contributions,
    effective_sample_size,
    estimate_is_family,
    importance_ratios,
    is_contributions,
    pdis_contributions,
    pdwis_contributions,
    trajectory_weights,
    wdr_contributions,
    wis_contributions,
)

__all__ = [
    "DISAGREES_WITH",
    "IS_ESTIMATORS",
    "LOW_ESS",
    "LOW_SUPPORT",
    "NOT_APPLICABLE",
    "UNSUPPORTED_ACTIONS",
    "ZERO_WEIGHT",
    "ContributionSpec",
    "EpisodeBatch",
    "Estimate",
    "FittedQEvaluation",
    "bootstrap_sums",
    "cumulative_weights",
    "discounted_returns",
    "dr_contributions",
    "effective_sample_size",
    "estimate_is_family",
    "estimates_from_contributions",
    "flag_disagreements",
    "importance_ratios",
    "is_contributions",
    "pdis_contributions",
    "pdwis_contributions",
    "support_flags",
    "trajectory_weights",
    "wdr_contributions",
    "wis_contributions",
]
