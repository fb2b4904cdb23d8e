"""Codex CLI sessions (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`) → native
step records, one episode per session file.

Written by the rollout recorder (openai/codex, codex-rs/core/src/rollout/recorder.rs and
protocol's RolloutLine / RolloutItem): each line `{timestamp, type: session_meta |
response_item | event_msg | turn_context | compacted, payload}`; `session_meta` `{id, cwd,
cli_version, originator, instructions?, model?, forked_from_id?, source?}`, `turn_context`
`{model, cwd, approval_policy, ...}`, `response_item` a Responses API item: `message {role:
user | assistant | developer, content: [{type: input_text | output_text, text}]}`,
`reasoning {summary}`, `function_call {name, arguments (JSON text), call_id}`,
`function_call_output {call_id, output}` (the shell's output as JSON text `{output,
metadata: {exit_code, duration_seconds}}`, or plain text), `custom_tool_call {name, input,
call_id}` / `custom_tool_call_output`, `local_shell_call {call_id, action}`,
`web_search_call {action}`; `event_msg` the UI's events (`token_count {info:
{total_token_usage}}`; the others repeat the response items and are not read). Rollouts
before the envelope (2025 spring) start with `{id, timestamp, instructions?}` and hold the
items bare, with `{record_type: "state"}` lines between.

Mapping: the assistant items between two other items are one turn (one model response):
its calls (function, custom, local shell and web search calls) one `tool_call` row each,
its text the turn's content, its reasoning summary `extra.reasoning`; a turn without calls
is a `message` row. An output answers its call by `call_id` (a non-zero `exit_code` in its
metadata, or in the header of a text output: `Exit code: N` / `Process exited with code
N` → observation.error `exit_code N`); user and developer messages are events (the
first user message the user_goal), a compaction's summary a system event. behaviour policy
= the turn context's `model` (else session_meta's); tokens from the last `token_count`.
No reward. episode_id: the session id, else the file's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.codex_cli.exec_json import (
    is_exec_event,
    is_legacy_line,
    read_exec,
    read_legacy,
)
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import arguments, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

ENVELOPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                       "compacted"})
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call",
                    "web_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output",
                      "local_shell_call_output"})


def is_rollout_line(value: Any) -> bool:
    """A line of a Codex rollout: the envelope `{type, payload}` (with a timestamp), or an
    old rollout's first line `{id, timestamp, instructions}`."""
    if not isinstance(value, dict):
        return False
    if value.get("type") in ENVELOPES and isinstance(value.get("payload"), dict):
        return "timestamp" in value or value["type"] == "session_meta"
    return {"id", "timestamp"} <= value.keys() and "instructions" in value and \
        len(value) <= 4


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    lines: list[tuple[Any, str]] = []
    for raw in json_records(path, limits):
        if raw.error is not None:  # a line that is no JSON: a record of its own
            yield AdaptedRecord(raw.number, raw.pointer or f"/{raw.number}", error=raw.error,
                                text=raw.text)
            continue
        lines.append((raw.value, f"/{raw.number}"))
    if not lines:
        return
    if any(is_exec_event(value) for value, _ in lines[:3]):  # `codex exec --json` output
        yield from read_exec(lines, path.name.removesuffix(".jsonl") or
                             fallback_episode_id(path, 1, options), limits.max_depth)
        return
    if is_legacy_line(lines[0][0]):  # the old `codex exec --json` output
        yield from read_legacy(lines, path.name.removesuffix(".jsonl") or
                               fallback_episode_id(path, 1, options), limits.max_depth)
        return
    episode_id = _session_id(lines) or path.name.removesuffix(".jsonl") or \
        fallback_episode_id(path, 1, options)
    try:
        rows, pointers, notes = session_rows(lines, episode_id, limits.max_depth)
    except AdapterError as exc:
        yield AdaptedRecord(1, "", error=exc, episode_id=episode_id)
        return
    yield AdaptedRecord(1, "", rows, pointers, episode_id=episode_id, notes=notes)


def _session_id(lines: list[tuple[Any, str]]) -> str | None:
    for value, _ in lines[:5]:
        if not isinstance(value, dict):
            continue
        if value.get("type") == "session_meta":
            sid = value["payload"].get("id")
            return sid if isinstance(sid, str) and sid else None
        if "instructions" in value and isinstance(value.get("id"), str):
            return value["id"]
    return None


def _item(value: Any) -> tuple[str, Any]:
    """(the line's kind, its payload): a bare item of an old rollout is a response_item."""
    if isinstance(value, dict) and value.get("type") in ENVELOPES and "payload" in value:
        return value["type"], value["payload"]
    if isinstance(value, dict) and "record_type" in value:
        return "state", value
    if isinstance(value, dict) and "instructions" in value and "type" not in value:
        return "session_meta", value
    return "response_item", value


def _is_assistant(item: dict) -> bool:
    kind = item.get("type")
    return kind in _CALLS or kind == "reasoning" or (
        kind == "message" and item.get("role") == "assistant")


