"""Adapted rows built straight into Arrow (parse._direct_table) give the table the
rule-by-rule path gives, and every row a rule refuses takes the rule-by-rule path, which
quarantines its record with the reason it always gave."""

from __future__ import annotations

import copy
import io

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracerl.data.formats import AdaptedRecord
from tracerl.data.ingest.parse import _direct_table, dumps_each, parse_adapted
from tracerl.data.ingest.run import _parse_adapted_guarded
from tracerl.data.schema import (
    LOGGED_FIELDS,
    RecordError,
    check_record,
    record_to_row,
)

LOGGED_SCHEMA = pa.schema(LOGGED_FIELDS)
EVENT = {"actor": "user", "kind": "message", "content": "hi"}


def _row(t: int, **fields) -> dict:
    row = {"episode_id": "ep-1", "t": t, "action": {"type": "message", "content": "ok"},
           "done": False}
    row.update(fields)
    return row


def _full(t: int) -> dict:
    """A row with every field of the step schema set."""
    return {
        "episode_id": "ep-ü", "t": t, "turn": t, "call_index": 0, "call_id": f"c{t}",
        "task": "tâche/1",
        "state": {"user_goal": "goal 🎯", "conversation_history": "[]",
                  "available_tools": ["a", "b"], "memory": "m", "retrieved_context": "r"},
        "action": {"type": "tool_call", "tool": "lookup", "content": "calling…",
                   "arguments": {"z": 1, "a": [1.5, {"y": None, "b": "ß"}], "m": -0.0}},
        "observation": {"tool_result": {"rows": [1, 2], "note": "ok", "big": 2**64 - 1},
                        "error": None,
                        "events": [EVENT, {"actor": "environment", "kind": "tool_call",
                                           "tool": "ping", "arguments": {"b": 2, "a": 1},
                                           "call_id": "e1", "error": "boom"}]},
        "reward": 0.5, "done": True, "prompt_version": "p1", "tool_schema_version": "s1",
        "environment_version": "e1", "action_logprobs": -0.25,
        "reward_components": {"zeta": 1, "alpha": 0.25, "mid": -2.5},
        "reward_source": "src", "verifier_version": "v1", "split": "train",
        "metadata": {"behavior_policy": "pi", "temperature": 0.7, "latency_ms": 12,
                     "cost_usd": 0.001, "safety_flags": ["pii"]},
        "episode": {"trial": 3, "agent_model": "m", "user_model": "u", "domain": "d",
                    "termination_reason": "done", "agent_cost_usd": 1, "user_cost_usd": 0.5,
                    "prompt_tokens": 10, "completion_tokens": 5, "duration_s": 1.25},
        "extra": {"k": {"z": [1, 2], "a": "ü"}, "n": None},
    }


# Valid rows of every shape: each field set, null, missing; structs null in some rows;
# free-form values of every JSON type; events null, empty, with arguments; unicode.
VALID_ROWS = [
    _full(0),
    _row(1),
    _row(2, state=None, observation=None, metadata=None, episode=None, extra=None,
         reward_components=None),
    _row(3, observation={"tool_result": 3, "events": []}, extra={}),
    _row(4, observation={"tool_result": "text ✓", "events": None}, reward_components={}),
    _row(5, observation={"tool_result": [1, "x", None, True]},
         action={"type": "tool_call", "tool": "t", "arguments": None}),
    _row(6, observation={"tool_result": True}, action={"type": "tool_call", "tool": "t",
                                                       "arguments": "a string"}),
    _row(7, observation={"tool_result": 0.1, "events": [EVENT | {"arguments": [3, 1]}]},
         action={"type": "final_answer", "content": None, "arguments": 2**70}),
    _row(8, reward=float("nan"), action_logprobs=-float("inf"),
         metadata={"temperature": float("inf"), "safety_flags": []},
         state={"available_tools": []}),
    _row(9, reward=-0.0, observation={"tool_result": float("nan")},
         episode={"trial": -(2**63), "prompt_tokens": 2**63 - 1}),
    _row(10, extra={"nested": {"deep": [[[{"x": 1}]]]}, "s": "\u2028\x00"},
         reward_components={"b": 1.0, "a": 2}),
    _row(11, observation={"error": "failed", "tool_result": {"b": 1, "a": {"d": 1, "c": 2}}}),
    _row(12, split="test", turn=None, call_index=None, call_id=None),
    _row(13, observation={"events": [EVENT, EVENT | {"actor": "system", "content": None}]}),
    _row(2**31 - 1, done=True, reward=1),
]

