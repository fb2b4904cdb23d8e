"""What one span says: its operation, and the messages of a model call in any attribute
generation or producer dialect (`_io`, `_producer_io`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec
import orjson

from tracerl.data.formats import AdapterError
from tracerl.data.formats.common.messages import (
    Message,
    ToolCall,
    ToolResult,
    arguments,
    normalize,
    result_content,
    text_of,
)
from tracerl.data.formats.otel_genai.spans import (
    _INFERENCE_OPS,
    _MESSAGE_EVENTS,
    _NOT_INFERENCE_OPS,
    Event,
    Span,
    _json,
)

# --- reading a span ---------------------------------------------------------------------

def _op(span: Span) -> str | None:
    op = span.attrs.get("gen_ai.operation.name")
    if op == "framework" and span.attrs.get("spring.ai.kind") == "tool_call":
        return "execute_tool"  # Spring AI's tool span (`tool_call <name>`)
    if isinstance(op, str):
        return op
    name = span.name.split(" ", 1)[0]
    if name in ("execute_tool", "invoke_agent", "chat", "text_completion", "generate_content"):
        return name
    if name == "call_llm":  # Google ADK's model call
        return "chat"
    vercel = span.attrs.get("ai.operationId")
    if isinstance(vercel, str) and vercel.startswith("ai."):
        return _vercel_op(vercel)
    braintrust = span.attrs.get("braintrust.span_attributes")
    if isinstance(braintrust, str) and braintrust[:1] == "{":  # {"type": llm | tool | ...}
        kind = _json(braintrust)
        kind = kind.get("type") if isinstance(kind, dict) else None
        if kind in ("llm", "tool"):
            return "chat" if kind == "llm" else "execute_tool"
    kind = span.attrs.get("openinference.span.kind") or span.attrs.get("traceloop.span.kind")
    if isinstance(kind, str):
        return {"LLM": "chat", "TOOL": "execute_tool", "AGENT": "invoke_agent",
                "tool": "execute_tool", "agent": "invoke_agent"}.get(kind)
    return None


def _vercel_op(operation: str) -> str:
    """The operation of a Vercel AI SDK span (`ai.operationId`): `ai.toolCall` runs a tool,
    `ai.<fn>.doGenerate` / `.doStream` is one model call, `ai.<fn>` (generateText, ...)
    wraps the steps."""
    if operation == "ai.toolCall":
        return "execute_tool"
    if operation.endswith((".doGenerate", ".doStream")):
        return "chat"
    if operation.endswith((".doEmbed", ".embed", ".embedMany")):
        return "embeddings"
    return "invoke_workflow"


def _has_prefix(attrs: dict, prefixes: tuple[str, ...]) -> bool:
    return any(k.startswith(prefixes) for k in attrs)


_CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.",
                     "llm.output_messages.")
_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt",
                 "gen_ai.completion")


def _is_inference(span: Span, op: str | None) -> bool:
    if op in _INFERENCE_OPS:
        return True
    if op in _NOT_INFERENCE_OPS:
        return False
    attrs = span.attrs
    if any(k in attrs for k in _CONTENT_KEYS) or _has_prefix(attrs, _CONTENT_PREFIXES):
        return True
    if any(e.name in _MESSAGE_EVENTS or e.name in ("gen_ai.choice", "gen_ai.content.prompt",
                                                  "gen_ai.content.completion",
                                                  "gen_ai.client.inference.operation.details")
           for e in span.events):
        return True
    return "gen_ai.request.model" in attrs and any(
        k.startswith("gen_ai.usage.") for k in attrs)


def _is_tool(span: Span, op: str | None) -> bool:
    # (Latitude's telemetry names its tool spans' operation `tool`)
    return op == "execute_tool" or (op in (None, "tool") and isinstance(
        span.attrs.get("gen_ai.tool.name"), str))


def _indexed(attrs: dict, prefix: str) -> list[dict]:
    """Messages of the indexed generation: `<prefix>N.<field>` (and OpenInference's
    `<prefix>N.message.<field>`) as OpenAI-shaped message dicts, in N order."""
    found: dict[int, dict] = defaultdict(dict)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix):]
        index, _, path = rest.partition(".")
        if not index.isdecimal() or not path:
            continue
        if path.startswith("message."):
            path = path[len("message."):]
        found[int(index)][path] = value
    messages = []
    for i in sorted(found):
        fields = found[i]
        m: dict = {"role": fields.get("role", "assistant" if "completion" in prefix
                                                  or "output" in prefix else "user")}
        content = fields.get("content")
        parsed = _json(content) if isinstance(content, str) and content[:1] == "[" else content
        if isinstance(parsed, list) and (all(isinstance(p, dict) and "type" in p
                                             for p in parsed) or _bedrock_blocks(parsed)):
            content = parsed  # (OpenLLMetry's Bedrock Converse: the blocks' JSON)
        texts = [v for k, v in sorted(fields.items()) if k.startswith("contents.")
                 and k.endswith(".message_content.text")]
        if content is None and texts:
            content = "".join(texts)
        m["content"] = content
        calls: dict[int, dict] = defaultdict(dict)
        for k, v in fields.items():
            if k.startswith("tool_calls."):
                j, _, sub = k[len("tool_calls."):].partition(".")
                if j.isdecimal():
                    sub = sub.removeprefix("tool_call.").removeprefix("function.")
                    calls[int(j)][sub] = v
        if calls:
            m["tool_calls"] = [{"id": c.get("id"), "function": {
                "name": c.get("name"), "arguments": c.get("arguments")}}
                for _, c in sorted(calls.items())]
        legacy = {k[len("function_call."):]: v for k, v in fields.items()
                  if k.startswith("function_call.")}
        if legacy and not calls:
            m["tool_calls"] = [{"id": None, "function": {"name": legacy.get("name"),
                                                         "arguments": legacy.get("arguments")}}]
        if "tool_call_id" in fields:
            m["tool_call_id"] = fields["tool_call_id"]
        if m["role"] == "tool" and "tool_call_id" not in m:
            m["tool_call_id"] = None
        if "finish_reason" in fields:
            m["finish_reason"] = fields["finish_reason"]
        messages.append(m)
    return messages


def _event_message(e: Event) -> Any:
    """The message an event carries: its body, its `gen_ai.event.content` JSON, or its
    attributes."""
    body = e.body
    if body is None and "gen_ai.event.content" in e.attrs:
        body = _json(e.attrs["gen_ai.event.content"])
    if body is None:
        body = {k: _json(v) for k, v in e.attrs.items()
                if not k.startswith(("gen_ai.system", "gen_ai.provider", "event."))}
    if isinstance(body, str):
        body = {"content": body}
    return body


def _plain_texts(value: Any, role: str) -> list | None:
    """`gen_ai.prompt` / `gen_ai.completion` as plain text, or a list of texts (Spring AI's
    content events and filters): one message of the role each."""
    if isinstance(value, str) and value and _json(value) is value:  # (not JSON)
        return [{"role": role, "content": value}]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [{"role": role, "content": v} for v in value]
    return None


def _messages_value(value: Any) -> list | None:
    value = _json(value)
    if isinstance(value, dict):
        value = value.get("messages", [value])
    return value if isinstance(value, list) else None


class _TextMessages:
    """A model call's input messages as the JSON text of an array, its top-level elements
    delimited (msgspec, without building them) but not parsed: a later call needs only the
    messages after the input's last assistant message, parsed from the end; the first,
    all of them (`full`). Made only for text that parses the same way whole or element by
    element (no number beyond a float, no deep nesting): else the text is parsed whole.
    A later call's input re-sends the earlier one's messages and adds some: given the
    earlier one (`prior`), only the text after their shared prefix is delimited."""

    __slots__ = ("before", "brackets", "elements", "text")

    def __init__(self, text: str, elements: list, brackets: int) -> None:
        self.text = text
        self.elements = elements
        self.brackets = brackets  # of the text: its `[` and `{`
        self.before: list = []  # the system instructions, when the span has them

    def __bool__(self) -> bool:
        return bool(self.before or self.elements)

    def full(self) -> list:
        try:
            return [*self.before, *orjson.loads(self.text)]
        except orjson.JSONDecodeError:  # (not met: `of` rules such text out)
            return []

    def after_last_assistant(self) -> list | None:
        """The messages (objects) after the last assistant message; None when there is
        no assistant message."""
        after = []
        for raw in reversed(self.elements):
            m = orjson.loads(memoryview(raw))
            if isinstance(m, dict):
                if _role_of(m) in _ASSISTANT_ROLES:
                    after.reverse()
                    return after
                after.append(m)
        return None  # (`before` is a system message)

    @classmethod
    def of(cls, text: str, prior: _TextMessages | None = None) -> _TextMessages | None:
        if prior is not None:
            grown = prior._grown(text)
            if grown is not None:
                return grown
        if len(text) <= _WHOLE_BYTES:
            return None  # parsed whole, sooner than delimited and parsed from the end
        brackets = text.count("[") + text.count("{")
        if brackets > _MAX_BRACKETS:
            return None
        elements = _delimited(text)
        return None if elements is None else cls(text, elements, brackets)

    def _grown(self, text: str) -> _TextMessages | None:
        """What `of(text)` gives, from only the part of `text` after this input's text
        (without its closing bracket) when `text` starts with it and goes on with `,` and
        more elements, or ends there; None otherwise (`of` then reads `text` whole). Each
        test of `of` holds for the whole text when it holds for both parts: the shared
        part passed them, and no number runs across the `,` between them."""
        old = self.text
        end = old.rfind("]")  # the closing bracket (only JSON whitespace after it)
        if end <= 0 or len(text) <= end or not text.startswith(old[:end]):
            return None
        rest = text[end:].lstrip(_JSON_SPACE)
        if rest[:1] == "]":
            if rest[1:].strip(_JSON_SPACE):
                return None
            return _TextMessages(text, self.elements, self.brackets)
        if rest[:1] != ",":
            return None
        more = "[" + rest[1:]
        brackets = self.brackets + more.count("[") + more.count("{") - 1
        if brackets > _MAX_BRACKETS:
            return None
        elements = _delimited(more)
        if not elements:  # `, ]` is not JSON: `of` says so
            return None
        return _TextMessages(text, [*self.elements, *elements], brackets)


def _delimited(text: str) -> list | None:
    """The top-level elements of a JSON array's text (msgspec.Raw), when it parses the same
    way whole or element by element; else None."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return None  # a lone surrogate: orjson refuses it, the text stays text
    mask = data.translate(_NUMBER_MASK)
    if b"deddd" in mask or b"de+ddd" in mask or _LONG_RUN in mask:
        return None  # maybe a number beyond a float: orjson refuses, msgspec delimits
    try:
        return _ELEMENTS.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None  # not JSON (orjson says why, or keeps it as text)


