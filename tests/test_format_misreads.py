"""The misreads of issue 33, each built from the producer's published shape (cited per
test) and checked against counts recomputed from the file with the stdlib: a file is read
right, or refused once by name, never misread with exit 0 and never a crash."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard

from tests.adapter_helpers import ingest_doc
from tracerl.data.formats import detect_format
from tracerl.data.ingest import InputError, ingest
from tracerl.data.schema import STEP_SCHEMA
from tracerl.io.fileio import read_table


def _rows(out: Path) -> list[dict]:
    return read_table(out / "steps").to_pylist()


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]


# SWE-agent/mini-swe-agent, src/minisweagent/run/utils/save.py (`save_traj`): {info:
# {exit_status, submission, model_stats, mini_version, config}, messages, trajectory_format:
# "mini-swe-agent-1"}; the agent's actions are ```bash blocks in its messages' text.
MINI = {"info": {"exit_status": "Submitted", "submission": "diff", "mini_version": "1.9.0",
                 "model_stats": {"instance_cost": 0.01, "api_calls": 3}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug in foo.py"},
            {"role": "assistant", "content": "THOUGHT: read it.\n\n```bash\ncat foo.py\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>x</output>"},
            {"role": "assistant", "content": "THOUGHT: fix.\n\n```bash\nsed -i s/a/b/ foo.py\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output></output>"}],
        "trajectory_format": "mini-swe-agent-1"}


def test_a_mini_swe_agent_trajectory_is_not_chat_with_no_calls(tmp_path):
    path = tmp_path / "task.traj.json"
    path.write_text(json.dumps(MINI, indent=2))
    commands = sum(m["content"].count("```bash") for m in MINI["messages"])
    summary = ingest([path], tmp_path / "out", max_bad_fraction=1.0)
    assert summary.formats.get(str(path)) != "openai-chat"
    rows = _rows(tmp_path / "out")
    if rows:  # read by a format of its own (a later one): every command is a call
        assert sum(r["action"]["type"] == "tool_call" for r in rows) == commands
    else:
        assert summary.quarantined == 1 and "trajectory_format" in \
            _quarantine(tmp_path / "out")[0]["reason"]


def test_fenced_commands_read_as_plain_chat_are_warned_about(tmp_path):
    plain = {"messages": MINI["messages"]}  # the same, without its format's marks
    summary, rows, _ = ingest_doc(tmp_path, "openai-chat", plain)
    assert all(r["action"]["type"] == "message" for r in rows)
    assert len(summary.warnings) == 1 and "0 tool calls" in summary.warnings[0] \
        and "2 fenced command block(s)" in summary.warnings[0]
    assert json.loads((tmp_path / "out" / "ingest_summary.json").read_text())["warnings"] \
        == summary.warnings


def test_a_pretty_printed_document_is_one_record_whatever_its_name(tmp_path):
    conversation = {"id": "c1", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."}]}
    path = tmp_path / "chat.jsonl"  # named JSON Lines, written with indent
    path.write_text(json.dumps(conversation, indent=2))
    assert detect_format(path) == "openai-chat"
    summary = ingest([path], tmp_path / "out")
    assert (summary.read, summary.accepted, summary.rows) == (1, 1, 2)


def test_an_unknown_pretty_printed_document_is_refused_once(tmp_path):
    # shaped like Inspect AI's EvalLog written as .json (inspect_ai/log/_log.py: version,
    # status, eval, plan, results, stats, samples[...]), pretty-printed, but with its `eval`
    # renamed: no format reads it (the real one is the inspect-ai format's:
    # tests/test_format_inspect_ai.py)
    log = {"version": 2, "status": "success",
           "evaluation": {"task": "ctf", "model": "m", "dataset": {"sample_ids": [1]}},
           "plan": {"steps": []}, "results": {"total_samples": 1},
           "stats": {"started_at": "2025-01-01T00:00:00Z"},
           "samples": [{"id": 1, "epoch": 1, "input": "find the flag", "messages": [
               {"role": "user", "content": "find the flag"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]}]}]}
    path = tmp_path / "2025-01-01_ctf.json"
    path.write_text(json.dumps(log, indent=2))
    lines = len(path.read_text().splitlines())
    summary = ingest([path], tmp_path / "out", max_bad_fraction=1.0)
    assert lines > 20 and (summary.read, summary.quarantined, summary.internal_errors) == \
        (1, 1, 0)
    # named native steps by hand, it is read line by line, and still no line crashes
    forced = ingest([path], tmp_path / "forced", fmt="jsonl", max_bad_fraction=1.0)
    assert forced.internal_errors == 0 and forced.quarantined == forced.read == lines
    assert any("expected a JSON object, got int 1" in r["reason"]
               for r in _quarantine(tmp_path / "forced"))


@pytest.mark.parametrize("name,data,what", [
    ("logs.zip", None, "zip archive"),
    ("logs.jsonl", gzip.compress(b'{"a": 1}\n', mtime=0), "gzip-compressed without a .gz name"),
    ("logs.jsonl.xz", lzma.compress(b'{"a": 1}\n'), "keys: a"),  # read, then judged
])
def test_a_container_is_named_not_read_as_text(tmp_path, name, data, what):
    path = tmp_path / name
    if data is None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("chat.jsonl", '{"messages": []}\n')
        data = buffer.getvalue()
    path.write_bytes(data)
    summary = ingest([path], tmp_path / "out", max_bad_fraction=1.0)
    [reject] = _quarantine(tmp_path / "out")
    assert summary.read == 1 and what in reject["reason"] and "UTF-8" not in reject["reason"]


@pytest.mark.parametrize("suffix,compress", [
    (".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress),
    (".zst", lambda data: zstandard.ZstdCompressor().compress(data))])
def test_a_compressed_file_is_read_as_the_plain_one(tmp_path, suffix, compress):
    data = b"".join(json.dumps({"id": f"c{k}", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": "ok"}]}).encode() + b"\n"
        for k in range(50))
    (tmp_path / "plain.jsonl").write_bytes(data)
    packed = tmp_path / f"packed.jsonl{suffix}"
    packed.write_bytes(compress(data))
    assert detect_format(packed) == "openai-chat"
    plain = ingest([tmp_path / "plain.jsonl"], tmp_path / "a")
    read = ingest([packed], tmp_path / "b")
    assert (read.read, read.accepted, read.rows) == (plain.read, plain.accepted, plain.rows) \
        == (50, 50, 50)
    assert read_table(tmp_path / "b" / "steps").column("action").equals(
        read_table(tmp_path / "a" / "steps").column("action"))
    cut = tmp_path / f"cut.jsonl{suffix}"
    cut.write_bytes(compress(data)[:len(compress(data)) // 2])
    try:  # what is intact is read, the cut one record; or nothing intact: refused by name
        summary = ingest([cut], tmp_path / "c", max_bad_fraction=1.0)
    except InputError as exc:
        assert str(exc).startswith(f"{cut}: not a readable ")
        return
    reasons = [r["reason"] for r in _quarantine(tmp_path / "c")]
    assert summary.accepted < 50 and any("stream cut" in r for r in reasons), reasons


# Claude Code's compaction marker (claude-code-log and ccusage fixtures): {"type": "system",
# "subtype": "compact_boundary", "parentUuid": null, "logicalParentUuid": <the last line
# before it>, "compactMetadata": {"trigger", "preTokens"}}; here that parent is not in the
# file (the transcript was cut before it).
def _cc(kind: str, uuid: str, parent: str | None, message: dict | None = None, **extra) -> dict:
    line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
            "timestamp": f"2026-01-01T00:00:{len(uuid):02d}Z", "isSidechain": False, **extra}
    if message is not None:
        line["message"] = message
    return line


def _call(k: int) -> list[dict]:
    return [
        _cc("assistant", f"a{k}", f"u{k}", {"id": f"msg{k}", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": "ls"}}]}),
        _cc("user", f"r{k}", f"a{k}", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{k}", "content": "ok"}]})]


def test_a_compaction_pointing_outside_the_file_keeps_the_first_half(tmp_path):
    lines = [_cc("user", "u0", None, {"role": "user", "content": "start"}), *_call(0),
             _cc("user", "u1", "r0", {"role": "user", "content": "go on"}), *_call(1),
             _cc("system", "c", None, subtype="compact_boundary", content="compacted",
                 logicalParentUuid="gone-uuid", compactMetadata={"trigger": "auto"}),
             _cc("user", "u2", "c", {"role": "user", "content": "summary"},
                 isCompactSummary=True), *_call(2)]
    lines[-2]["parentUuid"] = "u2"
    path = tmp_path / "s1.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    calls = sum(1 for line in lines if line["type"] == "assistant")
    summary = ingest([path], tmp_path / "out")
    rows = _rows(tmp_path / "out")
    assert sum(r["action"]["type"] == "tool_call" for r in rows) == calls == 3
    assert summary.notes["compactions_with_parent_outside_file"] == 1
    assert "abandoned_branches" not in summary.notes
    assert any("compaction" in w for w in summary.warnings)


# Harbor's ATIF RFC (docs/rfcs/0001-trajectory-format.md, v1.4) names a call
# {tool_call_id, function_name, arguments}; writers that follow chat APIs write {id, name,
# arguments} or {id, function: {name, arguments}}.
def test_atif_calls_spelled_as_chat_apis_spell_them(tmp_path):
    steps = [{"step_id": 1, "source": "user", "message": "list files"},
             {"step_id": 2, "source": "agent", "message": "",
              "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"cmd": "ls"}},
                             {"id": "c2", "function": {"name": "bash",
                                                       "arguments": "{\"cmd\": \"pwd\"}"}}],
              "observation": {"results": [{"source_call_id": "c1", "content": "a.txt"},
                                          {"source_call_id": "c2", "content": "/w"}]}},
             {"step_id": 3, "source": "agent", "message": "done"}]
    doc = {"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "x"},
           "steps": steps}
    summary, rows, quarantine = ingest_doc(tmp_path, "atif", doc)
    assert quarantine == [] and summary.accepted == 1
    assert [(r["call_id"], r["action"]["tool"], json.loads(r["action"]["arguments"]),
             json.loads(r["observation"]["tool_result"])) for r in rows if r["call_id"]] == [
        ("c1", "bash", {"cmd": "ls"}, "a.txt"), ("c2", "bash", {"cmd": "pwd"}, "/w")]


def _obs(oid: str, kind: str, name: str, second: int, parent: str | None = None,
         **fields) -> dict:
    at = f"2025-11-17T14:55:{second:02d}.000Z"
    return {"id": oid, "traceId": "tr", "parentObservationId": parent, "type": kind,
            "name": name, "startTime": at, "endTime": at, "level": "DEFAULT",
            "input": None, "output": None, "metadata": "{}", **fields}


def _meta(attributes: dict) -> str:
    return json.dumps({"attributes": attributes, "scope": {"name": "x", "attributes": {}}})


def _weather_generation(second: int, ids: list) -> dict:
    calls = [{"id": i, "type": "function", "function": {
        "name": "OpenMeteoTool", "arguments": json.dumps({"location_name": city})}}
        for i, city in zip(ids, ("Boston", "Prague"), strict=True)]
    return _obs("gen", "GENERATION", "ChatModel", second, "agent", model="granite",
                input=json.dumps([{"role": "user", "content": "weather?"}]),
                output=json.dumps({"role": "assistant", "content": None,
                                   "tool_calls": calls}))


def test_a_langfuse_call_id_given_as_a_list_of_one(tmp_path):
    # OTel attribute values are arrays as often as scalars; Langfuse keeps them so in the
    # observation's metadata (gen_ai.tool.call.id: ["call_a"])
    observations = [
        _obs("agent", "AGENT", "agent", 1), _weather_generation(2, [["call_a"], ["call_b"]]),
        *[_obs(f"tool{k}", "TOOL", "OpenMeteoTool", 3 + k, "agent",
               input=json.dumps({"location_name": city}), output=f"{city}: 20C",
               metadata=_meta({"gen_ai.tool.call.id": [cid],
                               "gen_ai.tool.name": "OpenMeteoTool"}))
          for k, (cid, city) in enumerate((("call_a", "Boston"), ("call_b", "Prague")))]]
    doc = {"trace": {"id": "tr", "name": "weather"}, "observations": observations}
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", doc)
    assert quarantine == [] and summary.accepted == 1
    assert [(r["call_id"], json.loads(r["observation"]["tool_result"])) for r in rows] == [
        ("call_a", "Boston: 20C"), ("call_b", "Prague: 20C")]


def test_beeai_tool_spans_are_two_calls_with_their_arguments(tmp_path):
    # Arize-ai/openinference, openinference-instrumentation-beeai: processors/tool.py names
    # the tool span after the tool (tool.name, input.value = the run's input as JSON) and
    # makes each emitter event (start, success, finish) a child span of the same kind
    # (_span.py: SpanWrapper.child, metadata.* attributes); in a Langfuse export they are
    # TOOL observations whose attributes are in the metadata, the input left empty.
    observations = [_obs("agent", "AGENT", "ToolCallingAgent", 1),
                    _weather_generation(2, [None, None])]
    for k, city in enumerate(("Boston", "Prague")):
        run = _obs(f"run{k}", "TOOL", "OpenMeteoTool", 3 + k, "agent", metadata=_meta({
            "openinference.span.kind": "TOOL", "tool.name": "OpenMeteoTool",
            "input.value": json.dumps({"input": {"location_name": city}}),
            "output.value": f"{city}: 20C", "metadata.class_name": "OpenMeteoTool"}))
        events = [_obs(f"run{k}-{event}", "TOOL", event, 3 + k, f"run{k}", metadata=_meta({
            "openinference.span.kind": "TOOL", "input.value": json.dumps({"event": event}),
            "metadata.path": f"tool.open_meteo.{event}"}))
            for event in ("start", "success", "finish")]
        observations += [*events, run] if k == 0 else [run, *events]  # either order
    tool_spans = sum(o["type"] == "TOOL" for o in observations)
    doc = {"trace": {"id": "tr", "name": "weather"}, "observations": observations}
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", doc)
    assert quarantine == [] and tool_spans == 8
    calls = [r for r in rows if r["action"]["type"] == "tool_call"]
    assert [(json.loads(r["action"]["arguments"]), json.loads(r["observation"]["tool_result"]))
            for r in calls] == [({"location_name": "Boston"}, "Boston: 20C"),
                                ({"location_name": "Prague"}, "Prague: 20C")]


def test_a_folder_whose_files_are_all_skipped_writes_an_empty_table(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "sessions-index.json").write_text(json.dumps(
        {"version": 1, "originalPath": "/w", "entries": []}))  # Claude Code's: no record
    (folder / "empty.jsonl").write_text("")
    summary = ingest([folder], tmp_path / "out")
    table = pq.read_table(tmp_path / "out" / "steps")
    assert summary.rows == table.num_rows == 0 and table.schema.equals(STEP_SCHEMA)


# A format named on the command line (`--format`) that is not the file's: refused, exit 2,
# one line naming the file, the format, what it expects and what was found — never a green
# empty dataset (codex-cli read 0 records of a tau2 file with exit 0).
def _codex_rollout(path: Path) -> Path:
    lines = [{"timestamp": "2025-10-01T10:00:00.000Z", "type": "session_meta",
              "payload": {"id": "s1", "cwd": "/w", "cli_version": "0.44.0"}},
             {"timestamp": "2025-10-01T10:00:01.000Z", "type": "response_item",
              "payload": {"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": "hi"}]}},
             {"timestamp": "2025-10-01T10:00:02.000Z", "type": "response_item",
              "payload": {"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": "hello"}]}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize("named", ["gemini-cli", "jsonl", "openai-chat", "inspect-ai",
                                   "otel-genai", "tau2", "smolagents"])
def test_a_file_of_another_format_named_with_format_is_refused(tmp_path, named):
    from typer.testing import CliRunner

    from tracerl.cli import app

    logs = _codex_rollout(tmp_path / "rollout.jsonl")
    assert detect_format(logs) == "codex-cli"
    result = CliRunner().invoke(app, ["ingest", str(logs), "--out", str(tmp_path / "out"),
                                      "--format", named])
    assert result.exit_code == 2, result.output
    line, = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith(f"error: {logs}: --format {named} expects ")
    assert "but its first record is of format codex-cli" in line
    assert line.endswith("pass --format codex-cli or auto")
    assert not (tmp_path / "out" / "steps").exists()
    # the format it is: read
    assert ingest([logs], tmp_path / "ok", fmt="codex-cli").quarantined == 0


def test_one_file_of_another_format_in_a_folder_refuses_the_named_format(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(3):
        _codex_rollout(folder / f"rollout-{i}.jsonl")
    (folder / "chat.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n")
    with pytest.raises(InputError, match=r"chat\.jsonl: --format codex-cli expects a Codex "
                                         r"CLI rollout, a record per session, but its first "
                                         r"record is of format openai-chat"):
        ingest([folder], tmp_path / "out", fmt="codex-cli")
    with pytest.raises(InputError, match=r"rollout-0\.jsonl: .* \(and 2 more files of 4\)"):
        ingest([folder], tmp_path / "out", fmt="openai-chat")


def test_a_document_of_no_known_shape_named_as_inspect_is_quarantined_not_empty(tmp_path):
    # a shape no detector knows may be named (how such a file is read); its reader then
    # says what it is not, never 0 records with exit 0
    doc = tmp_path / "odd.json"
    doc.write_text(json.dumps({"foo": {"bar": 1}}))
    assert detect_format(doc) is None
    summary = ingest([doc], tmp_path / "out", fmt="inspect-ai", max_bad_fraction=1.0)
    assert (summary.read, summary.quarantined) == (1, 1)
    assert "not an Inspect AI eval log" in _quarantine(tmp_path / "out")[0]["reason"]


def test_the_command_line_says_why_a_file_of_no_known_shape_is_refused(tmp_path):
    # events of no known format (here an invented run log) are refused by name, the reason
    # on one line of the command's output (not only in quarantine.jsonl)
    from typer.testing import CliRunner

    from tracerl.cli import app

    logs = tmp_path / "exec.jsonl"
    logs.write_text(json.dumps({"type": "run.started", "thread_id": "t1"}) + "\n" +
                    json.dumps({"type": "step.done", "item": {
                        "id": "i0", "type": "shell", "command": "ls",
                        "exit_code": 0, "status": "completed"}}) + "\n")
    result = CliRunner().invoke(app, ["ingest", str(logs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    refused = [x for x in result.output.splitlines() if x.startswith("refused: ")]
    assert refused == [f"refused: {logs}: " + _quarantine(tmp_path / "out")[0]["reason"]]
    assert "keys: thread_id, type" in refused[0] and "nearest formats:" in refused[0]
