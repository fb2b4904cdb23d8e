"""Claude Code transcripts and project folders as real Claude Code versions write them,
each shape built here in code from a real or documented one (the source is named at each
test): what `--format auto` must read and count, and what it must not read as steps."""

from __future__ import annotations

import json
from pathlib import Path

from tests.adapter_helpers import ingest_files
from tracerl.data.formats import detect_format


def _jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def _json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))
    return path


SID = "e1d93efd-3c2b-4f51-9a0e-6b7d2c1f0a11"


def _line(kind: str, uuid: str, parent: str | None, message: dict, **extra) -> dict:
    return {"parentUuid": parent, "isSidechain": False, "userType": "external",
            "entrypoint": "cli", "cwd": "/repo", "sessionId": SID, "version": "2.1.90",
            "gitBranch": "main", "type": kind, "message": message, "uuid": uuid,
            "timestamp": "2026-06-27T10:00:00.000Z", **extra}


def _session(head: list[dict]) -> list[dict]:
    return [*head,
            _line("user", "u1", None, {"role": "user", "content": "list the files"}),
            _line("assistant", "a1", "u1", {
                "model": "claude-opus-4-7", "id": "msg_01A", "type": "message",
                "role": "assistant", "stop_reason": "tool_use", "usage": {
                    "input_tokens": 3, "output_tokens": 9},
                "content": [{"type": "tool_use", "id": "toolu_01A", "name": "Bash",
                             "input": {"command": "ls"}, "caller": {"type": "direct"}}]},
                requestId="req_01A"),
            _line("user", "u2", "a1", {"role": "user", "content": [
                {"tool_use_id": "toolu_01A", "type": "tool_result", "content": "a\nb",
                 "is_error": False}]},
                toolUseResult={"stdout": "a\nb", "stderr": "", "interrupted": False},
                sourceToolAssistantUUID="a1"),
            _line("assistant", "a2", "u2", {
                "model": "claude-opus-4-7", "id": "msg_01B", "type": "message",
                "role": "assistant", "stop_reason": "end_turn", "usage": {
                    "input_tokens": 4, "output_tokens": 5},
                "content": [{"type": "text", "text": "Two files: a and b."}]}),
            {"type": "last-prompt", "lastPrompt": "list the files", "leafUuid": "a2",
             "sessionId": SID},
            {"type": "ai-title", "aiTitle": "List the files", "sessionId": SID},
            {"type": "custom-title", "customTitle": "files", "sessionId": SID},
            {"type": "agent-name", "agentName": "files", "sessionId": SID}]


# Claude Code 2.1 opens a session file with session-state lines that have a `type` and the
# `sessionId` but no uuid: `mode`, `permission-mode`, `bridge-session` (the first lines of
# real sessions as several session tools' fixtures copy them, found in the code index
# without their repository named: an IDE extension's test "Shape of the first lines of a
# real IDE session (Claude Code 2.1.289)", a Go `slashCommandOnly` fixture, a note "実デー
# タで確認" quoting mode / permission-mode / bridge-session; neilberkman/ccrider
# research/schema.md documents the older `summary` first line, which was already read).
# Before: the first line decided the format, no shape fitted, the file was read as native
# steps and every line quarantined.
def test_a_session_that_opens_with_session_state_lines_is_claude_code(tmp_path):
    for n, head in enumerate([
            [{"type": "mode", "mode": "normal", "sessionId": SID},
             {"type": "permission-mode", "permissionMode": "default", "sessionId": SID},
             {"type": "bridge-session", "sessionId": SID, "bridgeSessionId": "cse_01"}],
            [{"type": "permission-mode", "permissionMode": "bypassPermissions",
              "sessionId": SID},
             {"type": "file-history-snapshot", "messageId": "m1", "snapshot": {
                 "messageId": "m1", "trackedFileBackups": {},
                 "timestamp": "2026-06-27T10:00:00.000Z"}, "isSnapshotUpdate": False}]]):
        path = _jsonl(tmp_path / str(n) / f"{SID}.jsonl", _session(head))
        assert detect_format(path) == "claude-code"
        summary, rows, quarantine = ingest_files(tmp_path / str(n), path)
        assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
        assert [(r["action"]["type"], r["action"]["tool"]) for r in rows] == [
            ("tool_call", "Bash"), ("message", None)]
        assert json.loads(rows[0]["observation"]["tool_result"]) == "a\nb"
        assert rows[0]["episode_id"] == SID
        assert summary.notes["skipped_permission-mode_lines"] == 1
        assert summary.notes["skipped_last-prompt_lines"] == 1