# an input text this short is parsed whole (orjson builds its few messages faster than
# msgspec delimits them and they are parsed from the end: 2.1 vs 10.7 us at 580 bytes, 32
# vs 42 at 7.5 kB)
_WHOLE_BYTES = 8192
_MAX_BRACKETS = 500  # more `[` / `{` in an input's text: maybe nested deeper than a parser
_JSON_SPACE = " \t\r\n"
_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])
# digits as d, e/E as e, + as itself, anything else as a dot: a positive exponent of three
# digits or more, or 200 digits in a row, may be a number beyond a float
_NUMBER_MASK = bytes(ord("d") if chr(b).isdigit() and b < 128 else ord("e") if b in b"eE"
                     else ord("+") if b == ord("+") else ord(".") for b in range(256))
_LONG_RUN = b"d" * 200


def _io(span: Span, logs: list[Event], defer: bool = False,
        prior: _TextMessages | None = None
        ) -> tuple[list | _TextMessages | None, list | None]:
    """(input messages, output messages) of a model call, raw dicts, any generation;
    None where nothing was captured. defer: input messages held as JSON text come as
    _TextMessages (parsed when and where needed; prior: an earlier call's, whose text
    this one's may repeat)."""
    attrs = span.attrs
    raw = attrs.get("gen_ai.input.messages")
    if not logs and not span.events:
        common = _common_io(attrs, raw, defer, prior)
        if common is not None:
            return common
    inputs = _TextMessages.of(raw, prior) if defer and type(raw) is str and raw[:1] == "[" \
        else None
    if inputs is not None and not inputs.elements:
        inputs = []
    elif inputs is None:
        inputs = _messages_value(raw)
    outputs = _messages_value(attrs.get("gen_ai.output.messages"))
    events = [*span.events, *logs] if logs else span.events  # (only read)
    raw_system = attrs.get("gen_ai.system_instructions",
                           attrs.get("gen_ai.system.instructions"))  # (Latitude's name)
    for e in events:
        if e.name == "gen_ai.client.inference.operation.details":
            inputs = inputs or _messages_value(e.attrs.get("gen_ai.input.messages"))
            outputs = outputs or _messages_value(e.attrs.get("gen_ai.output.messages"))
            if raw_system is None:
                raw_system = e.attrs.get("gen_ai.system_instructions")
    if outputs and all(isinstance(m, dict) and m.get("parts") == [] and not m.get("content")
                       for m in outputs):
        # LiteLLM writes an empty output message, the call only in the older indexed
        # `gen_ai.completion.0.function_call.*` beside it
        outputs = _indexed(attrs, "gen_ai.completion.") or outputs
    if inputs is None and outputs is None:
        inputs = _indexed(attrs, "gen_ai.prompt.") or _indexed(attrs, "llm.input_messages.") \
            or None
        outputs = _indexed(attrs, "gen_ai.completion.") \
            or _indexed(attrs, "llm.output_messages.") or None
    if inputs is None and outputs is None:
        for key, holder in (("gen_ai.prompt", "in"), ("gen_ai.completion", "out")):
            for e in [span, *events]:
                source = e.attrs if isinstance(e, Event | Span) else {}
                value = _plain_texts(source.get(key), "user" if holder == "in" else
                                     "assistant") or _messages_value(source.get(key))
                if value is not None:
                    if holder == "in":
                        inputs = inputs or value
                    else:
                        outputs = outputs or value
        per_message = [e for e in events if e.name in _MESSAGE_EVENTS]
        choices = [e for e in events if e.name == "gen_ai.choice"]
        if per_message:
            inputs = [{"role": _MESSAGE_EVENTS[e.name], **_as_dict(_event_message(e))}
                      for e in sorted(per_message, key=lambda e: e.time)]
        if choices:
            bodies = [_as_dict(_event_message(e)) for e in choices]
            bodies = [b for b in bodies if b.get("index", 0) in (0, "0")] or bodies[:1]
            body = bodies[0]
            message = body.get("message")
            if isinstance(message, list | str):  # Strands: the content (Bedrock blocks)
                message = {"content": message, **{k: v for k, v in body.items()
                                                  if k == "finish_reason"}}
            elif not isinstance(message, dict):
                message = body
            outputs = [{"role": "assistant", **{k: v for k, v in message.items()
                                                if k != "role"}}]
    if inputs is None and outputs is None:
        inputs, outputs = _producer_io(attrs)
    system = _json(raw_system)
    if system is not None and inputs is not None:
        instructions = {"role": "system", "content": system if isinstance(system, str | list)
                        else text_of(system)}
        if isinstance(inputs, _TextMessages):
            inputs.before = [instructions]
        else:
            inputs = [instructions, *inputs]
    return inputs, outputs


