"""mini-swe-agent trajectories (`<instance>.traj.json`, `trajectory_format`
"mini-swe-agent-1", v1.x and v2.x) → native step records, one episode per trajectory.

Written by `DefaultAgent.save` (SWE-agent/mini-swe-agent, src/minisweagent/agents/
default.py): `{info: {exit_status, submission, model_stats: {instance_cost, api_calls},
mini_version, config: {agent, model: {model_name, action_regex?}, environment}},
messages: [...], trajectory_format, instance_id?}`. The messages, as each version writes
them:

- v1 (text): `{role, content}`; the action is the one fenced command in the assistant's
  text (```` ```bash ```` by default, `config.agent.action_regex` / `config.model.
  action_regex` when set); a message with none or several raised a FormatError (no command
  ran; the next user message says so). The user message after a command is its output
  (`<returncode>N</returncode><output>…`, a timeout notice, or the submission).
- v2 (text or tool calls, models/utils/actions_text.py, actions_toolcall.py,
  actions_toolcall_response.py): the assistant message carries the parsed commands in
  `extra.actions` (`[{command, tool_call_id?}]`); outputs are user messages (text) or
  `role: tool` messages (chat tool calls) or `function_call_output` items (Responses
  API, whose assistant turn is the whole response object: `object: "response"`,
  `output: [...]`), each with `extra.{raw_output, returncode, exception_info?}`. A
  FormatError is a user message with `extra.interrupt_type`; the text model's rejected
  reply is in its `extra.model_response`. The run ends with `{role: "exit", content:
  submission, extra: {exit_status, submission}}` (v2.0: a user message with `extra.
  exit_status`; docs/usage/output_files.md): when the submitting command has no output
  message (the environment raised Submitted), the exit (its content, else the submission)
  is its output.

Mapping: each executed command is one `tool_call` row (tool `bash`, arguments
`{"command": …}`, the call id when the model gave one; commands of one reply share its
turn); its output is the observation (`error`: the exception, or `returncode N` when N is
not 0); an assistant reply without a command (or a rejected reply kept in a FormatError)
is a `message` row; the system and task messages before the first action are row 0's
state (task = user_goal); other user messages are events. behaviour policy =
`config.model.model_name` (else the response's `model`); `extra.cost` of a reply is the
turn's metadata.cost_usd; episode: instance cost, exit status (termination_reason),
tokens (the responses' usage). No reward (SWE-bench results live elsewhere).
episode_id: `instance_id`, else the file name without `.traj.json`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import arguments, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

V1_ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def is_trajectory(value: Any) -> bool:
    """A mini-swe-agent trajectory: its `trajectory_format`, or `messages` beside an
    `info` that names the mini version."""
    if not isinstance(value, dict):
        return False
    fmt = value.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    info = value.get("info")
    return isinstance(value.get("messages"), list) and isinstance(info, dict) and \
        "mini_version" in info


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    for raw in json_records(path, limits, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        value = raw.value
        # a document's file names its instance; lines of JSONL are told apart by number
        episode_id = episode_id_of(value, None if raw.jsonl else path) or \
            fallback_episode_id(path, raw.number, options)
        try:
            rows, pointers, notes = trajectory_rows(value, raw.pointer, episode_id,
                                                    limits.max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(raw.number, raw.pointer, error=exc, episode_id=episode_id)
            continue
        yield AdaptedRecord(raw.number, raw.pointer, rows, pointers, episode_id=episode_id,
                            notes=notes)


def episode_id_of(value: Any, path: Path | None) -> str | None:
    """`instance_id`, else the file's name without `.traj.json` / `.traj` / `.json`."""
    if isinstance(value, dict) and isinstance(value.get("instance_id"), str) and \
            value["instance_id"]:
        return value["instance_id"]
    return file_id(path) if path is not None else None


