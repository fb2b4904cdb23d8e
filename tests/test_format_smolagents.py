"""smolagents run logs as smolagents writes them, built here in code after the writer
(huggingface/smolagents: src/smolagents/memory.py ActionStep.dict / PlanningStep.dict /
TaskStep / SystemPromptStep, AgentMemory.get_full_steps; agents.py RunResult; the
examples' benchmark runners' JSONL with `intermediate_steps`). Each test recomputes the
counts from the raw file with the stdlib and compares them with the step table."""

from __future__ import annotations

import json

from tests.format_helpers import ingest_detected, step_counts

TIMING = {"start_time": 1.7e9, "end_time": 1.7e9 + 2, "duration": 2.0}


def _action(n: int, calls: list[tuple[str, str, object]], observations, output: str,
            error=None, final: bool = False) -> dict:
    return {"step_number": n, "timing": TIMING, "model_input_messages": None,
            "tool_calls": [{"id": cid, "type": "function",
                            "function": {"name": name, "arguments": args}}
                           for cid, name, args in calls],
            "error": error, "model_output_message": {"role": "assistant", "content": output},
            "model_output": output, "code_action": calls[0][2] if calls and calls[0][1] ==
            "python_interpreter" else None, "observations": observations,
            "observations_images": None, "action_output": "4" if final else None,
            "token_usage": {"input_tokens": 1200, "output_tokens": 90},
            "is_final_answer": final}


def _raw_counts(steps: list[dict]) -> tuple[int, int, int]:
    actions = [s for s in steps if "step_number" in s]
    calls = sum(len(s["tool_calls"]) for s in actions)
    answered = sum(bool(s["tool_calls"]) and (s["observations"] is not None
                                              or s["error"] is not None) for s in actions)
    messages = sum(not s["tool_calls"] for s in actions) + sum("plan" in s for s in steps)
    return calls, answered, messages


def test_code_agent_full_steps_list(tmp_path):
    steps = [
        {"system_prompt": "You are an expert assistant who can solve any task using code."},
        {"task": "What is 2 + 2?", "task_images": None},
        {"model_input_messages": [], "model_output_message": {"role": "assistant",
                                                              "content": "1. add"},
         "plan": "1. Add the numbers.\n", "timing": TIMING,
         "token_usage": {"input_tokens": 300, "output_tokens": 20}},
        _action(1, [("call_1", "python_interpreter", "x = 2 + 2\nprint(x)")],
                "Execution logs:\n4\nLast output from code snippet:\nNone",
                "Thought: add.\n<code>\nx = 2 + 2\nprint(x)\n</code>"),
        _action(2, [], None, "I cannot parse this",
                error={"type": "AgentParsingError", "message": "No code block found"}),
        _action(3, [("call_3", "python_interpreter", "[final_answer(x)]")],
                "Execution logs:\nLast output from code snippet:\n4",
                "<code>\n[final_answer(x)]\n</code>", final=True)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(steps, indent=2))
    summary, rows, quarantine = ingest_detected(tmp_path, "smolagents", path)
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == _raw_counts(json.loads(path.read_text())) == (2, 2, 2)
    assert rows[0]["action"]["content"] == "1. Add the numbers.\n"
    assert json.loads(rows[1]["action"]["arguments"]) == "x = 2 + 2\nprint(x)"
    assert json.loads(rows[3]["action"]["arguments"]) == "[final_answer(x)]"
    assert rows[2]["observation"]["events"][0]["error"] == "No code block found"
    assert rows[0]["state"]["user_goal"] == "What is 2 + 2?"
    assert rows[0]["episode"]["prompt_tokens"] == 300 + 3 * 1200


