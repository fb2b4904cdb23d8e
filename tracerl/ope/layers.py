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

from tracerl.ope.episodes import EpisodeBatch
from tracerl.ope.estimate import (
    DEFAULT_MIN_N_EFF,
    DEFAULT_MIN_SUPPORT,
    LOW_SUPPORT,
    UNSUPPORTED_ACTIONS,
    Estimate,
    bootstrap_sums,
    flag_disagreements,
    interval_flags,
    prior_interval,
    support_flags,
)
from tracerl.ope.fqe import FittedQEvaluation
from tracerl.ope.fqe import episode_support as fqe_episode_support
from tracerl.ope.grouped import TrajectoryGroups
from tracerl.ope.importance import IS_ESTIMATORS, estimate_is_family
from tracerl.ope.replay import ReplayAdapter, ReplayLog, replay_sums
from tracerl.policies.bellman import BellmanBackup, Policy, evaluate
from tracerl.policies.transitions import Transitions

LAYERS = ("replay", "verifier", "critic", "importance")

# The step-table columns OPE reads (featurizers, transitions, replay): a stage reads only
# these from disk (tracerl.io.fileio.read_table), which halves its memory on wide logs.
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
    min_support: float = DEFAULT_MIN_SUPPORT
    min_ess_fraction: float = 0.1
    replay_samples: int = 8  # replays per logged episode for a stochastic target
    replay_max_steps: int = 50
    fqe_iterations: int = 1000
    # (worst, best) discounted return of an episode: the ends of the prior atom and of
    # replay's bounds. None: the worst and best return the logs show (weaker: an unseen
    # episode could lie outside them).
    return_range: tuple[float, float] | None = None
    min_n_eff: float = DEFAULT_MIN_N_EFF
    dr_folds: int = 2  # cross-fitting: DR's critic for an episode never saw it


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
    """The support every layer reports (tracerl.ope.fqe.episode_support, on the critic's
    states): the target's probability of an episode whose every decision is a (state,
    action) pair the logs show. Layers add their own detail under other names (replay:
    `replayed_share`, the share of replays whose every tool call had a recorded response;
    critic and IS: `share_of_decisions_on_logged_pairs`)."""
    tr = data.critic_tr
    return fqe_episode_support(tr.s, tr.a, tr.s_next, tr.done, target_on_critic,
                               data.initial_critic_states, settings.fqe_iterations)


def critic_n_eff(data: LoggedData, target_on_critic: np.ndarray,
                 settings: OPESettings) -> float:
    """Effective observations behind the critic: the harmonic mean of the logged counts
    N(s, a) of the cells the target's backups read, weighted by the target's expected
    visits d(s, a). A cell of N transitions can hide an unseen outcome of probability
    about 1/N; the critic's exposure to such outcomes is sum d(s, a) / N(s, a).

    Both sums are E_target[sum_t reward(s_t, a_t)] (γ = 1) by the one backup, on the
    distinct transition kinds weighted by how often they were logged (O(kinds))."""
    g = data.groups
    weight = g.counts @ g.uses  # transitions of each kind in the log
    cell = g.kinds[:, 0].astype(np.int64) * g.n_actions + g.kinds[:, 1].astype(np.int64)
    per_cell = np.bincount(cell, weights=weight, minlength=g.n_states * g.n_actions)
    sums = []
    for reward in (np.ones(len(cell)), 1.0 / per_cell[cell]):  # visits, exposure
        backup = BellmanBackup(g.kinds[:, 0], g.kinds[:, 1], reward, g.kinds[:, 3],
                               g.kinds[:, 4] != 0, g.n_states, g.n_actions, 1.0,
                               weights=weight[None, :])
        q, _, _ = evaluate(backup, target_on_critic, settings.fqe_iterations)
        v = (q[0] * target_on_critic).sum(axis=1)
        sums.append(float(g.counts @ v[g.start]) / g.n)
    visits, exposure = sums
    return visits / exposure if exposure > 0 else float("inf")


