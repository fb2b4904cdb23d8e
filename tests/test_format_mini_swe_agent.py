"""mini-swe-agent trajectories as its versions write them, built here in code after the
writer (SWE-agent/mini-swe-agent: src/minisweagent/agents/default.py `save`,
models/litellm_model.py `query`, models/utils/actions_text.py, actions_toolcall.py,
actions_toolcall_response.py) and its example trajectory
(eval/example_trajectories/astropy__astropy-12907.traj.json, v2.3.0 tool calls). Each test
recomputes the counts from the raw file with the stdlib and compares them with the step
table."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.format_helpers import ingest_detected, step_counts
from tracerl.data.formats.mini_swe_agent import read as mini_swe_agent

TASK = "<pr_description>\nFix separability_matrix for nested CompoundModels\n</pr_description>"
SYSTEM = "You are a helpful assistant that can interact with a computer shell."


def _write(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))  # save() writes indent=2
    return path


def _info(version: str, model_type: str, exit_status: str, **model) -> dict:
    return {"model_stats": {"instance_cost": 0.0428, "api_calls": 5},
            "config": {"agent": {"step_limit": 250, "cost_limit": 3.0},
                       "model": {"model_name": "deepseek/deepseek-chat", **model},
                       "model_type": model_type},
            "mini_version": version, "exit_status": exit_status,
            "submission": "--- a/separable.py\n+++ b/separable.py\n"}


def _obs(rc: int, out: str) -> str:
    return f"<returncode>{rc}</returncode>\n<output>\n{out}</output>"


def _raw_counts_text(doc: dict, regex: str) -> tuple[int, int]:
    """(commands run, replies without one) of a v1 text trajectory, from its messages."""
    replies = [m["content"] for m in doc["messages"] if m["role"] == "assistant"]
    found = [len(re.findall(regex, r, re.DOTALL)) for r in replies]
    return sum(n == 1 for n in found), sum(n != 1 for n in found)


def test_v1_text_trajectory_commands_in_fences_are_the_calls(tmp_path):
    # v1.x DefaultAgent: one ```bash block a reply; none or two raise FormatError (a user
    # message, no command run); a timeout is the command's output; Submitted's message is
    # the submitting command's output (the submission)
    doc = {"info": _info("1.9.1", "minisweagent.models.litellm_model.LitellmModel",
                         "Submitted"),
           "messages": [
               {"role": "system", "content": SYSTEM},
               {"role": "user", "content": TASK},
               {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls -la\n```"},
               {"role": "user", "content": _obs(0, "separable.py\n")},
               {"role": "assistant", "content": "Two at once:\n```bash\nls\n```\n```bash\n"
                                                "pwd\n```"},
               {"role": "user", "content": "Please always provide EXACTLY ONE action in "
                                           "triple backticks, found 2 actions."},
               {"role": "assistant", "content": "```bash\npython -m pytest -x\n```"},
               {"role": "user", "content": "The last command <command>python -m pytest -x"
                                           "</command> timed out and has been killed."},
               {"role": "assistant", "content": "```bash\ngrep -n cright separable.py\n```"},
               {"role": "user", "content": _obs(1, "")},
               {"role": "assistant", "content": "THOUGHT: done.\n```bash\necho "
                                                "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && "
                                                "git diff\n```"},
               {"role": "user", "content": "--- a/separable.py\n+++ b/separable.py\n"}],
           "trajectory_format": "mini-swe-agent-1"}
    path = _write(tmp_path, "astropy__astropy-12907.traj.json", doc)
    assert mini_swe_agent.is_trajectory(json.loads(path.read_text()))
    summary, rows, quarantine = ingest_detected(tmp_path, "mini-swe-agent", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())
    calls, messages = _raw_counts_text(raw, r"```bash\s*\n(.*?)\n```")  # v1 default.py
    assert (calls, messages) == (4, 1)
    assert step_counts(rows) == (calls, calls, messages)
    assert {r["episode_id"] for r in rows} == {"astropy__astropy-12907"}
    assert [json.loads(r["action"]["arguments"])["command"] for r in rows
            if r["action"]["type"] == "tool_call"] == [
        "ls -la", "python -m pytest -x", "grep -n cright separable.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"]
    assert rows[0]["state"]["user_goal"] == TASK
    assert rows[2]["observation"]["error"] is None  # the timeout notice is its output
    assert rows[3]["observation"]["error"] == "returncode 1"
    assert rows[-1]["observation"]["tool_result"] == json.dumps(raw["messages"][-1]["content"])
    assert rows[-1]["done"] and rows[-1]["episode"]["termination_reason"] == "Submitted"
    assert rows[0]["metadata"]["behavior_policy"] == "deepseek/deepseek-chat"
    assert rows[0]["episode"]["agent_cost_usd"] == 0.0428


def _reply(calls: list[tuple[str, str]], text: str = "", cost: float = 7.4e-05) -> dict:
    # litellm_model.query (v2, tool calls): the message's model_dump, extra.actions parsed
    tool_calls = [{"index": k, "function": {"arguments": json.dumps({"command": c}),
                                            "name": "bash"}, "id": cid, "type": "function"}
                  for k, (cid, c) in enumerate(calls)]
    return {"content": text, "role": "assistant", "tool_calls": tool_calls,
            "function_call": None, "provider_specific_fields": {},
            "extra": {"actions": [{"command": c, "tool_call_id": cid} for cid, c in calls],
                      "response": {"id": "r", "model": "deepseek-chat", "object":
                                   "chat.completion", "usage": {"completion_tokens": 54,
                                                                "prompt_tokens": 1798}},
                      "cost": cost, "timestamp": 1780680350.49}}


def _tool(cid: str, rc: int, out: str, **more) -> dict:
    # actions_toolcall.format_toolcall_observation_messages
    return {"content": _obs(rc, out), "extra": {"raw_output": out, "returncode": rc,
                                                "timestamp": 1780680351.0, **more},
            "tool_call_id": cid, "role": "tool"}


def test_v2_tool_calls_parallel_calls_share_a_turn_and_the_exit_answers_the_submit(tmp_path):
    doc = {"info": _info("2.3.0", "minisweagent.models.litellm_model.LitellmModel",
                         "Submitted"),
           "messages": [
               {"role": "system", "content": SYSTEM},
               {"role": "user", "content": TASK},
               _reply([("call_00_a", "ls -la"), ("call_01_b", "cat separable.py")],
                      "Let me look around."),
               _tool("call_00_a", 0, "separable.py\n"),
               _tool("call_01_b", 0, "import numpy as np\n"),
               {"role": "user", "content": "Tool call error:\n\n<error>\nNo tool calls found "
                                           "in the response.\n</error>",
                "extra": {"interrupt_type": "FormatError"}},
               _reply([("call_00_c", "sed -i 's/= 1/= right/' separable.py"),
                       ("call_01_d", "python repro.py")]),
               _tool("call_00_c", 0, ""),
               _tool("call_01_d", -1, "", exception_info="action was not executed"),
               _reply([("call_00_e", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && "
                                     "cat patch.txt")]),
               {"role": "exit", "content": "--- a/separable.py\n",
                "extra": {"exit_status": "Submitted", "submission": "--- a/separable.py\n"}}],
           "trajectory_format": "mini-swe-agent-1", "instance_id": "astropy__astropy-12907"}
    path = _write(tmp_path, "astropy__astropy-12907.traj.json", doc)
    summary, rows, quarantine = ingest_detected(tmp_path, "mini-swe-agent", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())
    replies = [m for m in raw["messages"] if m.get("role") == "assistant"]
    calls = sum(len(m["extra"]["actions"]) for m in replies)
    results = sum(m.get("role") == "tool" for m in raw["messages"]) + \
        sum(m.get("role") == "exit" for m in raw["messages"])
    assert (calls, results) == (5, 5)
    assert step_counts(rows) == (calls, results, 0)
    assert [(r["turn"], r["call_index"], r["call_id"]) for r in rows] == [
        (0, 0, "call_00_a"), (0, 1, "call_01_b"), (1, 0, "call_00_c"), (1, 1, "call_01_d"),
        (2, 0, "call_00_e")]
    assert rows[3]["observation"]["error"] == "action was not executed"
    assert rows[-1]["observation"]["tool_result"] == json.dumps("--- a/separable.py\n")
    assert rows[0]["metadata"]["cost_usd"] == 7.4e-05
    assert rows[0]["episode"]["prompt_tokens"] == 3 * 1798


def test_v2_text_model_keeps_the_reply_a_format_error_refused(tmp_path):
    # v2 text models (litellm_textbased_model, actions_text.py): the command is in
    # extra.actions; a refused reply is only in the FormatError's extra.model_response
    fence = "```mswea_bash_command\n{}\n```"
    doc = {"info": _info("2.1.0", "minisweagent.models.litellm_textbased_model."
                                  "LitellmTextbasedModel", "LimitsExceeded",
                         action_regex=r"```mswea_bash_command\s*\n(.*?)\n```"),
           "messages": [
               {"role": "system", "content": SYSTEM},
               {"role": "user", "content": TASK},
               {"role": "assistant", "content": "THOUGHT\n" + fence.format("ls"),
                "extra": {"actions": [{"command": "ls"}], "cost": 0.001}},
               {"role": "user", "content": _obs(0, "a.py\n"),
                "extra": {"raw_output": "a.py\n", "returncode": 0}},
               {"role": "user", "content": "Format error:\n\n<error>\nExpected exactly 1 "
                                           "action, found 0.\n</error>",
                "extra": {"interrupt_type": "FormatError", "n_actions": 0,
                          "model_response": "I think we are done."}},
               {"role": "exit", "content": "", "extra": {"exit_status": "LimitsExceeded",
                                                         "submission": ""}}],
           "trajectory_format": "mini-swe-agent-1"}
    path = _write(tmp_path, "django__django-11099.traj.json", doc)
    summary, rows, quarantine = ingest_detected(tmp_path, "mini-swe-agent", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())
    calls = sum(len(m.get("extra", {}).get("actions", [])) for m in raw["messages"]
                if m["role"] == "assistant")
    refused = sum("model_response" in m.get("extra", {}) for m in raw["messages"])
    assert step_counts(rows) == (calls, calls, refused) == (1, 1, 1)
    assert rows[1]["action"]["content"] == "I think we are done."
    assert {r["episode_id"] for r in rows} == {"django__django-11099"}
    assert rows[-1]["episode"]["termination_reason"] == "LimitsExceeded"


def test_v2_responses_api_trajectory(tmp_path):
    # litellm_response_toolcall_model: the reply is the whole response object, outputs are
    # function_call_output items
    def response(call_id: str, command: str) -> dict:
        return {"id": "resp_1", "object": "response", "model": "gpt-5-mini",
                "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                           {"type": "message", "role": "assistant", "content": [
                               {"type": "output_text", "text": "Checking."}]},
                           {"type": "function_call", "id": "fc_1", "call_id": call_id,
                            "name": "bash", "arguments": json.dumps({"command": command})}],
                "usage": {"input_tokens": 900, "output_tokens": 40},
                "extra": {"actions": [{"command": command, "tool_call_id": call_id}],
                          "cost": 0.002}}
    doc = {"info": _info("2.2.0", "minisweagent.models.litellm_response_toolcall_model."
                                  "LitellmResponseToolcallModel", "Submitted"),
           "messages": [
               {"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK},
               response("call_a", "ls"),
               {"type": "function_call_output", "call_id": "call_a", "output": _obs(0, "x\n"),
                "extra": {"raw_output": "x\n", "returncode": 0}},
               response("call_b", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
               # v2.0 ended the run with a user message (docs/usage/output_files.md)
               {"role": "user", "content": "", "extra": {"exit_status": "Submitted",
                                                         "submission": "diff --git a"}}],
           "trajectory_format": "mini-swe-agent-1.1"}
    path = _write(tmp_path, "t.traj.json", doc)
    summary, rows, quarantine = ingest_detected(tmp_path, "mini-swe-agent", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())
    calls = sum(o.get("type") == "function_call" for m in raw["messages"]
                if m.get("object") == "response" for o in m["output"])
    assert step_counts(rows) == (calls, calls, 0) == (2, 2, 0)
    assert rows[0]["action"]["content"] == "Checking."
    assert rows[0]["episode"]["prompt_tokens"] == 1800
    assert rows[-1]["observation"]["tool_result"] == json.dumps("diff --git a")
