"""Gemini CLI's headless output → native step records: `gemini -p ... --output-format
stream-json` (one episode per session) and `--output-format json` (refused: no actions).

Written by the non-interactive CLI (google-gemini/gemini-cli, packages/core/src/output/
types.ts: `JsonStreamEvent`, `JsonOutput`; stream-json-formatter.ts, json-formatter.ts;
packages/cli/src/nonInteractiveCli.ts emits them). stream-json is JSON Lines, each event
`{type, timestamp, ...}`: `init {session_id, model}`, `message {role: user | assistant,
content, delta?}` (an assistant's text arrives in chunks, `delta: true`), `tool_use
{tool_name, tool_id, parameters}`, `tool_result {tool_id, status: success | error, output?,
error?: {type, message}}`, `error {severity: warning | error, message}`, `result {status,
error?, stats?: {total_tokens, input_tokens, output_tokens, cached, input, duration_ms,
tool_calls}}`. The model's calls of one response are printed as it streams, their results
after the response ends. json is one pretty-printed object `{session_id?, response?, stats?:
SessionMetrics {models, tools: {totalCalls, ...}, files}, error?: {type, message, code?}}`:
the final answer and counters, no action of the agent's.

Mapping (stream-json): the assistant text and tool uses since the last result (or user
message) are one turn: its tool uses one `tool_call` row each (the text the first's
content), or a `message` row when it made none; a `tool_result` answers its call by
`tool_id` (`output` the observation, its `status` when it has none; status `error` →
observation.error, the error's message); the user's prompt is an event (the user_goal);
`error` events and a failed `result` system events; an event type this reader does not
know is counted (`unknown_events`). behaviour policy: init's `model`;
tokens: the result's stats. No reward. episode_id: the session_id. json: one quarantined
record saying it holds no actions (with its `stats.tools.totalCalls`) and what to read
instead — never an empty dataset.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tracerl.data.formats import AdapterError
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import arguments

STREAM_EVENTS = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
_JSON_KEYS = frozenset({"session_id", "response", "stats", "error"})


def is_stream_event(value: Any) -> bool:
    """stream-json's first event, `init {type, timestamp, session_id, model}`, or a
    `tool_use` event `{type, timestamp, tool_name, tool_id, parameters}`."""
    if not isinstance(value, dict) or not isinstance(value.get("timestamp"), str):
        return False
    if value.get("type") == "init":  # (a field or two more from a newer CLI is fine)
        return isinstance(value.get("session_id"), str) and \
            isinstance(value.get("model"), str) and len(value) <= 6
    if value.get("type") == "tool_use":
        return {"tool_name", "tool_id", "parameters"} <= value.keys() and len(value) <= 7
    return False


def is_json_output(value: Any) -> bool:
    """`--output-format json`'s object: only `session_id`, `response`, `stats`, `error`,
    with SessionMetrics stats (`models`, `tools`) or a JsonError `{type, message}`."""
    if not isinstance(value, dict) or not value or not value.keys() <= _JSON_KEYS:
        return False
    stats, error = value.get("stats"), value.get("error")
    if isinstance(stats, dict) and {"models", "tools"} <= stats.keys():
        return True
    return "stats" not in value and isinstance(error, dict) and \
        {"type", "message"} <= error.keys() and error.keys() <= {"type", "message", "code"}


def json_output_error(value: dict, where: str) -> AdapterError:
    """Why a `--output-format json` result is not read: it holds no agent action."""
    stats = value.get("stats") if isinstance(value.get("stats"), dict) else {}
    tools = stats.get("tools") if isinstance(stats.get("tools"), dict) else {}
    calls = tools.get("totalCalls")
    counted = f" (its stats count {calls} tool calls, none of them recorded)" \
        if isinstance(calls, int) else ""
    error = value.get("error")
    failed = f"; it reports an error: {error.get('message')}" if isinstance(error, dict) \
        else ""
    return AdapterError(where, "a Gemini CLI `--output-format json` result holds only the "
                               f"final response and counters, no agent actions{counted}"
                               f"{failed}; read the session file (~/.gemini/tmp/<project "
                               "hash>/chats/) or `--output-format stream-json` output instead")


def stream_rows(lines: list[tuple[Any, str]], fallback_id: str,
                max_depth: int) -> tuple[str, list[dict], list[str], Counter]:
    """(episode id, rows, pointers, notes) of a stream-json file."""
    init = next((v for v, _ in lines if isinstance(v, dict) and v.get("type") == "init"), {})
    episode_id = init.get("session_id") if isinstance(init.get("session_id"), str) and \
        init["session_id"] else fallback_id
    model = init.get("model") if isinstance(init.get("model"), str) else None
    stats: dict = {}
    for value, _ in lines:
        if isinstance(value, dict) and value.get("type") == "result" and \
                isinstance(value.get("stats"), dict):
            stats = value["stats"]
    builder = EpisodeBuilder(episode_id, {"episode": {
        "agent_model": model,
        "prompt_tokens": stats.get("input_tokens") if type(stats.get("input_tokens")) is int
        else None,
        "completion_tokens": stats.get("output_tokens")
        if type(stats.get("output_tokens")) is int else None}}, max_depth)
    text: list[str] = []
    text_at: list[str] = []
    calls: list[tuple[Any, Any, Any, str]] = []
    policy = {"behavior_policy": model} if model else None

    def flush() -> None:
        if calls or text:
            builder.assistant(text_at[0] if text_at else calls[0][3], "".join(text) or None,
                              list(calls), metadata=policy)
        text.clear()
        text_at.clear()
        calls.clear()

    for value, where in lines:
        if not isinstance(value, dict):
            raise AdapterError(where, f"an event is an object, got {type(value).__name__}")
        kind = value.get("type")
        if kind == "init":
            if value is not init and value.get("session_id") != episode_id:
                raise AdapterError(f"{where}/session_id", "a second session's init in one "
                                                          "stream (split the file per run)")
        elif kind == "message":
            content = value.get("content")
            if value.get("role") == "assistant":
                if isinstance(content, str):
                    text.append(content)
                    text_at.append(where)
            else:
                flush()
                builder.event("user", "message", content=content)
        elif kind == "tool_use":
            calls.append((value.get("tool_id"), value.get("tool_name"),
                          arguments(value.get("parameters"), f"{where}/parameters",
                                    max_depth), where))
        elif kind == "tool_result":
            flush()
            error = value.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            failed = value.get("status") == "error"
            output = value.get("output")  # absent when the display was no text
            builder.tool_result(where, value.get("tool_id"),
                                output if output is not None else value.get("status"),
                                str(message or "error") if failed or message else None)
        elif kind == "error":
            flush()
            builder.event("system", "message", content=value.get("message"),
                          error=str(value.get("message"))
                          if value.get("severity") != "warning" else None)
        elif kind == "result":
            flush()
            error = value.get("error")
            if value.get("status") == "error" or isinstance(error, dict):
                message = error.get("message") if isinstance(error, dict) else None
                builder.event("system", "message", content=message,
                              error=str(message or "error"))
        else:  # a newer CLI's event: counted, not read
            builder.notes["unknown_events"] += 1
    flush()
    rows, pointers = builder.finish("/", None, None, None, None)
    return episode_id, list(rows), list(pointers), builder.notes
