"""The calculator proves the engine the real logs use: the same train and ope code for all
three pipelines, and on the calculator that code equals the exact evaluator's tables.

- the one-hot critic (FQE) equals the tabular Bellman solution of the same data, solved
  here independently as a dense linear system, to 1e-9; so does the same critic solved as
  LSTD-Q (the solve hashed features take);
- BC and FQI through the engine give the chapter's policies, derived here from the raw
  records with dictionaries, state by state;
- the train and ope stages of the calculator, tau2 and support-desk pipelines run the same
  flow and the same code files.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import orjson
import pyarrow.compute as pc
import pytest
import yaml

from tests.calculator_ope import (
    CRITIC_FEATURES,
    ENCODER,
    POLICY_FEATURES,
    prepared,
    settings,
    steps_of,
)
from tracerl.cli import flow_of
from tracerl.config.deps import code_dep_of
from tracerl.config.learning import Train
from tracerl.envs.calculator.behavior import BehaviorPolicy, scripted_optimal_policy
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.rules import ACTIONS, valid_actions
from tracerl.ope.critic import Critic
from tracerl.ope.evaluate import evaluate_policy
from tracerl.rl.learners import fit_learners
from tracerl.rl.policy import MixturePolicy

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = {"calculator": "dvc.yaml", "tau2": "pipelines/tau2/dvc.yaml",
             "support_desk": "pipelines/support_desk/dvc.yaml"}


def tabular_fqe(tr, target: np.ndarray, gamma: float) -> np.ndarray:
    """V(s) of the target on the empirical model of the logged transitions: per logged
    (s, a), the mean reward and the next-state frequencies (the end: none); Q = 0 on pairs
    never logged. Solved as one dense linear system (I - gamma M) q = R."""
    pairs = sorted({(int(s), int(a)) for s, a in zip(tr.s, tr.a, strict=True)})
    index = {p: i for i, p in enumerate(pairs)}
    n = len(pairs)
    reward, m, count = np.zeros(n), np.zeros((n, n)), np.zeros(n)
    for s, a, r, nxt, done in zip(tr.s, tr.a, tr.r, tr.s_next, tr.done, strict=True):
        i = index[(int(s), int(a))]
        count[i] += 1
        reward[i] += r
        if nxt >= 0 and not done:
            for b in range(tr.n_actions):
                if (int(nxt), b) in index:
                    m[i, index[(int(nxt), b)]] += target[nxt, b]
    reward, m = reward / count, m / count[:, None]
    q = np.linalg.solve(np.eye(n) - gamma * m, reward)
    v = np.zeros(tr.n_states)
    for (s, a), i in index.items():
        v[s] += target[s, a] * q[i]
    return v


@pytest.mark.parametrize("dataset", ["good_coverage", "no_mul_support"])
def test_the_one_hot_critic_is_the_tabular_bellman_solution(dataset):
    tr = ENCODER.transitions(steps_of(dataset, 3000, seed=20261129))
    for policy in (BehaviorPolicy(dataset), scripted_optimal_policy(),
                   MixturePolicy([BehaviorPolicy("good_coverage"), scripted_optimal_policy()],
                                 [0.4, 0.6])):
        target = policy.action_probs(tr.rows)
        v = tabular_fqe(tr, target, 0.99)
        exact = float(v[tr.initial_states].mean())
        table = Critic(CRITIC_FEATURES, 0.99).fit(tr, target)
        lstd = Critic(CRITIC_FEATURES, 0.99, alpha=0.0, solver="lstd").fit(tr, target)
        assert table.value_ == pytest.approx(exact, abs=1e-9)
        assert lstd.value_ == pytest.approx(exact, abs=1e-9)
        np.testing.assert_allclose(table.v_, v, atol=1e-9)


def chapter_policies(records: list[dict]) -> dict[str, dict[str, str]]:
    """The chapter's three policies from the raw records, with dictionaries: per state key
    (task|x known|y known|result), BC's most frequent valid action (ties: lowest index),
    and FQI over every valid action or over the valid actions logged there (50 backups of
    the per-(state, action) mean target)."""
    def key(r: dict) -> str:
        memory = orjson.loads(r["state"]["memory"])
        result = memory.get("result")
        return (f"{r['task']}|{int('x' in memory)}|{int('y' in memory)}|"
                f"{'-' if result is None else result}")

    by_episode = defaultdict(list)
    for r in records:
        by_episode[r["episode_id"]].append(r)
    steps = []  # (state, action, reward, next state or None, done)
    for episode in by_episode.values():
        episode.sort(key=lambda r: r["t"])
        for i, r in enumerate(episode):
            nxt = key(episode[i + 1]) if i + 1 < len(episode) else None
            steps.append((key(r), ACTIONS.index(r["action"]["tool"]), r["reward"], nxt,
                          r["done"]))
    counts = defaultdict(Counter)
    for s, a, *_ in steps:
        counts[s][a] += 1

    def best(scores: dict[int, float], allowed: list[int]) -> int:
        top = max(scores.get(a, 0.0) for a in allowed)
        return min(a for a in allowed if scores.get(a, 0.0) >= top - 1e-9)

    out = {"bc": {s: ACTIONS[best(dict(c), list(valid_actions(s)))] for s, c in counts.items()}}
    for name, logged_only in (("naive_fqi", False), ("constrained_fqi", True)):
        def allowed(s: str, logged_only: bool = logged_only) -> list[int]:
            valid = list(valid_actions(s))
            logged = [a for a in valid if counts[s][a]] if logged_only else valid
            return logged or valid
        q: dict[str, dict[int, float]] = defaultdict(dict)
        for _ in range(50):
            target = defaultdict(list)
            for s, a, r, nxt, done in steps:
                v = 0.0 if nxt is None or done else max(q[nxt].get(b, 0.0) for b in allowed(nxt))
                target[(s, a)].append(r + 0.99 * v)
            q = defaultdict(dict)
            for (s, a), ys in target.items():
                q[s][a] = sum(ys) / len(ys)
        out[name] = {s: ACTIONS[best(q[s], allowed(s))] for s in counts}
    return out


@pytest.mark.parametrize("dataset, success", [
    ("good_coverage", {"bc": 1.0, "naive_fqi": 1.0, "constrained_fqi": 1.0}),
    ("no_mul_support", {"bc": 2 / 3, "naive_fqi": 1.0, "constrained_fqi": 2 / 3})])
def test_bc_and_fqi_through_the_engine_are_the_chapters(dataset, success):
    from tracerl.envs.calculator.logs import log_records

    records = [r for r in log_records(dataset, 3000, 20261129, 0.2)
               if r["split"] == "train"]
    steps = steps_of(dataset, 3000, seed=20261129, test_fraction=0.2)
    steps = steps.filter(pc.equal(steps.column("split"), "train"))
    learned = fit_learners(ENCODER.transitions(steps), POLICY_FEATURES,
                           Train(encoder="calculator"), 0.99)
    chapter = chapter_policies(records)
    for name, policy in learned.items():
        ours = dict(zip(policy.state_keys_.tolist(),
                        (ACTIONS[a] for a in policy.action_), strict=True))
        assert ours == chapter[name], name
        assert exact_value(policy)["success"] == pytest.approx(success[name], abs=0.01)


def test_the_delta_method_path_gives_the_same_values_on_the_calculator():
    """The path non-repeating logs take (LSTD-Q, delta-method interval, per-fold critics),
    forced on the calculator: the same values as the refitted one-hot critic, intervals
    around the exact truth."""
    steps = steps_of("good_coverage", 3000, seed=5)
    refit, delta = settings(3000, return_range=(-1.05, 0.98)), settings(
        3000, return_range=(-1.05, 0.98), critic={"interval": "delta"})
    a, b = prepared(steps, refit, replay=False), prepared(steps, delta, replay=False)
    assert a.groups is not None and b.groups is None
    target = MixturePolicy([BehaviorPolicy("good_coverage"), scripted_optimal_policy()],
                           [0.5, 0.5])
    truth = exact_value(target)["return"]
    one = {e.estimator: e for e in evaluate_policy(a, target, refit, seed=1)}
    two = {e.estimator: e for e in evaluate_policy(b, target, delta, seed=1)}
    for name in ("fqe", "is", "wis"):
        assert two[name].value == pytest.approx(one[name].value, abs=1e-9), name
    for name in ("fqe", "dr", "wdr"):
        assert two[name].ci_low <= truth <= two[name].ci_high, name
        assert abs(two[name].value - truth) < 0.03, name


def _stage_deps(dvc_file: str, stage: str) -> set[str]:
    spec = yaml.safe_load((ROOT / dvc_file).read_text())["stages"][stage]
    return {d for d in spec["deps"] if isinstance(d, str)
            and d.startswith(("tracerl/", "flows/", "tasks/"))}


@pytest.mark.parametrize("stage", ["train", "ope", "report"])
def test_every_pipeline_runs_the_same_stage_code(stage):
    flows = {name: flow_of(stage) for name in PIPELINES}
    assert len(set(flows.values())) == 1, flows
    # ... and the same code files (the import closure of that flow): no module, flow or
    # task of one pipeline only
    deps = {name: _stage_deps(f, stage) for name, f in PIPELINES.items()}
    common = set.intersection(*deps.values())
    for name, files in deps.items():
        engine = {d for d in files - common if not d.startswith("tracerl/envs/")}
        assert not engine, (name, sorted(engine))
    entry = {"train": "tracerl/rl/learners.py", "ope": "tracerl/ope/evaluate.py",
             "report": "tracerl/report/learning.py"}[stage]
    assert code_dep_of(ROOT, ROOT / entry).relative_to(ROOT).as_posix() in common  # its package
