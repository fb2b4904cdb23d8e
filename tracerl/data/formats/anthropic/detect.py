"""Whether a file is Anthropic Messages API traffic: a request (`messages` beside a
top-level `system`, or messages with tool_use / tool_result blocks), response (`type:
"message"`), API error, SSE stream (as events, or a text file of `event:` / `data:` lines,
also one that is only an `error` event), a Message Batches result or request line, an
Amazon Bedrock batch inference line, or a recorded HTTP exchange whose body is one of
those."""

from __future__ import annotations

from typing import Any

import orjson

from tracerl.data.formats.common.detect import Sniffed

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking",
                               "server_tool_use"})


_BATCH_RESULTS = frozenset({"succeeded", "errored", "expired", "canceled"})


# the `error.type` of an Anthropic API error (docs.claude.com/en/api/errors)
ANTHROPIC_ERRORS = frozenset({"invalid_request_error", "authentication_error",
                              "permission_error", "not_found_error", "request_too_large",
                              "rate_limit_error", "api_error", "overloaded_error",
                              "billing_error", "timeout_error"})


def is_anthropic_error(value: Any) -> bool:
    """An Anthropic API error body or stream event: `{type: error, error: {type, message}}`
    (one of its error types, or a compatible gateway's own code with a message)."""
    if not (isinstance(value, dict) and value.get("type") == "error"
            and isinstance(value.get("error"), dict)):
        return False
    error = value["error"]
    return error.get("type") in ANTHROPIC_ERRORS or (
        isinstance(error.get("type"), str) and isinstance(error.get("message"), str))


def _anthropic_error_stream(head: bytes) -> bool:
    """An event stream whose first event is an Anthropic `error` (overloaded before the
    message started: the whole stream)."""
    for line in head.split(b"\n"):
        if line.startswith(b"data:"):
            try:
                return is_anthropic_error(orjson.loads(line[5:]))
            except orjson.JSONDecodeError:
                return False
    return False


def _bedrock_anthropic(value: dict) -> bool:
    """An Amazon Bedrock batch inference line (`{recordId, modelInput, modelOutput |
    error}`) of an Anthropic model: its input a Messages request body (`anthropic_version`
    beside `messages`), its output a Messages response."""
    body, output = value.get("modelInput"), value.get("modelOutput")
    if isinstance(output, dict) and is_anthropic(output):
        return True
    return isinstance(body, dict) and isinstance(body.get("messages"), list) \
        and "anthropic_version" in body


def is_anthropic(value: dict) -> bool:
    """A Messages API response, request, SSE capture, Message Batches result or request
    line, or an HTTP exchange holding one."""
    if value.get("type") == "message" and value.get("role") == "assistant" \
            and isinstance(value.get("content"), list):
        return True
    if "custom_id" in value:
        result, params = value.get("result"), value.get("params")
        if isinstance(result, dict) and result.get("type") in _BATCH_RESULTS:
            return True
        if isinstance(params, dict) and isinstance(params.get("messages"), list):
            return True
    if value.get("type") in ("message_start", "content_block_start") \
            or is_anthropic_error(value):
        return True
    if "recordId" in value and "modelInput" in value:
        return _bedrock_anthropic(value)
    body = value.get("body", value.get("response"))
    if isinstance(body, str) and ("status" in value or "headers" in value):
        if body.lstrip().startswith(("event:", "data:")):
            return "message_start" in body[:4096]
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
    if isinstance(body, dict) and body is not value:
        if is_anthropic(body):
            return True
        if isinstance(body.get("messages"), list):
            return anthropic_messages(body)
    request = value.get("request")
    if isinstance(request, dict) and isinstance(request.get("body", request), dict):
        inner = request.get("body", request)
        if isinstance(inner, dict) and isinstance(inner.get("messages"), list):
            return anthropic_messages(inner)
    return False


def anthropic_messages(record: dict) -> bool:
    """Whether a record of messages is Anthropic's: a top-level system prompt beside them
    or content blocks only Anthropic writes (else it is OpenAI-style chat)."""
    messages = record.get("messages", record.get("traj"))
    if not isinstance(messages, list):
        return False
    roles = set()
    for m in messages[:200]:
        if not isinstance(m, dict):
            continue
        roles.add(m.get("role"))
        content = m.get("content")
        if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content):
            return True
        if "tool_calls" in m or m.get("role") in ("tool", "function", "developer"):
            return False
    return ("system" in record and "system" not in roles) or (
        "max_tokens" in record and "anthropic_version" in record)


def detect(s: Sniffed) -> bool:
    if s.event_stream:  # a server-sent event stream saved as text
        head = s.head[:4096]
        return b"message_start" in head or _anthropic_error_stream(head)
    if s.keys_only:
        return s.has(b"messages", b"traj", b"role") and s.has(b"tool_use", b"tool_result")
    value = s.record
    if not isinstance(value, dict):
        return False
    if is_anthropic(value):
        return True
    from tracerl.data.formats.openai_chat.detect import is_chat_call_log

    return ("messages" in value or "traj" in value) and not is_chat_call_log(value) \
        and anthropic_messages(value)
