"""A tool span's name, arguments and result, by producer (`_tool_run`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tracerl.data.formats import AdapterError
from tracerl.data.formats.common.messages import (
    arguments,
    result_content,
    text_of,
)
from tracerl.data.formats.otel_genai.span_io import (
    _bedrock_result,
)
from tracerl.data.formats.otel_genai.spans import (
    Span,
    _json,
)


def _tool_name(s: Span) -> str | None:
    a = s.attrs
    name = a.get("gen_ai.tool.name", a.get("tool.name", a.get(
        "ai.toolCall.name", a.get("spring.ai.tool.definition.name"))))
    if isinstance(name, str):
        return name
    if a.get("traceloop.span.kind") == "tool":  # OpenLLMetry: span `<tool>.tool`
        name = a.get("traceloop.entity.name")
        return name if isinstance(name, str) else s.name.removesuffix(".tool") or None
    return s.name.removeprefix("execute_tool").removeprefix("running tool:").strip() or None


# a tool span's arguments and result, by producer (the first present): the semantic
# conventions, OpenInference, the Vercel AI SDK, Google ADK, Logfire / pydantic-ai, Latitude,
# Spring AI, Braintrust
_TOOL_ARGUMENTS = ("gen_ai.tool.call.arguments", "input.value", "ai.toolCall.args",
                   "gcp.vertex.agent.tool_call_args", "tool_arguments",
                   "spring.ai.tool.call.arguments", "braintrust.input_json")
_TOOL_RESULTS = ("gen_ai.tool.call.result", "output.value", "ai.toolCall.result",
                 "gcp.vertex.agent.tool_response", "tool_response", "gen_ai.tool.result.value",
                 "spring.ai.tool.call.result", "braintrust.output_json")
_JSON_ENCODED = frozenset({"ai.toolCall.result", "braintrust.output_json"})  # always JSON


def _tool_run(s: Span, max_depth: int) -> _Tool:
    a = s.attrs
    raw_args = key = result = None
    for k in _TOOL_ARGUMENTS:
        if k in a:
            raw_args = a[k]
            break
    for k in _TOOL_RESULTS:
        if k in a:
            key, result = k, a[k]
            break
    if key is None or raw_args is None:  # Strands (legacy conventions): the span's events
        for e in s.events:
            if e.name == "gen_ai.tool.message" and raw_args is None and "content" in e.attrs:
                raw_args = e.attrs["content"]
            elif e.name == "gen_ai.choice" and key is None and "message" in e.attrs:
                key, result = "gen_ai.choice", e.attrs["message"]
            elif e.name == "tool.output" and key is None and "output" in e.attrs:
                key, result = "tool.output", e.attrs["output"]  # Claude Code
    if key is None and a.get("traceloop.span.kind") == "tool":
        # OpenLLMetry: the tool function's call and return value, JSON-encoded
        raw_args = _traceloop_arguments(a.get("traceloop.entity.input"))
        result, key = a.get("traceloop.entity.output"), "traceloop.entity.output"
    has_result = not _empty(result)
    if _adk_unset(result):
        result = None
    result = _decoded(result) if key in _JSON_ENCODED or key == "traceloop.entity.output" \
        else _json(result)
    result = _bedrock_result(result)
    call_id = a.get("gen_ai.tool.call.id", a.get("ai.toolCall.id",
                                                   a.get("spring.ai.tool.call.id")))
    if call_id == _ADK_UNSET:
        call_id = None
    output = tool_output(result)
    error = s.error
    if error is None and a.get("gen_ai.tool.result.is_error") is True:  # Latitude
        error = text_of(output) or "error"
    if error is None and _mcp_result(result) and result.get("isError") is True:
        error = text_of(output) or "error"
    return _Tool(s, _tool_name(s), str(call_id) if call_id is not None else None,
                 tool_arguments(raw_args, s.pointer, max_depth), output, has_result, error)


def _decoded(value: Any) -> Any:
    """A value its producer JSON-encoded, decoded (kept as it is when it is not JSON)."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _traceloop_arguments(raw: Any) -> Any:
    """An OpenLLMetry tool span's arguments from `traceloop.entity.input`: the `@tool`
    decorator's `{args, kwargs}` (the keyword arguments, unless only positional ones were
    passed), LangChain's `{input_str, inputs, ...}` (the inputs, else the input text)."""
    value = _json(raw)
    if not isinstance(value, dict):
        return value
    if "kwargs" in value and value.keys() <= {"args", "kwargs"}:
        kwargs, args = value.get("kwargs"), value.get("args")
        return kwargs if isinstance(kwargs, dict) and (kwargs or not args) else value
    if "input_str" in value or "inputs" in value:
        inputs = value.get("inputs")
        return inputs if isinstance(inputs, dict) and inputs else value.get("input_str")
    return value


def tool_output(value: Any) -> Any:
    """A recorded tool result as the agent saw it: a LangChain run's `{output: ...}`, a
    (serialised) ToolMessage's content, a content-block list's text."""
    if isinstance(value, dict) and "output" in value and set(value) <= {"output", "kwargs"}:
        value = value["output"]
    if isinstance(value, dict) and value.get("lc") == 1 and isinstance(value.get("kwargs"),
                                                                       dict):
        value = value["kwargs"]
    if isinstance(value, dict) and "content" in value and (
            value.get("type") == "tool" or "tool_call_id" in value):
        value = value["content"]
    if _mcp_result(value):  # what an MCP tool returns (ADK's tool_response holds it)
        value = value["content"]
    return result_content(value)


_MCP_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "_meta"})


def _mcp_result(value: Any) -> bool:
    """An MCP CallToolResult: `{content: [typed parts], isError?, structuredContent?}`."""
    return isinstance(value, dict) and isinstance(value.get("content"), list) \
        and value.keys() <= _MCP_RESULT_KEYS and all(
            isinstance(p, dict) and "type" in p for p in value["content"])


_ADK_UNSET = "<not specified>"  # Google ADK's placeholder for a call id or result it lacks


def _empty(value: Any) -> bool:
    """No result recorded: absent, or an empty object, list or text (some frameworks put
    `{}` where they did not capture the result)."""
    return value is None or value in ("", "{}", "[]", "null") or value == {} or value == [] \
        or _adk_unset(value)


def _adk_unset(value: Any) -> bool:
    """ADK's tool response when it has none (a tool that raised): `{"result": "<not
    specified>"}`, as an object or its JSON text."""
    return value == _ADK_UNSET or value == {"result": _ADK_UNSET} or (
        isinstance(value, str) and value.startswith('{"result"') and _ADK_UNSET in value
        and _decoded(value) == {"result": _ADK_UNSET})


def tool_arguments(raw: Any, pointer: str, max_depth: int) -> Any:
    """A tool span's arguments: JSON text parsed; text that is not JSON kept as text (a
    tool span holds what the framework passed)."""
    if raw is None:
        return None
    try:
        return arguments(raw, f"{pointer}#arguments", max_depth)
    except AdapterError:
        return raw


@dataclass
class _Tool:
    span: Span
    name: str | None
    call_id: str | None
    arguments: Any
    result: Any
    has_result: bool
    error: str | None
