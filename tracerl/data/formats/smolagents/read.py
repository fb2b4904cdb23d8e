"""smolagents run logs → native step records, one episode per run.

The steps are smolagents' memory steps as `step.dict()` writes them (huggingface/
smolagents, src/smolagents/memory.py; `AgentMemory.get_full_steps` /
`get_succinct_steps`): `ActionStep {step_number, timing, model_input_messages?,
tool_calls: [{id, type, function: {name, arguments}}], error?: {type, message},
model_output_message, model_output, code_action, observations, action_output,
token_usage: {input_tokens, output_tokens}, is_final_answer}`, `TaskStep {task,
task_images}`, `PlanningStep {model_input_messages, model_output_message, plan, timing,
token_usage}`, `SystemPromptStep {system_prompt}`, `FinalAnswerStep {output}`; before
1.15, `ActionStep {model_input_messages, tool_calls, start_time, end_time, step, error,
duration, model_output_message, model_output, observations, action_output}`, `PlanningStep
{model_input_messages, model_output_message, plan}` (earlier with `facts`),
`FinalAnswerStep {final_answer}`. A run is
written as a JSON list of steps, as a RunResult `{output, state, steps (or messages),
token_usage, timing}` (`run(..., return_full_result=True)`), or as a line of the
benchmark runners' JSONL (examples/open_deep_research, smolagents' GAIA runs: `{agent_name,
question, prediction, intermediate_steps: [...], task_id, true_answer, parsing_error,
iteration_limit_exceeded, agent_error, ...}`).

Mapping: an action step is one turn: its tool calls one `tool_call` row each (a
CodeAgent's one `python_interpreter` call with the code, a ToolCallingAgent's calls), the
model output its content; the step's `observations` the first call's result (a
ToolCallingAgent's parallel outputs come joined in one text: counted as
`joined_observations`), its `error` that call's observation.error; a step without calls
(the output could not be parsed) is a `message` row with its error as an event; a planning
step is a `message` row (`extra.planning`); the task is an event (the user_goal), the
system prompt a system event. Tokens: the steps' token_usage; behaviour policy: the run's
`model_id` when the log has one. Reward: a boolean or numeric `is_correct` / `score` of a
runner's line. episode_id: `task_id`, else `<file>:<record>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import arguments, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

_RUN_KEYS = ("intermediate_steps", "steps", "messages")


def is_step(value: Any) -> bool:
    """One smolagents memory step (as `dict()` writes it)."""
    if not isinstance(value, dict):
        return False
    keys = value.keys()
    return is_action(value) \
        or keys == {"task", "task_images"} or keys == {"system_prompt"} \
        or {"plan", "model_output_message", "timing"} <= keys \
        or {"plan", "model_output_message", "model_input_messages"} <= keys \
        or {"plan", "facts"} <= keys


def is_action(step: dict) -> bool:
    """An ActionStep: `{step_number, timing, ...}`, or before smolagents 1.15 `{step,
    start_time, end_time, duration, ...}`."""
    keys = step.keys()
    return ("tool_calls" in keys or "observations" in keys) and (
        {"step_number", "timing"} <= keys or {"step", "start_time", "duration"} <= keys)


def steps_of(value: Any) -> tuple[list | None, str]:
    """(a run's steps, the key they are under) of a record, or (None, "")."""
    if isinstance(value, list):
        return (value, "") if value and is_step(value[0]) else (None, "")
    if isinstance(value, dict):
        for key in _RUN_KEYS:
            steps = value.get(key)
            if isinstance(steps, list) and steps and is_step(steps[0]):
                return steps, key
    return None, ""


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    for raw in json_records(path, limits, whole=is_step, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        value = raw.value
        steps, key = steps_of(value)
        task_id = value.get("task_id") if isinstance(value, dict) else None
        episode_id = str(task_id) if task_id is not None else \
            fallback_episode_id(path, raw.number, options)
        if steps is None:
            yield AdaptedRecord(raw.number, raw.pointer, episode_id=episode_id,
                                error=AdapterError(raw.pointer or "/", "not a smolagents "
                                                   "run (a list of memory steps, or "
                                                   "`intermediate_steps` / `steps`)"))
            continue
        try:
            rows, pointers, notes = run_rows(value, steps, f"{raw.pointer}/{key}"
                                             if key else raw.pointer, episode_id,
                                             limits.max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(raw.number, raw.pointer, error=exc, episode_id=episode_id)
            continue
        yield AdaptedRecord(raw.number, raw.pointer, rows, pointers, episode_id=episode_id,
                            notes=notes)


def _reward(run: Any) -> float | None:
    for key in ("is_correct", "score", "reward"):
        value = run.get(key) if isinstance(run, dict) else None
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if isinstance(value, int | float) and abs(value) < 1e308:
            return float(value)
    return None


def run_rows(run: Any, steps: list, base: str, episode_id: str,
             max_depth: int) -> tuple[list[dict], list[str], Any]:
    model = None
    if isinstance(run, dict):
        for key in ("model_id", "model"):
            if isinstance(run.get(key), str):
                model = run[key]
                break
    prompt = completion = 0
    for s in steps:
        usage = s.get("token_usage") if isinstance(s, dict) else None
        if isinstance(usage, dict):
            prompt += usage.get("input_tokens") if type(usage.get("input_tokens")) is int \
                else 0
            completion += usage.get("output_tokens") \
                if type(usage.get("output_tokens")) is int else 0
    builder = EpisodeBuilder(episode_id, {
        "task": run.get("task") if isinstance(run, dict) and isinstance(run.get("task"), str)
        else None,
        "metadata": {"behavior_policy": model},
        "episode": {"agent_model": model, "prompt_tokens": prompt or None,
                    "completion_tokens": completion or None}}, max_depth)
    for j, step in enumerate(steps):
        _step(builder, step, f"{base}/{j}", max_depth)
    reward = _reward(run)
    kept = {k: v for k, v in run.items() if k not in _RUN_KEYS} \
        if isinstance(run, dict) else {}
    rows, pointers = builder.finish(base or "/", reward, None,
                                    "smolagents:is_correct" if reward is not None else None,
                                    {"episode": kept} if kept else None)
    return list(rows), list(pointers), builder.notes


def _arguments(raw: Any, where: str, max_depth: int) -> Any:
    """A call's arguments: an object, or text (a CodeAgent's code is the text itself, not
    JSON: kept as it is when it does not parse)."""
    try:
        return arguments(raw, where, max_depth)
    except AdapterError:
        if isinstance(raw, str):
            return raw
        raise


def _step(builder: EpisodeBuilder, step: Any, where: str, max_depth: int) -> None:
    if not isinstance(step, dict):
        raise AdapterError(where, f"a step is an object, got {type(step).__name__}")
    if "system_prompt" in step and len(step) == 1:
        builder.event("system", "message", content=step["system_prompt"])
        return
    action = is_action(step)
    if "task" in step and not action:
        builder.event("user", "message", content=text_of(step["task"]))
        return
    if "plan" in step and not action:
        builder.assistant(where, text_of(step["plan"]), [], extra={"planning": True})
        return
    if not action:
        final = "output" in step or "final_answer" in step
        builder.notes["final_answer_steps" if final else "unknown_steps"] += 1
        return
    raw_calls = step.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise AdapterError(f"{where}/tool_calls", "expected a list of tool calls")
    calls = []
    for k, c in enumerate(raw_calls):
        at = f"{where}/tool_calls/{k}"
        function = c.get("function") if isinstance(c, dict) else None
        if not isinstance(function, dict):
            raise AdapterError(at, "a tool call is {id, type, function: {name, arguments}}")
        calls.append((c.get("id"), function.get("name"),
                      function["arguments"] if function.get("name") == "python_interpreter"
                      and isinstance(function.get("arguments"), str)  # a CodeAgent's code
                      else _arguments(function.get("arguments"), f"{at}/function/arguments",
                                      max_depth), at))
    error = step.get("error")
    error_text = None
    if isinstance(error, dict):
        error_text = str(error.get("message") or error.get("type") or "error")
    elif error is not None:
        error_text = str(error)
    content = step.get("model_output")
    extra = {}
    if step.get("is_final_answer") is True:
        extra["final_answer"] = step.get("action_output")
    builder.assistant(where, text_of(content) if content is not None else None, calls,
                      extra=extra or None)
    observations = step.get("observations")
    if calls:
        if len(calls) > 1 and observations is not None:
            builder.notes["joined_observations"] += 1
        if observations is not None or error_text is not None:
            builder.tool_result(f"{where}/observations", calls[0][0], observations,
                                error_text)
    elif error_text is not None:
        builder.event("environment", "message", content=error_text, error=error_text)
