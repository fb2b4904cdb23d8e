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
