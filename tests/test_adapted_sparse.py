"""The direct build's shortcuts for what most adapted rows leave out: a field no row of
the batch has (built as a null column, not looked up row by row) and a JSON-text column
that is mostly null (`extra`, on done rows only: its few values written, then spread
out) give the table, and the Parquet bytes, of the rule-by-rule path."""

from __future__ import annotations

import io

import orjson
import pyarrow.parquet as pq

from tracerl.data.formats import AdaptedRecord
from tracerl.data.ingest.parse import _json_text, parse_adapted


def _rows(n: int) -> list[dict]:
    rows = []
    for t in range(n):
        row = {"episode_id": "ep", "t": t, "action": {"type": "message", "content": "ok"},
               "done": t == n - 1, "observation": {"tool_result": None, "error": None,
                                                   "events": None}}
        if t % 9 == 4:  # a few rows with extra and a reward; every other optional field absent
            row["extra"] = {"b": [None, 1], "a": {"z": None}}
            row["reward"] = 0.5
        rows.append(row)
    return rows


def _parquet(table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_mostly_null_json_text_is_each_value_canonical_or_null():
    values = [None] * 30 + [{"b": 1, "a": [None]}] + [None] * 7 + [None, "x", 0, [], {}]
    got = _json_text(values).to_pylist()
    assert got == [None if v is None else orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
                   for v in values]


def test_sparse_rows_build_what_the_rule_by_rule_path_builds():
    rows = _rows(60)
    records = [AdaptedRecord(1, "", rows=rows, row_pointers=[f"/m/{k}" for k in range(60)])]
    bad = {**rows[0], "episode_id": ""}  # a rule broken: the rule-by-rule path builds it
    slow_records = [*records, AdaptedRecord(2, "", rows=[bad], row_pointers=["/m/0"])]
    fast = parse_adapted(records, "f.json")
    slow = parse_adapted(slow_records, "f.json")
    assert fast.fast and not slow.fast and len(slow.rejects) == 1
    assert fast.table.schema.equals(slow.table.schema, check_metadata=True)
    assert fast.table.to_pylist() == slow.table.to_pylist()
    assert _parquet(fast.table) == _parquet(slow.table)
