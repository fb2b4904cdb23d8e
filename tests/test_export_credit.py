"""Step credit under the logging policy (tracerl.rl.credit), the weighted-steps export
and preference pairs mined from logged alternatives, on logs built so the answer is known:
real native JSONL ingested, relabelled and exported as the stage does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest
import scipy.sparse.linalg as spla

from tests.export_checks import check_export_folder
from tests.test_export import labelled_table
from tracerl.config.export import Export
from tracerl.config.learning import LOGS_TRAIN, Ope, Train
from tracerl.export.credit import worst_pairs
from tracerl.export.run import export_dataset, plan_credit
from tracerl.ope.critic import Critic, Design
from tracerl.report.credit import credit_section
from tracerl.rl.credit import credit_weights, step_credit
from tracerl.rl.features import OneHot
from tracerl.rl.transitions import Transitions

VERIFIERS, WEIGHTS = ["tau2_outcome@1"], {"task_success": 1.0}


def _logs(path: Path, episodes: list[tuple[str, float]], prefix: str = "e") -> Path:
    """Native JSONL: per episode (first action, final reward) a call then an answer, on
    tasks t0..t3; the first call is made in the same state every time."""
    lines = []
    for k, (tool, reward) in enumerate(episodes):
        ep, task = f"{prefix}{k:03d}", f"t{k % 4}"
        lines.append(orjson.dumps({
            "episode_id": ep, "t": 0, "task": task,
            "state": {"user_goal": "find order 7", "available_tools": ["lookup", "guess"]},
            "action": {"type": "tool_call", "tool": tool, "arguments": {"q": "7"}},
            "observation": {"tool_result": {"rows": [k]}}, "reward": 0.0, "done": False}))
        lines.append(orjson.dumps({
            "episode_id": ep, "t": 1, "task": task, "state": {"user_goal": "find order 7"},
            "action": {"type": "final_answer", "content": f"answer {k}"},
            "observation": {}, "reward": reward, "done": True}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _steps(tmp: Path, episodes: list[tuple[str, float]], prefix: str = "e"):
    tmp.mkdir(parents=True, exist_ok=True)
    return labelled_table(tmp, _logs(tmp / "logs.jsonl", episodes, prefix), "jsonl",
                          VERIFIERS, WEIGHTS)


def _config(out: Path, **kw) -> Export:
    return Export(out=str(out), splits={"train": 1.0}, **kw)


def _export(steps, out: Path, **kw) -> tuple[dict, dict]:
    manifest = export_dataset(steps, out, _config(out, **kw),
                              process={"task_success": 0.0}, outcome="task_success")
    return manifest, check_export_folder(out)


def test_a_better_logged_alternative_becomes_a_pair(tmp_path):
    # lookup always succeeds, guess always fails, from the same state: the right pair.
    episodes = [("lookup", 1.0) if k % 2 == 0 else ("guess", 0.0) for k in range(40)]
    manifest, records = _export(_steps(tmp_path / "logs", episodes), tmp_path / "out")
    pairs = records["pairs"]["train"]
    assert len(pairs) == 20  # one per logged guess, each its own prompt
    assert manifest["exports"]["pairs"]["pairs"] == {"train": 20}
    assert manifest["exports"]["pairs"]["records"] == {"train": 20}  # one guess a conversation
    for p in pairs:
        assert p["chosen"][0]["tool_calls"][0]["function"]["name"] == "lookup"
        assert p["rejected"][0]["tool_calls"][0]["function"]["name"] == "guess"
        assert p["credit"]["scope"] == "within"
        # ~1 and ~0: the logistic behaviour model over hashed features puts a little mass
        # on actions never logged after the call, whose Q the features extrapolate
        assert p["credit"]["chosen"]["q"] == pytest.approx(1.0, abs=0.02)
        assert p["credit"]["rejected"]["q"] == pytest.approx(0.0, abs=0.02)
        assert p["prompt"][-1] == {"role": "user", "content": "find order 7"}
        rejected_episode = p["provenance"]["episode_id"]
        assert int(rejected_episode[1:]) % 2 == 1  # anchored on a guess
        assert int(p["provenance"]["chosen"]["episode_id"][1:]) % 2 == 0
    openai = records["pairs_openai"]["train"]
    assert len(openai) == 20
    assert openai[0]["preferred_output"][0]["tool_calls"][0]["function"]["name"] == "lookup"
    assert openai[0]["input"]["messages"][-1]["content"] == "find order 7"
    # The weighted steps: lookup's advantage +0.5, guess's -0.5 (V = 0.5 at the state); one
    # record per conversation, its two assistant messages weighted.
    weighted = records["weighted"]["train"]
    assert len(weighted) == 40  # every conversation
    assert sum(len(r["credit"]) for r in weighted) == 80  # every assistant turn
    assert manifest["exports"]["weighted"]["records"] == {"train": 40}
    assert manifest["exports"]["weighted"]["assistant_messages"] == {"train": 80}
    for r in weighted:
        ep, first = r["provenance"]["episode_id"], r["credit"][0]
        expected = 0.5 if int(ep[1:]) % 2 == 0 else -0.5
        assert first["steps"][0]["t"] == 0
        assert first["advantage"] == pytest.approx(expected, abs=0.02), ep
        assert first["weight"] == pytest.approx(np.exp(first["advantage"]), rel=1e-9)
        assert r["messages"][first["message"]]["weight"] == first["weight"]
    table = pq.read_table(tmp_path / "out" / "weighted" / "train.parquet")
    assert table.num_rows == 40 and {"messages", "credit"} <= set(table.column_names)
    row = table.slice(0, 1).to_pylist()[0]
    assert [c["message"] for c in row["credit"]] == [c["message"] for c in weighted[0]["credit"]]
    assert row["credit"][0]["advantage_low"] == weighted[0]["credit"][0]["advantage_ci"][0]
    assert manifest["files"]["credit/episodes.jsonl"]["records"] == 40


def test_no_pair_where_the_logs_do_not_tell_the_actions_apart(tmp_path):
    # Both actions succeed half of the time: equal Q, overlapping intervals, no pair.
    episodes = [("lookup" if k % 2 == 0 else "guess", 1.0 if (k // 2) % 2 == 0 else 0.0)
                for k in range(40)]
    manifest, records = _export(_steps(tmp_path / "logs", episodes), tmp_path / "out")
    assert manifest["exports"]["pairs"]["records"] == {"train": 0}
    assert records.get("pairs", {}).get("train", []) == []
    assert len(records["weighted"]["train"]) == 40


def test_too_few_observations_make_no_pair(tmp_path):
    # The right pair, but each side logged 3 times (< pairs.min_count 5): not mined.
    episodes = [("lookup", 1.0) if k % 2 == 0 else ("guess", 0.0) for k in range(6)]
    manifest, _ = _export(_steps(tmp_path / "logs", episodes), tmp_path / "out")
    assert manifest["exports"]["pairs"]["records"] == {"train": 0}


def test_pairs_across_agents_on_the_same_task(tmp_path):
    # Agent a always looks up and succeeds, agent b always guesses and fails: within
    # either log there is one action, across them on each task the right pair.
    a = _steps(tmp_path / "a", [("lookup", 1.0)] * 12, prefix="a")
    b = _steps(tmp_path / "b", [("guess", 0.0)] * 12, prefix="b")
    config = _config(tmp_path / "out")
    plan = plan_credit({"a": a, "b": b}, config, Train.model_validate(LOGS_TRAIN), Ope(), 1.0)
    assert plan.pairs["a"] == []
    assert len(plan.pairs["b"]) == 12
    for spec in plan.pairs["b"]:
        assert (spec.scope, spec.chosen_dataset, spec.chosen_action, spec.rejected_action) == \
            ("across", "a", "lookup", "guess")
        assert spec.chosen_q[1] > spec.rejected_q[2]
    out = tmp_path / "out" / "b"
    export_dataset(b, out, config, process={"task_success": 0.0}, outcome="task_success",
                   credit=plan.credits["b"], pairs=plan.pairs["b"], chosen=plan.chosen)
    records = check_export_folder(out)["pairs"]["train"]
    assert len(records) == 12
    for r in records:  # the chosen side comes from agent a, on the anchor's task
        assert r["provenance"]["chosen"]["episode_id"].startswith("a")
        assert r["provenance"]["chosen"]["task"] == r["provenance"]["task"]


def test_an_empty_log_has_empty_credit_and_no_record(tmp_path):
    # A dataset with no step (every episode filtered away upstream, say) beside one with
    # steps: its transitions, credit and exports are empty, the other's are whole.
    a = _steps(tmp_path / "a", [("lookup", 1.0), ("guess", 0.0)] * 6, prefix="a")
    empty = a.slice(0, 0)
    config = _config(tmp_path / "out")
    plan = plan_credit({"a": a, "empty": empty}, config, Train.model_validate(LOGS_TRAIN),
                       Ope(), 1.0)
    credit = plan.credits["empty"]
    assert credit.tr.n == 0 and len(credit.pair_s) == 0 and plan.pairs["empty"] == []
    assert plan.summaries["empty"]["steps"] == 0 and plan.summaries["empty"]["value"] is None
    assert plan.summaries["empty"]["worst_pairs"] == []
    assert plan.credits["a"].tr.n == a.num_rows
    manifest = export_dataset(empty, tmp_path / "out" / "empty", config,
                              credit=credit, pairs=[], chosen=plan.chosen)
    assert manifest["exports"]["weighted"]["records"] == {"train": 0}
    assert check_export_folder(tmp_path / "out" / "empty").get("weighted", {}).get(
        "train", []) == []


def _bandit(rewards_by_action: list[list[float]]) -> Transitions:
    """One-step episodes at one state, action a's rewards as given."""
    a = np.array([j for j, rs in enumerate(rewards_by_action) for _ in rs])
    r = np.array([x for rs in rewards_by_action for x in rs], dtype=float)
    n = len(a)
    return Transitions.build(episode=np.arange(n), t=np.zeros(n, int), rows=np.zeros((n, 1), int),
                             a=a, r=r, done=np.ones(n, bool), actions=("x", "y"),
                             variables=("s",))