_SYSTEM_KEYS = ("gen_ai.system_instructions", "gen_ai.system.instructions")


def _common_io(attrs: dict, raw: Any, defer: bool, prior: _TextMessages | None
               ) -> tuple[list | _TextMessages, list] | None:
    """What `_io` gives for the common span of the latest generation, read without its
    dialect checks: input and output messages as JSON arrays' text, no events, no system
    instructions, an output message that is not LiteLLM's empty one; None for any other
    span (`_io` reads it)."""
    out = attrs.get("gen_ai.output.messages")
    if type(raw) is not str or type(out) is not str or raw[:1] != "[" or out[:1] != "[" \
            or _SYSTEM_KEYS[0] in attrs or _SYSTEM_KEYS[1] in attrs:
        return None
    try:
        outputs = orjson.loads(out)
    except orjson.JSONDecodeError:
        return None
    if not outputs or not all(type(m) is dict and m.get("parts") != [] for m in outputs):
        return None  # (empty, or maybe LiteLLM's empty message: `_io` says)
    inputs = _TextMessages.of(raw, prior) if defer else None
    if inputs is None:
        try:
            inputs = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if type(inputs) is not list:
            return None
    elif not inputs.elements:
        inputs = []
    return inputs, outputs


def _producer_io(attrs: dict) -> tuple[list | None, list | None]:
    """A model call's messages in its producer's own attributes (no gen_ai ones): Google
    ADK's `gcp.vertex.agent.llm_request` (Gemini `contents`, `config.system_instruction`)
    / `.llm_response` (`content`); the Vercel AI SDK's `ai.prompt.messages` and
    `ai.response.text` / `.toolCalls` / `.reasoning` (`ai.result.*` before v5)."""
    if "gcp.vertex.agent.llm_request" in attrs or "gcp.vertex.agent.llm_response" in attrs:
        request = _json(attrs.get("gcp.vertex.agent.llm_request"))
        request = request if isinstance(request, dict) else {}
        inputs = request.get("contents") if isinstance(request.get("contents"), list) else None
        config = request.get("config") if isinstance(request.get("config"), dict) else {}
        system = config.get("system_instruction", config.get("systemInstruction"))
        if inputs is not None and isinstance(system, str) and system:
            inputs = [{"role": "system", "content": system}, *inputs]
        elif inputs is not None and isinstance(system, dict) and "parts" in system:
            inputs = [{**system, "role": "system"}, *inputs]
        response = _json(attrs.get("gcp.vertex.agent.llm_response"))
        content = response.get("content") if isinstance(response, dict) else None
        outputs = [{"role": "model", **content}] if isinstance(content, dict) else None
        return inputs, outputs
    if "braintrust.input_json" in attrs or "braintrust.output_json" in attrs:
        # Braintrust's OTel spans: the logged input and output (chat messages)
        inputs = _messages_value(attrs.get("braintrust.input_json"))
        out = _json(attrs.get("braintrust.output_json"))
        if isinstance(out, str):
            out = [{"role": "assistant", "content": out}]
        elif isinstance(out, dict):
            out = [out] if "role" in out or "content" in out else _messages_value(out)
        return inputs, out if isinstance(out, list) else None
    if not any(k.startswith(("ai.prompt", "ai.response.", "ai.result.")) for k in attrs):
        return None, None
    messages = _json(attrs.get("ai.prompt.messages"))
    inputs = [_vercel_message(m) for m in messages if isinstance(m, dict)] \
        if isinstance(messages, list) else None
    text = attrs.get("ai.response.text", attrs.get("ai.result.text"))
    if text is None:  # generateObject: the object's JSON is the answer
        text = attrs.get("ai.response.object", attrs.get("ai.result.object"))
    calls = _json(attrs.get("ai.response.toolCalls", attrs.get("ai.result.toolCalls")))
    reasoning = attrs.get("ai.response.reasoning")
    out_parts: list[dict] = []
    if isinstance(reasoning, str) and reasoning:
        out_parts.append({"type": "reasoning", "content": reasoning})
    if isinstance(text, str) and text:
        out_parts.append({"type": "text", "content": text})
    for c in calls if isinstance(calls, list) else ():
        if isinstance(c, dict):
            out_parts.append({"type": "tool_call", "id": c.get("toolCallId"),
                              "name": c.get("toolName"),
                              "arguments": c.get("input", c.get("args"))})
    outputs = None
    if out_parts or isinstance(text, str):
        outputs = [{"role": "assistant", "parts": out_parts}]
        finish = attrs.get("ai.response.finishReason", attrs.get("ai.finishReason"))
        if finish is not None:
            outputs[0]["finish_reason"] = finish
    return inputs, outputs


