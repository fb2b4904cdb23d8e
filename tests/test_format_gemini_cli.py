"""Gemini CLI sessions as the CLI writes them, built here in code after the writer
(google-gemini/gemini-cli: packages/core/src/services/chatRecordingService.ts
`initialize` / `appendRecord` / `loadConversationRecord`, chatRecordingTypes.ts
MessageRecord, ToolCallRecord). Each test recomputes the counts from the raw file with the
stdlib and compares them with the step table."""

from __future__ import annotations

import json

from tests.format_helpers import ingest_detected, step_counts

META = {"sessionId": "8f0c2a9e-1b7d-4a55-9c3e-2f6d7b1a0c44", "projectHash": "a3f9" * 16,
        "startTime": "2026-01-10T09:00:00.000Z", "lastUpdated": "2026-01-10T09:00:00.000Z"}


def _call(cid: str, name: str, args: dict, output, status: str = "success") -> dict:
    response = {"output": output} if status == "success" else {"error": output}
    return {"id": cid, "name": name, "args": args, "status": status,
            "timestamp": "2026-01-10T09:00:05.000Z", "displayName": name,
            "result": [{"functionResponse": {"id": cid, "name": name,
                                             "response": response}}],
            "resultDisplay": str(output), "renderOutputAsMarkdown": False}


def _gemini(mid: str, text: str, calls: list[dict], model: str = "gemini-2.5-pro") -> dict:
    return {"id": mid, "timestamp": "2026-01-10T09:00:04.000Z", "type": "gemini",
            "content": text, "thoughts": [{"subject": "Planning", "description": "List files",
                                           "timestamp": "2026-01-10T09:00:03.000Z"}],
            "tokens": {"input": 1000, "output": 50, "cached": 0, "thoughts": 20, "tool": 0,
                       "total": 1070},
            "model": model, "toolCalls": calls}


def _user(mid: str, text: str) -> dict:
    return {"id": mid, "timestamp": "2026-01-10T09:00:01.000Z", "type": "user",
            "content": [{"text": text}]}


def _live(records: list[dict]) -> list[dict]:
    """The messages a session's records leave, as loadConversationRecord reads them."""
    live: dict[str, dict] = {}
    for r in records:
        if "$rewindTo" in r:
            ids = list(live)
            for dropped in ids[ids.index(r["$rewindTo"]) if r["$rewindTo"] in ids else 0:]:
                del live[dropped]
        elif "id" in r:
            live[r["id"]] = r
    return list(live.values())


def _raw_counts(messages: list[dict]) -> tuple[int, int, int]:
    replies = [m for m in messages if m["type"] == "gemini"]
    calls = [c for m in replies for c in m.get("toolCalls") or []]
    return (len(calls), sum(c.get("result") is not None for c in calls),
            sum(not m.get("toolCalls") for m in replies))


def test_jsonl_session_rewrites_rewinds_and_parallel_calls(tmp_path):
    first = _gemini("g1", "", [_call("read_file-1", "read_file", {"absolute_path": "/w/a.py"},
                                     "print(1)\n"),
                               _call("run_shell_command-2", "run_shell_command",
                                     {"command": "pytest -q"}, "Command failed: exit 1",
                                     "error")])
    records = [
        META,
        _user("u1", "Why does the test fail?"),
        {**first, "toolCalls": []},  # written first without its calls, then again
        first,
        {"id": "i1", "timestamp": "t", "type": "info", "content": "Checkpoint saved."},
        _gemini("g2", "Let me try another way.", [_call("glob-3", "glob", {"pattern": "*.py"},
                                                        "a.py")]),
        {"$rewindTo": "g2"},  # the user rewound that reply
        _gemini("g3", "The test expects 2, the code prints 1.", []),
        {"$set": {"lastUpdated": "2026-01-10T09:05:00.000Z", "summary": "Test failure"}}]
    path = tmp_path / "session-2026-01-10T09-00-8f0c2a9e.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary, rows, quarantine = ingest_detected(tmp_path, "gemini-cli", path)
    assert not quarantine and summary.accepted == 1
    live = _live([json.loads(x) for x in path.read_text().splitlines()])
    assert step_counts(rows) == _raw_counts(live) == (2, 2, 1)
    assert [(r["turn"], r["call_index"], r["call_id"]) for r in rows] == [
        (0, 0, "read_file-1"), (0, 1, "run_shell_command-2"), (1, None, None)]
    assert rows[0]["observation"]["tool_result"] == json.dumps("print(1)\n")
    assert rows[1]["observation"]["error"] == "Command failed: exit 1"
    assert rows[0]["state"]["user_goal"] == "Why does the test fail?"
    assert rows[0]["metadata"]["behavior_policy"] == "gemini-2.5-pro"
    assert json.loads(rows[0]["extra"])["reasoning"] == "Planning: List files"
    assert {r["episode_id"] for r in rows} == {META["sessionId"]}
    assert summary.notes["rewound_messages"] == 1
    assert rows[0]["episode"]["prompt_tokens"] == 2000  # g1 and g3


def test_legacy_json_session(tmp_path):
    doc = {**META, "messages": [
        _user("u1", "List the files."),
        _gemini("g1", "", [_call("ls-1", "list_directory", {"path": "/w"}, "a.py\nb.py")]),
        {"id": "e1", "timestamp": "t", "type": "error", "content": "Quota exceeded"},
        _gemini("g2", "There are two files.", [], "gemini-2.5-flash")]}
    path = tmp_path / "session-2025-09-01T10-00-8f0c2a9e.json"
    path.write_text(json.dumps(doc, indent=2))
    summary, rows, quarantine = ingest_detected(tmp_path, "gemini-cli", path)
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == _raw_counts(json.loads(path.read_text())["messages"]) \
        == (1, 1, 1)
    assert rows[1]["metadata"]["behavior_policy"] == "gemini-2.5-flash"
    assert rows[0]["observation"]["events"][0]["error"] == "Quota exceeded"


