"""OpenHands event streams as OpenHands writes them, built here in code after the writers
(All-Hands-AI/OpenHands: openhands/events/serialization/event.py event_to_dict, the
frontend's types/core/base.ts, evaluation output.jsonl `history`; OpenHands/
software-agent-sdk: openhands-sdk/openhands/sdk/event/llm_convertible/action.py,
observation.py, message.py). Each test recomputes the counts from the raw files with the
stdlib and compares them with the step table."""

from __future__ import annotations

import json
from pathlib import Path

from tests.format_helpers import ingest_detected, step_counts
from tracerl.data.formats.openhands import read as openhands

TASK = "Fix the failing test in tests/test_x.py"


def _response(rid: str, calls: list[tuple[str, str, dict]], text: str = "") -> dict:
    return {"id": rid, "created": 1730139142, "model": "claude-3-5-sonnet-20241022",
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": text, "tool_calls": [
                    {"id": cid, "type": "function", "function": {
                        "name": name, "arguments": json.dumps(args)}}
                    for cid, name, args in calls]}}],
            "usage": {"completion_tokens": 113, "prompt_tokens": 4000}}


def _action(eid: int, action: str, args: dict, response: dict | None = None,
            call_id: str | None = None, name: str | None = None, n: int = 1) -> dict:
    e = {"id": eid, "timestamp": f"2025-01-01T00:00:{eid:02d}", "source": "agent",
         "message": f"{action} ...", "action": action, "args": args}
    if response is not None:
        e["tool_call_metadata"] = {"function_name": name, "tool_call_id": call_id,
                                   "model_response": response, "total_calls_in_response": n}
        e["llm_metrics"] = {"accumulated_cost": 0.01 * eid, "accumulated_token_usage": {
            "model": "claude-3-5-sonnet-20241022", "prompt_tokens": 4000 * eid,
            "completion_tokens": 100 * eid}}
    return e


def _obs(eid: int, cause: int, kind: str, content: str, extras: dict,
         call: tuple | None = None) -> dict:
    e = {"id": eid, "timestamp": f"2025-01-01T00:00:{eid:02d}", "source": "agent",
         "message": "...", "cause": cause, "observation": kind, "content": content,
         "extras": extras}
    if call is not None:
        e["tool_call_metadata"] = {"function_name": call[1], "tool_call_id": call[0],
                                   "model_response": call[2], "total_calls_in_response":
                                   call[3]}
    return e