def _vercel_message(m: dict) -> dict:
    """A Vercel AI SDK prompt message (`content` a string or parts: text, reasoning,
    tool-call{toolCallId, toolName, args | input}, tool-result{toolCallId, result | output})
    as an OTel parts message."""
    content = m.get("content")
    if not isinstance(content, list):
        return {"role": m.get("role"), "content": content}
    parts = []
    for p in content:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind in ("text", "reasoning"):
            parts.append({"type": kind, "content": p.get("text")})
        elif kind == "tool-call":
            parts.append({"type": "tool_call", "id": p.get("toolCallId"),
                          "name": p.get("toolName"),
                          "arguments": p.get("input", p.get("args"))})
        elif kind == "tool-result":
            output = p.get("output", p.get("result"))
            if isinstance(output, dict) and "value" in output and output.get("type") in (
                    "text", "json", "error-text", "error-json", "content"):
                output = output["value"]  # v5: {type, value}
            parts.append({"type": "tool_call_response", "id": p.get("toolCallId"),
                          "response": output})
        else:
            parts.append(p)  # image, file: kept as they are
    return {"role": m.get("role"), "parts": parts}


def _as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {"content": value}


def _normalize_all(messages: list | None, where: str, max_depth: int,
                   lenient: bool = False) -> list[Message]:
    out = []
    for k, m in enumerate(messages or ()):
        if isinstance(m, dict):
            if "role" not in m and "parts" in m:
                m = {**m, "role": "user"}
            elif isinstance(m.get("content"), list | str):
                m = _bedrock_message(m)
            try:
                at = f"{where}/{k}"
                msg = _parts_message(m, at, max_depth)
                out.append(msg if msg is not None else normalize(_otel_message(m), at,
                                                                 max_depth))
            except AdapterError:
                if not lenient:
                    raise
    return out


