"""Schema v2: v1 logs and tables still ingest and read; unknown fields are kept under
`extra` unless strict; v2 fields of native JSONL round-trip."""

from __future__ import annotations

import json

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.data.schema import STEP_SCHEMA, row_to_record, upgrade_table
from tracerl.envs.calculator.logs import log_records
from tracerl.io.fileio import read_table

V1_ACTION = pa.struct([("type", pa.string()), ("tool", pa.string()),
                       ("arguments", pa.string())])


def _write(path, records) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_unknown_fields_are_kept_under_extra_unless_strict(tmp_path):
    records = list(log_records("good_coverage", 3, seed=1, test_fraction=0.0))
    records[1] = records[1] | {"harness": {"run": 7}}
    records[1]["state"] = records[1]["state"] | {"mood": "ok"}
    _write(tmp_path / "s.jsonl", records)
    kept = ingest([tmp_path / "s.jsonl"], tmp_path / "lenient")
    assert (kept.read, kept.accepted, kept.quarantined) == (len(records), len(records), 0)
    extra = read_table(tmp_path / "lenient" / "steps").column("extra").to_pylist()
    assert json.loads(extra[1]) == {"harness": {"run": 7}, "state.mood": "ok"}
    assert extra[0] is None
    strict = ingest([tmp_path / "s.jsonl"], tmp_path / "strict", strict=True,
                    max_bad_fraction=1.0)
    # the record with unknown fields, and the rest of its episode, are quarantined
    steps_per_episode = sum(r["episode_id"] == records[1]["episode_id"] for r in records)
    assert strict.quarantined == steps_per_episode


def test_v2_fields_of_native_jsonl_round_trip(tmp_path):
    base = next(iter(log_records("good_coverage", 1, seed=1, test_fraction=0.0)))
    record = base | {"t": 0, "done": True, "turn": 0, "call_index": 1, "call_id": "c9",
                     "extra": {"b": 1, "a": [2]},
                     "episode": {"trial": 3, "agent_model": "m", "prompt_tokens": 10}}
    record["action"] = record["action"] | {"content": "hello"}
    record["observation"] = (record["observation"] or {}) | {"events": [
        {"actor": "user", "kind": "tool_call", "tool": "reboot", "arguments": {"z": 1},
         "call_id": "u1"},
        {"actor": "environment", "kind": "tool_result", "content": "ok", "call_id": "u1"}]}
    _write(tmp_path / "s.jsonl", [record])
    summary = ingest([tmp_path / "s.jsonl"], tmp_path / "out")
    assert summary.accepted == 1
    row = read_table(tmp_path / "out" / "steps").to_pylist()[0]
    assert row["extra"] == '{"a":[2],"b":1}'  # canonical JSON text
    assert row["observation"]["events"][0]["arguments"] == '{"z":1}'
    back = row_to_record(row)
    assert back["episode"]["trial"] == 3 and back["episode"]["prompt_tokens"] == 10
    assert back["observation"]["events"] == record["observation"]["events"]
    assert back["extra"] == record["extra"] and back["action"]["content"] == "hello"
    assert (back["turn"], back["call_index"], back["call_id"]) == (0, 1, "c9")


def test_a_v1_table_is_upgraded_with_null_v2_columns(tmp_path):
    v1_fields = [f for f in STEP_SCHEMA if f.name not in {
        "turn", "call_index", "call_id", "episode", "extra", "source_pointer"}]
    v1_fields = [pa.field("action", V1_ACTION, nullable=False) if f.name == "action" else f
                 for f in v1_fields]
    v1 = pa.Table.from_pylist([
        {"episode_id": "e", "t": 0, "done": True, "reward": 1.0, "source_file": "f",
         "source_record": 1, "schema_version": 1,
         "action": {"type": "tool_call", "tool": "final", "arguments": "{}"}}],
        schema=pa.schema(v1_fields))
    pq.write_table(v1, tmp_path / "part-00000.parquet")
    upgraded = upgrade_table(read_table(tmp_path))
    assert upgraded.schema.remove_metadata() == STEP_SCHEMA.remove_metadata()
    row = upgraded.to_pylist()[0]
    assert row["turn"] is None and row["action"]["content"] is None
    assert row["action"]["tool"] == "final" and row["schema_version"] == 1
    labelled = relabel(read_table(tmp_path), ["tool_error_penalty@1"],
                       {"tool_error_penalty": 1.0})
    assert labelled.column("reward").to_pylist() == [0.0]
    assert labelled.column("turn").to_pylist() == [None]  # relabel writes v2


@pytest.mark.integration
def test_strict_reaches_worker_processes_and_comes_from_params(tmp_path):
    from typer.testing import CliRunner

    from tracerl.cli import app

    records = list(log_records("good_coverage", 3, seed=1, test_fraction=0.0))
    records[1] = records[1] | {"harness": {"run": 7}}
    _write(tmp_path / "s.jsonl", records)
    steps = sum(r["episode_id"] == records[1]["episode_id"] for r in records)
    two = ingest([tmp_path / "s.jsonl"], tmp_path / "w", strict=True, workers=2,
                 batch_lines=2, max_bad_fraction=1.0)
    assert two.quarantined == steps
    params = tmp_path / "params.yaml"
    params.write_text("ingest:\n  strict: true\n  max_bad_fraction: 1.0\n")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "s.jsonl"), "--out",
                                      str(tmp_path / "cli"), "--params", str(params)])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "cli" / "ingest_summary.json").read_text())
    assert summary["quarantined"] == steps
