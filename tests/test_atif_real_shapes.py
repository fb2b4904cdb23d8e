"""ATIF trajectories as Harbor's agents write them, each test a small trajectory modelled
on a real one (Harbor's golden trajectories, tests/golden/{terminus_2,openhands}/, as
copied into sachiny0106/Xelron; the ATIF RFC, docs/rfcs/0001-trajectory-format.md),
built here in code."""

from __future__ import annotations

import json
from pathlib import Path

from tests.adapter_helpers import ingest_files
from tracerl.data.formats import detect_format


def _json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))
    return path


TASK = {"step_id": 1, "source": "user",
        "message": "Task Description:\nCreate a file called hello.txt.\n"}


def _bash(n: int, call_id: str, keys: str, copied: bool = False) -> dict:
    # terminus-2: one bash_command call a step, its result without source_call_id
    step = {"step_id": n, "source": "agent", "model_name": "openai/gpt-4o",
            "message": f"Analysis: step {n}", "tool_calls": [
                {"tool_call_id": call_id, "function_name": "bash_command",
                 "arguments": {"keystrokes": keys, "duration": 0.1}}],
            "observation": {"results": [{"content": f"New Terminal Output:\n\n# {keys}"}]}}
    if copied:
        step["is_copied_context"] = True
        step["extra"] = {"note": "Metrics omitted to avoid duplication - already recorded "
                                 "in parent trajectory"}
    else:
        step["metrics"] = {"prompt_tokens": 700, "completion_tokens": 50,
                           "logprobs": [-0.1, -0.2]}
    return step


def _summarization(kind: str, last: list) -> dict:
    # trajectory.summarization-1-<kind>.json: the parent's steps copied for context
    return {"schema_version": "ATIF-v1.5", "session_id": f"sess-summarization-1-{kind}",
            "agent": {"name": f"terminus-2-summarization-{kind}", "version": "2.0.0",
                      "model_name": "openai/gpt-4o",
                      "extra": {"parent_session_id": "sess", "summarization_index": 1}},
            "steps": [{**TASK, "is_copied_context": True},
                      _bash(2, "call_0_1", "mkdir d\n", copied=True), *last]}


def test_terminus_2_context_summarization_in_a_harbor_trial(tmp_path):
    # tests/golden/terminus_2/hello-world-context-summarization.trajectory*.json and
    # terminus-2's _summarize: a system step whose one result names the three subagent
    # files beside trajectory.json (subagent_trajectory_ref[].trajectory_path); the
    # subagents copy the parent's steps (is_copied_context). Before: each subagent file
    # was an episode of its own with the trial's reward, its copied calls counted again.
    trial = tmp_path / "jobs" / "2026-01-01__10-00-00" / "hello-world__x1"
    _json(trial / "result.json", {"task_name": "hello-world",
                                  "verifier_result": {"rewards": {"reward": 1.0}}})
    refs = [{"session_id": f"sess-summarization-1-{k}",
             "trajectory_path": f"trajectory.summarization-1-{k}.json"}
            for k in ("summary", "questions", "answers")]
    main = _json(trial / "agent" / "trajectory.json", {
        "schema_version": "ATIF-v1.5", "session_id": "sess",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-4o"},
        "steps": [TASK, _bash(2, "call_0_1", "mkdir d\n"),
                  {"step_id": 3, "source": "system",
                   "message": "Performed context summarization and handoff to continue "
                              "task.",
                   "observation": {"results": [{"subagent_trajectory_ref": refs}]}},
                  {"step_id": 4, "source": "user",
                   "message": "Here are the answers the other agent provided."},
                  _bash(5, "call_2_1", "echo hi > hello.txt\n")]})
    agent = trial / "agent"
    _json(agent / "trajectory.summarization-1-summary.json", _summarization("summary", [
        {"step_id": 3, "source": "user", "message": "You are about to hand off your work"},
        {"step_id": 4, "source": "agent", "message": "I created d.",
         "metrics": {"prompt_tokens": 500, "completion_tokens": 200}}]))
    _json(agent / "trajectory.summarization-1-questions.json", {
        "schema_version": "ATIF-v1.5", "session_id": "sess-summarization-1-questions",
        "agent": {"name": "terminus-2-summarization-questions", "version": "2.0.0"},
        "steps": [{"step_id": 1, "source": "user", "message": "You are picking up work"},
                  {"step_id": 2, "source": "agent", "message": "Where is hello.txt?"}]})
    _json(agent / "trajectory.summarization-1-answers.json", _summarization("answers", [
        {"step_id": 3, "source": "user", "message": "The next agent has questions"},
        {"step_id": 4, "source": "agent", "message": "Not created yet."}]))
    assert detect_format(main) == "atif"
    summary, rows, quarantine = ingest_files(tmp_path, tmp_path / "jobs")
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    calls = [r for r in rows if r["action"]["type"] == "tool_call"]
    assert [r["call_id"] for r in calls] == ["call_0_1", "call_2_1"]  # each once
    assert all(r["observation"]["tool_result"] for r in calls)
    done = {r["episode_id"]: r["reward"] for r in rows if r["done"]}
    assert done == {"sess": 1.0, "sess/sess-summarization-1-summary": None,
                    "sess/sess-summarization-1-questions": None,
                    "sess/sess-summarization-1-answers": None}
    summary_rows = [r for r in rows if r["episode_id"] == "sess/sess-summarization-1-summary"]
    assert [r["action"]["content"] for r in summary_rows] == ["I created d."]
    assert summary_rows[0]["source_pointer"] == "/subagent_files/0/steps/3"
    history = json.loads(summary_rows[0]["state"]["conversation_history"])
    assert [(h["kind"], h["call_id"]) for h in history if h["kind"] != "message"] == [
        ("tool_call", "call_0_1"), ("tool_result", "call_0_1")]
    assert summary.notes["subagent_episodes"] == 3
    assert summary.notes["copied_context_steps"] == 2
    assert len([f for f in summary.sidecar_files if "summarization" in f]) == 3
    events = rows[0]["observation"]["events"]  # after the first call: the handoff
    assert "trajectory.summarization-1-summary.json" in events[1]["content"]