# A row each rule refuses (or pyarrow cannot hold as the rules mean it), and a row the
# rules take but Arrow's one-call build cannot (the rule-by-rule path keeps it).
BAD_ROWS = {
    "empty episode id": _row(0, episode_id=""),
    "missing episode id": {k: v for k, v in _row(0).items() if k != "episode_id"},
    "bool for an integer": _row(True),
    "float for int32": _row(1.0),
    "negative t": _row(-1),
    "t beyond int32": _row(2**31),
    "float turn": _row(0, turn=2.0),
    "negative call index": _row(0, call_index=-1),
    "int for a string": _row(0, call_id=7),
    "bool for a number": _row(0, reward=True),
    "string for a number": _row(0, reward="1.5"),
    "int for a bool": _row(0, done=1),
    "null done": _row(0, done=None),
    "string for a list": _row(0, state={"available_tools": "ab"}),
    "tuple for a list": _row(0, state={"available_tools": ("a", "b")}),
    "null in a list": _row(0, metadata={"safety_flags": ["a", None]}),
    "int in a list": _row(0, state={"available_tools": [1]}),
    "pairs for a struct": _row(0, state=[("user_goal", "g")]),
    "string for a struct": _row(0, episode="ep"),
    "unknown field": _row(0, mood="ok"),
    "unknown struct field": _row(0, action={"type": "message", "mood": "ok"}),
    "unknown event field": _row(0, observation={"events": [EVENT | {"mood": "ok"}]}),
    "event actor": _row(0, observation={"events": [EVENT | {"actor": "robot"}]}),
    "event kind missing": _row(0, observation={"events": [{"actor": "user"}]}),
    "event content int": _row(0, observation={"events": [EVENT | {"content": 3}]}),
    "event not an object": _row(0, observation={"events": [EVENT, None]}),
    "events a tuple": _row(0, observation={"events": (EVENT,)}),
    "events an object": _row(0, observation={"events": EVENT}),
    "action type": _row(0, action={"type": "shout"}),
    "action missing": {k: v for k, v in _row(0).items() if k != "action"},
    "tool call without tool": _row(0, action={"type": "tool_call", "tool": ""}),
    "split": _row(0, split="dev"),
    "positive logprob": _row(0, action_logprobs=0.5),
    "NaN logprob": _row(0, action_logprobs=float("nan")),
    "extra not an object": _row(0, extra=[1]),
    "reward components bool": _row(0, reward_components={"a": True}),
    "reward components string": _row(0, reward_components={"a": "1"}),
    "int64 overflow": _row(0, episode={"trial": 2**63}),
}
# rows the rules take that the one-call build leaves to the rule-by-rule path, each with
# the row as it is stored
SLOW_ONLY_ROWS = {
    "integer beyond 64 bits in a number": (_row(0, reward=2**70), _row(0, reward=2.0**70)),
    "integer beyond 64 bits in metadata": (_row(0, metadata={"latency_ms": 2**64}),
                                           _row(0, metadata={"latency_ms": 2.0**64})),
}
# rows neither path can write (the record is quarantined as an internal error)
UNWRITABLE_ROWS = {
    "lone surrogate in a string": _row(0, task="\ud800"),
    "lone surrogate in free-form JSON": _row(0, extra={"k": "\udfff"}),
    "non-string key in free-form JSON": _row(0, extra={1: "x"}),
    "set for a list": _row(0, metadata={"safety_flags": {"a"}}),  # no text for its reason
}


def _records(rows: list[dict]) -> list[AdaptedRecord]:
    return [AdaptedRecord(k + 1, f"/{k}", rows=[row], row_pointers=[f"/{k}/messages/0"])
            for k, row in enumerate(rows)]


def _flat(rows: list[dict]) -> tuple[list, list, list, list]:
    n = len(rows)
    return rows, ["f.json"] * n, list(range(1, n + 1)), [f"/{k}/messages/0" for k in range(n)]


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _children(table: pa.Table) -> list:
    """Every struct child as stored (StructArray.field does not apply the parent's
    validity: a value under a null parent shows), recursively."""
    out = []

    def walk(array: pa.Array) -> None:
        out.append(array.to_pylist())
        if pa.types.is_struct(array.type):
            for i in range(array.type.num_fields):
                walk(array.field(i))

    for column in table.columns:
        walk(column.combine_chunks())
    return out


def _assert_same(fast: pa.Table, slow: pa.Table) -> None:
    assert fast.schema.equals(slow.schema, check_metadata=True)
    assert repr(fast.to_pylist()) == repr(slow.to_pylist())  # NaN compares by its text
    assert repr(_children(fast)) == repr(_children(slow))
    assert _parquet(fast) == _parquet(slow)


