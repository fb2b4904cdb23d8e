"""Prefect tasks of the feature-based train and ope stages (`train.kind: features`,
`ope.kind: features`): read tables and artifacts, call `tracerl`, write results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
from prefect import get_run_logger, task

from tracerl.config.fixtures import get_fixture
from tracerl.fa_encoders import ENCODERS, encoder_for, episode_groups
from tracerl.fa_learning import fit_learners, hashed_featurizer, heldout_accuracy
from tracerl.io.fileio import read_table, write_json
from tracerl.ope.estimate import NOT_APPLICABLE
from tracerl.ope.fa_evaluate import (
    ReplaySettings,
    evaluate_features,
    logged_value,
    replay_reason,
)
from tracerl.ope.fa_layers import FAOPEConfig
from tracerl.policies.sklearn_policies import load_fa_policy, save_fa_policy

# What the encoders read of a step table (and what an error message points at).
ENCODER_COLUMNS = ("episode_id", "t", "task", "state", "action", "observation", "reward",
                   "done", "action_logprobs", "episode", "extra", "metadata", "source_file",
                   "source_record")
ENCODER_FILE = "encoder.json"


def _steps(steps_dir: Path) -> Any:
    return read_table(steps_dir, columns=ENCODER_COLUMNS)


def load_encoder(models_dir: Path) -> tuple[Any, dict]:
    """The encoder the train stage fitted (its vocabularies fixed), from models/."""
    return encoder_of(orjson.loads((Path(models_dir) / ENCODER_FILE).read_bytes()))


def encoder_of(spec: dict) -> tuple[Any, dict]:
    """(encoder, spec) from the spec `fit_encoder` wrote."""
    return ENCODERS[spec["name"]](**spec["params"]), spec


@task(name="fit-encoder", task_run_name="fit encoder {name}")
def fit_encoder(name: str, params: dict, steps_dirs: list[Path], models_dir: Path,
                n_bits: int, templates: list | None) -> dict:
    """One encoding for every dataset of the pipeline (vocabularies learnt from all)."""
    encoder = encoder_for([_steps(d) for d in steps_dirs], name, **params)
    featurizer = hashed_featurizer(name, encoder.cardinality, len(encoder.actions), n_bits,
                                   templates)
    get_params = getattr(encoder, "get_params", None)  # a fixed encoder has no params
    d = {"name": name, "params": get_params() if get_params else {},
         "cardinality": list(encoder.cardinality), "featurizer": featurizer.get_params()}
    write_json(Path(models_dir) / ENCODER_FILE, d)
    get_run_logger().info("encoder %s: %d actions, state cardinality %s, %d hashed columns",
                          name, len(encoder.actions), list(encoder.cardinality),
                          featurizer.n_features)
    return d


@task(name="train-features", task_run_name="train features {name}")
def train_features(name: str, steps_dir: Path, models_dir: Path, encoder_spec: dict,
                   train: dict, gamma: float) -> dict:
    """Fit the learners on one dataset's labelled steps; save each policy with its params
    and data hash; BC's accuracy on held-out tasks (grouped k-fold)."""
    from tracerl.hashed_features import HashedFeaturizer

    encoder, d = encoder_of(encoder_spec)  # written by this stage: staged, not yet in place
    featurizer = HashedFeaturizer.from_params(d["featurizer"])
    steps = _steps(steps_dir)
    tr = encoder.transitions(steps)
    data_hash = tr.data_hash()
    hyper = {k: train.get(k, {}) for k in ("bc", "fqi", "fqi_constrained")}
    seed = int(train["seed"])
    policies = fit_learners(tr, featurizer, train["learners"], hyper, gamma, seed)
    out_dir = Path(models_dir) / name
    summary: dict[str, Any] = {"rows": tr.n_steps, "episodes": tr.n_episodes,
                               "data_hash": data_hash, "policies": {}}
    for learner, policy in policies.items():  # over the few learners
        save_fa_policy(policy, out_dir / f"{learner}.json", data_hash)
        info = {"class": type(policy).__name__}
        if hasattr(policy, "converged_"):
            info["converged"] = bool(policy.converged_)
        if hasattr(policy, "bellman_residual_"):
            info["bellman_residual"] = float(policy.bellman_residual_)
        summary["policies"][learner] = info
    heldout = train.get("heldout", {})
    group_by = heldout.get("group_by", "task")
    if "bc" in train["learners"]:
        summary["bc_heldout"] = {"group_by": group_by, **heldout_accuracy(
            tr, episode_groups(steps, group_by), featurizer, hyper["bc"],
            int(heldout.get("n_folds", 5)), seed)}
    return summary


