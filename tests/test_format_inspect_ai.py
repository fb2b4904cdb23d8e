"""Inspect AI eval logs as Inspect writes them, built here in code after the writer
(UKGovernmentBEIS/inspect_ai: src/inspect_ai/log/_log.py EvalLog / EvalSample,
log/_recorders/json.py, log/_recorders/eval.py: header.json, _journal/start.json,
samples/<id>_epoch_<n>.json; model/_chat_message.py ChatMessage*; scorer/_metric.py
value_to_float). Each test recomputes tool-call, result and message counts from the raw
file with the stdlib and compares them with the step table."""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from pathlib import Path

from tests.format_helpers import ingest_detected, step_counts
from tracerl.data.formats import ReadOptions
from tracerl.data.formats.inspect_ai import read as inspect_ai

SPEC = {"eval_id": "BxLtVq3kE9", "run_id": "Fa9pQ2", "created": "2025-03-01T10:00:00+00:00",
        "task": "ctf_intercode", "task_id": "T1", "task_version": 0,
        "dataset": {"name": "ic_ctf", "samples": 2}, "model": "openai/gpt-4o",
        "config": {}, "packages": {"inspect_ai": "0.3.90"}}
PLAN = {"name": "plan", "steps": [{"solver": "react", "params": {}}], "config": {}}
STATS = {"started_at": "2025-03-01T10:00:00+00:00", "completed_at": "2025-03-01T10:05:00",
         "model_usage": {}}


def _call(call_id: str, function: str, args: dict) -> dict:
    return {"id": call_id, "function": function, "arguments": args, "type": "function"}


def _sample(sample_id, epoch: int, scores: dict) -> dict:
    return {
        "id": sample_id, "epoch": epoch, "input": "Find the flag.", "target": "picoCTF{x}",
        "messages": [
            {"id": "m1", "role": "system", "content": "You are a CTF player.",
             "source": "input"},
            {"id": "m2", "role": "user", "content": "Find the flag.", "source": "input"},
            {"id": "m3", "role": "assistant", "source": "generate", "model": "gpt-4o-2024-08-06",
             "content": [{"type": "reasoning", "reasoning": "List then read."},
                         {"type": "text", "text": "Looking around."}],
             "tool_calls": [_call("call_a", "bash", {"cmd": "ls"}),
                            _call("call_b", "bash", {"cmd": "cat flag.txt"})]},
            {"id": "m4", "role": "tool", "tool_call_id": "call_a", "function": "bash",
             "content": "flag.txt\n"},
            {"id": "m5", "role": "tool", "tool_call_id": "call_b", "function": "bash",
             "content": "attachment://3b9c4e5f0a1d2c3b4a5f6e7d8c9b0a1f",
             "error": {"type": "permission", "message": "Permission denied"}},
            {"id": "m6", "role": "assistant", "source": "generate", "model": "gpt-4o-2024-08-06",
             "content": "", "tool_calls": [
                 _call("call_c", "python", {"code": "print(open('flag.txt').read())"})]},
            {"id": "m7", "role": "tool", "tool_call_id": "call_c", "function": "python",
             "content": [{"type": "text", "text": "picoCTF{x}"}]},
            {"id": "m8", "role": "assistant", "content": "The flag is picoCTF{x}.",
             "source": "generate", "model": "gpt-4o-2024-08-06"}],
        "output": {"model": "gpt-4o-2024-08-06", "choices": [
            {"message": {"role": "assistant", "content": "The flag is picoCTF{x}."},
             "stop_reason": "stop"}]},
        "scores": scores, "metadata": {"category": "forensics"}, "store": {},
        "events": [], "model_usage": {"openai/gpt-4o": {"input_tokens": 1200,
                                                        "output_tokens": 80,
                                                        "total_tokens": 1280}},
        "total_time": 12.5, "working_time": 11.0, "uuid": "u1",
        "attachments": {"3b9c4e5f0a1d2c3b4a5f6e7d8c9b0a1f": "cat: flag.txt: Permission "
                                                          "denied"}}


SCORES = [{"includes": {"value": "C", "answer": "picoCTF{x}", "explanation": "found"}},
          {"includes": {"value": "I", "answer": "none"},
           "model_graded": {"value": 0.25, "answer": "none"},
           "rubric": {"value": {"safety": 1, "helpful": "P", "note": "text"}}}]


