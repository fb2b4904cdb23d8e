"""Prefect tasks for layered off-policy evaluation: the logged data of a dataset prepared
once, then per candidate policy one task for the layers, one per chunk of the critic's
bootstrap, and one that joins them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.learning import LEARNERS
from tracerl.config.fixtures import fixture_of
from tracerl.features import get_featurizer
from tracerl.io.fileio import read_table
from tracerl.ope.candidates import UniformValidPolicy, build_candidates, candidate_names
from tracerl.ope.estimate import DEFAULT_MIN_N_EFF
from tracerl.ope.layers import (
    OPE_COLUMNS,
    LoggedData,
    OPESettings,
    PendingEvaluation,
    boot_chunk_values,
    finish_evaluation,
    start_evaluation,
)
from tracerl.ope.replay import ReplayAdapter
from tracerl.ope.report import record
from tracerl.policies.artifact import load_policy
from tracerl.policies.bellman import Policy


def settings_from(params: dict[str, Any], n_episodes: int) -> OPESettings:
    ope, replay = params["ope"], params["ope"]["replay"]
    samples = min(int(replay["max_samples"]), max(1, math.ceil(replay["min_draws"]
                                                               / max(n_episodes, 1))))
    return OPESettings(
        verifiers=list(params["relabel"]["verifiers"]), weights=dict(params["relabel"]["weights"]),
        gamma=float(params["gamma"]), layers=list(ope["layers"]),
        is_estimators=list(ope["is_estimators"]), level=float(ope["confidence"]),
        n_boot=int(ope["n_boot"]), min_support=float(ope["min_support"]),
        min_ess_fraction=float(ope["min_ess_fraction"]), replay_samples=samples,
        replay_max_steps=int(replay["max_steps"]), fqe_iterations=int(ope["fqe_iterations"]),
        return_range=tuple(float(x) for x in ope["return_range"]) if ope.get("return_range")
        else None, min_n_eff=float(ope.get("min_n_eff", DEFAULT_MIN_N_EFF)),
        dr_folds=int(ope.get("dr_folds", 2)))


def boot_chunks_of(params: dict[str, Any]) -> int:
    """Tasks per candidate for the critic's bootstrap: ceil(n_boot / boot_chunk), none
    without the critic layer (what `start_evaluation` plans)."""
    ope = params["ope"]
    if "critic" not in ope["layers"] or not int(ope["n_boot"]):
        return 0
    return math.ceil(int(ope["n_boot"]) / int(ope.get("boot_chunk", 500)))


def candidates_of(params: dict[str, Any]) -> list[str]:
    """The candidates' names, in the order `prepare_candidates` builds them."""
    return candidate_names(["behavior", *LEARNERS], params["ope"]["candidates"])


@dataclass
class PreparedCandidates:
    """One dataset's logged data, prepared once, and the candidates to evaluate on it.

    Under Dask this crosses to each worker once (a task's result is moved by the
    scheduler to the workers of the tasks that take it), not once per candidate."""

    dataset: str
    data: LoggedData
    adapter: ReplayAdapter | None
    settings: OPESettings
    candidates: dict[str, Policy]
    truth: Callable[[Policy], dict] | None  # the simulator's exact value, where one exists
    seed: int
    boot_chunk: int  # critic bootstrap replicates per task


# Large inputs (the prepared data): no cache key hashed from them, no result persisted.
@task(name="prepare-candidates", task_run_name="prepare candidates on {dataset}",
      cache_policy=NO_CACHE)
def prepare_candidates(steps_dir: Path, models_dir: Path, dataset: str,
                       params: dict[str, Any]) -> PreparedCandidates:
    steps = read_table(steps_dir, columns=OPE_COLUMNS)
    if params["ope"]["split"] != "all":
        steps = steps.filter(pc.equal(steps.column("split"), params["ope"]["split"]))
    featurizer = get_featurizer(params["coverage"]["featurizer"])
    # The dataset's fixture (params `fixture:`) brings replay, its logger and the truth.
    fixture = fixture_of(params, dataset)
    if fixture is None or fixture.replay_adapter is None or fixture.behavior_policy is None:
        raise ValueError(f"ope of {dataset!r} needs a fixture with a replay adapter and a "
                         f"behaviour policy (params `fixture:`), got {fixture}")
    adapter = fixture.replay_adapter()
    data = LoggedData.prepare(steps, featurizer, get_featurizer(params["ope"]["critic_featurizer"]),
                              adapter)
    base = {"behavior": fixture.behavior_policy(dataset, params),
            **{name: load_policy(models_dir / f"{name}.json") for name in LEARNERS}}
    uniform = UniformValidPolicy(featurizer.valid_actions, len(featurizer.actions))
    candidates = build_candidates(base, params["ope"]["candidates"], uniform)
    settings = settings_from(params, int(data.initial_critic_states.size))
    if list(candidates) != candidates_of(params):  # the flow maps one task per listed name
        raise RuntimeError(f"ope on {dataset}: built candidates {list(candidates)}, the flow "
                           f"lists {candidates_of(params)}")
    return PreparedCandidates(
        dataset, data, adapter, settings, candidates,
        truth=partial(fixture.truth_metrics, params=params) if fixture.truth_metrics
        else None,
        seed=int(params["ope"]["seed"]), boot_chunk=int(params["ope"].get("boot_chunk", 500)))


@dataclass
class StartedCandidate:
    """One candidate's records but the critic's interval, and its truth."""

    pending: PendingEvaluation
    truth: dict | None


@task(name="evaluate-candidate", task_run_name="evaluate {candidate} on {dataset}",
      cache_policy=NO_CACHE)
def evaluate_candidate(prepared: PreparedCandidates, candidate: str,
                       dataset: str) -> StartedCandidate:
    """Every layer for one candidate, the critic's bootstrap planned in chunks (run by
    `bootstrap_chunk`). `dataset` (= prepared.dataset) names the task run."""
    names = list(prepared.candidates)
    # The candidate's position, not the order tasks run in, fixes its seed.
    seed = prepared.seed + 1000 * names.index(candidate)
    policy = prepared.candidates[candidate]
    truth = prepared.truth(policy) if prepared.truth is not None else None
    return StartedCandidate(start_evaluation(prepared.data, policy, prepared.adapter,
                                             prepared.settings, seed, prepared.boot_chunk),
                            truth)


@task(name="bootstrap-chunk", task_run_name="bootstrap {candidate} on {dataset}: chunk {chunk}",
      cache_policy=NO_CACHE)
def bootstrap_chunk(prepared: PreparedCandidates, started: StartedCandidate, chunk: int,
                    candidate: str, dataset: str) -> np.ndarray:
    """The critic refitted on one chunk of a candidate's resamples: (2, replicates)."""
    return boot_chunk_values(prepared.data, started.pending, chunk)


@task(name="finish-candidate", task_run_name="combine {candidate} on {dataset}",
      cache_policy=NO_CACHE)
def finish_candidate(started: StartedCandidate, values: list[np.ndarray], candidate: str,
                     dataset: str) -> list[dict[str, Any]]:
    """The candidate's records, the critic's interval from its chunks in chunk order."""
    return [record(dataset, candidate, estimate, started.truth)
            for estimate in finish_evaluation(started.pending, values)]