@task(name="ope-features", task_run_name="evaluate candidates on {name}")
def ope_features(name: str, steps_dir: Path, models_dir: Path, candidates: dict[str, Path],
                 ope: dict, relabel: dict, gamma: float, fixture_name: str | None) -> dict:
    """Every applicable layer for every candidate on one dataset's logs; the behaviour
    model is the BC fitted on this dataset (its propensities are estimated)."""
    from tracerl.hashed_features import HashedFeaturizer

    encoder, d = load_encoder(models_dir)
    featurizer = HashedFeaturizer.from_params(d["featurizer"])
    tr = encoder.transitions(_steps(steps_dir))
    behavior_path = Path(models_dir) / name / "bc.json"
    if not behavior_path.is_file():
        raise ValueError(f"ope on {name}: no behaviour model {behavior_path} (train.learners "
                         f"must include bc and train.datasets {name})")
    behavior = load_fa_policy(behavior_path)
    policies = {c: load_fa_policy(p) for c, p in candidates.items()}
    value_range = ope.get("return_range")
    config = FAOPEConfig(gamma=gamma, n_boot=int(ope["n_boot"]), level=float(ope["confidence"]),
                         seed=int(ope["seed"]), min_support=float(ope["min_support"]),
                         min_behavior_prob=float(ope["min_behavior_prob"]),
                         min_ess_fraction=float(ope["min_ess_fraction"]),
                         min_dual_ess_fraction=float(ope["min_dual_ess_fraction"]),
                         critic_alpha=float(ope["critic_alpha"]),
                         value_range=tuple(value_range) if value_range else None)
    fixture = get_fixture(fixture_name) if fixture_name else None
    reason = replay_reason(fixture_name, fixture, encoder.actions)
    replay_steps, replay_settings = None, None
    if reason is None:  # the fixture replays: the whole table, the relabel stage's verifiers
        replay_steps = read_table(steps_dir)
        replay = ope.get("replay") or {}
        replay_settings = ReplaySettings(
            verifiers=list(relabel["verifiers"]), weights=dict(relabel["weights"]),
            success_component=(relabel.get("filters") or {}).get("outcome"),
            replays=int(replay.get("replays", 8)), max_steps=int(replay.get("max_steps", 50)))
    estimates = evaluate_features(tr, policies, behavior_model=behavior,
                                  critic_featurizer=featurizer, config=config,
                                  layers=ope["layers"], fixture_name=fixture_name,
                                  fixture=fixture, steps=replay_steps,
                                  actions=encoder.actions, replay_settings=replay_settings)
    if reason is None:  # replay ran; it may still have failed to be scored (said per row)
        # (a replay with too little support has no value either, but is not this)
        reason = next((e.flags[0].split(": ", 1)[1] for ests in estimates.values()
                       for e in ests if e.layer == "replay" and e.flags
                       and e.flags[0].startswith(f"{NOT_APPLICABLE}: ")), None)
    records = []
    for candidate, ests in estimates.items():
        trained_on = candidate.split("/", 1)[0]
        for e in ests:
            records.append({"dataset": name, "policy": candidate, "trained_on": trained_on,
                            "cross_agent": trained_on != name, **e.to_dict()})
    logged = logged_value(tr, gamma=gamma, seed=config.seed, n_boot=config.n_boot,
                          level=config.level)
    return {"records": records, "logged": logged.to_dict(), "episodes": tr.n_episodes,
            "steps": tr.n_steps, "logged_propensities": bool(
                tr.n_steps and np.isfinite(tr.behavior_logp).all()),
            "fixture": fixture_name, "replay": reason}


def no_truth_reason(fixture_name: str | None, fixture: Any) -> str | None:
    """Why the dataset's candidates have no truth beside their estimates (None: they do)."""
    if fixture is None:
        return ("no truth: real logs have no simulator to roll a candidate out in, so "
                "estimates are read against the logged value only")
    if fixture.truth_metrics is None:
        return f"no truth: the {fixture_name} fixture brings none"
    return None


@task(name="truth-features", task_run_name="truth of the candidates on {fixture_name}")
def truth_features(fixture_name: str, candidates: dict[str, Path],
                   params: dict) -> dict[str, dict[str, float]]:
    """Per candidate, the fixture's truth of every metric OPE reports (``return``,
    ``success``) with their standard errors: its rollouts in the simulator, as sized and
    seeded by the fixture's params."""
    import time

    fixture = get_fixture(fixture_name)
    out = {}
    for name, p in candidates.items():  # a few candidates, each a vectorised Monte Carlo
        start = time.perf_counter()
        out[name] = {k: float(v) for k, v in fixture.truth_metrics(load_fa_policy(p),
                                                                   params).items()}
        get_run_logger().info("truth of %s: return %.4f (SE %.4f), success %.4f (%.1f s)",
                              name, out[name]["return"], out[name]["return_se"],
                              out[name]["success"], time.perf_counter() - start)
    return out


@task(name="logged-value", task_run_name="logged value of {name}")
def logged_value_of(name: str, steps_dir: Path, models_dir: Path, ope: dict,
                    gamma: float) -> dict:
    """A dataset's own logged value (the agent's success on its own logs)."""
    encoder, _ = load_encoder(models_dir)
    tr = encoder.transitions(_steps(steps_dir))
    e = logged_value(tr, gamma=gamma, seed=int(ope["seed"]), n_boot=int(ope["n_boot"]),
                     level=float(ope["confidence"]))
    return e.to_dict()