def _raw_counts(samples: list[dict]) -> tuple[int, int, int]:
    """(tool calls, tool messages, assistant messages without calls) of the samples."""
    messages = [m for s in samples for m in s["messages"]]
    calls = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
    results = sum(m["role"] == "tool" for m in messages)
    texts = sum(m["role"] == "assistant" and not m.get("tool_calls") for m in messages)
    return calls, results, texts


def _check(rows: list[dict], samples: list[dict]) -> None:
    calls, results, texts = _raw_counts(samples)
    assert step_counts(rows) == (calls, results, texts)
    first = rows[0]
    assert first["episode_id"] == "BxLtVq3kE9:1:1"
    assert (first["turn"], first["call_index"], first["call_id"]) == (0, 0, "call_a")
    assert (rows[1]["turn"], rows[1]["call_index"]) == (0, 1)
    assert rows[1]["observation"]["error"] == "Permission denied"
    assert rows[1]["observation"]["tool_result"] == json.dumps(
        "cat: flag.txt: Permission denied")  # the attachment put back
    assert rows[2]["observation"]["tool_result"] == json.dumps("picoCTF{x}")
    assert first["state"]["user_goal"] == "Find the flag."
    assert first["metadata"]["behavior_policy"] == "gpt-4o-2024-08-06"
    assert json.loads(first["extra"])["reasoning"] == "List then read."
    assert first["task"] == "ctf_intercode"
    assert first["episode"]["prompt_tokens"] == 1200 and first["episode"]["trial"] == 1
    done = [r for r in rows if r["done"]]
    assert [r["reward"] for r in done] == [1.0, 0.0]
    assert dict(done[1]["reward_components"]) == {
        "includes": 0.0, "model_graded": 0.25, "rubric/helpful": 0.5, "rubric/safety": 1.0}
    assert done[0]["reward_source"] == "inspect:includes"


def test_json_log_samples_are_episodes_with_their_scores(tmp_path):
    samples = [_sample(1, 1, SCORES[0]), _sample("q2", 1, SCORES[1])]
    log = {"version": 2, "status": "success", "eval": SPEC, "plan": PLAN,
           "results": {"total_samples": 2, "completed_samples": 2, "scores": []},
           "stats": STATS, "samples": samples}
    path = tmp_path / "2025-03-01T10-00-00_ctf-intercode_BxLtVq3kE9.json"
    path.write_text(json.dumps(log, indent=2))
    assert inspect_ai.is_log(json.loads(path.read_text()))
    summary, rows, quarantine = ingest_detected(tmp_path, "inspect-ai", path)
    assert not quarantine and summary.accepted == 2
    _check(rows, json.loads(path.read_text())["samples"])


