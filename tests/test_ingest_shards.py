"""A whole-file format read in slices (tracerl.data.ingest.run.shardable): the slices one
after the other are exactly the unsharded records, for every reader that says it can be
sharded; and an ingest that reads a large file in slices on two workers writes the same
bytes (every Parquet part, quarantine, summary) as one that reads it whole."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from tracerl.config.formats import format_names
from tracerl.data.formats import reader
from tracerl.data.ingest import ingest
from tracerl.data.ingest.limits import Limits
from tracerl.data.ingest.run import shardable


def _simulation(i: int) -> dict:
    calls = [{"id": "c1", "name": "lookup", "arguments": {"q": f"user{i}@example.com"},
              "requestor": "assistant"}]
    messages = [{"role": "user", "content": f"help {i}"},
                {"role": "assistant", "content": "looking", "tool_calls": calls},
                {"role": "tool", "id": "c1", "content": json.dumps({"n": i})},
                # a call id reused in a later turn (kept, counted)
                {"role": "assistant", "content": None, "tool_calls": copy.deepcopy(calls)},
                {"role": "tool", "id": "c1", "content": "ok"},
                {"role": "assistant", "content": "done " * (i % 7)}]
    return {"id": f"sim-{i}", "task_id": f"t{i % 3}", "trial": 0, "messages": messages,
            "reward_info": {"reward": float(i % 2)}}


def _tau2(path: Path, n: int = 60) -> Path:
    sims: list = [_simulation(i) for i in range(n)]
    sims[7] = {"task_id": "t1", "messages": []}  # no id: quarantined
    sims[20]["messages"][2]["id"] = "nowhere"  # a result no call made
    sims[33] = "not a simulation"
    doc = {"info": {"git_commit": "x", "agent_info": {"llm": "m"}, "user_info": {"llm": "u"},
                    "environment_info": {"domain_name": "desk"}},
           "tasks": [{"id": f"t{k}"} for k in range(3)], "simulations": sims}
    text = json.dumps(doc, indent=1)
    # an element over max_record_bytes
    text = text.replace('"not a simulation"', '"' + "x" * 5000 + '"', 1)
    path.write_text(text)
    return path


def _otel(path: Path, n: int = 40) -> Path:
    lines = []
    for k in range(n):
        trace = f"{k:032x}"
        out = [{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": k}}]}]
        spans = [{"traceId": trace, "spanId": f"{k:08x}00000001", "name": "chat m",
                  "startTimeUnixNano": str(10 * k), "endTimeUnixNano": str(10 * k + 1),
                  "attributes": [
                      {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                      {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                          [{"role": "user", "parts": [{"type": "text",
                                                       "content": f"hi {k}"}]}])}},
                      {"key": "gen_ai.output.messages",
                       "value": {"stringValue": json.dumps(out)}}]}]
        lines.append(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                    "scopeSpans": [{"spans": spans}]}]}))
    lines.insert(11, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return path


# an input of each format whose reader can be sharded (a new one needs its input here)
INPUTS = {"tau2": _tau2, "otel-genai": _otel}
SHARDABLE = [f for f in format_names() if shardable(f)]


def _record(r) -> tuple:
    error = None if r.error is None else (r.error.where, r.error.reason)
    return (r.number, r.pointer, r.rows, r.row_pointers, error, r.episode_id, r.text,
            dict(r.notes or {}), r.source_file, r.is_record)


def test_tau2_is_sharded():
    assert "tau2" in SHARDABLE


@pytest.mark.parametrize("fmt", SHARDABLE)
def test_slices_one_after_the_other_are_the_unsharded_records(fmt, tmp_path):
    assert fmt in INPUTS, f"add an input of {fmt} to INPUTS"
    path = INPUTS[fmt](tmp_path / f"input.{'jsonl' if fmt == 'otel-genai' else 'json'}")
    limits = Limits(max_record_bytes=4000)
    read, _ = reader(fmt)
    whole = [_record(r) for r in read(path, limits, None)]
    assert len(whole) > 10
    plan_slices = getattr(read, "plan_slices", None)  # made once, handed to each slice
    plan = {"plan": plan_slices(path, limits)} if plan_slices is not None else {}
    for n in (1, 2, 3, 5):
        sliced = [_record(r) for k in range(n) for r in read(path, limits, None, shard=(k, n))]
        assert sliced == whole, f"{n} slices"
        if plan:
            planned = [_record(r) for k in range(n)
                       for r in read(path, limits, None, shard=(k, n), **plan)]
            assert planned == whole, f"{n} slices with the file's plan"


def _digest(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.md5(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def test_a_file_read_in_slices_by_two_workers_writes_the_same_bytes(tmp_path):
    path = _tau2(tmp_path / "results.json", n=300)
    # small batches: parts cut inside slices and across their borders
    limits = Limits(max_record_bytes=4000, batch_bytes=20_000)
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        summary = ingest([path], out, batch_lines=50, workers=workers, limits=limits,
                         max_bad_fraction=1.0)
        runs[workers] = _digest(out)
        summary_json = json.loads((out / "ingest_summary.json").read_text())
        assert summary_json["quarantined"] == summary.quarantined == 3
        assert summary.reused_call_ids == 297
    assert len([k for k in runs[1] if k.startswith("steps/")]) > 10
    assert runs[1] == runs[2]