def return_range(data: LoggedData, settings: OPESettings) -> tuple[float, float]:
    """(worst, best) discounted return from any step to the end: the settings', else the
    extremes the logs show (weaker: an unseen outcome could lie outside them)."""
    if settings.return_range is not None:
        low, high = (float(x) for x in settings.return_range)
        return low, high
    g = data.groups
    to_go = np.zeros(len(g.r))
    low, high = np.inf, -np.inf
    for t in range(g.r.shape[1] - 1, -1, -1):  # over steps of the horizon, not episodes
        to_go = g.r[:, t] + settings.gamma * to_go
        live = g.mask[:, t]
        if live.any():
            low, high = min(low, float(to_go[live].min())), max(high, float(to_go[live].max()))
    return (low, high) if np.isfinite(low) else (0.0, 0.0)


def critic_and_importance(data: LoggedData, policy: Policy, settings: OPESettings,
                          seed: int, support: float | None = None, *,
                          boot_chunk: int | None = None,
                          deferred: list | None = None) -> list[Estimate]:
    """The FQE critic and the IS family (DR and WDR with cross-fitted critics). `support`
    is the layers' common support (`episode_support`; computed here when not given).
    `boot_chunk`, `deferred`: the critic's bootstrap in chunks, left to the caller when
    `deferred` is a list (see `_critic_estimate`)."""
    decisions, _ = decision_support(data, policy)
    tr, groups, out = data.critic_tr, data.groups, []
    target = np.asarray(policy.action_probs(data.critic_policy_keys), dtype=float)
    if support is None:
        support = episode_support(data, target, settings) if decisions < 1.0 else 1.0
    value_range = return_range(data, settings)
    fqe = FittedQEvaluation(settings.gamma, settings.fqe_iterations).fit(
        tr.s, tr.a, tr.r, tr.s_next, tr.done, target)
    if "critic" in settings.layers:
        out.append(_critic_estimate(data, fqe, target, support, decisions, value_range,
                                    settings, seed, boot_chunk, deferred))
    if "importance" in settings.layers:
        has_propensities = not np.isnan(groups.pi_b).any()
        batch, multiplicity, folds = groups.batch(target, fqe.q_, settings.gamma), \
            groups.counts, 0
        if has_propensities and {"dr", "wdr"} & set(settings.is_estimators):
            batch, multiplicity = _cross_fitted(groups, target, settings, seed)
            folds = settings.dr_folds
        family = estimate_is_family(batch, tuple(settings.is_estimators), support=support,
                                    unsupported_flag=decisions < 1.0, seed=seed + 1,
                                    level=settings.level, n_boot=settings.n_boot,
                                    min_ess_fraction=settings.min_ess_fraction,
                                    min_support=settings.min_support,
                                    multiplicity=multiplicity, value_range=value_range,
                                    min_n_eff=settings.min_n_eff)
        for estimate in family:
            estimate.details["share_of_decisions_on_logged_pairs"] = decisions
            if estimate.estimator in ("dr", "wdr") and estimate.applicable:
                estimate.details["critic"] = (f"cross-fitted: {folds} folds of episodes, "
                                              "each corrected by a critic fitted on the "
                                              "others")
        out += family
    return out


def _cross_fitted(groups: TrajectoryGroups, target: np.ndarray, settings: OPESettings,
                  seed: int) -> tuple[EpisodeBatch, np.ndarray]:
    """The distinct trajectories once per fold, each fold's rows carrying the critic
    fitted on the other folds (q_hat, v_hat) and the fold's episode counts as multiplicity.

    Why: a tabular critic fitted on the same episodes satisfies the empirical Bellman
    equation in every cell, so DR's correction sums to zero wherever the state holds the
    history (the calculator): DR would be FQE again, never a second opinion.
    """
    k = max(2, int(settings.dr_folds))
    folds = groups.folds(k, seed)  # (k, trajectories)
    q = groups.refit_q(target, groups.counts[None, :] - folds, settings.gamma,
                       settings.fqe_iterations)  # (k, states, actions)
    v = (q * target).sum(axis=2)
    base = groups.batch(target, None, settings.gamma)
    rows = np.arange(k)[:, None, None]
    mask = np.tile(base.mask, (k, 1))
    q_hat = np.where(mask, q[rows, groups.s, groups.a].reshape(mask.shape), 0.0)
    v_hat = np.where(mask, v[rows, groups.s].reshape(mask.shape), 0.0)
    batch = EpisodeBatch(reward=np.tile(base.reward, (k, 1)), pi_b=np.tile(base.pi_b, (k, 1)),
                         pi_e=np.tile(base.pi_e, (k, 1)), q_hat=q_hat, v_hat=v_hat,
                         mask=mask, gamma=settings.gamma)
    return batch, folds.reshape(-1)


