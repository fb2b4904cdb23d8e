"""tau2 verifiers: gold actions re-checked from the log agree with tau2's own logged
action_checks on the real files, and the decision does not read those logged checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from tracerl.data.ingest import ingest
from tracerl.data.relabel import diagnostics, relabel, select_training_data
from tracerl.data.verifiers import get_verifier, gold_action_taken
from tracerl.io.fileio import read_table

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "tau2-bench"
FILES = sorted(REAL.glob("*.json"))
real = pytest.mark.skipif(len(FILES) != 2, reason=f"tau2-bench logs not found in {REAL}")


def _steps(tmp_path: Path, doc_or_path) -> object:
    path = doc_or_path
    if not isinstance(doc_or_path, Path):
        path = tmp_path / "results.json"
        path.write_text(json.dumps(doc_or_path))
    out = tmp_path / f"out-{path.stem}"
    summary = ingest([path], out)
    assert summary.quarantined == 0
    return read_table(out / "steps")


@real
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_action_match_agrees_with_logged_action_checks(tmp_path, path):
    doc = json.loads(path.read_text())
    logged = [c["action_match"] for s in doc["simulations"]
              for c in s["reward_info"]["action_checks"] or []]
    report = get_verifier("tau2_action_match@1").diagnostics(_steps(tmp_path, path))
    assert report["checks_compared"] == len(logged) > 0
    assert report["agreement"] >= 0.99, report["disagreements"]
    print(f"{path.name}: {report['summary']}")


@real
def test_decisions_do_not_read_the_logged_checks(tmp_path):
    doc = json.loads(FILES[0].read_text())
    verifier = get_verifier("tau2_action_match@1")
    before = verifier.score(_steps(tmp_path, FILES[0]))
    for sim in doc["simulations"]:  # every logged verdict flipped
        for check in sim["reward_info"]["action_checks"] or []:
            check["action_match"] = not check["action_match"]
    flipped = _steps(tmp_path, doc)
    np.testing.assert_array_equal(verifier.score(flipped), before)
    assert verifier.diagnostics(flipped)["agreement"] <= 0.01


def _gold(name="get_user", arguments=None, compare_args=None):
    return {"action_id": "a", "name": name, "arguments": arguments or {"user_id": "u1"},
            "compare_args": compare_args}


@pytest.mark.parametrize(("gold", "calls", "taken"), [
    (_gold(), [("get_user", {"user_id": "u1"})], True),
    (_gold(), [("get_user", {"user_id": "u2"})], False),
    (_gold(), [("get_order", {"user_id": "u1"})], False),
    # compare_args null: every argument of the call is compared, so an extra one differs
    (_gold(), [("get_user", {"user_id": "u1", "verbose": True})], False),
    (_gold(compare_args=["user_id"]), [("get_user", {"user_id": "u1", "verbose": True})],
     True),
    (_gold(compare_args=[]), [("get_user", {"anything": 1})], True),
    (_gold(arguments={"amount": 50}), [("get_user", {"amount": 50.0})], True),
    (_gold(), [("get_user", {"user_id": "u2"}), ("get_user", {"user_id": "u1"})], True),
    (_gold(), [], False),
])
def test_gold_action_rule(gold, calls, taken):
    assert gold_action_taken(gold, calls) is taken


def _episode(calls_by_user: bool, reward: float = 1.0) -> dict:
    gold = [_gold("reboot", {"device": "phone"}) | {"action_id": "g1"}]
    call = {"id": "x1", "name": "reboot", "arguments": {"device": "phone"},
            "requestor": "user" if calls_by_user else "assistant"}
    messages = [{"role": "assistant", "content": "Please reboot."}]
    if calls_by_user:  # telecom: the user runs the tool on their own device
        messages += [{"role": "user", "content": None, "tool_calls": [call]}]
    else:
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]}]
    messages += [{"role": "tool", "id": "x1", "content": "ok", "requestor": call["requestor"]},
                 {"role": "assistant", "content": "Done."}]
    return {"info": {"environment_info": {"domain_name": "telecom"}},
            "tasks": [{"id": "t", "evaluation_criteria": {"actions": gold}}],
            "simulations": [{"id": "s", "task_id": "t", "messages": messages, "reward_info": {
                "reward": reward, "action_checks": [
                    {"action": gold[0], "action_match": True}]}}]}


@pytest.mark.parametrize("calls_by_user", [False, True])
def test_a_gold_action_is_found_among_agent_and_user_calls(tmp_path, calls_by_user):
    steps = _steps(tmp_path, _episode(calls_by_user))
    scores = get_verifier("tau2_action_match@1").score(steps)
    done = steps.column("done").to_numpy(zero_copy_only=False)
    assert scores[done].tolist() == [1.0] and scores[~done].tolist() == [0.0] * (~done).sum()


def test_outcome_is_the_logged_reward_and_survives_a_second_relabel(tmp_path):
    steps = _steps(tmp_path, _episode(False, reward=0.5))
    weights = {"task_success": 2.0, "action_match": 1.0}
    once = relabel(steps, ["tau2_outcome@1", "tau2_action_match@1"], weights)
    twice = relabel(once, ["tau2_outcome@1", "tau2_action_match@1"], weights)
    for table in (once, twice):
        done = table.filter(table.column("done"))
        assert done.column("reward").to_pylist() == [2.0 * 0.5 + 1.0]
        assert pc.sum(table.column("reward")).as_py() == 2.0
    found = diagnostics(once, ["tau2_outcome@1", "tau2_action_match@1"])
    assert list(found) == ["tau2_action_match@1"] and found["tau2_action_match@1"]["agree"] == 1
    kept = select_training_data(once, "outcome", outcome="action_match")
    assert kept.num_rows == once.num_rows
    assert select_training_data(once, "process", process={"action_match": 1.0}).num_rows == 0
