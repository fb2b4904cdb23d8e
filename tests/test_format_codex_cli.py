"""Codex CLI rollouts as the CLI writes them, built here in code after the writer
(openai/codex: codex-rs/core/src/rollout/recorder.rs, protocol's RolloutLine /
RolloutItem / ResponseItem; the shell tool's output JSON `{output, metadata: {exit_code,
duration_seconds}}`). Each test recomputes the counts from the raw file with the stdlib
and compares them with the step table."""

from __future__ import annotations

import json

from tests.format_helpers import ingest_detected, step_counts

SID = "0199a213-81c0-7800-8aa1-bbab2a035a53"
CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")


def _line(kind: str, payload: dict, second: int = 0) -> dict:
    return {"timestamp": f"2025-10-01T10:00:{second:02d}.000Z", "type": kind,
            "payload": payload}


def _msg(role: str, text: str) -> dict:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def _shell(call_id: str, command: list[str]) -> dict:
    return {"type": "function_call", "name": "shell",
            "arguments": json.dumps({"command": command, "workdir": "/w"}),
            "call_id": call_id}


def _out(call_id: str, text: str, code: int) -> dict:
    return {"type": "function_call_output", "call_id": call_id,
            "output": json.dumps({"output": text, "metadata": {"exit_code": code,
                                                                "duration_seconds": 0.1}})}


def _raw_counts(lines: list[dict]) -> tuple[int, int]:
    """(calls, outputs) among the response items."""
    items = [x["payload"] for x in lines if x["type"] == "response_item"]
    return (sum(i["type"] in CALLS for i in items),
            sum(i["type"].endswith("_output") for i in items))


def test_rollout_turns_parallel_calls_outputs_and_tokens(tmp_path):
    lines = [
        _line("session_meta", {"id": SID, "timestamp": "2025-10-01T10:00:00.000Z",
                               "cwd": "/w", "originator": "codex_cli_rs",
                               "cli_version": "0.44.0", "instructions": None}),
        _line("response_item", _msg("user", "<environment_context>\n  <cwd>/w</cwd>\n"
                                            "</environment_context>")),
        _line("turn_context", {"cwd": "/w", "approval_policy": "on-request",
                               "sandbox_policy": {"mode": "workspace-write"},
                               "model": "gpt-5-codex", "effort": "medium",
                               "summary": "auto"}),
        _line("response_item", _msg("user", "Fix the failing test.")),
        _line("event_msg", {"type": "user_message", "message": "Fix the failing test.",
                            "kind": "plain"}),
        _line("response_item", {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": "**Inspecting tests**"}],
            "content": None, "encrypted_content": "gAAAA"}),
        _line("response_item", _shell("call_1", ["bash", "-lc", "ls"])),
        _line("response_item", _shell("call_2", ["bash", "-lc", "pytest -q"])),
        _line("response_item", _out("call_1", "src\ntests\n", 0)),
        _line("event_msg", {"type": "exec_command_end", "call_id": "call_2",
                            "exit_code": 1}),
        _line("response_item", _out("call_2", "1 failed", 1)),
        _line("response_item", {"type": "custom_tool_call", "status": "completed",
                                 "call_id": "call_3", "name": "apply_patch",
                                 "input": "*** Begin Patch\n*** Update File: a.py\n"
                                          "*** End Patch"}),
        _line("response_item", {"type": "custom_tool_call_output", "call_id": "call_3",
                                 "output": "Success. Updated the following files:\nM a.py"}),
        _line("response_item", {"type": "web_search_call", "id": "ws_1",
                                 "status": "completed",
                                 "action": {"type": "search", "query": "pytest -q"}}),
        _line("response_item", _msg("assistant", "Fixed: the test passes now.")),
        _line("event_msg", {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 21000, "cached_input_tokens": 9000,
                                  "output_tokens": 900, "total_tokens": 21900},
            "last_token_usage": {"input_tokens": 7000, "output_tokens": 300}}})]
    path = tmp_path / f"rollout-2025-10-01T10-00-00-{SID}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine and summary.accepted == 1
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    calls, outputs = _raw_counts(raw)
    assert (calls, outputs) == (4, 3)
    # the closing assistant text joins the web search's turn (one response)
    assert step_counts(rows) == (calls, outputs, 0)
    assert [(r["turn"], r["call_index"], r["call_id"]) for r in rows] == [
        (0, 0, "call_1"), (0, 1, "call_2"), (1, 0, "call_3"), (2, 0, "ws_1")]
    assert rows[1]["observation"]["error"] == "exit_code 1"
    assert json.loads(rows[0]["observation"]["tool_result"])["output"] == "src\ntests\n"
    assert json.loads(rows[2]["action"]["arguments"]).startswith("*** Begin Patch")
    assert json.loads(rows[0]["extra"])["reasoning"] == "**Inspecting tests**"
    assert rows[0]["state"]["user_goal"].startswith("<environment_context>")
    assert rows[0]["metadata"]["behavior_policy"] == "gpt-5-codex"
    assert {r["episode_id"] for r in rows} == {SID}
    assert rows[0]["episode"]["prompt_tokens"] == 21000


