"""SWE-agent `.traj` files as SWE-agent writes them, built here in code after the writer
(SWE-agent/SWE-agent: sweagent/agent/agents.py `get_trajectory_data`, RetryAgent's
`attempts`; sweagent/types.py TrajectoryStep, HistoryItem, AgentInfo). Each test recomputes
the counts from the raw file with the stdlib and compares them with the step table."""

from __future__ import annotations

import json

from tests.format_helpers import ingest_detected, step_counts
from tracerl.data.formats.swe_agent import read as swe_agent

PROBLEM = "We're currently solving the following issue within our repository: ..."


def _step(action: str, observation: str, thought: str) -> dict:
    return {"action": action, "observation": observation,
            "response": f"{thought}\n\n```\n{action}\n```", "thought": thought,
            "execution_time": 0.21, "state": {"working_dir": "/testbed"},
            "query": [{"role": "system", "content": "SETTING: ..."}], "extra_info": {}}


def _history() -> list[dict]:
    return [{"role": "system", "content": "SETTING: You are an autonomous programmer",
             "agent": "main", "message_type": "system"},
            {"role": "user", "content": "demo", "agent": "main", "message_type": "demo",
             "is_demo": True},
            {"role": "user", "content": PROBLEM, "agent": "main",
             "message_type": "observation"},
            {"role": "assistant", "content": "Let me look.", "thought": "Let me look.",
             "action": "ls", "agent": "main", "message_type": "action",
             "tool_calls": [{"function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"},
                             "id": "call_1", "type": "function"}],
             "tool_call_ids": ["call_1"]}]


def _trajectory(steps: list[dict], exit_status: str) -> dict:
    return {"trajectory": steps, "history": _history(),
            "info": {"swe_agent_version": "1.1.0", "exit_status": exit_status,
                     "submission": "diff --git a/x b/x\n",
                     "model_stats": {"instance_cost": 0.31, "tokens_sent": 52000,
                                     "tokens_received": 1300, "api_calls": 4},
                     "edited_files30": "[File: x]"}}


def _raw_counts(attempt: dict) -> tuple[int, int]:
    """(steps with an action, steps without) of a trajectory, from the raw file."""
    actions = [bool((s.get("action") or "").strip()) for s in attempt["trajectory"]]
    return sum(actions), len(actions) - sum(actions)


def test_one_trajectory_every_action_is_a_call_and_its_observation_the_result(tmp_path):
    # 1.x function calling: the action is the command line the call made; the cost limit
    # exits with an autosubmission step that has no action
    doc = {**_trajectory([
        _step("ls", "README.md\nsrc\n", "Let me look."),
        _step("str_replace_editor view /testbed/src/x.py", "Here's the result ...",
              "Open the file."),
        _step("python reproduce.py", "Traceback ...", "Reproduce."),
        {**_step("", "Exited (autosubmitted)", "Exit due to cost limit"), "response": ""}],
        "exit_cost"),
        "replay_config": json.dumps({"agent": {"model": {"name": "gpt-4o",
                                                         "per_instance_cost_limit": 3.0}}}),
        "environment": "main"}
    path = tmp_path / "django__django-11099.traj"
    path.write_text(json.dumps(doc, indent=2))
    assert swe_agent.is_trajectory(json.loads(path.read_text()))
    summary, rows, quarantine = ingest_detected(tmp_path, "swe-agent", path)
    assert not quarantine and summary.accepted == 1
    calls, messages = _raw_counts(json.loads(path.read_text()))
    assert (calls, messages) == (3, 1)
    assert step_counts(rows) == (calls, calls, messages)
    assert {r["episode_id"] for r in rows} == {"django__django-11099"}
    assert [json.loads(r["action"]["arguments"]) for r in rows[:3]] == [
        {"command": "ls"}, {"command": "str_replace_editor view /testbed/src/x.py"},
        {"command": "python reproduce.py"}]
    assert rows[0]["action"]["content"] == "Let me look."
    assert rows[0]["state"]["user_goal"] == PROBLEM
    assert "demo" not in rows[0]["state"]["conversation_history"]
    assert rows[-1]["action"]["content"] == "Exit due to cost limit"
    assert rows[-1]["observation"]["events"][0]["content"] == "Exited (autosubmitted)"
    assert rows[0]["metadata"]["behavior_policy"] == "gpt-4o"
    assert rows[-1]["episode"]["termination_reason"] == "exit_cost"
    assert rows[-1]["episode"]["prompt_tokens"] == 52000


def test_retry_attempts_are_episodes_and_the_chosen_copy_is_not_read_twice(tmp_path):
    # RetryAgent.get_trajectory_data(choose=True): attempts, then the best one again at
    # the top level with info.best_attempt_idx
    first = _trajectory([_step("ls", "a\n", "look"), _step("submit", "diff", "done")],
                        "submitted")
    second = _trajectory([_step("cat a", "x\n", "read"), _step("submit", "diff", "done"),
                          ], "submitted")
    doc = {"attempts": [first, second], **json.loads(json.dumps(second))}
    doc["info"]["best_attempt_idx"] = 1
    path = tmp_path / "sympy__sympy-20590.traj"
    path.write_text(json.dumps(doc))
    assert swe_agent.is_trajectory(json.loads(path.read_text()))
    summary, rows, quarantine = ingest_detected(tmp_path, "swe-agent", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())
    calls = sum(_raw_counts(a)[0] for a in raw["attempts"])
    assert step_counts(rows) == (calls, calls, 0) == (4, 4, 0)
    assert sorted({r["episode_id"] for r in rows}) == [
        "sympy__sympy-20590/attempt-0", "sympy__sympy-20590/attempt-1"]


def test_swe_agent_0x_trajectory(tmp_path):
    # 0.x: {environment, trajectory: [{action, observation, response, state, thought}],
    # history, info}; actions are the agent's shell commands (open, edit ... end_of_edit)
    doc = {"environment": "swe_main", "trajectory": [
        {"action": "open src/x.py", "observation": "[File: src/x.py (10 lines total)]",
         "response": "DISCUSSION\nopen it\n```\nopen src/x.py\n```", "state":
         "{\"open_file\": \"n/a\"}", "thought": "DISCUSSION\nopen it\n"},
        {"action": "edit 3:3\n    return 1\nend_of_edit", "observation": "File updated.",
         "response": "...", "state": "{}", "thought": "fix"},
        {"action": "submit", "observation": "\ndiff --git a/src/x.py", "response": "...",
         "state": "{}", "thought": "submit"}],
        "history": [{"role": "system", "content": "SETTING: ...", "agent": "primary"},
                    {"role": "user", "content": PROBLEM, "agent": "primary"}],
        "info": {"exit_status": "submitted", "submission": "diff --git a/src/x.py",
                 "model_stats": {"total_cost": 1.2, "instance_cost": 0.4,
                                 "tokens_sent": 30000, "tokens_received": 900,
                                 "api_calls": 3}}}
    path = tmp_path / "pvlib__pvlib-python-1072.traj"
    path.write_text(json.dumps(doc, indent=2))
    summary, rows, quarantine = ingest_detected(tmp_path, "swe-agent", path)
    assert not quarantine and summary.accepted == 1
    calls, messages = _raw_counts(json.loads(path.read_text()))
    assert step_counts(rows) == (calls, calls, messages) == (3, 3, 0)
    assert json.loads(rows[1]["action"]["arguments"])["command"].endswith("end_of_edit")
    assert rows[0]["state"]["user_goal"] == PROBLEM