def test_the_interval_is_the_per_episode_influence():
    # A one-step bandit: Q(a) is a's mean reward, its delta-method standard error
    # sqrt(n/(n-1) * mean((r - Q)^2) / n_a) (the sample spread of a's rewards).
    rng = np.random.default_rng(0)
    x, y = rng.binomial(1, 0.7, 60).astype(float), rng.binomial(1, 0.2, 40).astype(float)
    tr = _bandit([list(x), list(y)])
    features = OneHot((1,), 2)
    pi = np.array([[0.6, 0.4]])
    credit = step_credit(tr, features, pi, gamma=1.0, level=0.95, value_range=(0.0, 1.0))
    n = 100
    for j, rs in enumerate((x, y)):
        assert credit.q[j] == pytest.approx(rs.mean(), abs=1e-6)
        se = np.sqrt(n / (n - 1) * np.mean((rs - rs.mean()) ** 2) / len(rs))
        half = 1.959963984540054 * se
        assert credit.q_high[j] - credit.q[j] == pytest.approx(half, rel=1e-4)
    v = 0.6 * x.mean() + 0.4 * y.mean()
    assert credit.advantage[0] == pytest.approx(x.mean() - v, abs=1e-6)
    assert credit.flags[0] == [] and credit.converged
    assert worst_pairs(credit, 5)[0]["action"] == "y"
    assert "`y`" in worst_pairs(credit, 5)[0]["sentence"]