@dataclass
class CriticBootstrap:
    """The critic's bootstrap, planned: resamples of episodes (counts per distinct
    trajectory) and their prior atoms' weights, drawn in one stream each and split into
    chunks of consecutive replicates. Each chunk is refitted on its own
    (`critic_boot_values`, any order, anywhere); `critic_interval` joins them in chunk
    order, so the interval is the same for any chunk size."""

    target: np.ndarray  # the target's probabilities on the critic's states
    value_range: tuple[float, float]
    gamma: float
    iterations: int
    chunks: list[tuple[np.ndarray, np.ndarray]]  # (draws (b, trajectories), atoms (b, cells))


def critic_bootstrap(groups: TrajectoryGroups, target: np.ndarray,
                     value_range: tuple[float, float], settings: OPESettings, seed: int,
                     chunk: int | None = None) -> CriticBootstrap:
    """Draw the critic's `settings.n_boot` resamples and prior weights, in chunks of
    `chunk` replicates (None: one chunk)."""
    n_boot = settings.n_boot
    draws = groups.draws(n_boot, seed)
    atoms = np.random.default_rng([seed, 2]).exponential(size=(n_boot, groups.n_cells))
    size = max(1, n_boot if chunk is None else int(chunk))
    return CriticBootstrap(target, value_range, settings.gamma, settings.fqe_iterations,
                           [(draws[i:i + size], atoms[i:i + size])
                            for i in range(0, n_boot, size)])


def critic_boot_values(groups: TrajectoryGroups, boot: CriticBootstrap,
                       index: int) -> np.ndarray:
    """FQE's value refitted on chunk `index`'s resamples, with the prior atom at the worst
    return (row 0) and at the best (row 1): (2, replicates of the chunk)."""
    draws, atoms = boot.chunks[index]
    per, out = groups.rows_per_chunk, []
    for start in range(0, len(draws), per):  # memory-bounded batches of replicates
        part, weight = draws[start:start + per], atoms[start:start + per]
        ends = []
        for end in boot.value_range:
            q = groups.refit_q(boot.target, part, boot.gamma, boot.iterations,
                               prior_weight=weight, prior_target=end)
            v = (q * boot.target).sum(axis=2)
            ends.append((part * v[:, groups.start]).sum(axis=1) / groups.n)
        out.append(np.stack(ends))
    return np.concatenate(out, axis=1) if out else np.zeros((2, 0))


def critic_interval(estimate: Estimate, boot: CriticBootstrap, values: Sequence[np.ndarray],
                    n: float, level: float, seed: int) -> None:
    """Set the critic record's interval from its chunks' values, joined in chunk order."""
    if len(values) != len(boot.chunks):
        raise ValueError(f"critic bootstrap: {len(values)} chunk results for "
                         f"{len(boot.chunks)} chunks")
    joined = np.concatenate(values, axis=1)
    estimate.ci_low, estimate.ci_high = prior_interval(joined[0], joined[1], n,
                                                       boot.value_range, level, seed)


def _critic_estimate(data: LoggedData, fqe: FittedQEvaluation, target: np.ndarray,
                     support: float, decisions: float, value_range: tuple[float, float],
                     settings: OPESettings, seed: int, chunk: int | None = None,
                     deferred: list | None = None) -> Estimate:
    """FQE's value, with an interval from refitting it on resampled episodes, each refit
    given one unseen outcome per logged cell (weight ~ Exp(1), one pseudo-transition)
    worth the worst return (lower end) or the best (upper end): the branch a sample never
    showed widens the interval instead of vanishing from every resample.

    With `deferred` (a list), the interval is left to the caller: (record, plan) is
    appended to it, the plan's chunks of `chunk` replicates still to refit."""
    groups = data.groups
    n_eff = critic_n_eff(data, target, settings)
    flags = support_flags(support, unsupported=decisions < 1.0,
                          min_support=settings.min_support)
    flags += interval_flags(n_eff, settings.min_n_eff)
    if not fqe.converged_:
        flags.append("not_converged")
    estimate = Estimate(
        layer="critic", estimator="fqe", value=fqe.value(data.initial_critic_states),
        ci_low=None, ci_high=None, ci_level=settings.level, support=support,
        n=int(data.initial_critic_states.size), flags=flags,
        details={"n_boot": settings.n_boot, "seed": seed, "n_eff": n_eff,
                 "interval": "refit per resample, one unseen outcome per cell at the "
                             "worst/best return", "prior_range": list(value_range),
                 "share_of_decisions_on_logged_pairs": fqe.support_,
                 "bellman_residual": fqe.bellman_residual_,
                 "backup": "expectation under the target policy"})
    if settings.n_boot:
        boot = critic_bootstrap(groups, target, value_range, settings, seed, chunk)
        if deferred is not None:
            deferred.append((estimate, boot))
        else:
            values = [critic_boot_values(groups, boot, i) for i in range(len(boot.chunks))]
            critic_interval(estimate, boot, values, groups.n, settings.level, seed)
    return estimate


