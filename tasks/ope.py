"""Prefect task for layered off-policy evaluation of every candidate on one dataset."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from prefect import task

import tracerl.envs  # noqa: F401  (registers the fixtures)
from tasks.learning import LEARNERS
from tracerl.features import get_featurizer
from tracerl.fileio import read_table
from tracerl.fixtures import fixture_of
from tracerl.ope.candidates import UniformValidPolicy, build_candidates
from tracerl.ope.estimate import DEFAULT_MIN_N_EFF
from tracerl.ope.layers import OPE_COLUMNS, LoggedData, OPESettings, evaluate_policy
from tracerl.ope.report import record
from tracerl.policies.artifact import load_policy


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


@task(name="evaluate-candidates", task_run_name="evaluate candidates on {dataset}")
def evaluate_candidates(steps_dir: Path, models_dir: Path, dataset: str,
                        params: dict[str, Any]) -> list[dict[str, Any]]:
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
    records = []
    for k, (name, policy) in enumerate(candidates.items()):
        truth = fixture.truth_metrics(policy, params) if fixture.truth_metrics else None
        for estimate in evaluate_policy(data, policy, adapter, settings,
                                        seed=int(params["ope"]["seed"]) + 1000 * k):
            records.append(record(dataset, name, estimate, truth))
    return records