def test_openhands_trajectory_with_tool_definitions_and_a_finish_call(tmp_path):
    # tests/golden/openhands/hello-world.trajectory.json (ATIF-v1.5): system steps around
    # the user's, tool_definitions in OpenAI form, the last call (`finish`) unanswered
    tools = [{"type": "function", "function": {"name": name, "description": "...",
                                               "parameters": {"type": "object"}}}
             for name in ("execute_bash", "think", "finish", "str_replace_editor")]
    path = _json(tmp_path / "trajectory.json", {
        "schema_version": "ATIF-v1.5", "session_id": "NORMALIZED_SESSION_ID",
        "agent": {"name": "openhands", "version": "1.0.0", "tool_definitions": tools,
                  "extra": {"agent_class": "CodeActAgent"}},
        "steps": [{"step_id": 1, "source": "system", "message": "You are OpenHands agent"},
                  {"step_id": 2, "source": "user", "message": "Create hello.txt"},
                  {"step_id": 3, "source": "system", "message": "Added workspace context"},
                  {"step_id": 4, "source": "agent", "message": "I edited the file.",
                   "tool_calls": [{"tool_call_id": "call_fake_1",
                                   "function_name": "str_replace_editor",
                                   "arguments": {"command": "create",
                                                 "path": "/app/hello.txt"}}],
                   "observation": {"results": [{"source_call_id": "call_fake_1",
                                                "content": "File created"}]},
                   "metrics": {"prompt_tokens": 100, "completion_tokens": 50,
                               "cost_usd": 0.00075}},
                  {"step_id": 5, "source": "agent", "message": "All done!",
                   "tool_calls": [{"tool_call_id": "call_fake_2", "function_name": "finish",
                                   "arguments": {"message": "Task complete."}}],
                   "metrics": {"prompt_tokens": 120, "completion_tokens": 30}}],
        "final_metrics": {"total_prompt_tokens": 220, "total_completion_tokens": 80}})
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.accepted, quarantine) == (1, [])
    assert [(r["action"]["tool"], r["observation"]["tool_result"]) for r in rows] == [
        ("str_replace_editor", '"File created"'), ("finish", None)]
    assert rows[0]["state"]["available_tools"] == sorted(
        ["execute_bash", "think", "finish", "str_replace_editor"])
    assert rows[0]["episode"]["prompt_tokens"] == 220