def test_reward_evaluation_names_the_scorer(tmp_path):
    log = {"version": 2, "status": "success", "eval": SPEC, "plan": PLAN,
           "samples": [_sample(1, 1, SCORES[1])]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    _, rows, _ = ingest_detected(tmp_path, "inspect-ai", path,
                             read_options=ReadOptions(reward_evaluation="model_graded"))
    assert rows[-1]["reward"] == 0.25 and rows[-1]["reward_source"] == "inspect:model_graded"


def test_eval_zip_finished_and_journal_only(tmp_path):
    samples = [_sample(1, 1, SCORES[0]), _sample("q2", 1, SCORES[1])]
    path = tmp_path / "2025-03-01T10-00-00_ctf-intercode_BxLtVq3kE9.eval"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5) as z:
        z.writestr("_journal/start.json", json.dumps({"version": 2, "eval": SPEC,
                                                      "plan": PLAN}, indent=2))
        for s in samples:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s, indent=2))
        z.writestr("_journal/summaries/1.json", json.dumps([{"id": 1, "epoch": 1}]))
        z.writestr("summaries.json", json.dumps([{"id": 1, "epoch": 1}]))
        z.writestr("header.json", json.dumps({"version": 2, "status": "success",
                                              "eval": SPEC, "plan": PLAN,
                                              "stats": STATS}, indent=2))
    assert inspect_ai.is_eval_zip(path)
    summary, rows, quarantine = ingest_detected(tmp_path, "inspect-ai", path)
    assert not quarantine and summary.accepted == 2
    with zipfile.ZipFile(path) as z:
        raw = [json.loads(z.read(n)) for n in z.namelist() if n.startswith("samples/")]
    _check(rows, raw)
    # a run still going: only the journal's start, one sample written so far
    running = tmp_path / "running" / "r.eval"
    running.parent.mkdir()
    with zipfile.ZipFile(running, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("_journal/start.json", json.dumps({"version": 2, "eval": SPEC,
                                                      "plan": PLAN}))
        z.writestr("samples/1_epoch_1.json", json.dumps(samples[0]))
    assert inspect_ai.is_eval_zip(running)
    summary, rows, quarantine = ingest_detected(running.parent, "inspect-ai", running)
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == _raw_counts(samples[:1])


def _zstd_zip(path: Path, entries: dict[str, bytes]) -> None:
    """A zip whose entries are Zstandard-compressed (method 93), written by hand as
    Python's zipfile writes them only from 3.14 (APPNOTE 4.3.7 local header, 4.3.12
    central directory, 4.3.16 end record)."""
    import zstandard

    out, central = b"", b""
    for name, data in entries.items():
        packed = zstandard.ZstdCompressor().compress(data)
        crc, raw_name = zlib.crc32(data), name.encode()
        header = struct.pack("<4s5H3L2H", b"PK\x03\x04", 63, 0, 93, 0, 0, crc, len(packed),
                             len(data), len(raw_name), 0)
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 63, 63, 0, 93, 0, 0, crc,
                               len(packed), len(data), len(raw_name), 0, 0, 0, 0, 0,
                               len(out)) + raw_name
        out += header + raw_name + packed
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                      len(central), len(out), 0)
    path.write_bytes(out + central + end)


def test_eval_zip_with_zstandard_entries(tmp_path):
    sample = _sample(1, 1, SCORES[0])
    path = tmp_path / "z.eval"
    _zstd_zip(path, {"header.json": json.dumps({"version": 2, "status": "success",
                                                "eval": SPEC, "plan": PLAN}).encode(),
                     "samples/1_epoch_1.json": json.dumps(sample).encode()})
    assert inspect_ai.is_eval_zip(path)
    summary, rows, quarantine = ingest_detected(tmp_path, "inspect-ai", path)
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == _raw_counts([sample])
    assert rows[-1]["reward"] == 1.0


def test_an_older_log_version_1_with_tool_error_text_and_one_score(tmp_path):
    # inspect_ai 0.3.1x: `version: 1`, a tool message's error the text `tool_error` (before
    # ToolCallError), a sample's single `score` (before `scores`), no attachments; a sample
    # whose last call the run ended before answering (a limit): no result, counted as a call
    sample = _sample(7, 1, {})
    del sample["scores"]
    sample["score"] = {"value": "C", "answer": "picoCTF{x}"}
    messages = sample["messages"]
    messages[4] = {"role": "tool", "tool_call_id": "call_b", "function": "bash",
                   "content": "cat: flag.txt: Permission denied",
                   "tool_error": "Permission denied"}
    sample["messages"] = [*messages[:6], *messages[7:8]]  # call_c left unanswered
    sample["messages"][-1] = {**messages[7], "content": "Out of time."}
    sample.pop("attachments", None)
    log = {"version": 1, "status": "success", "eval": SPEC, "plan": PLAN,
           "results": {"scores": []}, "stats": STATS, "samples": [sample]}
    path = tmp_path / "2024-08-01T10-00-00_ctf_old.json"
    path.write_text(json.dumps(log))
    summary, rows, quarantine = ingest_detected(tmp_path, "inspect-ai", path)
    assert not quarantine and summary.accepted == 1
    calls, results, texts = _raw_counts(json.loads(path.read_text())["samples"])
    assert step_counts(rows) == (calls, results, texts) == (3, 2, 1)
    assert rows[1]["observation"]["error"] == "Permission denied"
    assert rows[2]["observation"]["tool_result"] is None
    assert [r["reward"] for r in rows if r["done"]] == [1.0]