_BEDROCK_BLOCKS = frozenset({"text", "toolUse", "toolResult", "reasoningContent", "image",
                             "document", "video", "cachePoint", "guardContent", "citationsContent"})


def _bedrock_blocks(content: Any) -> bool:
    return type(content) is list and bool(content) and all(
        type(b) is dict and len(b) == 1 and next(iter(b)) in _BEDROCK_BLOCKS for b in content)


def _bedrock_message(m: dict) -> dict:
    """A message whose content is Amazon Bedrock Converse blocks (Strands Agents' events:
    `{text}`, `{toolUse: {toolUseId, name, input}}`, `{toolResult: {toolUseId, status,
    content: [{text} | {json}]}}`, `{reasoningContent: {reasoningText: {text}}}`) in the
    Anthropic block shape the normalizer reads; any other message as it is."""
    content = m["content"]
    if type(content) is str:  # (OpenLLMetry's Bedrock Converse: the blocks' JSON text)
        content = _json(content) if content[:2] == "[{" else None
    if not _bedrock_blocks(content):
        return m
    blocks = []
    for b in content:
        (kind, v), = b.items()
        if kind == "text" and isinstance(v, str):
            blocks.append({"type": "text", "text": v})
        elif kind == "toolUse" and isinstance(v, dict):
            blocks.append({"type": "tool_use", "id": v.get("toolUseId"), "name": v.get("name"),
                           "input": v.get("input")})
        elif kind == "toolResult" and isinstance(v, dict):
            inner = v.get("content")
            if isinstance(inner, list) and len(inner) == 1 and isinstance(inner[0], dict) \
                    and set(inner[0]) == {"json"}:
                inner = inner[0]["json"]
            elif isinstance(inner, list):
                inner = [{"type": "text", "text": x["text"]} if isinstance(x, dict)
                         and isinstance(x.get("text"), str) else
                         {"type": "text", "text": orjson.dumps(x.get("json", x)).decode()}
                         for x in inner if isinstance(x, dict)]
            blocks.append({"type": "tool_result", "tool_use_id": v.get("toolUseId"),
                           "content": inner, "is_error": v.get("status") == "error"})
        elif kind == "reasoningContent" and isinstance(v, dict):
            text = v.get("reasoningText")
            text = text.get("text") if isinstance(text, dict) else None
            if isinstance(text, str):
                blocks.append({"type": "thinking", "thinking": text})
    return {**m, "content": blocks}


