"""Prefect task of the train stage, and the learners it fits (also read by table and ope)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
from prefect import task

from tracerl.data import relabel as rl
from tracerl.io.fileio import read_table
from tracerl.policies import BehaviorCloning, FittedQIteration, Transitions
from tracerl.policies.artifact import save_policy, table_hash

LEARNERS = {
    "bc": lambda p, gamma: BehaviorCloning(tie_break=p["tie_break"], seed=p["seed"]),
    "naive_fqi": lambda p, gamma: FittedQIteration(gamma=gamma, n_iterations=p["iterations"],
                                                   support="none", tie_break=p["tie_break"],
                                                   seed=p["seed"]),
    "constrained_fqi": lambda p, gamma: FittedQIteration(gamma=gamma,
                                                         n_iterations=p["iterations"],
                                                         support="logged",
                                                         tie_break=p["tie_break"],
                                                         seed=p["seed"]),
}


# What the learners read of a step table (featurizers, transitions, the SWiRL filters);
# the data hash saved with each policy covers exactly these.
TRAINING_COLUMNS = ("episode_id", "t", "task", "state.memory", "state.available_tools",
                    "action", "reward", "done", "action_logprobs", "split",
                    "reward_components")


@task(name="train-policies", task_run_name="train {out_dir.name}")
def train_policies(steps_dir: Path, featurizer: str, out_dir: Path, train: dict,
                   gamma: float) -> dict:
    from tracerl.features import get_featurizer

    steps = read_table(steps_dir, columns=TRAINING_COLUMNS)
    if train.get("split"):
        steps = steps.filter(pc.equal(steps.column("split"), train["split"]))
    steps = rl.select_training_data(steps, train["data_filter"])
    data_hash = table_hash(steps)
    transitions = Transitions.from_steps(steps, get_featurizer(featurizer))
    summary = {"rows": steps.num_rows, "data_hash": data_hash, "policies": {}}
    for name, make in LEARNERS.items():
        policy = make(train, gamma).fit(transitions)
        save_policy(policy, out_dir / f"{name}.json", data_hash)
        summary["policies"][name] = {
            "states": len(policy.state_keys_),
            "unsupported_states": len(policy.unsupported_states_),
        }
    return summary