def test_tool_calling_agent_runner_lines(tmp_path):
    def line(task_id: str, correct: bool) -> dict:
        return {"agent_name": "search_agent", "model_id": "Qwen/Qwen2.5-72B-Instruct",
                "question": "Capital of France?", "prediction": "Paris",
                "true_answer": "Paris", "is_correct": correct, "task_id": task_id,
                "parsing_error": False, "iteration_limit_exceeded": False,
                "agent_error": None, "start_time": "2025-01-01 10:00:00",
                "intermediate_steps": [
                    {"task": "Capital of France?", "task_images": None},
                    _action(1, [("call_a", "web_search", {"query": "capital of France"}),
                                ("call_b", "visit_webpage", {"url": "https://x"})],
                            "Paris is the capital.\nFrance - Wikipedia", ""),
                    _action(2, [("call_c", "final_answer", {"answer": "Paris"})],
                            "Paris", "", final=True)]}
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(line("t1", True)) + "\n" + json.dumps(line("t2", False)) + "\n")
    summary, rows, quarantine = ingest_detected(tmp_path, "smolagents", path)
    assert not quarantine and summary.accepted == 2
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    calls, answered, messages = map(sum, zip(*(_raw_counts(r["intermediate_steps"])
                                               for r in raw), strict=True))
    assert step_counts(rows) == (calls, answered, messages) == (6, 4, 0)
    assert [(r["turn"], r["call_index"]) for r in rows[:3]] == [(0, 0), (0, 1), (1, 0)]
    assert [r["reward"] for r in rows if r["done"]] == [1.0, 0.0]
    assert rows[0]["metadata"]["behavior_policy"] == "Qwen/Qwen2.5-72B-Instruct"
    assert summary.notes["joined_observations"] == 2


def test_steps_as_smolagents_before_1_15_wrote_them(tmp_path):
    # huggingface/smolagents memory.py before 1.15: ActionStep.dict() {model_input_messages,
    # tool_calls, start_time, end_time, step, error, duration, model_output_message,
    # model_output, observations, action_output}; PlanningStep as asdict {model_input_messages,
    # model_output_message, plan}; FinalAnswerStep {final_answer}
    def action(n: int, calls: list, observations, error=None) -> dict:
        return {"model_input_messages": None,
                "tool_calls": [{"id": cid, "type": "function",
                                "function": {"name": name, "arguments": args}}
                               for cid, name, args in calls],
                "start_time": 1.7e9 + n, "end_time": 1.7e9 + n + 1, "step": n,
                "error": error, "duration": 1.0,
                "model_output_message": {"role": "assistant", "content": "Thought: ..."},
                "model_output": "Thought: ...", "observations": observations,
                "action_output": None}

    steps = [{"task": "What is 2+2?", "task_images": None},
             {"model_input_messages": [], "model_output_message": {"role": "assistant",
                                                                    "content": "1. add"},
              "plan": "1. add"},
             action(1, [("call_1", "python_interpreter", "print(2+2)")], "4"),
             action(2, [("call_2", "python_interpreter", "final_answer(4")], None,
                    {"type": "AgentParsingError", "message": "SyntaxError: '(' was never "
                                                             "closed"}),
             action(3, [("call_3", "final_answer", {"answer": "4"})], "4"),
             action(4, [], None, {"type": "AgentGenerationError", "message": "timeout"}),
             {"final_answer": "4"}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(steps))
    summary, rows, quarantine = ingest_detected(tmp_path, "smolagents", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())
    actions = [s for s in raw if "step" in s]
    calls = sum(len(s["tool_calls"]) for s in actions)
    answered = sum(bool(s["tool_calls"]) and (s["observations"] is not None
                                              or s["error"] is not None) for s in actions)
    messages = sum(not s["tool_calls"] for s in actions) + sum("plan" in s for s in raw)
    assert step_counts(rows) == (calls, answered, messages) == (3, 3, 2)
    calls_rows = [r for r in rows if r["action"]["type"] == "tool_call"]
    assert calls_rows[1]["observation"]["error"] == "SyntaxError: '(' was never closed"
    assert json.loads(calls_rows[0]["action"]["arguments"]) == "print(2+2)"