_PARTS_MESSAGE_KEYS = frozenset({"role", "parts", "finish_reason"})
_PARTS_ROLES = frozenset({"user", "system", "assistant", "tool"})
_TEXT_PART_KEYS = frozenset({"type", "content"})
_CALL_PART_KEYS = frozenset({"type", "id", "name", "arguments"})
_RESPONSE_PART_KEYS = frozenset({"type", "id", "response"})


def _parts_message(m: dict, where: str, max_depth: int) -> Message | None:
    """The common message of the latest generation (`{role, parts: [text | tool_call |
    tool_call_response]}`, an assistant's `finish_reason`) read directly: the Message
    normalize(_otel_message(m)) makes of it; None for any other shape (it goes there)."""
    if not m.keys() <= _PARTS_MESSAGE_KEYS:
        return None
    role = m.get("role")
    parts = m.get("parts")
    if role not in _PARTS_ROLES or type(parts) is not list:
        return None
    if len(parts) == 1 and role != "tool":  # the common message: one text part
        p = parts[0]
        if type(p) is dict and p.get("type") == "text" and p.keys() <= _TEXT_PART_KEYS:
            value = p.get("content")
            if type(value) is not str:
                return None
            msg = Message(role, value, where)
            if role == "assistant" and m.get("finish_reason") is not None:
                msg.extra = {"finish_reason": m["finish_reason"]}
            return msg
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    base = f"{where}/content/"
    for k, p in enumerate(parts):
        if type(p) is not dict:
            return None
        kind = p.get("type")
        keys = p.keys()
        if kind == "text" and keys <= _TEXT_PART_KEYS:
            value = p.get("content")
            if type(value) is not str:
                return None
            texts.append(value)
        elif kind == "tool_call" and keys <= _CALL_PART_KEYS:
            at = base + str(k)
            raw = p.get("arguments")
            if isinstance(raw, str):  # (an object is the arguments as they are)
                raw = arguments(raw, f"{at}/arguments", max_depth)
            calls.append(ToolCall(p.get("id"), p.get("name"), raw, at))
        elif kind == "tool_call_response" and keys <= _RESPONSE_PART_KEYS:
            response = p.get("response")
            if type(response) is str and response[:2] == "[{":  # OpenLLMetry's Bedrock:
                blocks = _json(response)  # the result's content blocks as JSON text
                if _bedrock_blocks(blocks):
                    response = _bedrock_result(blocks)
            results.append(ToolResult(p.get("id"), result_content(response), None,
                                      base + str(k)))
        else:
            return None
    if role == "tool" and not results:
        return None
    msg = Message(role, "".join(texts) if texts else None, where, calls, results)
    if role == "assistant" and m.get("finish_reason") is not None:
        msg.extra = {"finish_reason": m["finish_reason"]}
    return msg


