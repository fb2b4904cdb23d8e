"""SWE-agent trajectories (`<instance_id>.traj`, SWE-agent 0.x and 1.x) → native step
records, one episode per trajectory (per attempt when the run retried).

Written by `DefaultAgent.get_trajectory_data` (SWE-agent/SWE-agent, sweagent/agent/
agents.py; the types in sweagent/types.py): `{trajectory: [TrajectoryStep], history:
[HistoryItem], info: AgentInfo, replay_config?, environment?}`, a step `{action,
observation, response, thought, state, execution_time, query?, extra_info?}`, a history item
`{role, content, message_type: thought | action | observation, agent?, is_demo?, thought?,
action?, tool_calls?, tool_call_ids?}`, info `{exit_status, submission, model_stats:
{instance_cost, tokens_sent, tokens_received, api_calls}, review?, edited_files30?, ...}`.
A RetryAgent run writes `attempts: [{trajectory, history, info}, ...]` and, once it chose,
the best attempt's data again at the top level (`info.best_attempt_idx`).

Mapping: each step is one turn. A step with an action is one `tool_call` row: tool `bash`
(SWE-agent runs every action, its tools included, as a command in the container's shell;
function calling only chooses the command line), arguments `{"command": action}`, content
the step's thought, its observation the result. A step without an action (the agent exited
on an error and was autosubmitted) is a `message` row with its thought, its observation an
environment event. The history's system and task messages before the agent's first reply
(demonstrations left out) are row 0's state. behaviour policy = `replay_config.agent.model.
name`; episode: exit status (termination_reason), instance cost, tokens sent / received.
No reward (SWE-bench results live elsewhere). episode_id: the file's name without `.traj`
(the instance id); an attempt's `<id>/attempt-<k>`; the top-level copy of the chosen
attempt is not read twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.formats.mini_swe_agent.read import as_dict, file_id
from tracerl.data.ingest.limits import Limits


def is_trajectory(value: Any) -> bool:
    """A SWE-agent trajectory: a `trajectory` list of steps with `action` and
    `observation` (or only `attempts` of them), beside `info` or `history`."""
    if not isinstance(value, dict):
        return False
    attempts = value.get("attempts")
    if isinstance(attempts, list) and attempts and is_trajectory(attempts[0]):
        return True
    steps = value.get("trajectory")
    if not isinstance(steps, list) or not ("info" in value or "history" in value):
        return False
    return not steps or (isinstance(steps[0], dict) and
                         {"action", "observation"} <= steps[0].keys())


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    for raw in json_records(path, limits, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        episode_id = file_id(path) if raw.jsonl is False and raw.number == 1 and \
            raw.pointer == "" else None
        episode_id = episode_id or fallback_episode_id(path, raw.number, options)
        try:
            rows, pointers, notes = run_rows(raw.value, raw.pointer, episode_id,
                                             limits.max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(raw.number, raw.pointer, error=exc, episode_id=episode_id)
            continue
        yield AdaptedRecord(raw.number, raw.pointer, rows, pointers, episode_id=episode_id,
                            notes=notes)


def run_rows(value: Any, pointer: str, episode_id: str,
             max_depth: int) -> tuple[list[dict], list[str], Counter]:
    """The rows of a trajectory file: its attempts (each an episode), else its one
    trajectory."""
    if not isinstance(value, dict):
        raise AdapterError(pointer or "/", f"a trajectory is an object, got "
                                           f"{type(value).__name__}")
    attempts = value.get("attempts")
    if not isinstance(attempts, list) or not attempts:
        return trajectory_rows(value, pointer, episode_id, max_depth)
    rows: list[dict] = []
    pointers: list[str] = []
    notes: Counter = Counter()
    for k, attempt in enumerate(attempts):
        more, more_pointers, more_notes = trajectory_rows(
            attempt, f"{pointer}/attempts/{k}", f"{episode_id}/attempt-{k}", max_depth,
            _model(value))
        rows += more
        pointers += more_pointers
        notes.update(more_notes)
        notes["attempts"] += 1
    return rows, pointers, notes


def _model(value: dict) -> str | None:
    """The model's name in the run's replay_config (JSON text in 1.x, or an object)."""
    config = value.get("replay_config")
    if isinstance(config, str):
        try:
            config = orjson.loads(config)
        except orjson.JSONDecodeError:
            return None
    name = as_dict(as_dict(as_dict(config).get("agent")).get("model")).get("name")
    return name if isinstance(name, str) else None


def trajectory_rows(value: Any, pointer: str, episode_id: str, max_depth: int,
                    model: str | None = None) -> tuple[list[dict], list[str], Counter]:
    if not isinstance(value, dict):
        raise AdapterError(pointer or "/", f"an attempt is an object, got "
                                           f"{type(value).__name__}")
    steps = value.get("trajectory")
    if not isinstance(steps, list):
        raise AdapterError(f"{pointer}/trajectory", "a trajectory needs a `trajectory` list "
                                                    "of steps")
    info = as_dict(value.get("info"))
    stats = as_dict(info.get("model_stats"))
    model = _model(value) or model

    def number(key: str, kind: type) -> Any:
        v = stats.get(key)
        return kind(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    exit_status = info.get("exit_status")
    common = {"metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "agent_cost_usd": number("instance_cost",
                                                                         float),
                          "prompt_tokens": number("tokens_sent", int),
                          "completion_tokens": number("tokens_received", int),
                          "termination_reason": exit_status if isinstance(exit_status, str)
                          else None}}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    _task(builder, value.get("history"))
    for j, step in enumerate(steps):
        where = f"{pointer}/trajectory/{j}"
        if not isinstance(step, dict):
            raise AdapterError(where, f"a step is an object, got {type(step).__name__}")
        action = step.get("action")
        if action is not None and not isinstance(action, str):
            raise AdapterError(f"{where}/action", f"an action is a string, got "
                                                  f"{type(action).__name__}")
        thought = step.get("thought") if isinstance(step.get("thought"), str) else None
        observation = text_of(step.get("observation"))
        extra = {"execution_time": step["execution_time"]} \
            if isinstance(step.get("execution_time"), int | float) else None
        if action and action.strip():
            builder.assistant(where, thought or None, [(None, "bash", {"command": action},
                                                        f"{where}/action")], extra=extra)
            builder.tool_result(f"{where}/observation", None, observation)
        else:
            builder.assistant(where, thought or text_of(step.get("response")), [],
                              extra=extra)
            if observation:
                builder.event("environment", "message", content=observation)
    kept = {k: v for k, v in info.items() if k != "model_stats"}
    rows, pointers = builder.finish(pointer or "/", None, None, None,
                                    {"episode": kept} if kept else None)
    return list(rows), list(pointers), builder.notes


def _task(builder: EpisodeBuilder, history: Any) -> None:
    """The system and task messages of the history before the agent's first reply."""
    for item in history if isinstance(history, list) else ():
        if not isinstance(item, dict) or item.get("is_demo") is True:
            continue
        role = item.get("role")
        if role not in ("system", "user"):
            return
        builder.event(role, "message", content=text_of(item.get("content")))