def test_a_function_response_carrying_an_error_is_an_observation_error(tmp_path):
    # a call recorded `success` whose functionResponse's response is {"error": ...}
    call = _call("c1", "read_file", {"path": "x"}, "ok")
    call["result"][0]["functionResponse"]["response"] = {"error": "File not found: x"}
    records = [META, _user("u1", "read x"), _gemini("g1", "", [call])]
    path = tmp_path / "session-2026-01-10T09-00-8f0c2a9e.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in records))
    summary, rows, quarantine = ingest_detected(tmp_path, "gemini-cli", path)
    assert not quarantine
    assert step_counts(rows) == (1, 1, 0)
    assert rows[0]["observation"]["error"] == "File not found: x"


# `gemini -p ... --output-format stream-json`, built after the writer (google-gemini/
# gemini-cli: packages/core/src/output/types.ts JsonStreamEvent, stream-json-formatter.ts;
# packages/cli/src/nonInteractiveCli.ts: the text in `delta` chunks and the tool uses as the
# response streams, each tool_result after it)
def _stream(kind: str, **fields) -> dict:
    return {"type": kind, "timestamp": "2026-01-10T09:00:00.000Z", **fields}


def _stream_raw_counts(events: list[dict]) -> tuple[int, int, int]:
    """(tool uses, tool results, assistant text runs with no tool use before the next
    result, user message or the end)."""
    uses = sum(e["type"] == "tool_use" for e in events)
    results = sum(e["type"] == "tool_result" for e in events)
    messages, text, called = 0, False, False
    for e in events + [_stream("result")]:
        if e["type"] == "message" and e["role"] == "assistant":
            text = True
        elif e["type"] == "tool_use":
            called = True
        elif e["type"] in ("tool_result", "result", "error") or e["type"] == "message":
            messages += text and not called
            text = called = False
    return uses, results, messages


def test_stream_json_output(tmp_path):
    events = [
        _stream("init", session_id="5b1c0d7e-aa11-4c2f-9e0d-6f1e2d3c4b5a",
                model="gemini-2.5-pro"),
        _stream("message", role="user", content="Fix the failing test"),
        _stream("message", role="assistant", content="Let me look ", delta=True),
        _stream("message", role="assistant", content="at the tests.", delta=True),
        _stream("tool_use", tool_name="run_shell_command", tool_id="run_shell_command-1-a",
                parameters={"command": "pytest -q"}),
        _stream("tool_use", tool_name="read_file", tool_id="read_file-1-b",
                parameters={"absolute_path": "/w/missing.py"}),
        _stream("tool_result", tool_id="run_shell_command-1-a", status="success",
                output="1 failed, 3 passed"),
        _stream("tool_result", tool_id="read_file-1-b", status="error",
                output="File not found", error={"type": "FILE_NOT_FOUND",
                                                "message": "File not found: /w/missing.py"}),
        _stream("tool_use", tool_name="replace", tool_id="replace-2-c",
                parameters={"file_path": "/w/a.py", "old_string": "1", "new_string": "2"}),
        _stream("tool_result", tool_id="replace-2-c", status="success"),
        _stream("error", severity="warning", message="Loop detected, stopping"),
        _stream("message", role="assistant", content="Fixed.", delta=True),
        _stream("result", status="success", stats={
            "total_tokens": 3100, "input_tokens": 3000, "output_tokens": 100, "cached": 0,
            "input": 3000, "duration_ms": 5300, "tool_calls": 3})]
    path = tmp_path / "gemini-stream.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in events))
    summary, rows, quarantine = ingest_detected(tmp_path, "gemini-cli", path)
    assert not quarantine and summary.accepted == 1
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    counts = _stream_raw_counts(raw)
    assert counts == (3, 3, 1)
    assert step_counts(rows) == counts
    assert [(r["turn"], r["call_index"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (2, None)]
    assert rows[0]["action"]["content"] == "Let me look at the tests."
    assert rows[1]["observation"]["error"] == "File not found: /w/missing.py"
    assert rows[0]["observation"]["error"] is None
    assert rows[0]["state"]["user_goal"] == "Fix the failing test"
    assert {r["episode_id"] for r in rows} == {"5b1c0d7e-aa11-4c2f-9e0d-6f1e2d3c4b5a"}
    assert rows[0]["metadata"]["behavior_policy"] == "gemini-2.5-pro"
    assert rows[0]["episode"]["prompt_tokens"] == 3000


def test_json_output_holds_no_actions_and_is_refused_clearly(tmp_path):
    # `--output-format json` (packages/core/src/output/json-formatter.ts: pretty-printed
    # JsonOutput {session_id, response, stats: SessionMetrics, error?})
    doc = {"session_id": "5b1c", "response": "Fixed.", "stats": {
        "models": {"gemini-2.5-pro": {"api": {"totalRequests": 2}, "tokens": {"prompt": 3000}}},
        "tools": {"totalCalls": 3, "totalSuccess": 2, "totalFail": 1, "byName": {}},
        "files": {"totalLinesAdded": 1, "totalLinesRemoved": 1}}}
    path = tmp_path / "gemini.json"
    path.write_text(json.dumps(doc, indent=2))
    summary, rows, quarantine = ingest_detected(tmp_path, "gemini-cli", path)
    assert rows == [] and summary.accepted == 0 and len(quarantine) == 1
    reason = quarantine[0]["reason"]
    assert "no agent actions" in reason and "3 tool calls" in reason
    assert "stream-json" in reason