def replay_and_verify(data: LoggedData, policy: Policy, adapter: ReplayAdapter,
                      settings: OPESettings, seed: int,
                      support: float | None = None) -> list[Estimate]:
    """Replay (discounted return, rewards from the verifiers) and the verifier layer
    (success rate), from K replays per logged episode.

    No survivor bias: a replay that stops at a call with no recorded response still
    counts, as the worst return (success 0) at the interval's lower end and the best
    (success 1) at its upper end; the interval holds the bounds the unreplayed mass
    allows. The point estimate (mean over replays that reached the end) is given only
    where `replayed_share` >= min_support. `support` is the layers' common support
    (`episode_support`; computed here when not given).
    """
    n = int(pc.sum(pc.equal(data.steps.column("t"), 0)).as_py() or 0)
    if data.replay_log is None or type(data.replay_log.adapter) is not type(adapter):
        data.replay_log = ReplayLog(data.steps, adapter)
    decisions, _ = decision_support(data, policy)
    if support is None:
        target = np.asarray(policy.action_probs(data.critic_policy_keys), dtype=float)
        support = episode_support(data, target, settings) if decisions < 1.0 else 1.0
    sums = replay_sums(data.replay_log, policy, replays=settings.replay_samples, seed=seed,
                       max_steps=settings.replay_max_steps, verifiers=settings.verifiers,
                       weights=settings.weights, gamma=settings.gamma,
                       success_component="task_success")
    ret_sum, success_sum, complete_sum = sums.returns, sums.successes, sums.complete
    runs, unreplayed_calls, replayed = sums.runs, sums.unreplayed_calls, sums.replayed_share
    flags = support_flags(support, unsupported=decisions < 1.0,
                          min_support=settings.min_support)
    n_eff = float(complete_sum.sum() / runs)  # episodes replayed to the end
    flags += interval_flags(n_eff, settings.min_n_eff)
    if replayed < 1.0:
        flags.append(f"unreplayed_calls: replayed_share={replayed:.3f}")
    top = sorted(unreplayed_calls.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    details = {"replays_per_episode": runs, "unreplayed_calls": dict(top),
               "replayed_share": replayed, "episodes_fully_replayed": n_eff,
               "share_of_decisions_on_logged_pairs": decisions}
    specs = []
    if "replay" in settings.layers:
        specs.append(("replay", "replay", ret_sum, return_range(data, settings), "return"))
    if "verifier" in settings.layers:
        verifier = next((v for v in settings.verifiers if v.startswith("calculator_exact")),
                        settings.verifiers[0])
        specs.append(("verifier", verifier, success_sum, (0.0, 1.0), "success"))
    if not specs or n == 0:
        return [Estimate.not_applicable(layer, name, "no logged episode", support=support,
                                        flags=flags) for layer, name, *_ in specs]
    missing = runs - complete_sum  # replays of each episode that stopped early
    columns = np.column_stack([c for _, _, total, (worst, best), _ in specs
                               for c in ((total + missing * worst) / runs,
                                         (total + missing * best) / runs)])
    boot = bootstrap_sums(columns, n_boot=settings.n_boot, seed=seed)
    out = []
    for j, (layer, name, total, value_range, metric) in enumerate(specs):
        low_sum, high_sum = columns[:, 2 * j].sum(), columns[:, 2 * j + 1].sum()
        value = float(total.sum() / complete_sum.sum()) \
            if replayed >= settings.min_support and complete_sum.sum() > 0 else None
        ci_low = ci_high = None
        if settings.n_boot:
            ci_low, ci_high = prior_interval(boot[:, 2 * j] / n, boot[:, 2 * j + 1] / n, n,
                                             value_range, settings.level, seed)
        out.append(Estimate(
            layer=layer, estimator=name, value=value, ci_low=ci_low, ci_high=ci_high,
            ci_level=settings.level, support=support, n=n, flags=list(flags),
            details={**details, "metric": metric, "n_boot": settings.n_boot, "seed": seed,
                     "bounds": [float(low_sum / n), float(high_sum / n)],
                     "interval": "bootstrap of the bounds (unreplayed replays at the worst/"
                                 "best value) with one unseen pseudo-episode",
                     "prior_range": list(value_range),
                     **({} if value is not None else {
                         "no_value": f"replayed_share {replayed:.3f} < min_support "
                                     f"{settings.min_support}: only the bounds"})}))
    return out


@dataclass
class PendingEvaluation:
    """Every layer's records for one target policy, the critic's interval still to come
    from its bootstrap chunks (`critic`: None when there is none to run)."""

    estimates: list[Estimate]
    critic: tuple[Estimate, CriticBootstrap] | None
    n: float  # episodes the critic's resamples draw
    level: float
    seed: int  # the critic's seed: its prior atoms' shares

    @property
    def n_chunks(self) -> int:
        return 0 if self.critic is None else len(self.critic[1].chunks)


def start_evaluation(data: LoggedData, policy: Policy, adapter: ReplayAdapter | None,
                     settings: OPESettings, seed: int,
                     boot_chunk: int | None = None) -> PendingEvaluation:
    """Every requested layer for one target policy except the critic's bootstrap, which is
    planned in chunks of `boot_chunk` replicates (None: one chunk)."""
    out: list[Estimate] = []
    decisions, _ = decision_support(data, policy)
    target = np.asarray(policy.action_probs(data.critic_policy_keys), dtype=float)
    support = episode_support(data, target, settings) if decisions < 1.0 else 1.0
    if adapter is not None and {"replay", "verifier"} & set(settings.layers):
        out += replay_and_verify(data, policy, adapter, settings, seed, support)
    deferred: list = []
    if {"critic", "importance"} & set(settings.layers):
        out += critic_and_importance(data, policy, settings, seed + 100, support,
                                     boot_chunk=boot_chunk, deferred=deferred)
    return PendingEvaluation(out, deferred[0] if deferred else None, data.groups.n,
                             settings.level, seed + 100)


def boot_chunk_values(data: LoggedData, pending: PendingEvaluation, index: int) -> np.ndarray:
    """The critic's refits on chunk `index` of a pending evaluation."""
    if pending.critic is None:
        raise ValueError("this evaluation has no critic bootstrap")
    return critic_boot_values(data.groups, pending.critic[1], index)


def finish_evaluation(pending: PendingEvaluation,
                      values: Sequence[np.ndarray]) -> list[Estimate]:
    """The records, the critic's interval from its chunks' values (in chunk order); layers
    whose value intervals do not overlap are flagged as disagreeing."""
    if pending.critic is not None:
        estimate, boot = pending.critic
        critic_interval(estimate, boot, values, pending.n, pending.level, pending.seed)
    elif values:
        raise ValueError("chunk values given for an evaluation with no critic bootstrap")
    out = pending.estimates
    flag_disagreements([e for e in out if e.applicable and e.layer != "verifier"])
    return out


def evaluate_policy(data: LoggedData, policy: Policy, adapter: ReplayAdapter | None,
                    settings: OPESettings, seed: int,
                    boot_chunk: int | None = None) -> list[Estimate]:
    """Every requested layer for one target policy; layers whose value intervals do not
    overlap are flagged as disagreeing. The same records for any `boot_chunk`."""
    pending = start_evaluation(data, policy, adapter, settings, seed, boot_chunk)
    return finish_evaluation(pending, [boot_chunk_values(data, pending, i)
                                       for i in range(pending.n_chunks)])


__all__ = ["LAYERS", "LOW_SUPPORT", "OPE_COLUMNS", "UNSUPPORTED_ACTIONS", "CriticBootstrap",
           "LoggedData", "OPESettings", "PendingEvaluation", "boot_chunk_values",
           "critic_n_eff", "decision_support", "episode_support", "evaluate_policy",
           "finish_evaluation", "return_range", "start_evaluation"]