def test_old_rollout_of_bare_items(tmp_path):
    # codex before the RolloutLine envelope: an {id, timestamp, instructions} line, then
    # bare items and {record_type: state} lines
    lines = [{"id": "5f1b", "timestamp": "2025-05-01T09:00:00.000Z", "instructions": None},
             {"record_type": "state"},
             _msg("user", "list files"),
             {"type": "function_call", "id": "fc_1", "name": "shell",
              "arguments": json.dumps({"command": ["ls"]}), "call_id": "call_a"},
             {"record_type": "state"},
             {"type": "function_call_output", "call_id": "call_a",
              "output": json.dumps({"output": "a.py\n", "metadata": {"exit_code": 0}})},
             _msg("assistant", "There is a.py.")]
    path = tmp_path / "rollout-2025-05-01-5f1b.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine and summary.accepted == 1
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    calls = sum(x.get("type") == "function_call" for x in raw)
    texts = sum(x.get("type") == "message" and x["role"] == "assistant" for x in raw)
    assert step_counts(rows) == (calls, calls, texts) == (1, 1, 1)
    assert {r["episode_id"] for r in rows} == {"5f1b"}


def test_newer_rollout_text_outputs_unified_exec_and_a_call_left_unanswered(tmp_path):
    # codex 0.5x: the shell's output as text with a header (`Exit code: N`, `Wall time`,
    # `Output:`), unified exec (`exec_command` / `write_stdin`: `Process exited with code N`
    # or `Process running with session ID N`), a ghost snapshot item, a compaction with its
    # replacement history (not read again), and a call the session ended before answering
    def call(cid: str, name: str, args: dict) -> dict:
        return {"type": "function_call", "name": name, "arguments": json.dumps(args),
                "call_id": cid}

    def out(cid: str, text: str) -> dict:
        return {"type": "function_call_output", "call_id": cid, "output": text}

    lines = [
        _line("session_meta", {"id": SID, "cwd": "/w", "cli_version": "0.58.0",
                               "originator": "codex_cli_rs", "source": "cli",
                               "model_provider": "openai"}),
        _line("turn_context", {"cwd": "/w", "model": "gpt-5.1-codex", "effort": "high"}),
        _line("response_item", _msg("user", "Run the tests.")),
        _line("response_item", call("c1", "shell", {"command": ["bash", "-lc", "pytest"]})),
        _line("response_item", out("c1", "Exit code: 1\nWall time: 2.1 seconds\nOutput:\n"
                                         "1 failed, 3 passed\n")),
        _line("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
        _line("response_item", call("c2", "exec_command", {"cmd": "make lint"})),
        _line("response_item", call("c3", "exec_command", {"cmd": "cat log.txt"})),
        _line("response_item", out("c2", "Chunk ID: 1f2e\nWall time: 0.4 seconds\n"
                                         "Process exited with code 2\nOriginal token count: 9\n"
                                         "Output:\nlint: 1 error\n")),
        # what the command printed may say anything: only the header is read
        _line("response_item", out("c3", "Exit code: 0\nWall time: 0.0 seconds\nOutput:\n"
                                         "Exit code: 5\n")),
        _line("compacted", {"message": "Summary so far.", "replacement_history": [
            _msg("user", "Run the tests."), call("c1", "shell", {"command": ["pytest"]})]}),
        _line("response_item", call("c4", "exec_command", {"cmd": "npm run dev"})),
        _line("response_item", out("c4", "Chunk ID: 9a\nWall time: 10.0 seconds\nProcess "
                                         "running with session ID 7\nOutput:\nready\n")),
        _line("response_item", call("c5", "shell", {"command": ["bash", "-lc", "sleep 99"]}))]
    path = tmp_path / f"rollout-2025-11-20T08-00-00-{SID}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine and summary.accepted == 1
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    calls, outputs = _raw_counts(raw)
    assert step_counts(rows) == (calls, outputs, 0) == (5, 4, 0)
    errors = {r["call_id"]: r["observation"]["error"] for r in rows}
    assert errors == {"c1": "exit_code 1", "c2": "exit_code 2", "c3": None, "c4": None,
                      "c5": None}
    assert [(r["turn"], r["call_index"]) for r in rows] == [(0, 0), (1, 0), (1, 1), (2, 0),
                                                            (3, 0)]
    assert rows[0]["metadata"]["behavior_policy"] == "gpt-5.1-codex"


# `codex exec --json` output, built after the writer (openai/codex:
# codex-rs/exec/src/exec_events.rs — ThreadEvent, ThreadItem; event_processor_with_jsonl_
# output.rs — items started, updated and completed under one `item_N` id)
EXEC_CALLS = ("command_execution", "file_change", "mcp_tool_call", "collab_tool_call",
              "web_search")


def _exec_raw_counts(events: list[dict]) -> tuple[int, int, int]:
    """(calls, calls ended with a result, agent messages with no call after them in their
    turn) recomputed from the raw lines: the last state of each item id."""
    last: dict[str, dict] = {}
    order: list[tuple[str, str]] = []
    for e in events:
        if e["type"].startswith("item.") and "item" in e:
            if e["item"]["id"] not in last:
                order.append(("item", e["item"]["id"]))
            last[e["item"]["id"]] = e["item"]
        elif e["type"] in ("turn.completed", "turn.failed"):
            order.append(("end", ""))
    items = [last[i] if k == "item" else None for k, i in order]
    calls = [i for i in items if i and i["type"] in EXEC_CALLS]
    ended = [i for i in calls if i["type"] != "web_search" and i["status"] != "in_progress"]
    messages, pending = 0, 0
    for i in items + [None]:
        if i is None or i["type"] in EXEC_CALLS:
            messages += pending if i is None else 0
            pending = 0
        elif i["type"] == "agent_message":
            pending += 1
    return len(calls), len(ended), messages


def test_codex_exec_json_stream(tmp_path):
    tid = "0199a213-81c0-7800-8aa1-bbab2a035a53"

    def ev(kind: str, item: dict) -> dict:
        return {"type": kind, "item": item}

    def cmd(iid: str, command: str, status: str, out: str = "", code=None) -> dict:
        return {"id": iid, "type": "command_execution", "command": command,
                "aggregated_output": out, "exit_code": code, "status": status}

    events = [
        {"type": "thread.started", "thread_id": tid},
        {"type": "turn.started"},
        ev("item.completed", {"id": "item_0", "type": "reasoning",
                              "text": "**Looking at the tests**"}),
        ev("item.completed", {"id": "item_1", "type": "agent_message",
                              "text": "I'll run the tests first."}),
        ev("item.started", cmd("item_2", "bash -lc 'pytest -q'", "in_progress")),
        ev("item.completed", cmd("item_2", "bash -lc 'pytest -q'", "failed",
                                 "1 failed, 3 passed\n", 1)),
        ev("item.started", {"id": "item_3", "type": "todo_list", "items": [
            {"text": "fix a.py", "completed": False}]}),
        ev("item.completed", {"id": "item_4", "type": "file_change", "changes": [
            {"path": "a.py", "kind": "update"}], "status": "completed"}),
        ev("item.started", {"id": "item_5", "type": "mcp_tool_call", "server": "docs",
                            "tool": "search", "arguments": {"q": "pytest"}, "result": None,
                            "error": None, "status": "in_progress"}),
        ev("item.completed", {"id": "item_5", "type": "mcp_tool_call", "server": "docs",
                              "tool": "search", "arguments": {"q": "pytest"},
                              "result": {"content": [{"type": "text", "text": "found 2"}],
                                         "structured_content": None},
                              "error": None, "status": "completed"}),
        ev("item.completed", {"id": "item_6", "type": "mcp_tool_call", "server": "docs",
                              "tool": "fetch", "arguments": {}, "result": None,
                              "error": {"message": "timeout"}, "status": "failed"}),
        ev("item.started", {"id": "item_7", "type": "web_search", "query": "pytest -q"}),
        ev("item.completed", {"id": "item_7", "type": "web_search", "query": "pytest -q",
                              "action": {"type": "search", "query": "pytest -q"}}),
        ev("item.updated", {"id": "item_3", "type": "todo_list", "items": [
            {"text": "fix a.py", "completed": True}]}),
        ev("item.completed", {"id": "item_8", "type": "agent_message",
                              "text": "Fixed a.py; the tests pass."}),
        ev("item.completed", {"id": "item_3", "type": "todo_list", "items": [
            {"text": "fix a.py", "completed": True}]}),
        {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens":
                                             24448, "output_tokens": 122}},
        {"type": "turn.started"},
        ev("item.completed", {"id": "item_9", "type": "error",
                              "message": "command timed out"}),
        ev("item.started", cmd("item_10", "sleep 100", "in_progress")),
        {"type": "turn.failed", "error": {"message": "stream disconnected"}},
        {"type": "error", "message": "stream disconnected"}]
    path = tmp_path / "codex-exec.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in events))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine and summary.accepted == 1
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    calls, ended, messages = _exec_raw_counts(raw)
    assert (calls, ended, messages) == (6, 4, 1)
    assert step_counts(rows) == (calls, ended, messages)
    by_id = {r["call_id"]: r for r in rows}
    assert by_id["item_2"]["observation"]["error"] == "exit_code 1"
    assert by_id["item_2"]["action"]["content"] == "I'll run the tests first."
    assert json.loads(by_id["item_2"]["extra"])["reasoning"] == "**Looking at the tests**"
    assert by_id["item_5"]["action"]["tool"] == "docs__search"
    assert by_id["item_5"]["observation"]["error"] is None
    assert by_id["item_6"]["observation"]["error"] == "timeout"
    assert by_id["item_10"]["observation"]["tool_result"] is None
    assert rows[-1]["action"]["type"] == "tool_call" or rows[-1]["call_id"] is None
    assert {r["episode_id"] for r in rows} == {tid}
    assert rows[0]["episode"]["prompt_tokens"] == 24763