def test_the_system_is_the_critics():
    # The influence's A (Design.system, as credit factors it) solves to the critic's theta.
    tr = _bandit([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
    features = OneHot((1,), 2)
    pi = np.array([[0.5, 0.5]])
    design = Design(features, tr)
    critic = Critic(features, 1.0, 1e-6, solver="lstd").fit(tr, pi, design=design)
    theta = spla.splu(design.system(pi, 1.0, 1e-6)).solve(design.phi.T @ tr.r)
    assert np.allclose(theta, critic.theta_)


def test_weight_rules():
    tr = _bandit([[1.0] * 5, [0.0] * 5])
    credit = step_credit(tr, OneHot((1,), 2), np.array([[0.5, 0.5]]), gamma=1.0)
    adv = credit.advantage[credit.pair]
    assert np.allclose(credit_weights(credit, "exp", beta=0.1, max_weight=3.0),
                       np.minimum(np.exp(adv / 0.1), 3.0))
    assert list(credit_weights(credit, "positive")) == list((adv > 0).astype(float))
    with pytest.raises(ValueError, match="unknown weighting rule"):
        credit_weights(credit, "nope")


def test_the_report_says_which_step_the_logs_blame(tmp_path):
    episodes = [("lookup", 1.0) if k % 2 == 0 else ("guess", 0.0) for k in range(40)]
    steps = _steps(tmp_path / "logs", episodes)
    plan = plan_credit({"agent": steps}, _config(tmp_path / "out"),
                       Train.model_validate(LOGS_TRAIN), Ope(), 1.0)
    (tmp_path / "reports" / "export").mkdir(parents=True)
    (tmp_path / "reports" / "export" / "credit.json").write_bytes(
        orjson.dumps({"datasets": plan.summaries}))
    anchor, html = credit_section(tmp_path / "reports")
    assert anchor == "credit"
    assert "calling `guess`" in html and "n = 20" in html
    worst = plan.summaries["agent"]["worst_pairs"][0]
    assert (worst["action"], worst["n"]) == ("guess", 20)
    assert worst["advantage"] == pytest.approx(-0.5, abs=0.02)
    drops = plan.summaries["agent"]["largest_drops"]
    assert drops and drops[0]["action"] == "guess" and drops[0]["t"] == 0


def test_identical_outcomes_do_not_make_a_point_interval():
    # Every logged outcome of x is 1 (every TD error 0): the delta method alone says
    # se = 0; one unseen outcome at the worst return keeps x's lower end at n/(n+1).
    tr = _bandit([[1.0] * 9, [0.0, 1.0] * 5])
    credit = step_credit(tr, OneHot((1,), 2), np.array([[0.5, 0.5]]), gamma=1.0,
                         value_range=(0.0, 1.0))
    assert credit.q[0] == pytest.approx(1.0)
    assert credit.q_low[0] == pytest.approx(9 / 10, abs=1e-9)
    assert credit.q_high[0] == pytest.approx(1.0)