def test_session_state_lines_alone_do_not_make_a_claude_code_file(tmp_path):
    """Lines with a type and a sessionId, and nothing of a transcript after them: not
    claude-code by this rule (nothing says it is a Claude Code transcript)."""
    path = _jsonl(tmp_path / "x.jsonl", [{"type": "started", "sessionId": "s"},
                                         {"type": "finished", "sessionId": "s"}])
    assert detect_format(path) is None


# A Claude Code project folder holds files that are not transcripts: the project's
# `sessions-index.json` ({version, originalPath, entries: [{sessionId, fullPath, ...}]},
# read by tmc/cc's SessionIndex and several session browsers) and, for a Workflow tool
# run, `<session>/workflows/<runId>.json` (its snapshot: runId, workflowName,
# workflowProgress) and `<session>/subagents/workflows/<runId>/journal.jsonl` (a
# `started` / `result` line per agent) beside the agents' transcripts (modelled on
# daaain/claude-code-log test/test_data/workflow_scriptpath/). Before: the index and the
# snapshot were read as native steps and quarantined (or refused), the journal's lines
# quarantined; ingesting ~/.claude/projects failed on them.
def test_claude_code_project_side_files_are_counted_not_read(tmp_path):
    project = tmp_path / "-repo"
    main = _jsonl(project / f"{SID}.jsonl", _session([]))
    _json(project / "sessions-index.json", {
        "version": 1, "originalPath": "/repo", "entries": [{
            "sessionId": SID, "fullPath": str(main), "fileMtime": 1768989134347,
            "firstPrompt": "list the files", "messageCount": 4, "gitBranch": "main",
            "projectPath": "/repo", "isSidechain": False}]})
    run = project / SID / "subagents" / "workflows" / "wf_sp01"
    _jsonl(run / "journal.jsonl", [
        {"type": "started", "key": "v2:hsp0", "agentId": "agsp0001"},
        {"type": "result", "key": "v2:hsp0", "agentId": "agsp0001", "result": "swept"}])
    _jsonl(run / "agent-agsp0001.jsonl", [
        {**_line("user", "w1", None, {"role": "user", "content": [
            {"type": "text", "text": "Sweep docs batch a."}]}),
         "isSidechain": True, "agentId": "agsp0001"},
        {**_line("assistant", "w2", "w1", {
            "id": "msg_w2", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-6", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "swept"}],
            "usage": {"input_tokens": 5, "output_tokens": 5}}),
         "isSidechain": True, "agentId": "agsp0001"}])
    _json(run / "agent-agsp0001.meta.json", {"agentType": "workflow-subagent"})
    _json(project / SID / "workflows" / "wf_sp01.json", {
        "runId": "wf_sp01", "taskId": "task_sp01", "status": "completed",
        "workflowName": "docs-sweep", "agentCount": 1, "workflowProgress": [
            {"type": "workflow_phase", "index": 1, "title": "Sweep"},
            {"type": "workflow_agent", "index": 0, "label": "sweep:a",
             "agentId": "agsp0001", "model": "claude-sonnet-4-6", "state": "done"}]})
    summary, rows, quarantine = ingest_files(tmp_path, project)
    assert set(summary.formats.values()) == {"claude-code"}
    assert (summary.read, summary.accepted, quarantine) == (2, 2, [])
    assert {k: summary.notes[k] for k in ("sessions_index_files", "workflow_run_files",
                                          "workflow_journal_files")} == {
        "sessions_index_files": 1, "workflow_run_files": 1, "workflow_journal_files": 1}
    agent = [r for r in rows if r["episode_id"].endswith("/agent-agsp0001")]
    assert [r["action"]["content"] for r in agent] == ["swept"]
    assert json.loads(agent[0]["extra"])["episode"]["agent_type"] == "workflow-subagent"


