"""The fast column-wise parser and the per-record validator agree on every edge case."""

from __future__ import annotations

import copy

import orjson
import pyarrow as pa
import pytest

from tracerl.data.ingest.parse import parse_batch
from tracerl.data.schema import LOGGED_FIELDS, RULES, RecordError, check_record, record_to_row
from tracerl.envs.calculator.logs import log_records

# Valid JSON that breaks a rule: the batch cannot take the fast path.
FORCES_SLOW_PATH = b'{"episode_id": ""}'
LOGGED_SCHEMA = pa.schema(LOGGED_FIELDS)
BASE = next(iter(log_records("good_coverage", 1, seed=1, test_fraction=0.0)))


def _set(path: str, value):
    record = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = record
    for p in parents:
        node = node.setdefault(p, {})  # a v2 struct the v1 base record lacks
    if value is _DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return record


_DELETE = object()
ODD_VALUES = [None, _DELETE, 0, -1, 1.5, 2**31, 2**40, True, False, "", "x", "train", [],
              ["a"], [1], [None], {}, {"k": 1}, {"k": "v"}, "tool_call", -0.0]
PATHS = ["episode_id", "t", "task", "state", "state.user_goal", "state.available_tools",
         "state.memory", "action", "action.type", "action.tool", "action.arguments",
         "observation", "observation.tool_result", "observation.error", "reward", "done",
         "action_logprobs", "reward_components", "split", "metadata",
         "metadata.temperature", "metadata.safety_flags", "environment_version",
         # schema v2
         "turn", "call_index", "call_id", "action.content", "observation.events", "extra",
         "episode", "episode.trial", "episode.agent_model", "episode.duration_s"]
EVENT = {"actor": "user", "kind": "message", "content": "hi"}
CASES = [_set(p, v) for p in PATHS for v in ODD_VALUES] + [
    BASE | {"unknown": 1}, [BASE], "text", 3, None,
    _set("reward_components", {"task_success": "1"}),
    _set("action", {"type": "message", "tool": None, "arguments": None}),
    _set("observation.events", [EVENT]),
    _set("observation.events", [EVENT | {"actor": "robot"}]),
    _set("observation.events", [EVENT | {"kind": "tool_call", "arguments": {"a": [1]}}]),
    _set("observation.events", [EVENT | {"content": 3}]),
    _set("observation.events", [EVENT | {"mood": "ok"}]),
    _set("observation.events", [EVENT, None]),
    _set("extra", {"nested": {"k": [1, 2]}}),
    _set("episode", {"trial": 2, "agent_model": "m", "prompt_tokens": 2**63}),
]


def _reference_verdict(record) -> str | None:
    try:
        check_record(record)
    except RecordError as exc:
        return exc.field
    return None


@pytest.mark.parametrize("fast_batch", [True, False])
def test_batch_parser_agrees_with_record_validator(fast_batch):
    """Each case parsed alone (fast path when the batch is clean) and inside a batch with
    a broken record (forcing the rule-by-rule path) gets the reference verdict."""
    for case in CASES:
        line = orjson.dumps(case)
        lines = [line] if fast_batch else [line, FORCES_SLOW_PATH]
        parsed = parse_batch(lines, "f.jsonl", 1)
        expected = _reference_verdict(case)
        rejects = [r for r in parsed.rejects if r.source_record == 1]
        if expected is None:
            assert not rejects and parsed.table.num_rows == 1, case
            reference = pa.Table.from_pylist([record_to_row(case)], schema=LOGGED_SCHEMA)
            assert parsed.table.select(LOGGED_SCHEMA.names).equals(reference), case
        else:
            assert [r.field for r in rejects] == [expected], (case, rejects)


