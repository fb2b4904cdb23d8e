"""The dialogue encoder's state keys by hand on a small log; cross-agent coverage shares by
hand; validation counts calls to tools not offered without failing when asked to."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tests.test_validation import TOOLS, _edit, _table
from tracerl.data.coverage import coverage_report, cross_agent_coverage
from tracerl.data.ingest.parse import records_to_table
from tracerl.data.validation import TOOL_OFFERED, validate_steps
from tracerl.rl.encoding import DialogueEncoder, encoder_for, get_encoder

USER = {"actor": "user", "kind": "message", "content": "..."}


def _row(episode, t, tool=None, error=None, events=None, goal=None, domain="airline"):
    action = {"type": "tool_call", "tool": tool, "arguments": {}} if tool else \
        {"type": "message", "content": "ok"}
    return {"episode_id": episode, "t": t, "done": False, "reward": 0.0, "action": action,
            "observation": {"error": error, "events": events},
            "state": {"user_goal": goal}, "episode": {"domain": domain}}


def _log() -> pa.Table:
    rows = [
        _row("a", 0, goal="hi", events=[USER]),
        _row("a", 1, tool="get_user", error="boom"),
        _row("a", 2, tool="get_user", events=[USER]),
        _row("a", 3),
        _row("b", 1, domain="retail"),  # rows in any order
        _row("b", 0, tool="x", domain="retail"),
    ]
    for r in rows:
        r["done"] = (r["episode_id"], r["t"]) in {("a", 3), ("b", 1)}
    return records_to_table(rows, "f", list(range(1, len(rows) + 1)))


def test_state_and_action_keys_by_hand():
    steps = _log()
    f = encoder_for([steps], "dialogue")
    tr = f.transitions(steps)  # in (episode_id, t) order: a0..a3, b0, b1
    assert f.actions == ("get_user", "respond", "x")
    assert [tr.actions[a] for a in tr.a] == ["respond", "get_user", "get_user", "respond",
                                              "x", "respond"]
    assert tr.labels[tr.s].tolist() == [
        "prev=start|calls=0|err=0|user=1|domain=airline",
        "prev=respond|calls=0|err=0|user=1|domain=airline",
        "prev=get_user|calls=1|err=1|user=0|domain=airline",
        "prev=get_user|calls=2|err=0|user=1|domain=airline",
        "prev=start|calls=0|err=0|user=0|domain=retail",
        "prev=x|calls=1|err=0|user=0|domain=retail",
    ]
    capped = DialogueEncoder.from_steps([steps], parts=["n_calls"], max_calls=1)
    view = capped.transitions(steps)
    assert view.labels[view.s].tolist() == ["calls=0", "calls=0", "calls=1+", "calls=1+",
                                            "calls=0", "calls=1+"]


def test_encoder_is_registered_with_its_params():
    f = get_encoder("dialogue", actions=["a", "respond"], parts=["prev_action"])
    assert f.get_params() == {"actions": ["a", "respond"], "parts": ["prev_action"],
                              "max_calls": 5, "values": {}}
    with pytest.raises(ValueError, match="not among"):
        DialogueEncoder(actions=[], parts=["mood"])


def test_coverage_report_runs_on_dialogue_keys():
    steps = _log()
    report = coverage_report(encoder_for([steps], "dialogue").transitions(steps))
    assert report.n_transitions == 6 and report.n_episodes == 2
    assert report.n_sa.sum() == 6 and len(report.state_keys) == 6


def test_cross_agent_coverage_by_hand():
    target_s = np.array(["s1", "s1", "s2", "s3", "s3"])
    target_a = np.array(["a", "a", "b", "a", "respond"])
    ref_s = np.array(["s1", "s3", "s9"])
    ref_a = np.array(["a", "respond", "a"])
    report = cross_agent_coverage(target_s, target_a, ref_s, ref_a, "ft", "base")
    assert report.overall == {"rows": 5, "rows_covered": 3, "share_rows": 0.6,
                              "pairs": 4, "pairs_covered": 2, "share_pairs": 0.5}
    assert report.by_action["a"] == {"rows": 3, "rows_covered": 2, "share_rows": 2 / 3,
                                     "pairs": 2, "pairs_covered": 1, "share_pairs": 0.5}
    assert report.by_action["b"]["share_rows"] == 0.0
    assert "| **all** | 5 | 3 | 60% | 4 | 2 | 50% |" in report.to_markdown()


def test_calls_to_tools_not_offered_are_counted_not_fatal_when_asked():
    action = {"type": "tool_call", "tool": "shell", "arguments": {}}
    table = _table(_edit("e1", 1, action=action))
    failing = validate_steps(table, -1.0, 1.0)
    assert not failing.success and failing.unexpected(TOOL_OFFERED) == 1
    counted = validate_steps(table, -1.0, 1.0, hallucinated_tools="count")
    assert counted.success and counted.unexpected(TOOL_OFFERED) == 1
    assert [w.name for w in counted.warnings] == [TOOL_OFFERED]
    assert "counted, not failing" in counted.failure_message()


def test_a_dataset_tool_list_is_enforced():
    table = _table(_edit("e1", 1, action={"type": "tool_call", "tool": "shell"}))
    logged = [*TOOLS, "anything"]  # the fixture's other calls
    report = validate_steps(table, -1.0, 1.0, tools=[*logged, "shell"],
                            hallucinated_tools="count")
    assert report.success
    report = validate_steps(table, -1.0, 1.0, tools=logged, hallucinated_tools="count")
    assert not report.success
    [failure] = report.failures
    assert failure.name.startswith("action.tool in [") and failure.unexpected_count == 1
    assert failure.sample[0]["value"] == "shell"
