"""Every OPE layer that applies to a logged dataset, for feature-based candidates.

- critic (LSTD-Q) and the IS family come from `tracerl.ope.fa_layers` (logged propensities
  when every step has them, else the estimated behaviour model's, flagged
  ``estimated_propensities``);
- replay and verifier need a fixture that serves a different policy's tool calls (its
  replay adapter): real logs have none, and the rows say "not applicable" with the reason,
  never a guess;
- `logged_value`: the behaviour's own value on its log (mean discounted return over
  episodes, bootstrap interval): the yardstick the estimates are read against;
- `pick`: the candidate with the highest headline value among those whose headline record
  carries no flag at all (a flagged estimate is never selected).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tracerl.fixtures import Fixture
from tracerl.hashed_features import HashedFeaturizer
from tracerl.ope.estimate import ContributionSpec, Estimate
from tracerl.ope.fa_data import FATransitions
from tracerl.ope.fa_layers import FAOPEConfig, bootstrap_estimates, evaluate_candidates

FA_LAYERS = ("replay", "verifier", "critic", "importance")


def replay_reason(fixture_name: str | None, fixture: Fixture | None) -> str:
    """Why the replay and verifier layers do not apply to this dataset."""
    if fixture is None:
        return ("no fixture for this dataset (real logs): a candidate's tool calls that the "
                "log did not make have no recorded response and no simulator to answer them")
    if fixture.replay_adapter is None:
        return f"fixture {fixture_name!r} brings no replay adapter"
    return (f"fixture {fixture_name!r} has a replay adapter for tabular policies; replaying "
            f"feature-based policies through it is not implemented yet")


def evaluate_features(tr: FATransitions, candidates: Mapping[str, Any], *,
                      behavior_model: Any, critic_featurizer: HashedFeaturizer,
                      config: FAOPEConfig, layers: Sequence[str] = FA_LAYERS,
                      fixture_name: str | None = None, fixture: Fixture | None = None
                      ) -> dict[str, list[Estimate]]:
    """Per candidate, one Estimate per layer/estimator in `layers` (critic and importance
    computed; replay and verifier as not-applicable records saying why)."""
    unknown = sorted(set(layers) - set(FA_LAYERS))
    if unknown:
        raise ValueError(f"unknown OPE layers {unknown}; expected some of {list(FA_LAYERS)}")
    computed = evaluate_candidates(tr, candidates, critic_featurizer=critic_featurizer,
                                   behavior_model=behavior_model, config=config)
    reason = replay_reason(fixture_name, fixture)
    out = {}
    for name, records in computed.items():  # over candidates
        kept = [e for e in records if e.layer in layers]
        support = records[0].support if records else math.nan
        if "replay" in layers:
            kept.insert(0, Estimate.not_applicable("replay", "return", reason, support=support,
                                                   n=tr.n_episodes, level=config.level))
        if "verifier" in layers:
            kept.insert(1 if "replay" in layers else 0, Estimate.not_applicable(
                "verifier", "success", reason, support=support, n=tr.n_episodes,
                level=config.level))
        out[name] = kept
    return out


def logged_value(tr: FATransitions, *, gamma: float, seed: int, n_boot: int,
                 level: float) -> Estimate:
    """The logged behaviour's value: mean over episodes of sum_t gamma^t r_t, with a
    percentile bootstrap interval (support 1: it is the data itself)."""
    returns = np.bincount(tr.episode, weights=tr.rewards * gamma ** tr.t.astype(np.float64),
                          minlength=tr.n_episodes)
    spec = ContributionSpec("logged", "on_policy", returns, support=1.0,
                            details={"episodes": tr.n_episodes, "steps": tr.n_steps})
    return bootstrap_estimates([spec], seed=seed, level=level, n_boot=n_boot)[0]


def pick(records: Sequence[Mapping[str, Any]], headline: str) -> tuple[str | None, str]:
    """(candidate, why): the highest headline value among headline records (dicts with
    policy, layer, estimator, value, flags) that carry no flag at all."""
    best, best_value, flagged = None, -math.inf, []
    for r in records:
        if f"{r['layer']}/{r['estimator']}" != headline:
            continue
        if r["value"] is None or r["flags"]:
            flagged.append(r["policy"])
        elif r["value"] > best_value:
            best, best_value = r["policy"], r["value"]
    if best is None:
        return None, (f"no candidate: every headline {headline} estimate is flagged or not "
                      f"applicable ({', '.join(flagged) or 'none evaluated'})")
    return best, (f"highest unflagged {headline} ({best_value:.4f}); flagged, never picked: "
                  f"{', '.join(flagged) or 'none'}")


def verdict_against_logged(record: Mapping[str, Any], logged: Mapping[str, Any],
                           min_support: float) -> str:
    """Would the candidate beat the logged agent? Only said when the estimate is supported
    and unflagged and its interval clears the logged value's interval; else says why not."""
    if record["value"] is None:
        return "cannot say: " + "; ".join(record["flags"])
    if record["support"] < min_support:
        return (f"not enough support: {record['support']:.2f} of the candidate's episodes "
                f"stay on actions the log shows (needs {min_support:.2f})")
    if record["flags"]:
        return "cannot say: estimate flagged " + ", ".join(
            dict.fromkeys(f.split(":")[0] for f in record["flags"]))
    if record["ci_low"] > logged["ci_high"]:
        return "better than the logged agent (intervals do not overlap)"
    if record["ci_high"] < logged["ci_low"]:
        return "worse than the logged agent (intervals do not overlap)"
    return "cannot tell apart from the logged agent (intervals overlap)"