def _otel_message(m: dict) -> dict:
    """An OTel message (latest generation: `parts` with `content` text) in the shape the
    normalizer reads (its parts' `content` is their text)."""
    parts = m.get("parts")
    if isinstance(parts, list):
        fixed = []
        for p in parts:
            if isinstance(p, dict) and p.get("type") in ("text", "reasoning") \
                    and "text" not in p:
                p = {**p, "text": p.get("content")} if p.get("type") == "text" else p
            fixed.append(p)
        return {**{k: v for k, v in m.items() if k != "parts"}, "content": fixed}
    return m


def _bedrock_result(value: Any) -> Any:
    """A Bedrock Converse tool result's content (Strands records `[{text} | {json}]`):
    its text, or its one JSON value; anything else as it is."""
    if type(value) is not list or not value or not all(
            type(b) is dict and len(b) == 1 and ("text" in b or "json" in b) for b in value):
        return value
    if len(value) == 1 and "json" in value[0]:
        return value[0]["json"]
    return "".join(b["text"] if isinstance(b.get("text"), str) else
                   orjson.dumps(b.get("json")).decode() for b in value)


def _role_of(m: dict) -> str | None:
    role = m.get("role", m.get("type"))
    return role.lower() if isinstance(role, str) else None


_ASSISTANT_ROLES = frozenset({"assistant", "model", "ai"})