def file_id(path: Path) -> str | None:
    """A trajectory file's name without `.traj.json` / `.traj` / `.json`: the instance id
    that SWE-agent and mini-swe-agent name their files by."""
    name = path.name
    for suffix in (".traj.json", ".traj", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def as_dict(value: Any) -> dict:
    """`value` if it is an object, else an empty one (optional nested fields)."""
    return value if isinstance(value, dict) else {}


def action_regex(info: dict) -> re.Pattern:
    """The regex that found the command in a text reply (v1 and v2 text models)."""
    config = as_dict(info.get("config"))
    for part in ("model", "agent"):
        regex = as_dict(config.get(part)).get("action_regex")
        if isinstance(regex, str) and regex:
            return re.compile(regex, re.DOTALL)
    return re.compile(V1_ACTION_REGEX, re.DOTALL)


def command_error(extra: dict, text: str | None) -> str | None:
    """A command's failure: its exception, else `returncode N` for N not 0 (from
    `extra.returncode`, else the `<returncode>` tag of the output text)."""
    if extra.get("exception_info"):
        return str(extra["exception_info"])
    code = extra.get("returncode")
    if code is None and isinstance(text, str):
        found = _RETURNCODE.search(text[:200])
        code = int(found.group(1)) if found else None
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"returncode {code}"
    return None


def trajectory_rows(value: Any, pointer: str, episode_id: str,
                    max_depth: int) -> tuple[list[dict], list[str], Any]:
    if not isinstance(value, dict):
        raise AdapterError(pointer or "/", f"a trajectory is an object, got "
                                           f"{type(value).__name__}")
    messages = value.get("messages")
    if not isinstance(messages, list):
        raise AdapterError(f"{pointer}/messages", "a trajectory needs a `messages` list")
    info = as_dict(value.get("info"))
    model_config = as_dict(as_dict(info.get("config")).get("model"))
    model = model_config.get("model_name") if isinstance(model_config.get("model_name"),
                                                         str) else None
    regex = action_regex(info)
    usage = _usage(messages)
    stats = as_dict(info.get("model_stats"))
    cost = stats.get("instance_cost")
    common = {"metadata": {"behavior_policy": model},
              "state": {"available_tools": ["bash"]},
              "episode": {"agent_model": model,
                          "agent_cost_usd": float(cost) if isinstance(cost, int | float)
                          and not isinstance(cost, bool) else None,
                          "termination_reason": info.get("exit_status")
                          if isinstance(info.get("exit_status"), str) else None,
                          "prompt_tokens": usage[0] or None,
                          "completion_tokens": usage[1] or None}}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    for j, m in enumerate(messages):
        _message(builder, m, f"{pointer}/messages/{j}", regex, max_depth)
    kept = {k: v for k, v in info.items() if k not in ("config", "model_stats")}
    kept.update({k: v for k, v in value.items() if k not in (
        "messages", "info", "trajectory_format", "instance_id")})
    rows, pointers = builder.finish(pointer or "/", None, None, None,
                                    {"episode": kept} if kept else None)
    return list(rows), list(pointers), builder.notes


def _usage(messages: list) -> tuple[int, int]:
    """(prompt, completion) tokens summed over the replies' `extra.response.usage`."""
    prompt = completion = 0
    for m in messages:
        source = m if isinstance(m, dict) and m.get("object") == "response" else \
            as_dict(as_dict(m).get("extra")).get("response")
        usage = as_dict(as_dict(source).get("usage"))
        for key, add in (("prompt_tokens", 0), ("input_tokens", 0),
                         ("completion_tokens", 1), ("output_tokens", 1)):
            n = usage.get(key)
            if type(n) is int:
                if add:
                    completion += n
                else:
                    prompt += n
    return prompt, completion


def _message(builder: EpisodeBuilder, m: Any, where: str, regex: re.Pattern,
             max_depth: int) -> None:
    if not isinstance(m, dict):
        raise AdapterError(where, f"a message is an object, got {type(m).__name__}")
    extra = as_dict(m.get("extra"))
    role = m.get("role")
    if m.get("object") == "response" or role == "assistant":
        _reply(builder, m, where, extra, max_depth, regex)
        return
    if m.get("type") == "function_call_output":
        content = m.get("output")
        builder.tool_result(where, m.get("call_id"), text_of(content),
                            command_error(extra, text_of(content)))
        return
    content = text_of(m.get("content"))
    if role == "tool":
        builder.tool_result(where, m.get("tool_call_id"), content,
                            command_error(extra, content))
        return
    if role == "exit" or "exit_status" in extra:  # the run's end (v2.0: a user message)
        if not content and isinstance(extra.get("submission"), str):
            content = extra["submission"]
        if builder.match(None, None) is not None:  # the submitting command's output
            builder.tool_result(where, None, content)
        else:
            builder.event("environment", "message", content=content)
        return
    if role == "system":
        builder.event("system", "message", content=content)
        return
    if role != "user":
        raise AdapterError(f"{where}/role", f"unknown role {role!r}")
    if extra.get("interrupt_type"):
        if isinstance(extra.get("model_response"), str):  # the reply the parser refused
            builder.assistant(f"{where}/extra/model_response", extra["model_response"], [])
            builder.notes["format_errors"] += 1
        builder.event("environment", "message", content=content)
        return
    if builder.match(None, None) is not None:  # the output of the turn's open command
        builder.tool_result(where, None, content, command_error(extra, content))
        return
    builder.event("user" if not builder.rows else "environment", "message", content=content)


def _reply(builder: EpisodeBuilder, m: dict, where: str, extra: dict, max_depth: int,
           regex: re.Pattern) -> None:
    """An assistant reply: its commands (extra.actions, else its tool calls, else the one
    fenced command of its text) and its text."""
    if m.get("object") == "response":
        output = m.get("output") if isinstance(m.get("output"), list) else []
        text = "".join(text_of(o.get("content")) or "" for o in output
                       if isinstance(o, dict) and o.get("type") == "message") or None
        raw_calls = [(o.get("call_id") or o.get("id"), o.get("name"), o.get("arguments"),
                      f"{where}/output/{k}") for k, o in enumerate(output)
                     if isinstance(o, dict) and o.get("type") == "function_call"]
    else:
        text = text_of(m.get("content"))
        raw_calls = [(c.get("id"), as_dict(c.get("function")).get("name"),
                      as_dict(c.get("function")).get("arguments"), f"{where}/tool_calls/{k}")
                     for k, c in enumerate(m.get("tool_calls") or []) if isinstance(c, dict)]
    actions = extra.get("actions")
    if isinstance(actions, list):
        calls = []
        for k, a in enumerate(actions):
            at = f"{where}/extra/actions/{k}"
            if not isinstance(a, dict) or not isinstance(a.get("command"), str):
                raise AdapterError(at, "an action is an object with a `command` string")
            calls.append((a.get("tool_call_id"), "bash", {"command": a["command"]}, at))
    elif raw_calls:
        calls = [(cid, name, arguments(args, f"{at}/arguments", max_depth), at)
                 for cid, name, args, at in raw_calls]
    else:
        found = regex.findall(text or "")
        calls = [(None, "bash", {"command": found[0].strip()}, where)] if len(found) == 1 \
            else []
    cost = extra.get("cost")
    cost = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) \
        else None
    response = m if m.get("object") == "response" else as_dict(extra.get("response"))
    model = response.get("model") if isinstance(response.get("model"), str) else None
    builder.assistant(where, text, calls, cost=cost,
                      metadata={"behavior_policy": model} if model and
                      not builder.common["metadata"]["behavior_policy"] else None)