def test_clean_batches_take_the_fast_path_and_match_the_slow_one():
    records = list(log_records("no_mul_support", 30, seed=3, test_fraction=0.3))
    lines = [orjson.dumps(r) for r in records]
    fast = parse_batch(lines, "f.jsonl", 1)
    slow = parse_batch(lines + [FORCES_SLOW_PATH], "f.jsonl", 1)
    assert fast.fast and not slow.fast
    assert fast.table.equals(slow.table)
    assert [r.field for r in slow.rejects] == ["episode_id"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.field)
def test_column_check_is_exactly_all_of_the_value_check(rule):
    values = [v for v in ODD_VALUES if v is not _DELETE] + [BASE.get(rule.field)]
    for v in values:
        for column in ([v], [v, v], [BASE.get(rule.field), v]):
            assert rule.column_ok(column) == all(map(rule.ok, column)), (rule.field, column)


def test_free_form_json_that_changes_type_still_takes_the_fast_path():
    """pyarrow cannot infer a column whose JSON type changes between rows; the field-name
    check then runs in Python, and both ways agree with the reference."""
    first = _set("observation.tool_result", 3)
    second = _set("observation.tool_result", {"rows": [1, 2], "note": "ok"}) | {"t": 1}
    lines = [orjson.dumps(first), orjson.dumps(second)]
    parsed = parse_batch(lines, "f.jsonl", 1)
    assert parsed.fast and parsed.table.num_rows == 2
    results = [o["tool_result"] for o in parsed.table.column("observation").to_pylist()]
    assert results == ["3", '{"note":"ok","rows":[1,2]}']

    unknown = _set("state.mood", "ok") | {"t": 2}
    parsed = parse_batch(lines + [orjson.dumps(unknown)], "f.jsonl", 1)
    assert [(r.source_record, r.field) for r in parsed.rejects] == [(3, "state.mood")]
    assert parsed.table.num_rows == 2


def _adapted(*rows: dict) -> list:
    from tracerl.data.formats import AdaptedRecord

    return [AdaptedRecord(k + 1, f"/{k}", rows=[row], row_pointers=[f"/{k}/messages/0"])
            for k, row in enumerate(rows)]


@pytest.mark.parametrize("fast_batch", [True, False])
def test_adapted_rows_fast_path_agrees_with_record_validator(fast_batch):
    """Adapted rows are built straight into Arrow when the batch is clean, else rule by
    rule: each case gets the reference verdict and the same row either way (NaN and
    integers beyond 64 bits among them)."""
    from tracerl.data.ingest.parse import parse_adapted

    broken = _set("episode_id", "")
    extra_cases = [_set("reward", float("nan")), _set("reward", float("inf")),
                   _set("action_logprobs", -float("inf")),
                   _set("episode", {"trial": 2**70})]
    for case in [c for c in CASES if isinstance(c, dict)] + extra_cases:
        rows = [case] if fast_batch else [case, broken]
        parsed = parse_adapted(_adapted(*rows), "f.json", strict=True)
        expected = _reference_verdict(case)
        rejects = [r for r in parsed.rejects if r.source_record == 1]
        if expected is None:
            assert not rejects and parsed.table.num_rows == 1, case
            reference = pa.Table.from_pylist([record_to_row(case)], schema=LOGGED_SCHEMA)
            got = parsed.table.select(LOGGED_SCHEMA.names)
            assert repr(got.to_pylist()) == repr(reference.to_pylist()), case  # NaN too
            assert parsed.table.column("source_pointer").to_pylist() == ["/0/messages/0"]
        else:
            assert [r.field for r in rejects] == [expected], (case, rejects)


def test_clean_adapted_batches_take_the_fast_path_and_match_the_slow_one():
    from tracerl.data.ingest.parse import parse_adapted

    records = list(log_records("no_mul_support", 30, seed=3, test_fraction=0.3))
    fast = parse_adapted(_adapted(*records), "f.json")
    slow = parse_adapted(_adapted(*records, _set("episode_id", "")), "f.json")
    assert fast.fast and not slow.fast
    assert fast.table.equals(slow.table)
    assert [r.field for r in slow.rejects] == ["episode_id"]
