"""Layered off-policy evaluation of one target policy on one logged dataset.

Layers (shared/seeds/000, "OPE for Agents"): replay against recorded tool responses, the
verifiers' judgement of what replay produced, a learned critic (FQE), and the importance
sampling family. Every layer returns `Estimate` records; none of them guesses where the
data has no support: each says how much support it had.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.ope.candidates import Policy
from tracerl.ope.episodes import EpisodeBatch
from tracerl.ope.estimate import (
    LOW_SUPPORT,
    UNSUPPORTED_ACTIONS,
    ContributionSpec,
    Estimate,
    estimates_from_contributions,
    flag_disagreements,
    support_flags,
)
from tracerl.ope.fqe import FittedQEvaluation
from tracerl.ope.grouped import TrajectoryGroups
from tracerl.ope.importance import (
    IS_ESTIMATORS,
    dr_contributions,
    estimate_is_family,
    wdr_contributions,
)
from tracerl.ope.replay import ReplayAdapter, ReplayLog, replay
from tracerl.policies.transitions import Transitions
from tracerl.relabel import relabel

LAYERS = ("replay", "verifier", "critic", "importance")

# The step-table columns OPE reads (featurizers, transitions, replay): a stage reads only
# these from disk (tracerl.fileio.read_table), which halves its memory on wide logs.
OPE_COLUMNS = ("episode_id", "t", "task", "state.memory", "state.available_tools", "action",
               "observation", "reward", "done", "environment_version", "action_logprobs",
               "split")


@dataclass
class OPESettings:
    verifiers: Sequence[str]
    weights: Mapping[str, float]
    gamma: float = 0.99
    layers: Sequence[str] = LAYERS
    is_estimators: Sequence[str] = IS_ESTIMATORS
    level: float = 0.95
    n_boot: int = 2000
    min_support: float = 0.95
    min_ess_fraction: float = 0.1
    replay_samples: int = 8  # replays per logged episode for a stochastic target
    replay_max_steps: int = 50
    fqe_iterations: int = 1000


@dataclass
class LoggedData:
    """One logged dataset, featurized once and shared by every candidate."""

    steps: pa.Table
    policy_tr: Transitions  # the policy's state keys: support of its decisions
    critic_tr: Transitions  # the critic's (finer) state keys: FQE and the DR models
    critic_policy_keys: list[str]  # the policy key inside each critic state key
    initial_critic_states: np.ndarray  # critic state of each episode's first step
    logged_pairs: np.ndarray  # (policy states, actions): was (s, a) ever logged
    groups: TrajectoryGroups  # distinct trajectories (critic states) and their counts
    replay_log: ReplayLog | None = None  # recorded responses, coded once for every replay

    @classmethod
    def prepare(cls, steps: pa.Table, featurizer: Any, critic_featurizer: Any,
                adapter: ReplayAdapter | None = None) -> LoggedData:
        policy_tr = Transitions.from_steps(steps, featurizer)
        critic_tr = Transitions.from_steps(steps, critic_featurizer)
        to_policy = getattr(critic_featurizer, "policy_key", lambda key: key)
        n_s, n_a = len(policy_tr.state_keys), len(policy_tr.actions)
        logged = np.bincount(policy_tr.s.astype(np.int64) * n_a + policy_tr.a,
                             minlength=n_s * n_a).reshape(n_s, n_a) > 0
        first = critic_tr.t == 0
        initial = np.empty(int(critic_tr.episode.max()) + 1 if len(critic_tr.s) else 0,
                           dtype=np.int64)
        initial[critic_tr.episode[first]] = critic_tr.s[first]
        groups = TrajectoryGroups(critic_tr.s, critic_tr.a, critic_tr.r, critic_tr.s_next,
                                  critic_tr.done, critic_tr.behavior_prob,
                                  critic_tr.episode, critic_tr.t, len(critic_tr.state_keys),
                                  len(critic_tr.actions))
        return cls(steps, policy_tr, critic_tr,
                   [to_policy(str(k)) for k in critic_tr.state_keys], initial, logged,
                   groups, None if adapter is None else ReplayLog(steps, adapter))


def decision_support(data: LoggedData, policy: Policy) -> tuple[float, np.ndarray]:
    """(share of the target's decisions, at the logged states, on logged (s, a) pairs;
    the target's probabilities on the policy state vocabulary)."""
    probs = np.asarray(policy.action_probs(list(data.policy_tr.state_keys)), dtype=float)
    covered = (probs * data.logged_pairs).sum(axis=1)
    return float(covered[data.policy_tr.s].mean()), probs


def episode_support(data: LoggedData, target_on_critic: np.ndarray,
                    settings: OPESettings) -> float:
    """Share of the target's episodes that stay on logged (s, a) pairs to their end.

    The same backup as FQE with reward 1 on reaching the end, γ = 1 and Q = 0 on unlogged
    pairs: V(s) is then the probability, under the target, of finishing from s without a
    decision the data never showed. The same notion as replay's share of episodes it
    could follow to the end, so every layer's support means one thing.
    """
    tr = data.critic_tr
    reach = FittedQEvaluation(1.0, settings.fqe_iterations).fit(
        tr.s, tr.a, tr.done.astype(float), tr.s_next, tr.done, target_on_critic)
    return float(np.clip(reach.value(data.initial_critic_states), 0.0, 1.0))


def critic_and_importance(data: LoggedData, policy: Policy, settings: OPESettings,
                          seed: int) -> list[Estimate]:
    decisions, _ = decision_support(data, policy)
    tr, groups, out = data.critic_tr, data.groups, []
    target = np.asarray(policy.action_probs(data.critic_policy_keys), dtype=float)
    support = episode_support(data, target, settings) if decisions < 1.0 else 1.0
    fqe = FittedQEvaluation(settings.gamma, settings.fqe_iterations).fit(
        tr.s, tr.a, tr.r, tr.s_next, tr.done, target)
    refits = _refit_replicates(groups, target, settings, seed)
    if "critic" in settings.layers:
        out.append(_critic_estimate(data, fqe, refits["fqe"], support, decisions, settings,
                                    seed))
    if "importance" in settings.layers:
        family = estimate_is_family(groups.batch(target, fqe.q_, settings.gamma),
                                    tuple(settings.is_estimators), support=support,
                                    unsupported_flag=decisions < 1.0, seed=seed + 1,
                                    level=settings.level, n_boot=settings.n_boot,
                                    min_ess_fraction=settings.min_ess_fraction,
                                    min_support=settings.min_support,
                                    multiplicity=groups.counts)
        for estimate in family:
            estimate.details["share_of_decisions_on_logged_pairs"] = decisions
            if estimate.estimator in refits and estimate.applicable and settings.n_boot:
                # The critic is part of DR/WDR: its refits set their interval.
                estimate.ci_low, estimate.ci_high = _interval(refits[estimate.estimator],
                                                              settings.level)
                estimate.details["interval"] = "critic refitted on every resample"
        out += family
    return out


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    return float(np.quantile(values, tail)), float(np.quantile(values, 1.0 - tail))


def _refit_replicates(groups: TrajectoryGroups, target: np.ndarray, settings: OPESettings,
                      seed: int) -> dict[str, np.ndarray]:
    """FQE, DR and WDR on every bootstrap resample of episodes, the critic refitted on
    each: the intervals then carry the critic's own estimation error. The DR/WDR formulas
    are those of tracerl.ope.importance, applied to all replicates stacked as rows."""
    values: dict[str, list[np.ndarray]] = {"fqe": [], "dr": [], "wdr": []}
    if not settings.n_boot:
        return {k: np.zeros(0) for k in values}
    k, horizon = groups.paths.shape
    for draws in groups.chunks(groups.draws(settings.n_boot, seed)):
        q = groups.refit_q(target, draws, settings.gamma, settings.fqe_iterations)
        b = len(draws)
        v = (q * target).sum(axis=2)  # (b, states)
        values["fqe"].append((draws * v[:, groups.start]).sum(axis=1) / groups.n)
        if np.isnan(groups.pi_b).any():
            continue  # no behaviour propensities: DR/WDR are not applicable
        base = groups.batch(target, None, settings.gamma)
        rows = np.arange(b)[:, None, None]
        stacked = EpisodeBatch(
            reward=np.tile(base.reward, (b, 1)), pi_b=np.tile(base.pi_b, (b, 1)),
            pi_e=np.tile(base.pi_e, (b, 1)), mask=np.tile(base.mask, (b, 1)),
            q_hat=np.where(base.mask, q[rows, groups.s, groups.a], 0.0).reshape(b * k, horizon),
            v_hat=np.where(base.mask, v[rows, groups.s], 0.0).reshape(b * k, horizon),
            gamma=settings.gamma)
        dr = dr_contributions(stacked).reshape(b, k)
        values["dr"].append((draws * dr).sum(axis=1) / groups.n)
        num, den = (x.reshape(b, k, -1) for x in wdr_contributions(stacked))
        num_sum = np.einsum("bk,bkh->bh", draws, num)
        den_sum = np.einsum("bk,bkh->bh", draws, den)
        values["wdr"].append(np.divide(num_sum, den_sum, out=np.zeros_like(num_sum),
                                       where=den_sum != 0).sum(axis=1))
    return {key: np.concatenate(v) if v else np.zeros(0) for key, v in values.items()}


def _critic_estimate(data: LoggedData, fqe: FittedQEvaluation, refits: np.ndarray,
                     support: float, decisions: float, settings: OPESettings,
                     seed: int) -> Estimate:
    """FQE's value, with an interval from refitting it on resampled episodes."""
    flags = support_flags(support, unsupported=decisions < 1.0,
                          min_support=settings.min_support)
    if not fqe.converged_:
        flags.append("not_converged")
    ci_low, ci_high = _interval(refits, settings.level) if len(refits) else (None, None)
    return Estimate(
        layer="critic", estimator="fqe", value=fqe.value(data.initial_critic_states),
        ci_low=ci_low, ci_high=ci_high, ci_level=settings.level, support=support,
        n=int(data.initial_critic_states.size), flags=flags,
        details={"n_boot": settings.n_boot, "seed": seed, "interval": "refit per resample",
                 "share_of_decisions_on_logged_pairs": fqe.support_,
                 "bellman_residual": fqe.bellman_residual_,
                 "backup": "expectation under the target policy"})


def replay_and_verify(data: LoggedData, policy: Policy, adapter: ReplayAdapter,
                      settings: OPESettings, seed: int) -> list[Estimate]:
    """Replay (discounted return of fully replayed episodes, rewards from the verifiers)
    and the verifier layer (their success rate), from K replays per logged episode."""
    n = int(pc.sum(pc.equal(data.steps.column("t"), 0)).as_py() or 0)
    ret_sum, success_sum, complete_sum = np.zeros(n), np.zeros(n), np.zeros(n)
    unsupported_calls: dict[str, int] = {}
    runs = 0
    if data.replay_log is None or type(data.replay_log.adapter) is not type(adapter):
        data.replay_log = ReplayLog(data.steps, adapter)
    while runs < max(1, settings.replay_samples):
        result = replay(data.replay_log, policy, seed=seed + runs,
                        max_steps=settings.replay_max_steps)
        runs += 1
        # The verifiers score each distinct replayed trajectory once.
        scored = relabel(result.steps, settings.verifiers, settings.weights)
        t = scored.column("t").to_numpy().astype(float)
        reward = scored.column("reward").to_numpy()
        success = pc.fill_null(pc.list_element(pc.map_lookup(
            scored.column("reward_components"), "task_success", "all"), 0), 0.0).to_numpy()
        k = int(result.trajectory_of.max()) + 1 if n else 0
        ret = np.bincount(result.episode_index, weights=reward * settings.gamma ** t,
                          minlength=k)
        won = np.bincount(result.episode_index, weights=success, minlength=k) > 0
        done = result.complete.astype(float)
        ret_sum += done * ret[result.trajectory_of]
        success_sum += done * won[result.trajectory_of]
        complete_sum += done
        for call, count in result.unsupported_calls.items():
            unsupported_calls[call] = unsupported_calls.get(call, 0) + count
        if result.deterministic:
            break  # every decision had probability 1: more replays repeat this one
    support = float(complete_sum.sum() / (runs * n)) if n else 0.0
    flags = support_flags(support, unsupported=bool(unsupported_calls),
                          min_support=settings.min_support)
    top = sorted(unsupported_calls.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    details = {"replays_per_episode": runs, "unsupported_calls": dict(top),
               "episodes_fully_replayed": float(complete_sum.sum() / runs)}
    specs = []
    if "replay" in settings.layers:
        specs.append(ContributionSpec("replay", "replay", ret_sum, support,
                                      ratio_denominators=complete_sum, flags=flags,
                                      details=details))
    if "verifier" in settings.layers:
        verifier = next((v for v in settings.verifiers if v.startswith("calculator_exact")),
                        settings.verifiers[0])
        specs.append(ContributionSpec("verifier", verifier, success_sum, support,
                                      ratio_denominators=complete_sum, flags=flags,
                                      details={**details, "metric": "success"}))
    if not specs or complete_sum.sum() == 0:
        return [Estimate.not_applicable(s.layer, s.estimator,
                                        "no logged episode could be replayed to its end",
                                        support=support, flags=flags) for s in specs]
    return estimates_from_contributions(specs, seed=seed, level=settings.level,
                                        n_boot=settings.n_boot)


def evaluate_policy(data: LoggedData, policy: Policy, adapter: ReplayAdapter | None,
                    settings: OPESettings, seed: int) -> list[Estimate]:
    """Every requested layer for one target policy; layers whose value intervals do not
    overlap are flagged as disagreeing."""
    out: list[Estimate] = []
    if adapter is not None and {"replay", "verifier"} & set(settings.layers):
        out += replay_and_verify(data, policy, adapter, settings, seed)
    if {"critic", "importance"} & set(settings.layers):
        out += critic_and_importance(data, policy, settings, seed + 100)
    flag_disagreements([e for e in out if e.applicable and e.layer != "verifier"])
    return out


__all__ = ["LAYERS", "LOW_SUPPORT", "OPE_COLUMNS", "UNSUPPORTED_ACTIONS", "LoggedData",
           "OPESettings", "decision_support", "evaluate_policy"]