def _v0_events() -> list[dict]:
    r1 = _response("chatcmpl-1", [("toolu_1", "execute_bash", {"command": "ls"}),
                                  ("toolu_2", "str_replace_editor",
                                   {"command": "view", "path": "/w/tests/test_x.py"})],
                   "Let me look at the repo.")
    r2 = _response("chatcmpl-2", [("toolu_3", "execute_bash",
                                   {"command": "pytest tests/test_x.py"})])
    r3 = _response("chatcmpl-3", [("toolu_4", "finish", {"message": "Fixed."})])
    return [
        {"id": 0, "timestamp": "t", "source": "agent", "message": "sys", "action": "system",
         "args": {"content": "You are OpenHands agent.", "tools": []}},
        {"id": 1, "timestamp": "t", "source": "user", "message": TASK, "action": "message",
         "args": {"content": TASK, "image_urls": None, "wait_for_response": False}},
        {"id": 2, "timestamp": "t", "source": "user", "message": "", "action": "recall",
         "args": {"recall_type": "workspace_context", "query": TASK}},
        {"id": 3, "timestamp": "t", "source": "environment", "message": "",
         "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running"}},
        _action(4, "run", {"command": "ls", "thought": "Let me look at the repo.",
                           "blocking": False}, r1, "toolu_1", "execute_bash", 2),
        _obs(5, 4, "run", "src\ntests\n", {"command": "ls", "exit_code": 0},
             ("toolu_1", "execute_bash", r1, 2)),
        _action(6, "read", {"path": "/w/tests/test_x.py", "thought": ""}, r1, "toolu_2",
                "str_replace_editor", 2),
        _obs(7, 6, "read", "1\tdef test_x(): ...", {"path": "/w/tests/test_x.py"},
             ("toolu_2", "str_replace_editor", r1, 2)),
        _action(8, "run", {"command": "pytest tests/test_x.py"}, r2, "toolu_3",
                "execute_bash"),
        _obs(9, 8, "run", "1 failed", {"command": "pytest", "exit_code": 1},
             ("toolu_3", "execute_bash", r2, 1)),
        # a call whose arguments failed validation: no action, only its error observation
        _obs(10, 8, "error", "Missing required argument 'path'", {},
             ("toolu_x", "str_replace_editor", r2, 1)),
        _action(11, "message", {"content": "The test expects 2.", "wait_for_response":
                                False}),
        _action(12, "finish", {"final_thought": "Fixed.", "outputs": {}}, r3, "toolu_4",
                "finish"),
        {"id": 13, "timestamp": "t", "source": "environment", "message": "",
         "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "finished"}, "cause": 12}]


def _raw_v0(events: list[dict]) -> tuple[int, int, int]:
    """(agent actions with a tool call, observations of those calls, agent messages)."""
    calls = {e["tool_call_metadata"]["tool_call_id"] for e in events if "action" in e
             and e["source"] == "agent" and e.get("tool_call_metadata")}
    answered = {e["tool_call_metadata"]["tool_call_id"] for e in events
                if "observation" in e and e.get("tool_call_metadata")} & calls
    messages = sum("action" in e and e["source"] == "agent" and e["action"] == "message"
                   for e in events)
    return len(calls), len(answered), messages


def test_v0_trajectory_export_parallel_calls_share_a_turn(tmp_path):
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(_v0_events(), indent=2))
    assert openhands.is_stream(json.loads(path.read_text()))
    summary, rows, quarantine = ingest_detected(tmp_path, "openhands", path)
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == _raw_v0(json.loads(path.read_text())) == (4, 3, 1)
    assert [(r["turn"], r["call_index"], r["call_id"]) for r in rows] == [
        (0, 0, "toolu_1"), (0, 1, "toolu_2"), (1, 0, "toolu_3"), (2, None, None),
        (3, 0, "toolu_4")]
    assert json.loads(rows[1]["action"]["arguments"]) == {"command": "view",
                                                          "path": "/w/tests/test_x.py"}
    assert rows[0]["action"]["content"] == "Let me look at the repo."
    assert rows[2]["observation"]["error"] == "exit_code 1"
    assert rows[2]["observation"]["events"][0]["error"] == "Missing required argument 'path'"
    assert rows[0]["state"]["user_goal"] == TASK
    assert rows[0]["metadata"]["behavior_policy"] == "claude-3-5-sonnet-20241022"
    assert rows[-1]["episode"]["agent_cost_usd"] == 0.12
    assert rows[-1]["episode"]["prompt_tokens"] == 48000


def test_v0_without_function_calling_runnable_actions_are_the_calls(tmp_path):
    # CodeActAgent before function calling: commands parsed from the reply's
    # <execute_bash> block, no tool_call_metadata; the observation names its cause
    events = [
        {"id": 0, "source": "user", "message": TASK, "action": "message",
         "args": {"content": TASK}, "timestamp": "t"},
        {"id": 1, "source": "agent", "message": "Running command: ls", "action": "run",
         "args": {"command": "ls", "thought": "Look first.", "blocking": False},
         "timestamp": "t"},
        {"id": 2, "source": "agent", "message": "", "cause": 1, "observation": "run",
         "content": "a.py", "extras": {"command": "ls", "exit_code": 0}, "timestamp": "t"},
        {"id": 3, "source": "agent", "message": "", "action": "run_ipython",
         "args": {"code": "print(1)", "thought": ""}, "timestamp": "t"},
        {"id": 4, "source": "agent", "message": "", "cause": 3, "observation": "run_ipython",
         "content": "1", "extras": {"code": "print(1)"}, "timestamp": "t"},
        {"id": 5, "source": "agent", "message": "", "action": "finish",
         "args": {"outputs": {}, "thought": "done", "final_thought": "Done."},
         "timestamp": "t"}]
    line = {"instance_id": "django__django-11099", "instruction": TASK, "history": events,
            "metrics": {"accumulated_cost": 0.3}, "test_result": {"git_patch": ""}}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(line) + "\n")
    summary, rows, quarantine = ingest_detected(tmp_path, "openhands", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())["history"]
    calls = sum(e.get("action") in ("run", "run_ipython") for e in raw)
    results = sum("cause" in e for e in raw)
    assert step_counts(rows) == (calls, results, 1) == (2, 2, 1)
    assert rows[0]["episode_id"] == "django__django-11099"
    assert (rows[0]["action"]["tool"], json.loads(rows[0]["action"]["arguments"])) == (
        "run", {"command": "ls"})
    assert rows[-1]["action"]["content"] == "Done."


