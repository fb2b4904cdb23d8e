"""Prefect tasks for relabelling, coverage and training: thin wrappers over the library."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
from prefect import task

import tracerl.envs  # noqa: F401  (registers the fixtures' featurizers and verifiers)
from tracerl import relabel as rl
from tracerl.fileio import read_table, write_json, write_table, write_text
from tracerl.policies import BehaviorCloning, FittedQIteration, Transitions
from tracerl.policies.artifact import save_policy, table_hash


@task(name="relabel-steps")
def relabel_steps(steps_dir: Path, out_dir: Path, verifiers: list[str],
                  weights: dict[str, float], filters: dict | None = None) -> dict:
    """filters: the components the SWiRL filters read ({"process": {component: good
    value}, "outcome": component}); library defaults when absent."""
    filters = filters or {}
    steps = read_table(steps_dir)
    labelled = rl.relabel(steps, verifiers, weights)
    write_table(labelled, out_dir)
    changed = pc.greater(pc.abs(pc.subtract(labelled.column("reward"),
                                            labelled.column("reward_logged"))), 1e-12)
    episodes = {mode: len(pc.unique(rl.select_training_data(
        labelled, mode, filters.get("process"), filters.get("outcome")).column("episode_id")))
        for mode in rl.MODES}
    return {
        "rows": labelled.num_rows,
        "episodes_by_filter": episodes,
        "rows_reward_changed": int(pc.sum(changed).as_py() or 0),
        "mean_reward": float(np.mean(labelled.column("reward").to_numpy())),
        "verifier_version": labelled.column("verifier_version")[0].as_py()
        if labelled.num_rows else None,
        "verifier_diagnostics": rl.diagnostics(labelled, verifiers),
    }


@task(name="coverage-report")
def coverage_of(steps_dir: Path, featurizer: str, out_dir: Path, name: str,
                featurizer_params: dict | None = None) -> dict:
    from tracerl.coverage import coverage_report
    from tracerl.features import featurizer_for

    steps = read_table(steps_dir)
    report = coverage_report(steps, featurizer_for(steps, featurizer, **(featurizer_params or {})))
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / f"{name}.json", report.to_dict())
    markdown = report.to_markdown()
    write_text(out_dir / f"{name}.md", markdown + "\n")
    report.plot(out_dir / f"{name}.png")
    return {"markdown": markdown, "summary": report.to_dict().get("summary", {})}


@task(name="cross-agent-coverage")
def cross_agent_coverage_of(target_dir: Path, reference_dir: Path, featurizer: str,
                            featurizer_params: dict | None, out_dir: Path, target: str,
                            reference: str) -> dict:
    """Share of the target dataset's (state, action) pairs the reference's logs contain."""
    from tracerl.coverage import cross_agent_coverage
    from tracerl.features import featurizer_for

    keys = []
    for folder in (target_dir, reference_dir):
        steps = read_table(folder)
        f = featurizer_for(steps, featurizer, **(featurizer_params or {}))
        keys += [f.state_keys(steps), f.action_keys(steps)]
    report = cross_agent_coverage(*keys, target=target, reference=reference)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"cross_agent_{target}_in_{reference}"
    write_json(out_dir / f"{stem}.json", report.to_dict())
    write_text(out_dir / f"{stem}.md", report.to_markdown())
    return {"markdown": report.to_markdown(), "overall": report.overall}


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


@task(name="train-policies")
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


@task(name="calculator-table")
def evaluate_calculator_policies(models: Path, datasets: list[str], behavior: dict,
                                 mc_episodes: int, seed: int, gamma: float) -> dict:
    from tracerl.envs.calculator import BehaviorPolicy, BehaviorSpec
    from tracerl.envs.calculator_table import calculator_table
    from tracerl.policies.artifact import load_policy

    policies = {name: {"behavior": BehaviorPolicy(name,
                                                  BehaviorSpec.from_params(behavior.get(name))),
                       **{p: load_policy(models / name / f"{p}.json") for p in LEARNERS}}
                for name in datasets}
    return calculator_table(policies, mc_episodes, seed, gamma)