def test_codex_exec_json_of_a_resumed_thread_and_a_new_one(tmp_path):
    # `codex exec resume` prints thread.started again; a second thread id is an episode
    events = []
    for tid in ("t-1", "t-1", "t-2"):
        events += [{"type": "thread.started", "thread_id": tid}, {"type": "turn.started"},
                   {"type": "item.completed", "item": {"id": "item_0",
                                                       "type": "agent_message",
                                                       "text": "hi"}},
                   {"type": "turn.completed", "usage": {"input_tokens": 1,
                                                        "cached_input_tokens": 0,
                                                        "output_tokens": 1}}]
    path = tmp_path / "exec.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in events))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine
    assert sorted({r["episode_id"] for r in rows}) == ["t-1", "t-2"]


def test_codex_exec_json_before_the_rewrite(tmp_path):
    # the old `codex exec --json` (codex-rs/exec/src/event_processor_with_json_output.rs of
    # 2025 summer: the config summary, `{prompt}`, then each core Event `{id, msg}` of
    # codex-rs/core/src/protocol.rs, deltas left out)
    def ev(msg: dict, sub: str = "0") -> dict:
        return {"id": sub, "msg": msg}

    lines = [
        {"workdir": "/w", "model": "codex-mini-latest", "provider": "openai",
         "approval": "never", "sandbox": "workspace-write", "reasoning effort": "medium",
         "reasoning summaries": "auto"},
        {"prompt": "make the tests pass"},
        ev({"type": "session_configured", "session_id": "7d1c9f0e", "model":
            "codex-mini-latest", "history_log_id": 1, "history_entry_count": 0}, ""),
        ev({"type": "task_started"}),
        ev({"type": "agent_reasoning", "text": "**Running tests**"}),
        ev({"type": "exec_command_begin", "call_id": "call_a", "command": ["bash", "-lc",
                                                                          "pytest -q"],
            "cwd": "/w"}),
        ev({"type": "exec_command_end", "call_id": "call_a", "stdout": "1 failed\n",
            "stderr": "", "exit_code": 1, "duration": {"secs": 1, "nanos": 0}}),
        ev({"type": "patch_apply_begin", "call_id": "call_b", "auto_approved": True,
            "changes": {"/w/a.py": {"update": {"unified_diff": "-1\n+2\n",
                                               "move_path": None}}}}),
        ev({"type": "patch_apply_end", "call_id": "call_b", "stdout": "Success.",
            "stderr": "", "success": True}),
        ev({"type": "mcp_tool_call_begin", "call_id": "call_c", "invocation": {
            "server": "docs", "tool": "search", "arguments": {"q": "x"}}}),
        ev({"type": "mcp_tool_call_end", "call_id": "call_c", "invocation": {
            "server": "docs", "tool": "search", "arguments": {"q": "x"}},
            "duration": {"secs": 0, "nanos": 5}, "result": {"Err": "tool timed out"}}),
        ev({"type": "exec_command_begin", "call_id": "call_d", "command": ["pytest"],
            "cwd": "/w"}),
        ev({"type": "agent_message", "message": "Done: the tests pass."}),
        ev({"type": "token_count", "input_tokens": 5000, "cached_input_tokens": 0,
            "output_tokens": 300, "reasoning_output_tokens": 100, "total_tokens": 5300}),
        ev({"type": "task_complete", "last_agent_message": "Done: the tests pass."})]
    path = tmp_path / "exec-old.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine and summary.accepted == 1
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    types = [x["msg"]["type"] for x in raw if "msg" in x]
    calls = sum(t.endswith("_begin") for t in types)
    ended = sum(t.endswith("_end") for t in types)
    messages = types.count("agent_message")
    assert (calls, ended, messages) == (4, 3, 1)
    assert step_counts(rows) == (calls, ended, messages)
    by_id = {r["call_id"]: r for r in rows}
    assert by_id["call_a"]["observation"]["error"] == "exit_code 1"
    assert json.loads(by_id["call_a"]["observation"]["tool_result"]) == "1 failed\n"
    assert by_id["call_c"]["observation"]["error"] == "tool timed out"
    assert json.loads(by_id["call_a"]["extra"])["reasoning"] == "**Running tests**"
    assert rows[0]["state"]["user_goal"] == "make the tests pass"
    assert rows[0]["metadata"]["behavior_policy"] == "codex-mini-latest"
    assert {r["episode_id"] for r in rows} == {"7d1c9f0e"}
    assert rows[0]["episode"]["prompt_tokens"] == 5000


def test_codex_exec_json_event_and_item_types_of_a_newer_cli_are_counted_not_fatal(tmp_path):
    events = [{"type": "thread.started", "thread_id": "t-new"}, {"type": "turn.started"},
              {"type": "item.completed", "item": {"id": "item_0", "type": "image_view",
                                                  "path": "a.png"}},
              {"type": "thread.tokens", "total": 3},
              {"type": "item.completed", "item": {
                  "id": "item_1", "type": "command_execution", "command": "ls",
                  "aggregated_output": "a.png\n", "exit_code": 0, "status": "completed"}},
              {"type": "turn.completed", "usage": {"input_tokens": 1,
                                                   "cached_input_tokens": 0,
                                                   "output_tokens": 1}}]
    path = tmp_path / "exec.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in events))
    summary, rows, quarantine = ingest_detected(tmp_path, "codex-cli", path)
    assert not quarantine and step_counts(rows) == (1, 1, 0)
