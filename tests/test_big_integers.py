"""Integers beyond 64 bits (JSON has no limit) in tool arguments and results stay exact,
digit for digit, in every format; where the schema holds an int64 an out-of-range value is
a quarantine reason naming the field. Expected texts are written out here by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from tracerl.data.ingest import ingest
from tracerl.data.schema import may_hold_big_int, row_to_record
from tracerl.envs.calculator.logs import log_records

BIG = "123456789012345678901234567890"  # 97 bits
NEGATIVE = "-98765432109876543210"  # below int64's minimum
U64_PLUS_ONE = "18446744073709551616"
ARGUMENTS = ('{"order_id": ' + BIG + ', "refund_cents": ' + NEGATIVE + ', "seq": '
             + U64_PLUS_ONE + ', "note": "id 12345678901234567890123 in text"}')
# canonical: sorted keys, compact, every digit kept
CANONICAL = ('{"note":"id 12345678901234567890123 in text","order_id":' + BIG
             + ',"refund_cents":' + NEGATIVE + ',"seq":' + U64_PLUS_ONE + "}")
RESULT = '{"balance": ' + BIG + "}"
RESULT_CANONICAL = '{"balance":' + BIG + "}"


def _steps(out: Path) -> list[dict]:
    return pq.read_table(out / "steps").to_pylist()


def _call_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["action"]["tool"] == "cancel_order"]


def test_native_jsonl_keeps_them_exact_and_round_trips(tmp_path):
    records = [orjson.dumps(r).decode() for r in  # a batch of more than 4 KiB
               log_records("good_coverage", 20, seed=7, test_fraction=0.2)]
    first = json.loads(records[0])
    first["action"] = {"type": "tool_call", "tool": "cancel_order", "arguments": "@A@"}
    first["observation"]["tool_result"] = "@R@"
    records[0] = json.dumps(first).replace('"@A@"', ARGUMENTS).replace('"@R@"', RESULT)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(records) + "\n")
    summary = ingest([src], tmp_path / "out", workers=1)
    assert summary.quarantined == 0
    (row,) = _call_rows(_steps(tmp_path / "out"))
    assert row["action"]["arguments"] == CANONICAL
    assert row["observation"]["tool_result"] == RESULT_CANONICAL
    # back to a native record and in again: the same text
    back = tmp_path / "back.jsonl"
    back.write_text("".join(json.dumps(row_to_record(r)) + "\n"
                            for r in _steps(tmp_path / "out")))
    assert BIG in back.read_text()
    ingest([back], tmp_path / "again", workers=1)
    (again,) = _call_rows(_steps(tmp_path / "again"))
    assert again["action"]["arguments"] == CANONICAL
    assert again["observation"]["tool_result"] == RESULT_CANONICAL


def test_tau2_keeps_them_exact(tmp_path):
    sim = ('{"id": "s1", "task_id": "t1", "messages": ['
           '{"role": "user", "content": "refund"},'
           '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", '
           '"name": "cancel_order", "arguments": ' + ARGUMENTS + '}]},'
           '{"role": "tool", "id": "c1", "content": ' + json.dumps(RESULT) + '},'
           '{"role": "assistant", "content": "done"}], "reward_info": {"reward": 1}}')
    src = tmp_path / "results.json"
    src.write_text('{"info": {}, "tasks": [], "simulations": [' + sim + "]}")
    summary = ingest([src], tmp_path / "out", fmt="tau2")
    assert (summary.read, summary.quarantined) == (1, 0)
    (row,) = _call_rows(_steps(tmp_path / "out"))
    assert row["action"]["arguments"] == CANONICAL
    assert row["observation"]["tool_result"] == RESULT_CANONICAL


def test_openai_chat_keeps_them_exact_in_string_and_object_arguments(tmp_path):
    def conversation(arguments: str) -> str:
        return ('{"messages": [{"role": "user", "content": "refund"},'
                '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", '
                '"type": "function", "function": {"name": "cancel_order", "arguments": '
                + arguments + '}}]},'
                '{"role": "tool", "tool_call_id": "c1", "content": ' + json.dumps(RESULT)
                + '}]}')

    src = tmp_path / "chats.jsonl"
    # as the API sends them (a JSON string), and already parsed (an object)
    src.write_text(conversation(json.dumps(ARGUMENTS)) + "\n" + conversation(ARGUMENTS) + "\n")
    summary = ingest([src], tmp_path / "out", fmt="openai-chat")
    assert (summary.read, summary.quarantined) == (2, 0)
    rows = _call_rows(_steps(tmp_path / "out"))
    assert [r["action"]["arguments"] for r in rows] == [CANONICAL, CANONICAL]
    assert [r["observation"]["tool_result"] for r in rows] == [RESULT_CANONICAL] * 2


def test_an_int64_field_out_of_range_is_named(tmp_path):
    records = [orjson.dumps(r).decode() for r in
               log_records("good_coverage", 1, seed=7, test_fraction=0.2)]
    records[1] = records[1].replace('"t":1,', '"t":' + BIG + ",", 1)
    assert BIG in records[1]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(records) + "\n")
    ingest([src], tmp_path / "out", workers=1, max_bad_fraction=1.0)
    quarantine = [json.loads(x) for x in (tmp_path / "out" / "quarantine.jsonl")
                  .read_text().splitlines()]
    (own,) = [q for q in quarantine if q["source_record"] == 2]
    assert own["field"] == "t"
    assert "an integer in [0, 2^31)" in own["reason"] and BIG in own["reason"]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=9000), st.integers(0, 9000), st.integers(1, 25),
       st.sampled_from(b"0123456789"))
def test_the_long_digit_check_finds_every_run_of_19(text, at, length, digit):
    """Small texts go through a regex, large ones through numpy: both say whether a run of
    19 or more ASCII digits is there, as this regex does."""
    text = text[:at] + bytes([digit]) * length + text[at:]
    assert may_hold_big_int(text) == bool(re.search(rb"[0-9]{19,}", text))


def test_long_digit_runs_inside_strings_take_orjson_and_numbers_stay_exact():
    """A run of 19+ digits inside a string (OTLP's nanosecond times, trace ids) is not a
    number: orjson's reading stands. A number beyond 64 bits anywhere a number can stand
    (after `[`, `:`, `,`, whitespace, its `-`, or alone) is still read exactly, also after
    such a string."""
    from tracerl.data.schema import loads_exact, may_hold_long_number

    big = 2**64 + 1
    assert not may_hold_long_number(b'{"startTimeUnixNano": "1700000000000000000123"}')
    assert not may_hold_long_number(b'{"traceId": "0000000000000000000000000000002a"}')
    for text in (f"{big}", f"[{big}]", f'{{"a":-{big}}}', f'{{"a":\t{big}}}',
                 f'{{"t": "1700000000000000000123", "n": {big}}}', f"[1,\n{big}]"):
        assert may_hold_long_number(text.encode()), text
        assert loads_exact(text) == json.loads(text), text