# The Claude Agent SDK's messages, as `claude -p --output-format stream-json --verbose`
# prints them one a line and claude-code-action saves them as a JSON array in its
# execution file (modelled on test/fixtures/sample-turns.json of claude-code-action, here
# from its fork jason-webcomm/claude-code-action; the same file is in six other forks):
# `system` init (session_id, tools), `assistant` / `user` messages with `session_id` and
# `parent_tool_use_id` (a sub-agent's messages name the Task call that started it), tool
# results in user messages that may name no session, a closing `result` (cost, duration,
# subtype). Before: the array was read as OpenAI chat and every element quarantined; a
# stream-json file without uuids was read as native steps.
def _sdk_stream(session: str | None = "sample-session-id") -> list[dict]:
    sid = {"session_id": session} if session else {}
    return [
        {"type": "system", "subtype": "init", **sid, "tools": ["Task", "Bash", "Read"],
         "mcp_servers": [{"name": "github", "status": "connected"}],
         "model": "claude-opus-4-5-20251101", "permissionMode": "default"},
        {"type": "assistant", "message": {
            "id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-opus-4-5-20251101", "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 50,
                      "output_tokens": 75},
            "content": [{"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {
                            "subagent_type": "general-purpose", "prompt": "List it"}}]},
         "parent_tool_use_id": None, **sid},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": "List it"}]}, "parent_tool_use_id": "toolu_task", **sid},
        {"type": "assistant", "message": {
            "id": "msg_s1", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5-20251001", "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "output_tokens": 9},
            "content": [{"type": "tool_use", "id": "toolu_ls", "name": "Bash",
                         "input": {"command": "ls"}}]},
         "parent_tool_use_id": "toolu_task", **sid},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_ls", "content": "README.md",
             "is_error": False}]}, "parent_tool_use_id": "toolu_task",
         "tool_use_result": {"stdout": "README.md", "stderr": "", "interrupted": False}},
        {"type": "assistant", "message": {
            "id": "msg_s2", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5-20251001", "stop_reason": "end_turn",
            "usage": {"input_tokens": 6, "output_tokens": 5},
            "content": [{"type": "text", "text": "README.md"}]},
         "parent_tool_use_id": "toolu_task", **sid},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_task",
             "content": [{"type": "text", "text": "README.md"}], "is_error": False}]}},
        {"type": "assistant", "message": {
            "id": "msg_2", "type": "message", "role": "assistant",
            "model": "claude-opus-4-5-20251101", "stop_reason": "end_turn",
            "usage": {"input_tokens": 180, "output_tokens": 60},
            "content": [{"type": "text", "text": "Only a README."}]},
         "parent_tool_use_id": None, **sid},
        {"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.0347,
         "duration_ms": 18750, "num_turns": 2, "result": "Only a README.", **sid}]


def test_an_agent_sdk_message_stream_is_claude_code(tmp_path):
    array = _json(tmp_path / "a" / "claude-execution-output.json", _sdk_stream())
    lines = _jsonl(tmp_path / "b" / "stream.jsonl", _sdk_stream())
    for path in (array, lines):
        assert detect_format(path) == "claude-code"
        summary, rows, quarantine = ingest_files(path.parent, path)
        assert (summary.read, summary.accepted, quarantine) == (2, 2, [])
        assert summary.notes["skipped_result_lines"] == 1
        main = [r for r in rows if r["episode_id"] == "sample-session-id"]
        task = [r for r in rows if r["episode_id"] == "sample-session-id/task-toolu_task"]
        assert [(r["action"]["type"], r["action"]["tool"]) for r in main] == [
            ("tool_call", "Task"), ("message", None)]
        assert json.loads(main[0]["observation"]["tool_result"]) == "README.md"
        assert main[0]["state"]["available_tools"] == ["Bash", "Read", "Task"]
        episode = main[0]["episode"]
        assert (episode["agent_cost_usd"], episode["duration_s"],
                episode["termination_reason"]) == (0.0347, 18.75, "success")
        assert [(r["action"]["type"], r["action"]["tool"]) for r in task] == [
            ("tool_call", "Bash"), ("message", None)]
        assert json.loads(task[0]["observation"]["tool_result"]) == "README.md"
        assert task[0]["episode"]["agent_model"] == "claude-haiku-4-5-20251001"


def test_a_stream_of_the_same_shape_without_a_tool_list_is_not_claude_code(tmp_path):
    """Cursor's agent CLI copies the stream-json envelope (`system` init with session_id)
    but lists no tools and writes its calls as `tool_call` lines: not read as Claude
    Code, whose init line always lists them."""
    path = _jsonl(tmp_path / "cursor.jsonl", [
        {"type": "system", "subtype": "init", "apiKeySource": "login", "cwd": "/repo",
         "session_id": "c1", "model": "Claude 4 Sonnet", "permissionMode": "default"},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."}]}, "session_id": "c1"}])
    assert detect_format(path) != "claude-code"
