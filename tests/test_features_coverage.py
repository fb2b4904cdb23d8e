"""Tests for the calculator's state encoder, tracerl.rl.transitions and tracerl.data.coverage.

Expectations on the tiny hand-built tables are worked out by hand in the comments, never
taken from the code under test.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from tracerl.data.coverage import coverage_report
from tracerl.data.ingest.parse import records_to_table
from tracerl.data.schema import canonical_json
from tracerl.envs.calculator.behavior import BehaviorPolicy
from tracerl.envs.calculator.encoder import CalculatorEncoder
from tracerl.envs.calculator.logs import log_records
from tracerl.envs.calculator.rules import ACTIONS, POLICY_VARIABLES, keys_to_rows
from tracerl.envs.calculator.simulator import simulate
from tracerl.rl.encoding import get_encoder
from tracerl.rl.transitions import Transitions

ENCODER = CalculatorEncoder()


def table(records: list[dict]):
    return records_to_table(records, "test.jsonl", list(range(1, len(records) + 1)))


def view(steps) -> Transitions:
    """The transitions over the states a policy sees (what coverage counts)."""
    return ENCODER.transitions(steps).project(POLICY_VARIABLES)


def keys(steps) -> list[str]:
    """The policy key of each row, in table order."""
    return ENCODER.labels(ENCODER.state_rows(steps), POLICY_VARIABLES)


def calc(ep: str, t: int, task: str, memory: dict, tool: str, reward: float = -0.02,
         done: bool = False, logprob: float | None = 0.0) -> dict:
    """One calculator step record; only the fields the featurizer and learners read."""
    return {
        "episode_id": ep, "t": t, "task": task,
        "state": {"memory": canonical_json(memory)},
        "action": {"type": "tool_call", "tool": tool, "arguments": {}},
        "reward": reward, "done": done, "action_logprobs": logprob,
    }


def tiny_records() -> list[dict]:
    """Three episodes (two mul, one add cut short), rows shuffled."""
    x3, x3y4 = {"x": 3}, {"x": 3, "y": 4}
    x2, x2y2 = {"x": 2}, {"x": 2, "y": 2}
    rows = [
        calc("e1", 0, "mul", {}, "lookup_x"),
        calc("e1", 1, "mul", x3, "lookup_y"),
        calc("e1", 2, "mul", x3y4, "add", logprob=math.log(0.5)),
        calc("e1", 3, "mul", {**x3y4, "result": 7}, "final", reward=-1.02, done=True),
        calc("e2", 0, "mul", {}, "lookup_x"),
        calc("e2", 1, "mul", x2, "lookup_y"),
        calc("e2", 2, "mul", x2y2, "sub", logprob=math.log(0.25)),
        calc("e2", 3, "mul", {**x2y2, "result": 0}, "final", reward=-1.02, done=True),
        calc("e3", 0, "add", {}, "lookup_x", logprob=None),
        calc("e3", 1, "add", {"x": 1}, "lookup_y", logprob=None),
        calc("e3", 2, "add", {"x": 1, "y": 1}, "add", logprob=None),  # log ends, not done
    ]
    random.Random(7).shuffle(rows)
    return rows


# --------------------------------------------------------------------------- featurizers


def test_calculator_keys_from_memory() -> None:
    recs = [
        calc("e", 0, "mul", {}, "lookup_x"),
        calc("e", 1, "mul", {"x": 3}, "lookup_y"),
        calc("e", 2, "mul", {"x": 3, "y": 4}, "mul"),
        calc("e", 3, "mul", {"result": 12, "x": 3, "y": 4}, "final", done=True),
        calc("f", 0, "sub", {"x": 9, "y": 9, "result": -8}, "final", done=True),
    ]
    steps = table(recs)
    assert keys(steps) == ["mul|0|0|-", "mul|1|0|-", "mul|1|1|-", "mul|1|1|12", "sub|1|1|-8"]
    # the critic's finer key: whether the stored result is the task's op of x and y
    assert ENCODER.labels(ENCODER.state_rows(steps))[3:] == ["mul|1|1|12|ok", "sub|1|1|-8|bad"]
    assert ENCODER.action_codes(steps).tolist() == [0, 1, 4, 5, 5]
    tr = ENCODER.transitions(steps)
    assert tr.rows.tolist() == sorted(tr.rows.tolist())  # sorted, distinct
    assert ENCODER.actions == ACTIONS
    assert ENCODER.valid_actions(keys_to_rows(["mul|1|1|-"]))[0].tolist() == [0, 0, 1, 1, 1, 0]
    assert ENCODER.valid_actions(keys_to_rows(["mul|1|1|12"]))[0].tolist() == [0, 0, 0, 0, 0, 1]
    assert get_encoder("calculator").get_params() == {}


def test_calculator_encoder_matches_the_simulator_on_logged_records() -> None:
    # The logger writes rows in rollout order, so row i is simulator step i.
    ro = simulate(BehaviorPolicy("good_coverage"), 500, 3)
    steps = table(list(log_records("good_coverage", 500, 3, 0.2)))
    assert keys(steps) == ro.state_keys().tolist()
    assert ENCODER.action_codes(steps).tolist() == ro.action.tolist()


def test_calculator_encoder_rejects_what_it_cannot_key() -> None:
    with pytest.raises(ValueError, match="not calculator tools"):
        ENCODER.action_codes(table([calc("e", 0, "mul", {}, "search")]))
    rec = calc("e", 0, "mul", {}, "lookup_x")
    rec["state"]["memory"] = None
    with pytest.raises(ValueError, match="state.memory is null"):
        ENCODER.transitions(table([rec]))
    with pytest.raises(ValueError, match="not calculator tasks"):
        ENCODER.transitions(table([calc("e", 0, "div", {}, "lookup_x")]))
    with pytest.raises(ValueError, match="unknown state encoder"):
        get_encoder("nope")


# --------------------------------------------------------------------------- transitions


def test_transitions_link_next_rows_of_the_same_episode() -> None:
    tr = view(table(tiny_records()))
    keys = tr.state_keys
    rows = {
        (str(keys[s]), str(keys[n]) if n >= 0 else None, bool(d),
         None if math.isnan(p) else round(float(p), 12))
        for s, n, d, p in zip(tr.s, tr.s_next, tr.done, tr.behavior_prob, strict=True)
    }
    assert tr.n == 11
    assert rows == {
        ("mul|0|0|-", "mul|1|0|-", False, 1.0),  # e1 and e2 give the same row
        ("mul|1|0|-", "mul|1|1|-", False, 1.0),
        ("mul|1|1|-", "mul|1|1|7", False, 0.5),
        ("mul|1|1|7", None, True, 1.0),
        ("mul|1|1|-", "mul|1|1|0", False, 0.25),
        ("mul|1|1|0", None, True, 1.0),
        ("add|0|0|-", "add|1|0|-", False, None),  # no logprob logged: NaN
        ("add|1|0|-", "add|1|1|-", False, None),
        ("add|1|1|-", None, False, None),  # e3's log ends here without done
    }
    assert tr.n_truncated == 1
    assert np.lexsort((tr.t, tr.episode)).tolist() == list(range(tr.n))  # (episode, t) order
    assert tr.tasks.tolist() == ["add", "mul"]
    assert tr.valid[list(keys).index("mul|1|1|-")].tolist() == [0, 0, 1, 1, 1, 0]


def test_transitions_reject_duplicates_and_missing_rewards() -> None:
    dup = [calc("e", 0, "mul", {}, "lookup_x"), calc("e", 0, "mul", {}, "lookup_x")]
    with pytest.raises(ValueError, match="duplicate"):
        ENCODER.transitions(table(dup))
    missing = [calc("e", 0, "mul", {}, "lookup_x", reward=None)]
    with pytest.raises(ValueError, match="reward is null"):
        ENCODER.transitions(table(missing))


# --------------------------------------------------------------------------- coverage


def test_coverage_counts_on_a_tiny_table() -> None:
    rep = coverage_report(view(table(tiny_records())))
    d = rep.to_dict()
    assert d["n_transitions"] == 11 and d["n_episodes"] == 3 and d["n_states"] == 8
    n_s = {k: v["n"] for k, v in d["states"].items()}
    assert n_s == {"mul|0|0|-": 2, "mul|1|0|-": 2, "mul|1|1|-": 2, "mul|1|1|7": 1,
                   "mul|1|1|0": 1, "add|0|0|-": 1, "add|1|0|-": 1, "add|1|1|-": 1}
    s = d["states"]["mul|1|1|-"]
    assert {a: v["n"] for a, v in s["actions"].items()} == {"add": 1, "sub": 1}
    assert s["actions"]["add"]["behavior_prob_from_counts"] == 0.5
    assert s["actions"]["add"]["mean_logged_prob"] == pytest.approx(0.5)
    assert s["actions"]["sub"]["mean_logged_prob"] == pytest.approx(0.25)
    assert s["never_logged_valid"] == ["mul"]
    assert d["states"]["add|1|1|-"]["never_logged_valid"] == ["sub", "mul"]
    assert d["states"]["add|1|1|-"]["actions"]["add"]["mean_logged_prob"] is None
    assert rep.never_logged == {"mul|1|1|-": ["mul"], "add|1|1|-": ["sub", "mul"]}
    # mul task: valid pairs 1 + 1 + 3 + 1 + 1 = 7, logged 1 + 1 + 2 + 1 + 1 = 6.
    mul = d["tasks"]["mul"]
    assert mul["action_counts"] == {"lookup_x": 2, "lookup_y": 2, "add": 1, "sub": 1,
                                    "mul": 0, "final": 2}
    assert (mul["valid_pairs"], mul["logged_valid_pairs"]) == (7, 6)
    assert mul["share_logged"] == pytest.approx(6 / 7)
    assert mul["never_logged_actions"] == ["mul"]
    # add task (cut short): valid 1 + 1 + 3 = 5, logged 3; final is never valid there.
    add = d["tasks"]["add"]
    assert (add["valid_pairs"], add["logged_valid_pairs"]) == (5, 3)
    assert add["never_logged_actions"] == ["sub", "mul"]
    assert add["action_counts"]["final"] == 0


def test_coverage_dict_is_json_ready_and_deterministic() -> None:
    steps = table(tiny_records())
    a = json.dumps(coverage_report(view(steps)).to_dict(), allow_nan=False)
    b = json.dumps(coverage_report(view(steps)).to_dict(), allow_nan=False)
    assert a == b


def _markdown_row(markdown: str, first_cell: str) -> list[str]:
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in\n{markdown}")


def test_markdown_shows_mul_never_logged_on_mul_tasks() -> None:
    steps = table(list(log_records("no_mul_support", 600, 0, 0.2)))
    md = coverage_report(view(steps)).to_markdown()
    header = _markdown_row(md, "task")
    mul_row = _markdown_row(md, "mul")
    assert "0 ⚠" in mul_row[header.index("mul")]
    assert "⚠" not in mul_row[header.index("add")]
    assert "- ⚠ `mul` tasks: `mul` never logged" in md.splitlines()
    good = table(list(log_records("good_coverage", 600, 0, 0.2)))
    md_good = coverage_report(view(good)).to_markdown()
    assert "⚠" not in _markdown_row(md_good, "mul")[header.index("mul")]
    assert "Every action valid on a task was logged" in md_good


def test_markdown_marks_actions_never_valid_on_a_task() -> None:
    md = coverage_report(view(table(tiny_records()))).to_markdown()
    header = _markdown_row(md, "task")
    add_row = _markdown_row(md, "add")
    assert add_row[header.index("final")] == "–"
    assert "0 ⚠" in add_row[header.index("sub")]


def test_plot_writes_the_same_png_twice(tmp_path) -> None:
    rep = coverage_report(view(table(tiny_records())))
    a = rep.plot(tmp_path / "a.png").read_bytes()
    b = rep.plot(tmp_path / "b.png").read_bytes()
    assert a.startswith(b"\x89PNG\r\n\x1a\n")
    assert a == b
    assert b"Matplotlib" not in a  # no version string in the metadata