def _write_events(folder: Path, events: list[dict], name) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for k, e in enumerate(events):
        p = folder / name(k, e)
        p.write_text(json.dumps(e))
        paths.append(p)
    return paths


def test_v0_session_folder_of_event_files(tmp_path):
    events = _v0_events()
    folder = tmp_path / "sessions" / "5f2c9e" / "events"
    paths = _write_events(folder, events, lambda k, e: f"{k}.json")
    assert openhands.sidecars(paths[0]) == sorted(paths[1:], key=lambda p: int(p.stem))
    summary, rows, quarantine = ingest_detected(tmp_path, "openhands", paths[0])
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == _raw_v0(events)
    assert {r["episode_id"] for r in rows} == {"5f2c9e"}


def _sdk_events() -> list[dict]:
    def action(eid, rid, cid, tool, args, thought=""):
        return {"kind": "ActionEvent", "id": eid, "timestamp": "t", "source": "agent",
                "thought": [{"type": "text", "text": thought}] if thought else [],
                "action": {"kind": "ExecuteBashAction", **args}, "tool_name": tool,
                "tool_call_id": cid, "tool_call": {"id": cid, "name": tool,
                                                   "arguments": json.dumps(args),
                                                   "origin": "completion"},
                "llm_response_id": rid, "security_risk": "LOW"}

    def observation(eid, aid, cid, tool, text, is_error=False):
        return {"kind": "ObservationEvent", "id": eid, "timestamp": "t",
                "source": "environment", "tool_name": tool, "tool_call_id": cid,
                "action_id": aid, "observation": {"kind": "ExecuteBashObservation",
                                                  "content": [{"type": "text",
                                                               "text": text}],
                                                  "is_error": is_error}}
    return [
        {"kind": "SystemPromptEvent", "id": "e0", "timestamp": "t", "source": "agent",
         "system_prompt": {"type": "text", "text": "You are OpenHands agent."},
         "tools": []},
        {"kind": "MessageEvent", "id": "e1", "timestamp": "t", "source": "user",
         "llm_message": {"role": "user", "content": [{"type": "text", "text": TASK}]},
         "activated_skills": []},
        {"kind": "ConversationStateUpdateEvent", "id": "e2", "timestamp": "t",
         "source": "environment", "key": "execution_status", "value": "running"},
        action("e3", "resp-1", "call_1", "terminal", {"command": "ls"}, "Look."),
        action("e4", "resp-1", "call_2", "terminal", {"command": "cat README"}),
        observation("e5", "e3", "call_1", "terminal", "README\n"),
        observation("e6", "e4", "call_2", "terminal", "no such file", True),
        action("e7", "resp-2", "call_3", "file_editor", {"command": "view", "path": "/w"}),
        {"kind": "AgentErrorEvent", "id": "e8", "timestamp": "t", "source": "agent",
         "tool_name": "file_editor", "tool_call_id": "call_3",
         "error": "Tool 'file_editor' failed"},
        {"kind": "MessageEvent", "id": "e9", "timestamp": "t", "source": "agent",
         "llm_message": {"role": "assistant", "content": [{"type": "text",
                                                           "text": "Done."}]}}]


def test_sdk_conversation_folder_of_event_files(tmp_path):
    events = _sdk_events()
    folder = tmp_path / "conversations" / "a1b2c3" / "events"
    paths = _write_events(folder, events, lambda k, e: f"event-{k:05d}-{e['id']}.json")
    summary, rows, quarantine = ingest_detected(tmp_path, "openhands", paths[0])
    assert not quarantine and summary.accepted == 1
    calls = sum(e["kind"] == "ActionEvent" for e in events)
    results = sum(e["kind"] in ("ObservationEvent", "AgentErrorEvent") for e in events)
    texts = sum(e["kind"] == "MessageEvent" and e["source"] == "agent" for e in events)
    assert step_counts(rows) == (calls, results, texts) == (3, 3, 1)
    assert [(r["turn"], r["call_index"]) for r in rows] == [(0, 0), (0, 1), (1, 0),
                                                            (2, None)]
    assert rows[1]["observation"]["error"] == "no such file"
    assert rows[2]["observation"]["error"] == "Tool 'file_editor' failed"
    assert rows[0]["action"]["content"] == "Look."
    assert {r["episode_id"] for r in rows} == {"a1b2c3"}
    # the same events as one JSON array
    path = tmp_path / "sdk.json"
    path.write_text(json.dumps(events))
    summary, rows2, quarantine = ingest_detected(tmp_path / "again", "openhands", path)
    assert not quarantine and step_counts(rows2) == (3, 3, 1)
