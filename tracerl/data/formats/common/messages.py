"""Chat messages of every dialect real logs use, as one shape (`Message`).

Agent logs hold the same conversation in many shapes; each adapter finds its messages and
hands them here, so a message means the same thing whichever format carried it:

- OpenAI chat completions: `role` system | developer | user | assistant | tool | function,
  `content` a string, null, or a list of parts; `tool_calls[{id, function{name,
  arguments}}]` (also flat `{id, name, arguments}`), `tool_call_id`, the older
  `function_call` answered by a `function` message by name.
- Anthropic Messages: `content` a string or blocks: `text`, `thinking` /
  `redacted_thinking`, `tool_use{id, name, input}`, `tool_result{tool_use_id, content,
  is_error}` (content a string or text blocks), `server_tool_use` /
  `*_tool_result` (server-side tools: kept as text-free parts).
- OpenTelemetry GenAI (`gen_ai.input.messages` / `gen_ai.output.messages`): `parts[{type:
  text|reasoning|tool_call|tool_call_response, content|id|name|arguments|response}]`.
- Gemini / Google ADK: `role` user | model | function, `parts[{text} | {function_call{name,
  args, id}} | {function_response{name, response, id}}]` (camelCase too).
- LangChain: `type` human | ai | system | tool (or a serialised `{"lc": 1, "id": [...,
  "AIMessage"], "kwargs": {...}}`, or messages_to_dict's `{"type", "data": {...}}`),
  `tool_calls[{name, args, id}]` or
  `additional_kwargs.tool_calls` (OpenAI form), `tool_call_id`, `status: "error"`.
- OpenAI Responses API items: `{type: message, role, content[{type: input_text |
  output_text, text}]}`, `{type: function_call, call_id, name, arguments}`, `{type:
  function_call_output, call_id, output}`, `{type: reasoning}`.

Tool arguments are a JSON object, or JSON text of one (parsed under the record guards: a
malformed or too deep text is an AdapterError naming where it is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from tracerl.data.formats import AdapterError
from tracerl.data.ingest.limits import Limits, RecordRejected, load_record
from tracerl.data.schema import canonical_json

DEFAULT_MAX_DEPTH = Limits().max_depth

ROLES = {
    "assistant": "assistant", "model": "assistant", "ai": "assistant", "agent": "assistant",
    "aimessage": "assistant", "aimessagechunk": "assistant", "bot": "assistant",
    "user": "user", "human": "user", "humanmessage": "user", "humanmessagechunk": "user",
    "system": "system", "developer": "system", "systemmessage": "system",
    "tool": "tool", "function": "tool", "ipython": "tool", "toolmessage": "tool",
    "functionmessage": "tool", "tool_result": "tool",
}


@dataclass(slots=True)
class ToolCall:
    call_id: str | None
    name: Any
    arguments: Any
    pointer: str


@dataclass(slots=True)
class ToolResult:
    call_id: str | None
    content: Any
    error: str | None
    pointer: str
    name: str | None = None  # matched by name when there is no id (legacy `function`)


@dataclass(slots=True)
class Message:
    role: str  # assistant | user | system | tool | tools (a tool definition, not a turn)
    text: str | None
    pointer: str
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    reasoning: str | None = None
    extra: dict | None = None  # the message's fields no shape above names


_LIMITS: dict[int, Limits] = {}
_LONG_DIGITS = re.compile(r"\d{19,}")


def json_in_text(text: str, max_depth: int) -> Any:
    """JSON held in a string (tool arguments, a tool result) under the record guards:
    integers exact, RecordRejected for text that is not JSON or nests deeper than
    max_depth (counted from the string's own value)."""
    if (len(text) <= max_depth or text.count("{") + text.count("[") <= max_depth) and (
            len(text) < 19 or not _LONG_DIGITS.search(text)):  # (each needs that many chars)
        try:  # the common case, without the guards' extra passes
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # the guarded path below says why
    limits = _LIMITS.get(max_depth)
    if limits is None:
        limits = _LIMITS[max_depth] = Limits(max_depth=max_depth)
    return load_record(text.encode("utf-8", "surrogatepass"), limits)


def arguments(raw: Any, where: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Tool-call arguments as a JSON value: an object (or any JSON value) as is, JSON text
    parsed; blank text is no arguments."""
    if not isinstance(raw, str):
        return raw
    try:
        return _arguments_text(raw, max_depth)
    except RecordRejected as exc:
        raise AdapterError(where, f"arguments are {exc.reason}: {raw[:60]!r}") from None


def _arguments_text(raw: str, max_depth: int) -> Any:
    """Arguments given as text: parsed (RecordRejected when not JSON), blank is None."""
    if not raw or raw.isspace():  # (as `not raw.strip()`, without a copy)
        return None
    return json_in_text(raw, max_depth)


def _role(value: Any) -> str | None:
    return ROLES.get(value.lower()) if isinstance(value, str) else None


def text_of(content: Any) -> str | None:
    """Text of a content value: a string as is; the text parts of a list joined; None for
    no text (null, or parts that carry none)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for p in content:
            if isinstance(p, str):
                texts.append(p)
            elif isinstance(p, dict):
                kind = p.get("type")
                if kind in _TEXT_PARTS or (kind is None and "text" in p):
                    value = p.get("text", p.get("content"))
                    if isinstance(value, str):
                        texts.append(value)
        return "".join(texts) if texts else None
    if isinstance(content, dict):
        value = content.get("text", content.get("content"))
        if isinstance(value, str):
            return value
    return canonical_json(content)


_TEXT_PARTS = frozenset({"text", "input_text", "output_text", "summary_text"})
_REASONING_PARTS = frozenset({"thinking", "reasoning", "redacted_thinking"})
_CALL_PARTS = frozenset({"tool_use", "tool_call", "function_call", "server_tool_use",
                         "mcp_tool_use"})
_RESULT_PARTS = frozenset({"tool_result", "tool_call_response", "function_call_output",
                           "mcp_tool_result"})


def result_content(value: Any) -> Any:
    """A tool result's content as stored: text blocks joined into their text, any other
    value as is (a string holding JSON is parsed later, by the episode builder)."""
    if isinstance(value, list) and value and all(
            isinstance(p, dict) and p.get("type") in _TEXT_PARTS for p in value):
        return "".join(p.get("text") or "" for p in value if isinstance(p.get("text"), str))
    return value


def _call_from_part(p: dict, where: str, max_depth: int) -> ToolCall:
    inner = p.get("function_call") or p.get("functionCall")
    if isinstance(inner, dict):  # Gemini
        return ToolCall(_str_or_none(inner.get("id")), inner.get("name"),
                        arguments(inner.get("args", inner.get("arguments")),
                                  f"{where}/function_call/args", max_depth), where)
    call_id = p.get("id") if "id" in p else p.get("call_id")
    if p.get("type") == "function_call" and p.get("call_id") is not None:
        call_id = p.get("call_id")  # Responses API: `id` is the item's, call_id the call's
    raw = p.get("input", p.get("arguments", p.get("args")))
    key = "input" if "input" in p else "arguments" if "arguments" in p else "args"
    return ToolCall(call_id, p.get("name"), arguments(raw, f"{where}/{key}", max_depth), where)


def _result_from_part(p: dict, where: str) -> ToolResult:
    inner = p.get("function_response") or p.get("functionResponse")
    if isinstance(inner, dict):  # Gemini
        return ToolResult(_str_or_none(inner.get("id")), inner.get("response"), None, where,
                          inner.get("name") if isinstance(inner.get("name"), str) else None)
    kind = p.get("type")
    if kind == "tool_result" or kind == "mcp_tool_result":
        call_id = p.get("tool_use_id")
        content = p.get("content")
    elif kind == "function_call_output":
        call_id = p.get("call_id")
        content = p.get("output")
    elif isinstance(kind, str) and kind.endswith("_tool_result") and "tool_use_id" in p:
        # Anthropic server tools (web_search_tool_result, web_fetch_tool_result,
        # code_execution_tool_result, ...): the call's id is tool_use_id; a failed call's
        # content is `{type: <...>_error, error_code}`
        call_id = p.get("tool_use_id")
        content = p.get("content")
        failed = content if isinstance(content, dict) else None
        if failed is not None and str(failed.get("type", "")).endswith("_error"):
            return ToolResult(call_id, content, str(failed.get("error_code") or "error"),
                              where)
    else:  # OTel tool_call_response
        call_id = p.get("id")
        content = p.get("response", p.get("result", p.get("content")))
    content = result_content(content)
    error = None
    if p.get("is_error") is True:
        error = text_of(content) or "error"
    return ToolResult(call_id, content, error, where)


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def parts(message_role: str, items: list, where: str, max_depth: int) -> Message:
    """A message whose content is a list of typed parts (any dialect above)."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for k, p in enumerate(items):
        at = f"{where}/{k}"
        if isinstance(p, str):
            texts.append(p)
            continue
        if not isinstance(p, dict):
            raise AdapterError(at, f"a content part is an object or a string, got "
                                   f"{type(p).__name__}")
        kind = p.get("type")
        if kind in _TEXT_PARTS or (kind is None and isinstance(p.get("text"), str)):
            value = p.get("text", p.get("content"))
            if isinstance(value, str):
                texts.append(value)
        elif kind in _REASONING_PARTS or p.get("thought") is True:
            value = p.get("thinking", p.get("content", p.get("text")))
            if isinstance(value, list):
                value = text_of(value)
            if isinstance(value, str):
                reasoning.append(value)
        elif kind in _CALL_PARTS or "function_call" in p or "functionCall" in p:
            calls.append(_call_from_part(p, at, max_depth))
        elif kind in _RESULT_PARTS or "function_response" in p or "functionResponse" in p \
                or (isinstance(kind, str) and kind.endswith("_tool_result")):
            results.append(_result_from_part(p, at))
    return Message(message_role, "".join(texts) if texts else None, where, calls, results,
                   "".join(reasoning) if reasoning else None)


# --- one message ------------------------------------------------------------------------

# what an assistant message's fields become; the others are kept in its row's `extra`
_MAPPED = frozenset({"role", "content", "parts", "tool_calls", "function_call", "lc",
                     "kwargs"})


_PLAIN_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})


def plain_message(m: dict, where: str, max_depth: int
                  ) -> tuple[str, str | None, Any] | None:
    """The common OpenAI chat message (string or null content, `function` tool calls),
    read without the general path's dialect checks and without building a Message:
    ("assistant", content, [(call id, tool name, arguments, pointer), ...]),
    ("tool", content, its tool_call_id), or ("user" | "system", content, None); None for
    anything else (the general path reads it)."""
    if not m.keys() <= _PLAIN_KEYS:
        return None
    role = m.get("role")
    content = m.get("content")
    if content is not None and type(content) is not str:
        return None
    if role == "assistant":
        raw = m.get("tool_calls")
        if not raw:
            return "assistant", content, []
        if type(raw) is not list:
            return None
        calls = []
        for k, c in enumerate(raw):
            function = c.get("function") if type(c) is dict else None
            if type(function) is not dict:
                return None  # (the general path raises what a call before it raised here)
            at = f"{where}/tool_calls/{k}"
            value = function.get("arguments")
            if type(value) is str:
                try:
                    value = _arguments_text(value, max_depth)
                except RecordRejected as exc:
                    raise AdapterError(f"{at}/function/arguments", f"arguments are "
                                       f"{exc.reason}: {value[:60]!r}") from None
            calls.append((c.get("id"), function.get("name"), value, at))
        return "assistant", content, calls
    if role == "tool":
        if "tool_call_id" not in m:
            return None
        return "tool", content, m["tool_call_id"]
    if (role == "user" or role == "system") and "tool_calls" not in m:
        return role, content, None
    return None


def _plain(m: dict, where: str, max_depth: int) -> Message | None:
    """plain_message as a Message."""
    plain = plain_message(m, where, max_depth)
    if plain is None:
        return None
    role, content, more = plain
    if role == "assistant":
        return Message("assistant", content, where, [ToolCall(*c) for c in more])
    if role == "tool":
        return Message("tool", None, where, [], [ToolResult(more, content, None, where)])
    return Message(role, content, where)


def normalize(m: Any, where: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Message:
    """One message of any dialect above; AdapterError naming where it is when it is not
    a message."""
    if type(m) is dict:
        plain = _plain(m, where, max_depth)
        if plain is not None:
            return plain
    if not isinstance(m, dict):
        raise AdapterError(where, f"a message is an object, got {type(m).__name__}")
    if isinstance(m.get("data"), dict) and "content" not in m and "role" not in m \
            and isinstance(m.get("type"), str) and "content" in m["data"]:
        # LangChain's messages_to_dict: {"type": "human" | "ai" | ..., "data": {...}}
        return normalize({**m["data"], "type": m["data"].get("type", m["type"])}, where,
                         max_depth)
    if m.get("lc") == 1 and isinstance(m.get("kwargs"), dict):  # serialised LangChain
        ident = m.get("id")
        kind = ident[-1] if isinstance(ident, list) and ident else None
        return normalize({**m["kwargs"], "type": m["kwargs"].get("type", kind)}, where,
                         max_depth)
    kind = m.get("type")
    if kind == "function_call" and "role" not in m:  # Responses API items
        return Message("assistant", None, where, [_call_from_part(m, where, max_depth)])
    if kind == "function_call_output" and "role" not in m:
        return Message("tool", None, where, [], [_result_from_part(m, where)])
    if kind == "reasoning" and "role" not in m:
        return Message("assistant", None, where, reasoning=text_of(m.get("summary")))
    role_value = m.get("role", kind if kind != "message" else None)
    role = _role(role_value)
    if role is None:
        raise AdapterError(f"{where}/role", f"unknown role {role_value!r} (expected system, "
                                            "user, assistant, tool or function)")
    content = m.get("content", m.get("parts"))
    content_key = "content" if "content" in m else "parts"
    if isinstance(content, list):
        msg = parts(role, content, f"{where}/{content_key}", max_depth)
        msg.pointer = where
    else:
        msg = Message(role, text_of(content), where)
    for k, c in enumerate(_list(m.get("tool_calls"), f"{where}/tool_calls")):
        msg.calls.append(_openai_call(c, f"{where}/tool_calls/{k}", max_depth))
    if not m.get("tool_calls"):
        extra_calls = (m.get("additional_kwargs") or {}).get("tool_calls") \
            if isinstance(m.get("additional_kwargs"), dict) else None
        for k, c in enumerate(_list(extra_calls, f"{where}/additional_kwargs/tool_calls")):
            msg.calls.append(_openai_call(c, f"{where}/additional_kwargs/tool_calls/{k}",
                                          max_depth))
    legacy = m.get("function_call")
    if isinstance(legacy, dict):
        # No id in the legacy form: the `function` message answers it by name.
        msg.calls.append(ToolCall(f"{where}#function_call", legacy.get("name"),
                                  arguments(legacy.get("arguments"),
                                            f"{where}/function_call/arguments", max_depth),
                                  f"{where}/function_call"))
    if role == "tool" and not msg.results:
        call_id = m.get("tool_call_id", m.get("call_id"))
        if call_id is None and isinstance(content, dict) and content.get("type") == "function" \
                and isinstance(content.get("function"), dict):
            # a tool definition logged as a tool message (Langfuse's LangChain handler)
            return Message("tools", None, where, extra={"definition": content})
        if call_id is None and role_value != "function" and isinstance(m.get("id"), str):
            call_id = m.get("id")  # tau2-style tool messages carry the call's id as `id`
        error = None
        if m.get("is_error") is True or m.get("error") is True or m.get("status") == "error":
            error = text_of(msg.text) or "error"
        name = m.get("name") if isinstance(m.get("name"), str) and call_id is None else None
        content = content if isinstance(content, list) else m.get("content")
        msg.results.append(ToolResult(call_id, result_content(content), error, where, name))
        msg.text = None
    if role == "assistant":
        extra = {k: v for k, v in m.items() if k not in _MAPPED and v is not None
                 and not (k == "type" and "role" not in m)}
        kwargs = extra.get("additional_kwargs")
        if isinstance(kwargs, dict) and "tool_calls" in kwargs:
            kwargs = {k: v for k, v in kwargs.items() if k != "tool_calls"}
            if kwargs:
                extra["additional_kwargs"] = kwargs
            else:
                del extra["additional_kwargs"]
        msg.extra = extra or None
    return msg


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AdapterError(where, f"expected a list, got {type(value).__name__}")
    return value


def _openai_call(c: Any, where: str, max_depth: int) -> ToolCall:
    if not isinstance(c, dict):
        raise AdapterError(where, f"a tool call is an object, got {type(c).__name__}")
    function = c.get("function")
    if isinstance(function, dict):
        return ToolCall(c.get("id"), function.get("name"),
                        arguments(function.get("arguments"), f"{where}/function/arguments",
                                  max_depth), where)
    if "function" in c and function is not None:
        raise AdapterError(f"{where}/function", "a tool call's `function` is an object")
    if "name" not in c:
        raise AdapterError(f"{where}/function", "a tool call needs a `function` object")
    key = "arguments" if "arguments" in c else "args" if "args" in c else "input"
    return ToolCall(c.get("id"), c.get("name"), arguments(c.get(key), f"{where}/{key}",
                                                          max_depth), where)


# --- model-call payloads ----------------------------------------------------------------
# What an observability tool records as a model call's input and output, in whichever
# provider's or framework's shape: the messages in it.

def parse_json_text(value: Any, depth: int = 3) -> Any:
    """A value that may be JSON text (or JSON text of JSON text, as some exporters write):
    the parsed value; anything else as is."""
    import orjson

    for _ in range(depth):
        if not isinstance(value, str) or value[:1] not in ("{", "[", '"'):
            return value
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def input_messages(value: Any) -> list | None:
    """The messages of a model call's input: a list of messages (chat, Anthropic,
    Responses API items, Gemini contents, LangChain), `{messages}`, `{contents}` (Gemini,
    with `config.system_instruction`), `{input, instructions}` (Responses API), one
    message, or a prompt string (one user message)."""
    value = parse_json_text(value)
    if value is None:
        return None
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list):
        if value and all(isinstance(m, str) for m in value):
            return [{"role": "user", "content": "".join(value)}]
        return [m for m in value if isinstance(m, dict)]
    if not isinstance(value, dict):
        return None
    system = []
    for key in ("system", "instructions", "system_instruction"):
        if isinstance(value.get(key), str | list):
            system.append({"role": "system", "content": value[key]})
    config = value.get("config")
    if isinstance(config, dict) and isinstance(config.get("system_instruction"), str | list):
        system.append({"role": "system", "content": config["system_instruction"]})
    for key in ("messages", "contents", "input"):
        inner = value.get(key)
        if isinstance(inner, list):
            return system + [m for m in inner if isinstance(m, dict)]
        if isinstance(inner, str) and key == "input":
            return system + [{"role": "user", "content": inner}]
    if "role" in value or "parts" in value or value.get("lc") == 1:
        return system + [value]
    if "prompt" in value and isinstance(value["prompt"], str):
        return system + [{"role": "user", "content": value["prompt"]}]
    return system or None


def output_messages(value: Any) -> list | None:
    """The messages of a model call's output: a chat completion (`choices[0].message`),
    a Responses API object (`output` items), a Gemini response (`content` / `candidates`),
    an Anthropic or chat message, a list of them, or text (one assistant message)."""
    value = parse_json_text(value)
    if value is None:
        return None
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    if isinstance(value, list):
        return [m if "role" in m or "type" in m or "parts" in m
                else {"role": "assistant", **m} for m in value if isinstance(m, dict)]
    if not isinstance(value, dict):
        return None
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message", choices[0].get("delta"))
        if isinstance(message, dict):
            return [{"role": "assistant", **message}]
        if isinstance(choices[0].get("text"), str):
            return [{"role": "assistant", "content": choices[0]["text"]}]
    if isinstance(value.get("output"), list):  # Responses API
        return [m for m in value["output"] if isinstance(m, dict)]
    candidates = value.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        value = candidates[0]
    if isinstance(value.get("content"), dict) and "parts" in value["content"]:
        return [{**value["content"], "role": "assistant"}]
    if isinstance(value.get("messages"), list):
        msgs = [m for m in value["messages"] if isinstance(m, dict)]
        return msgs[-1:] if msgs else None
    if "role" in value or "content" in value or "tool_calls" in value or "parts" in value \
            or value.get("lc") == 1:
        return [value if "role" in value or value.get("lc") == 1
                else {"role": "assistant", **value}]
    if isinstance(value.get("text"), str):
        return [{"role": "assistant", "content": value["text"]}]
    return None
