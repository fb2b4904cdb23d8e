"""Every OPE layer that applies to a logged dataset, for feature-based candidates.

- critic (LSTD-Q) and the IS family come from `tracerl.ope.fa_layers` (logged propensities
  when every step has them, else the estimated behaviour model's, flagged
  ``estimated_propensities``);
- replay and verifier need a fixture that serves a different policy's tool calls (its
  replay adapter, whose `state_codes` gives the encoder's int state rows and whose actions
  are the encoder's): `replay_and_verify` replays each candidate over the logged episodes,
  scores the replays with the verifiers, and counts a replay that reached a call the log
  never recorded at the worst / best value of the range (no survivor bias). Real logs have
  no fixture: the rows say "not applicable" with the reason, never a guess;
- `logged_value`: the behaviour's own value on its log (mean discounted return over
  episodes, bootstrap interval): the yardstick the estimates are read against;
- `pick`: the candidate with the highest headline value among those whose headline record
  carries no flag at all (a flagged estimate is never selected).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tracerl.config.fixtures import Fixture
from tracerl.hashed_features import HashedFeaturizer
from tracerl.ope.estimate import (
    ContributionSpec,
    Estimate,
    bootstrap_sums,
    interval_flags,
    prior_interval,
    support_flags,
)
from tracerl.ope.fa_data import FATransitions
from tracerl.ope.fa_layers import FAOPEConfig, bootstrap_estimates, evaluate_candidates

FA_LAYERS = ("replay", "verifier", "critic", "importance")


def replay_reason(fixture_name: str | None, fixture: Fixture | None,
                  actions: Sequence[str] | None = None) -> str | None:
    """Why the replay and verifier layers do not apply to this dataset (None: they do)."""
    if fixture is None:
        return ("no fixture for this dataset (real logs): a candidate's tool calls that the "
                "log did not make have no recorded response and no simulator to answer them")
    if fixture.replay_adapter is None:
        return f"the {fixture_name} fixture brings no replay adapter"
    adapter = fixture.replay_adapter()
    if not hasattr(adapter, "state_codes"):
        return (f"the {fixture_name} fixture's replay adapter gives no encoded states "
                f"(state_codes) for feature-based policies to act on")
    if actions is not None and list(adapter.actions) != list(actions):
        return (f"the {fixture_name} fixture's replay adapter acts over other actions than "
                f"the encoder's")
    return None


class _OnStateRows:
    """A feature-based policy as replay calls it: action_probs over the adapter's distinct
    state rows (`state_codes` gives them as the encoder's int states)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def action_probs(self, states: Sequence[np.ndarray]) -> np.ndarray:
        rows = np.asarray(states, dtype=np.int64).reshape(len(states), -1)
        return self.policy.action_probs(rows)


@dataclass(frozen=True)
class ReplaySettings:
    """What replay and verifier need beyond FAOPEConfig: the verifiers and weights the
    relabel stage used, the reward component that says an episode succeeded."""

    verifiers: Sequence[str]
    weights: Mapping[str, float]
    success_component: str | None = None
    replays: int = 8          # per logged episode, for a stochastic candidate
    max_steps: int = 50


def replay_and_verify(steps: pa.Table, policy: Any, adapter: Any, *, settings: ReplaySettings,
                      config: FAOPEConfig, support: float,
                      as_replay_policy: Any = None) -> list[Estimate]:
    """[replay (return), verifier (success)] of one candidate, from up to `replays` replays
    of every logged episode (one when the candidate is deterministic).

    The value is the mean over replays that reached the episode's end, given only when
    that share is at least min_support; the interval is a bootstrap of the bounds where an
    unreplayed replay counts at the range's worst (lower end) and best (upper end) value.
    """
    from tracerl.ope.replay import ReplayLog, replay_sums

    log = ReplayLog(steps, adapter)
    n = log.n
    # the fixture says how replay calls a policy; else the adapter's rows are our states
    wrapped = as_replay_policy(policy) if as_replay_policy else _OnStateRows(policy)
    sums = replay_sums(log, wrapped, replays=settings.replays, seed=config.seed,
                       max_steps=settings.max_steps, verifiers=settings.verifiers,
                       weights=settings.weights, gamma=config.gamma,
                       success_component=settings.success_component)
    ret_sum, success_sum, complete_sum = sums.returns, sums.successes, sums.complete
    runs, unreplayed, replayed = sums.runs, sums.unreplayed_calls, sums.replayed_share
    flags = support_flags(support, min_support=config.min_support)
    flags += interval_flags(float(complete_sum.sum() / runs), 30.0)
    if replayed < 1.0:
        flags.append(f"unreplayed_calls: replayed_share={replayed:.3f}")
    top = dict(sorted(unreplayed.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    value_range = config.value_range or (0.0, 1.0)
    specs = [("replay", "return", ret_sum, value_range)]
    if settings.success_component:
        specs.append(("verifier", "success", success_sum, (0.0, 1.0)))
    missing = runs - complete_sum
    columns = np.column_stack([c for *_, total, (worst, best) in specs
                               for c in ((total + missing * worst) / runs,
                                         (total + missing * best) / runs)])
    boot = bootstrap_sums(columns, n_boot=config.n_boot, seed=config.seed)
    out = []
    for j, (layer, estimator, total, rng) in enumerate(specs):
        value = (float(total.sum() / complete_sum.sum())
                 if replayed >= config.min_support and complete_sum.sum() > 0 else None)
        lo, hi = prior_interval(boot[:, 2 * j] / n, boot[:, 2 * j + 1] / n, n, rng,
                                config.level, config.seed)
        out.append(Estimate(layer=layer, estimator=estimator, value=value, ci_low=lo,
                            ci_high=hi, ci_level=config.level, support=support, n=n,
                            flags=list(flags),
                            details={"replays_per_episode": runs, "replayed_share": replayed,
                                     "unreplayed_calls": top, "value_range": list(rng),
                                     "interval": "bootstrap of the bounds (unreplayed at the "
                                                 "worst / best value) + one unseen episode"}))
    if not settings.success_component:
        out.append(Estimate.not_applicable(
            "verifier", "success", "no success component named (relabel.filters.outcome)",
            support=support, n=n, level=config.level))
    return out


def evaluate_features(tr: FATransitions, candidates: Mapping[str, Any], *,
                      behavior_model: Any, critic_featurizer: HashedFeaturizer,
                      config: FAOPEConfig, layers: Sequence[str] = FA_LAYERS,
                      fixture_name: str | None = None, fixture: Fixture | None = None,
                      steps: pa.Table | None = None, actions: Sequence[str] | None = None,
                      replay_settings: ReplaySettings | None = None
                      ) -> dict[str, list[Estimate]]:
    """Per candidate, one Estimate per layer/estimator in `layers`: critic and importance
    always; replay and verifier when the fixture's replay adapter can serve the candidate's
    calls (`steps`: the logged table, `actions`: the encoder's), else not-applicable records
    saying why."""
    unknown = sorted(set(layers) - set(FA_LAYERS))
    if unknown:
        raise ValueError(f"unknown OPE layers {unknown}; expected some of {list(FA_LAYERS)}")
    computed = evaluate_candidates(tr, candidates, critic_featurizer=critic_featurizer,
                                   behavior_model=behavior_model, config=config)
    reason = replay_reason(fixture_name, fixture, actions)
    if reason is None and (steps is None or replay_settings is None):
        reason = "replay needs the logged step table and the verifiers (not given)"
    out = {}
    for name, records in computed.items():  # over candidates
        kept = [e for e in records if e.layer in layers]
        support = records[0].support if records else math.nan
        if reason is None and {"replay", "verifier"} & set(layers):
            try:
                replayed = replay_and_verify(steps, candidates[name],
                                             fixture.replay_adapter(),
                                             settings=replay_settings, config=config,
                                             support=support,
                                             as_replay_policy=fixture.replay_policy)
                out[name] = [e for e in replayed if e.layer in layers] + kept
                continue
            except ValueError as exc:  # e.g. the verifiers cannot read a replayed trace
                reason = (f"the {fixture_name} fixture's replay ran but its trace could not be "
                          f"scored: {str(exc)[:300]}")
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