def test_valid_rows_build_the_table_the_rule_by_rule_path_builds():
    rows = VALID_ROWS * 3  # several records, so columns hold many values
    fast = parse_adapted(_records(rows), "f.json")
    broken = parse_adapted(_records([*rows, _row(0, episode_id="")]), "f.json")
    assert fast.fast and not broken.fast and not fast.rejects
    assert [r.field for r in broken.rejects] == ["episode_id"]
    _assert_same(fast.table, broken.table)


@pytest.mark.parametrize("k", range(len(VALID_ROWS)))
def test_each_valid_row_alone_matches_its_reference(k):
    """One row alone (every column of one shape): the table the fast path builds equals
    record_to_row's row (the rules' own conversion) and the rule-by-rule path's table."""
    row = VALID_ROWS[k]
    fast = parse_adapted(_records([row]), "f.json")
    slow = parse_adapted(_records([row, _row(0, episode_id="")]), "f.json")
    assert fast.fast and not fast.rejects
    _assert_same(fast.table, slow.table)
    reference = pa.Table.from_pylist([record_to_row(row)], schema=LOGGED_SCHEMA)
    got = fast.table.select(LOGGED_SCHEMA.names)
    assert repr(got.to_pylist()) == repr(reference.to_pylist())


def _reason(row: dict) -> tuple[str, str]:
    try:
        check_record(row)
    except RecordError as exc:
        return exc.field, f"{exc.reason} (row t={row.get('t')} from /1/messages/0)"
    raise AssertionError(f"the rules take {row}")


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_row_a_rule_refuses_falls_back_and_is_quarantined_as_before(case):
    bad = BAD_ROWS[case]
    assert _direct_table(*_flat([bad])) is None
    assert _direct_table(*_flat([*VALID_ROWS, bad])) is None
    parsed = parse_adapted(_records([VALID_ROWS[0], bad, VALID_ROWS[1]]), "f.json",
                           strict=True)
    assert not parsed.fast
    assert [(r.source_record, r.field, r.reason) for r in parsed.rejects] == [
        (2, *_reason(bad))]
    assert parsed.table.num_rows == 2
    assert parsed.read == 3


def test_unknown_fields_fall_back_and_are_kept_under_extra_when_not_strict():
    row = _row(0, mood="ok", action={"type": "message", "tone": "calm"})
    parsed = parse_adapted(_records([row]), "f.json")
    assert not parsed.fast and not parsed.rejects
    assert orjson.loads(parsed.table.column("extra")[0].as_py()) == {
        "mood": "ok", "action.tone": "calm"}


@pytest.mark.parametrize("case", sorted(SLOW_ONLY_ROWS))
def test_a_valid_row_arrow_cannot_build_in_one_call_is_kept_by_the_slow_path(case):
    row, stored = SLOW_ONLY_ROWS[case]
    assert _direct_table(*_flat([row])) is None
    parsed = parse_adapted(_records([row]), "f.json")
    assert not parsed.fast and not parsed.rejects and parsed.table.num_rows == 1
    reference = pa.Table.from_pylist([record_to_row(stored)], schema=LOGGED_SCHEMA)
    assert parsed.table.select(LOGGED_SCHEMA.names).equals(reference)


@pytest.mark.parametrize("case", sorted(UNWRITABLE_ROWS))
def test_a_row_no_path_can_write_costs_only_its_own_record(case):
    bad = UNWRITABLE_ROWS[case]
    assert _direct_table(*_flat([*VALID_ROWS, bad])) is None
    parsed = _parse_adapted_guarded(_records([VALID_ROWS[0], bad, VALID_ROWS[1]]),
                                    "f.json", False)
    assert [(r.source_record, r.field) for r in parsed.rejects] == [(2, "<internal>")]
    assert parsed.table.num_rows == 2


def test_rows_are_never_changed():
    rows = [*VALID_ROWS, *BAD_ROWS.values(), *(r for r, _ in SLOW_ONLY_ROWS.values())]
    before = copy.deepcopy(rows)
    parse_adapted(_records(rows), "f.json")
    for row in rows:
        _direct_table(*_flat([row]))
    assert repr(rows) == repr(before)


def test_dumps_each_writes_each_value_as_orjson_does():
    """One orjson call for all values, split at a marker: the same bytes as a call per
    value, also when a value holds the marker's text (then one by one)."""
    from tracerl.data.ingest.parse import _MARK

    values = [_full(0), None, 1, "s", [1, {"b": 2, "a": 1}], {"z": None}, 0.1, True]
    hostile = [[1, _MARK, 2], {"b": _MARK}, f"x{_MARK}", _MARK]
    for batch in ([], values[:1], values, hostile + values, values + hostile, hostile):
        for option in (0, orjson.OPT_SORT_KEYS):
            assert dumps_each(batch, option) == [orjson.dumps(v, option=option)
                                                 for v in batch]
