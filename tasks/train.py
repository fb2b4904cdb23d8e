"""Prefect tasks of the train stage: one encoding for every dataset, then the learners on
each (also read by the table and ope stages: `load_encoder`, `load_learners`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow.compute as pc
from prefect import get_run_logger, task

from tracerl.config.learning import Ope, Train
from tracerl.data import relabel as rl
from tracerl.feature_maps import critic_features, train_features
from tracerl.io.fileio import read_table, write_json
from tracerl.rl.artifact import load_policy, save_policy
from tracerl.rl.encoding import encoder_for, encoder_of, episode_groups
from tracerl.rl.learners import fit_learners, heldout_accuracy, swirl_inputs

ENCODER_FILE = "encoder.json"
# What the encoders, the SWiRL filters (and the turns they weigh) and a held-out split read
# of a step table.
TRAINING_COLUMNS = ("episode_id", "t", "turn", "task", "state", "action", "observation",
                    "reward",
                    "done", "action_logprobs", "episode", "extra", "split",
                    "reward_components", "source_file", "source_record")


def load_encoder(models_dir: Path) -> Any:
    """The encoder the train stage fitted (its vocabularies fixed), from models/."""
    return encoder_of(orjson.loads((Path(models_dir) / ENCODER_FILE).read_bytes()))


def load_learners(models_dir: Path, learners: list[str], encoder: Any) -> dict[str, Any]:
    """The policies the train stage saved for one dataset, by learner name."""
    return {name: load_policy(Path(models_dir) / f"{name}.json", encoder) for name in learners}


def training_transitions(steps_dir: Path, train: Train, encoder: Any,
                         filters: Any = None) -> tuple[Any, Any]:
    """(the step table the learners read, after the train split and the SWiRL filter
    `train.data_filter` over the components `filters` names (relabel.filters); its
    transitions)."""
    steps = read_table(steps_dir, columns=TRAINING_COLUMNS)
    if train.split:
        steps = steps.filter(pc.equal(steps.column("split"), train.split))
    steps = rl.select_training_data(steps, train.data_filter,
                                    *((filters.process, filters.outcome) if filters else ()))
    return steps, encoder.transitions(steps)


@task(name="fit-encoder", task_run_name="fit encoder {train.encoder}")
def fit_encoder(train: Train, steps_dirs: list[Path], models_dir: Path) -> dict:
    """One encoding for every dataset of the pipeline (vocabularies learnt from all)."""
    encoder = encoder_for([read_table(d, columns=TRAINING_COLUMNS) for d in steps_dirs],
                          train.encoder, **train.encoder_params)
    spec = encoder.spec()
    write_json(Path(models_dir) / ENCODER_FILE, spec)
    get_run_logger().info("encoder %s: %d actions, state cardinality %s", train.encoder,
                          len(encoder.actions), list(encoder.cardinality))
    return spec


def _learner_summary(policy: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"class": type(policy).__name__}
    if hasattr(policy, "state_keys_"):
        info["states"] = len(policy.state_keys_)
    if hasattr(policy, "unsupported_states_"):
        info["unsupported_states"] = len(policy.unsupported_states_)
    if getattr(policy, "recipe_", None):
        info["recipe"] = policy.recipe_
    for name in ("converged_", "bellman_residual_"):
        if hasattr(policy, name):
            info[name.rstrip("_")] = getattr(policy, name)
    return info


@task(name="train-policies", task_run_name="train {name}")
def train_policies(name: str, steps_dir: Path, models_dir: Path, encoder_spec: dict,
                   train: Train, gamma: float, *, filters: Any = None, export: Any = None,
                   ope: Ope | None = None) -> dict:
    """Fit the learners on one dataset's labelled steps; save each policy with its params
    and data hash; BC's accuracy on held-out groups when `train.heldout` asks for it.
    filters, export, ope: the params sections relabel.filters, export and ope (None: not
    in the params), which the SWiRL learners read (tracerl.rl.learners.swirl_inputs)."""
    encoder = encoder_of(encoder_spec)  # written by this stage: staged, not yet in place
    features = train_features(train, encoder)
    steps, tr = training_transitions(steps_dir, train, encoder, filters)
    data_hash = tr.data_hash()
    out_dir = Path(models_dir) / name
    summary: dict[str, Any] = {"rows": tr.n, "episodes": tr.n_episodes,
                               "data_hash": data_hash, "policies": {}}
    ope = ope or Ope()
    swirl = swirl_inputs(steps, tr, train, sft=export.sft if export else None,
                         weighting=export.weighting if export else None,
                         process=filters.process if filters else None,
                         outcome=filters.outcome if filters else None,
                         critic_features=critic_features(ope, train, encoder), ope=ope,
                         gamma=gamma)
    try:
        policies = fit_learners(tr, features, train, gamma, **swirl)
    except ValueError as exc:  # e.g. a filter that keeps no step: name the dataset
        raise ValueError(f"train: dataset {name} ({steps_dir}): {exc}") from None
    for learner, policy in policies.items():
        save_policy(policy, out_dir / f"{learner}.json", data_hash)
        summary["policies"][learner] = _learner_summary(policy)
    if train.heldout is not None and "bc" in train.learners:
        summary["bc_heldout"] = {"group_by": train.heldout.group_by, **heldout_accuracy(
            tr, episode_groups(steps, train.heldout.group_by), features, train.bc,
            train.tie_break, train.heldout.n_folds, train.seed)}
    return summary