def session_rows(lines: list[tuple[Any, str]], episode_id: str,
                 max_depth: int) -> tuple[list[dict], list[str], Any]:
    model = None
    usage: dict = {}
    for value, _ in lines:
        kind, payload = _item(value)
        if kind in ("session_meta", "turn_context") and isinstance(payload, dict) and \
                isinstance(payload.get("model"), str) and model is None:
            model = payload["model"]
        if kind == "event_msg" and isinstance(payload, dict) and \
                payload.get("type") == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(total, dict):
                usage = total
    builder = EpisodeBuilder(episode_id, {"episode": {
        "agent_model": model,
        "prompt_tokens": usage.get("input_tokens") if type(usage.get("input_tokens")) is int
        else None,
        "completion_tokens": usage.get("output_tokens")
        if type(usage.get("output_tokens")) is int else None}}, max_depth)
    turn: list[tuple[dict, str]] = []
    current_model = model

    def flush() -> None:
        if turn:
            _turn(builder, turn, current_model, max_depth)
            turn.clear()

    for value, where in lines:
        kind, item = _item(value)
        if kind == "turn_context" and isinstance(item, dict) and \
                isinstance(item.get("model"), str):
            current_model = item["model"]
        if kind == "compacted" and isinstance(item, dict):
            flush()
            builder.event("system", "message", content=text_of(item.get("message")))
            builder.notes["compactions"] += 1
        if kind != "response_item":
            continue
        if not isinstance(item, dict):
            raise AdapterError(where, f"a response item is an object, got "
                                      f"{type(item).__name__}")
        if _is_assistant(item):
            turn.append((item, f"{where}/payload" if "payload" in value else where))
            continue
        flush()
        at = f"{where}/payload" if isinstance(value, dict) and "payload" in value else where
        if item.get("type") in _OUTPUTS:
            content, error = _output(item.get("output"))
            builder.tool_result(at, item.get("call_id"), content, error)
        elif item.get("type") == "message":
            role = item.get("role")
            builder.event("system" if role in ("developer", "system") else "user", "message",
                          content=text_of(item.get("content")))
        else:
            builder.notes["other_items"] += 1
    flush()
    rows, pointers = builder.finish("/", None, None, None, None)
    return list(rows), list(pointers), builder.notes


def _output(output: Any) -> tuple[Any, str | None]:
    """(the output as stored, its error): the shell's `{output, metadata: {exit_code}}` JSON
    text gives its output and, for a non-zero exit code, `exit_code N`."""
    if isinstance(output, str) and output[:1] == "{":
        try:
            parsed = orjson.loads(output)
        except orjson.JSONDecodeError:
            return output, None
        metadata = parsed.get("metadata") if isinstance(parsed, dict) else None
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return parsed, f"exit_code {code}"
        return parsed, None
    if isinstance(output, dict) and "content" in output:  # a structured output
        return text_of(output.get("content")), \
            "error" if output.get("success") is False else None
    if isinstance(output, str):
        code = _text_exit_code(output)
        return output, f"exit_code {code}" if code else None
    return output, None


# The shell's output as text (newer rollouts): a header, then `Output:` and what the command
# printed — `Exit code: N` / `Wall time: ...` (the freeform shell tool), or `Chunk ID`,
# `Wall time`, `Process exited with code N` (unified exec; a command still running says
# `Process running with session ID N` and has no code yet).
_EXIT = re.compile(r"^(?:Exit code: |Process exited with code )(-?\d+)\s*$", re.M)


def _text_exit_code(output: str) -> int | None:
    """The exit code in the header of a shell output given as text (only the lines before
    `Output:`, never what the command printed), or None."""
    header = output.split("\nOutput:", 1)[0] if "\nOutput:" in output else None
    if header is None or len(header) > 400:
        return None
    found = _EXIT.search(header)
    return int(found.group(1)) if found else None


def _turn(builder: EpisodeBuilder, items: list[tuple[dict, str]], model: str | None,
          max_depth: int) -> None:
    texts, reasoning, calls = [], [], []
    for item, where in items:
        kind = item.get("type")
        if kind == "message":
            text = text_of(item.get("content"))
            if text:
                texts.append(text)
        elif kind == "reasoning":
            summary = text_of(item.get("summary"))
            if summary:
                reasoning.append(summary)
        elif kind == "function_call":
            calls.append((item.get("call_id"), item.get("name"),
                          arguments(item.get("arguments"), f"{where}/arguments", max_depth),
                          where))
        elif kind == "custom_tool_call":
            calls.append((item.get("call_id"), item.get("name"), item.get("input"), where))
        elif kind == "local_shell_call":
            calls.append((item.get("call_id") or item.get("id"), "local_shell",
                          item.get("action"), where))
        else:  # web_search_call: run by the server, no output item follows
            calls.append((item.get("id"), "web_search", item.get("action"), where))
    extra = {"reasoning": "\n".join(reasoning)} if reasoning else None
    builder.assistant(items[0][1], "\n".join(texts) or None, calls, extra=extra,
                      metadata={"behavior_policy": model} if model else None)
