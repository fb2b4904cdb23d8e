"""Prefect tasks of the ope stage: a dataset's logs prepared once, then per candidate policy
one task for the layers, one per chunk of a refitted critic's bootstrap, and one that joins
them; each dataset's logged value."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.train import TRAINING_COLUMNS, load_encoder, load_learners
from tracerl.config.fixtures import Fixture, fixture_of
from tracerl.config.learning import Ope, Train
from tracerl.config.schema import Params
from tracerl.feature_maps import critic_features
from tracerl.io.fileio import read_table
from tracerl.ope.candidate import Candidate
from tracerl.ope.evaluate import (
    LoggedData,
    PendingEvaluation,
    Settings,
    boot_chunk_values,
    finish_evaluation,
    logged_model,
    logged_value,
    not_applicable,
    start_evaluation,
    task_returns,
)
from tracerl.ope.external import external_names, load_external
from tracerl.ope.records import record
from tracerl.ope.replay import ReplayLog
from tracerl.rl.artifact import load_policy
from tracerl.rl.learners import behavior_model
from tracerl.rl.policy import Policy, UniformValidPolicy, derived, with_derived

# What the ope stage reads of a step table: what the encoders read (the train stage's
# columns) and what the replay log reads besides; not the provenance, version and lineage
# columns, about a third of the table in memory. An external candidate's keys may read any
# column: a dataset with one is read whole.
OPE_COLUMNS = (*TRAINING_COLUMNS, "environment_version")
# ... and what the logged value reads: the encoder's columns and the model the logs name.
LOGGED_COLUMNS = (*TRAINING_COLUMNS, "metadata.behavior_policy")


def sections(params: Params) -> tuple[Ope, Train]:
    """The ope and train sections (the stage's params declare both)."""
    if params.ope is None or params.train is None:
        raise ValueError("the ope stage needs the train and ope sections")
    return params.ope, params.train


def candidates_of(params: Params, dataset: str) -> list[str]:
    """The candidates evaluated on `dataset`, in the order `prepare_candidates` builds them:
    the logging policy where its fixture knows it, the learners trained on it, with
    `ope.cross_agent` those trained on the other datasets (``<dataset>/<learner>``), what
    `ope.candidates` derives from them, and the external candidates declared for it
    (`ope.candidates.external`: scored tables and Python policies)."""
    ope, train = sections(params)
    fixture = fixture_of(params, dataset)
    trained = train.datasets or params.dataset_names()
    base = ["behavior"] if fixture is not None and fixture.behavior_policy else []
    base += list(train.learners) if dataset in trained else []
    if ope.cross_agent:
        base += [f"{d}/{learner}" for d in trained if d != dataset for learner in train.learners]
    return [*base, *(name for name, _, _ in derived(ope.candidates.model_dump())),
            *external_names(ope.candidates.external, dataset, params.dataset_names())]


def replay_adapter_of(fixture: Fixture | None, actions: tuple[str, ...]) -> tuple[Any, str | None]:
    """(the fixture's replay adapter, None) or (None, why replay and verifier do not apply)."""
    if fixture is None:
        return None, ("no fixture for this dataset (real logs): a candidate's tool calls that "
                      "the log did not make have no recorded response and no simulator to "
                      "answer them")
    if fixture.replay_adapter is None:
        return None, f"the {fixture.name} fixture brings no replay adapter"
    adapter = fixture.replay_adapter()
    if tuple(adapter.actions) != tuple(actions):
        return None, (f"the {fixture.name} fixture's replay adapter acts over other actions "
                      "than the encoder's")
    return adapter, None


def no_truth_reason(fixture: Fixture | None) -> str | None:
    """Why the dataset's candidates have no truth beside their estimates (None: they do)."""
    if fixture is None:
        return ("no truth: real logs have no simulator to roll a candidate out in, so "
                "estimates are read against the logged value only")
    if fixture.truth_metrics is None:
        return f"no truth: the {fixture.name} fixture brings none"
    return None


def _behavior(tr: Any, features: Any, train: Train, models_dir: Path) -> Any:
    """pi_hat_b over the critic's features: the train stage's logistic BC when it was
    fitted on these very transitions over them, else fitted here."""
    saved = Path(models_dir) / "bc.json"
    if train.bc.model == "logistic" and saved.is_file():
        bc = load_policy(saved, tr.encoder)
        import orjson

        meta = orjson.loads(saved.read_bytes())
        if meta["data_hash"] == tr.data_hash() and bc.features == features:
            return bc
    return behavior_model(tr, features, C=train.bc.C, max_iter=train.bc.max_iter,
                          seed=train.seed)


@dataclass
class PreparedCandidates:
    """One dataset's logged data, prepared once, and the candidates to evaluate on it.

    Under Dask this crosses to each worker once (a task's result is moved by the
    scheduler to the workers of the tasks that take it), not once per candidate."""

    dataset: str
    data: LoggedData
    settings: Settings
    candidates: dict[str, Policy | Candidate]  # a Candidate: from outside (external)
    trained_on: dict[str, str]
    truth: Callable[[Policy], dict] | None  # the simulator's truth, where one exists
    seed: int
    replay_reason: str | None
    info: dict[str, Any]


# Large inputs (the prepared data): no cache key hashed from them, no result persisted.
@task(name="prepare-candidates", task_run_name="prepare candidates on {dataset}",
      cache_policy=NO_CACHE)
def prepare_candidates(steps_dir: Path, models_dir: Path, dataset: str,
                       params: Params) -> PreparedCandidates:
    ope, train = sections(params)
    outside = external_names(ope.candidates.external, dataset, params.dataset_names())
    steps = every_step = read_table(steps_dir, columns=None if outside else OPE_COLUMNS)
    if ope.split != "all":
        steps = steps.filter(pc.equal(steps.column("split"), ope.split))
    encoder = load_encoder(models_dir)
    tr = encoder.transitions(steps)
    fixture = fixture_of(params, dataset)
    adapter, reason = replay_adapter_of(fixture, encoder.actions)
    # What reads the step table first, then the table is let go: the critic's designs,
    # folds and checks below never hold it.
    log = ReplayLog(steps, adapter) if adapter is not None else None
    external = load_external(ope.candidates.external, dataset, steps, tr, every_step)
    del steps, every_step
    features = critic_features(ope, train, encoder)
    settings = Settings.of(ope, gamma=params.gamma, verifiers=params.relabel.verifiers,
                           weights=params.relabel.weights, n_episodes=tr.n_episodes)
    behavior = _behavior(tr, features, train, Path(models_dir) / dataset)
    data = LoggedData.prepare(tr, features, behavior, settings, ope.seed, replay_log=log)
    base: dict[str, Policy] = {}
    trained_on: dict[str, str] = {}
    names = candidates_of(params, dataset)
    if "behavior" in names:
        base["behavior"] = fixture.behavior_policy(dataset, params)
    trained = train.datasets or params.dataset_names()
    for d in sorted(trained, key=lambda d: d != dataset):  # its own first, as candidates_of
        prefix = "" if d == dataset else f"{d}/"
        if not prefix or ope.cross_agent:
            for learner, policy in load_learners(Path(models_dir) / d, train.learners,
                                                 encoder).items():
                base[prefix + learner], trained_on[prefix + learner] = policy, d
    candidates: dict[str, Policy | Candidate] = dict(with_derived(
        base, ope.candidates.model_dump(), UniformValidPolicy(encoder.valid_actions)))
    candidates.update(external)
    if list(candidates) != names:  # the flow maps one task per listed name
        raise RuntimeError(f"ope on {dataset}: built candidates {list(candidates)}, the flow "
                           f"lists {names}")
    no_truth = no_truth_reason(fixture)
    info = {"episodes": tr.n_episodes, "steps": tr.n,
            "logged_propensities": tr.logged_propensities, "replay": reason,
            "fixture": None if fixture is None else fixture.name,
            "critic": "refit per resample" if data.groups is not None else "delta method",
            # tasks per candidate for a refitted critic's bootstrap (none for the delta method)
            "boot_chunks": math.ceil(ope.n_boot / ope.boot_chunk)
            if data.groups is not None and "critic" in ope.layers else 0,
            "truth": no_truth or f"the {fixture.name} fixture's simulator, each candidate "
                                 "with its standard error (0: exact)"}
    if external:  # where each candidate from outside came from (file, sha256, scoring)
        info["external"] = {name: dict(c.provenance) for name, c in external.items()}
    return PreparedCandidates(
        dataset, data, settings, candidates, trained_on,
        truth=None if no_truth else partial(fixture.truth_metrics, params=params),
        seed=ope.seed, replay_reason=reason, info=info)


@task(name="dataset-info", task_run_name="about {dataset}", cache_policy=NO_CACHE)
def dataset_info(prepared: PreparedCandidates, dataset: str) -> dict[str, Any]:
    """What the report says of the evaluated logs (episodes, propensities, replay, truth)."""
    return prepared.info


@task(name="logged-value", task_run_name="logged value of {dataset}")
def logged_value_of(steps_dir: Path, models_dir: Path, dataset: str,
                    params: Params) -> dict:
    """A dataset's own logged value (the agent's return on its own logs), the model the
    logs name (metadata.behavior_policy) and its mean return per task (the agents'
    ranking pairs them by task)."""
    ope, _ = sections(params)
    steps = read_table(steps_dir, columns=LOGGED_COLUMNS)
    tr = load_encoder(models_dir).transitions(steps)
    return {**logged_value(tr, gamma=params.gamma, seed=ope.seed, n_boot=ope.n_boot,
                           level=ope.confidence).to_dict(),
            "model": logged_model(steps), "task_returns": task_returns(tr, params.gamma)}


@dataclass
class StartedCandidate:
    """One candidate's records but a refitted critic's interval, and its truth."""

    pending: PendingEvaluation
    truth: dict | None


@task(name="evaluate-candidate", task_run_name="evaluate {candidate} on {dataset}",
      cache_policy=NO_CACHE)
def evaluate_candidate(prepared: PreparedCandidates, candidate: str,
                       dataset: str) -> StartedCandidate:
    """Every layer for one candidate, a refitted critic's bootstrap planned in chunks (run
    by `bootstrap_chunk`). `dataset` (= prepared.dataset) names the task run."""
    names = list(prepared.candidates)
    # The candidate's position, not the order tasks run in, fixes its seed.
    seed = prepared.seed + 1000 * names.index(candidate)
    chosen = prepared.candidates[candidate]
    # A scored table has no policy to roll out: no truth beside its estimates.
    policy = chosen.policy if isinstance(chosen, Candidate) else chosen
    truth = None
    if prepared.truth is not None and policy is not None:
        start = time.perf_counter()
        truth = {k: float(v) for k, v in prepared.truth(policy).items()
                 if isinstance(v, int | float)}
        get_run_logger().info("truth of %s: return %.4f (SE %.4f), success %.4f (%.1f s)",
                              candidate, truth["return"], truth["return_se"],
                              truth["success"], time.perf_counter() - start)
    return StartedCandidate(start_evaluation(prepared.data, chosen, prepared.settings, seed),
                            truth)


@task(name="bootstrap-chunk", task_run_name="bootstrap {candidate} on {dataset}: chunk {chunk}",
      cache_policy=NO_CACHE)
def bootstrap_chunk(prepared: PreparedCandidates, started: StartedCandidate, chunk: int,
                    candidate: str, dataset: str) -> np.ndarray:
    """The critic refitted on one chunk of a candidate's resamples: (2, replicates)."""
    return boot_chunk_values(prepared.data, started.pending, chunk)


@task(name="finish-candidate", task_run_name="combine {candidate} on {dataset}",
      cache_policy=NO_CACHE)
def finish_candidate(prepared: PreparedCandidates, started: StartedCandidate,
                     values: list[np.ndarray], candidate: str, dataset: str) -> list[dict]:
    """The candidate's records, the critic's interval from its chunks in chunk order; replay
    and verifier say why where they do not apply."""
    estimates = finish_evaluation(started.pending, values)
    if prepared.replay_reason is not None:
        estimates = not_applicable(prepared.replay_reason, prepared.settings.layers,
                                   prepared.data.n, prepared.settings.level,
                                   estimates[0].support if estimates else np.nan) + estimates
    return [record(dataset, candidate, e, started.truth,
                   prepared.trained_on.get(candidate, dataset),
                   prepared.info.get("external", {}).get(candidate)) for e in estimates]
