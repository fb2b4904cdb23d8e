"""OpenTelemetry GenAI spans → native step records, one episode per agent conversation.

Containers (each auto-detected, each also as JSON Lines, one export per line):
- OTLP JSON: `{"resourceSpans": [{resource, scopeSpans: [{scope, spans: [...]}]}]}` (the
  collector's file exporter, OTLP/HTTP JSON; camelCase or proto field names), with
  `resourceLogs` (log-record events) in the same file; typed attribute values
  (`stringValue`, `intValue`, `arrayValue`, `kvlistValue`, ...); nanosecond times;
- JSON Lines of single spans: OTLP-shaped, or the SDK console exporter's (`context:
  {trace_id, span_id}`, `parent_id`, attributes as an object, ISO times);
- Jaeger query-API JSON: `{"data": [{traceID, spans: [...], processes}]}` with `tags` as
  `{key, type, value}`, `references` (CHILD_OF), `logs` (span events) and microsecond
  `startTime` / `duration`.

Attribute generations (all three, and OpenInference's `llm.*` as a fourth shape):
1. indexed: `gen_ai.prompt.N.{role, content, tool_call_id, tool_calls.M.{id, name,
   arguments}}` and `gen_ai.completion.N.{role, content, finish_reason, tool_calls.M.*}`;
2. per-message events: `gen_ai.system.message`, `gen_ai.user.message`,
   `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice` (span events or log
   records; the body, or `gen_ai.event.content`, or the attributes themselves), and the
   older `gen_ai.content.prompt` / `gen_ai.content.completion` events;
3. `gen_ai.input.messages` / `gen_ai.output.messages` (+ `gen_ai.system_instructions`)
   with typed parts (text, reasoning, tool_call, tool_call_response), on the span or on a
   `gen_ai.client.inference.operation.details` event; `execute_tool` spans with
   `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments` / `.result`.

Producers' own attributes, read where no `gen_ai` attribute says the same (the `gen_ai`
ones come first):
- OpenLLMetry / traceloop: a tool span (`traceloop.span.kind = tool`, named `<tool>.tool`)
  is an execute_tool span: its tool `traceloop.entity.name`, its arguments and result
  `traceloop.entity.input` / `.output` (JSON: the `@tool` decorator's `{args, kwargs}`,
  LangChain's `{input_str, inputs}` / `{output}`);
- Logfire / pydantic-ai: the GenAI events as a JSON list in the span attribute `events`
  (objects with `event.name`) are the span's events (generation 2); tool spans `running
  tool: <name>` with `gen_ai.tool.name`, `gen_ai.tool.call.id`, `tool_arguments`,
  `tool_response`;
- Vercel AI SDK (`ai.operationId`): `ai.<fn>.doGenerate` / `.doStream` is a model call
  (`ai.prompt.messages` with text / tool-call / tool-result parts in; `ai.response.text`,
  `.toolCalls`, `.reasoning`, or `ai.result.*` before v5, out), `ai.toolCall` a tool span
  (`ai.toolCall.name`, `.id`, `.args`, `.result`), `ai.<fn>` the run around them;
  generateObject's answer is `ai.response.object` (its JSON text);
- Google ADK: `call_llm` is a model call (`gcp.vertex.agent.llm_request`: Gemini
  `contents` and `config.system_instruction`; `.llm_response`: `content`), `execute_tool
  <name>` reads `gcp.vertex.agent.tool_call_args` / `.tool_response`; an MCP tool's
  `{content: [parts], isError}` result is its text (isError: the tool's error); the
  `execute_tool (merged)` span of parallel calls is not a call; "<not specified>" (ADK's
  placeholder) is no call id, `{"result": "<not specified>"}` no result;
- Strands Agents (legacy conventions): event content as Amazon Bedrock Converse blocks
  (`{text}`, `{toolUse}`, `{toolResult}`, `{reasoningContent}`; also OpenLLMetry's Bedrock
  spans, the blocks' JSON as a message's content), a `gen_ai.choice` whose `message` is
  the answer's blocks; a tool span's arguments / result in its `gen_ai.tool.message` /
  `gen_ai.choice` events;
- Spring AI: `tool_call <name>` spans (`spring.ai.kind` tool_call,
  `spring.ai.tool.definition.name`, `spring.ai.tool.call.arguments` / `.result`);
  `gen_ai.prompt` / `gen_ai.completion` as plain text or a list of texts;
- Latitude: `gen_ai.system.instructions`, tool spans of operation `tool` with
  `gen_ai.tool.result.value` / `.is_error`; Braintrust: `braintrust.span_attributes`
  type llm / tool with `braintrust.input_json` / `.output_json`; Claude Code:
  `claude_code.tool`'s `tool.output` event is its result, a failure of the deeper
  `claude_code.tool.execution` (same call id) its error; LiteLLM: an output message
  with no parts gives way to the indexed `gen_ai.completion.N.function_call.*`.
A turn whose recorded output names no call takes the calls the next call's input
records for it (its last assistant message, the same text), when that input answers
calls (producers that keep only the answer's text).

Conversations. Spans are joined by `gen_ai.conversation.id` (a span without one takes its
nearest ancestor's), else by trace id; a conversation's model calls are split by agent
(the nearest `invoke_agent` ancestor's `gen_ai.agent.name` / `.id`): each agent is its own
episode (episode_id = the conversation, `<conversation>/<agent>` when it has several).
A model-call span is one turn: its output message's text and tool calls (several: parallel
calls). Two instrumentation layers often describe one call (a framework's `call_llm`
around a client library's `chat`): a model-call span with a model-call span inside is not
a turn of its own (the inner one is, or the outer one when only it has the content).
What comes back before the next turn: the tool results (from `execute_tool` spans by call
id, else by tool name, else in order; and from the next call's input, the messages after
its last assistant message), user and system messages (events). The first call's input
is the state's history. Without captured content (OTel's default), a model call is a turn
with no text, and the `execute_tool` spans after it are its calls. A tool span two layers
deep (an MCP client inside the framework's tool span) is one call.
Rewards: `gen_ai.evaluation.result` events (`gen_ai.evaluation.name`,
`gen_ai.evaluation.score.value`) of the episode's spans are the done row's
reward_components; the reward is the score of `ingest.reward_evaluation` (or of the only
evaluation); `ingest.reward_attribute` names an attribute whose (last) numeric value is
the reward instead. Row metadata: behavior_policy = the response (else request) model,
temperature, latency_ms (the span's duration); episode tokens sum the turns' usage.

A record is one conversation (per agent) with at least one model call or tool span; a
trace with no GenAI model call, tool or agent span (HTTP plumbing only) is not one (the
summary counts them). A JSONL line that cannot be read is a record of its own; so is
an episode one of whose spans cannot be read (its output message is not a message).
Records: the lines that cannot be read, the file's notes, then the conversations in
time order (spans that start and end together: turns first, then in file order). Rows:
source_record = the conversation's number in the file, source_pointer = the span's
place (`/data/0/spans/17`, `/resourceSpans/0/scopeSpans/0/spans/5`, `/lines/12/...`).

Work and memory. The file is read once into compact spans (attributes flattened to a
dict, message content kept as its text); the conversations are found from the span tree
(a parent map, one pass per ancestor chain); a model call's messages are parsed and
normalized only when its episode is built, and dropped after: a later call's input only
after its last assistant message. A short input text (under 8 kB) is parsed whole (orjson
is quicker than finding where its messages end); a longer one is delimited (msgspec) and
parsed from its end, and when it repeats the previous call's text and adds messages (the
whole history re-sent), only the added text is delimited. `read_otel(...,
shard=(k, n))` yields the k-th of n contiguous slices of the records (by spans): every
shard reads the whole file but builds only its own episodes, so n processes share one
file's work. `read_lines(path, batch)` reads only some lines of a JSON Lines file (those
that hold every span of their traces and conversations: the runner cuts a large file into
such jobs by otel_links' scan) and gives each record its place among the whole file's, so
that the jobs' records, merged by place and numbered, are those of one read of the file.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError, ReadOptions
from tracerl.data.formats.common.dialogue import DEFAULT_MAX_DEPTH, EpisodeBuilder
from tracerl.data.formats.common.messages import (
    Message,
    ToolCall,
    ToolResult,
    arguments,
    normalize,
    result_content,
    text_of,
)
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

# the attributes whose (string) value joins spans into one conversation, beside the trace
# (otel_links scans files for them to know which files must be read together)
CONVERSATION_KEYS = ("gen_ai.conversation.id",)
_INFERENCE_OPS = frozenset({"chat", "text_completion", "generate_content", "completion",
                            "responses", "generate"})
_NOT_INFERENCE_OPS = frozenset({"execute_tool", "invoke_agent", "create_agent", "embeddings",
                                "execute_task", "invoke_workflow", "retrieval"})
_MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                   "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


@dataclass(slots=True)
class Event:
    name: str
    time: int
    attrs: dict
    body: Any = None


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int  # ns
    end: int
    attrs: dict
    events: list
    pointer: str
    service: str | None = None
    error: str | None = None


# --- containers -------------------------------------------------------------------------

def _any_value(v: Any) -> Any:
    """An OTLP AnyValue (camelCase or proto names) as a plain value."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "string_value"):
        if key in v:
            return v[key]
    for key in ("intValue", "int_value"):
        if key in v:
            try:
                return int(v[key])
            except (TypeError, ValueError):
                return v[key]
    for key in ("doubleValue", "double_value"):
        if key in v:
            return float(v[key]) if v[key] is not None else None
    for key in ("boolValue", "bool_value"):
        if key in v:
            return v[key]
    for key in ("arrayValue", "array_value"):
        if key in v:
            return [_any_value(x) for x in (v[key] or {}).get("values") or []]
    for key in ("kvlistValue", "kvlist_value"):
        if key in v:
            return {kv.get("key"): _any_value(kv.get("value"))
                    for kv in (v[key] or {}).get("values") or [] if isinstance(kv, dict)}
    for key in ("bytesValue", "bytes_value"):
        if key in v:
            return v[key]
    return v if v else None


def _attrs(raw: Any) -> dict:
    """Attributes as a dict: OTLP's list of {key, value}, Jaeger's {key, type, value}, or
    an object already."""
    if isinstance(raw, dict):
        return raw
    out = {}
    for kv in raw or ():
        if type(kv) is dict:
            key = kv.get("key")
            value = kv.get("value")
            if type(key) is str and type(value) is dict and "stringValue" in value:
                out[key] = value["stringValue"]  # the common OTLP value
                continue
        elif not isinstance(kv, dict):
            continue
        key = kv.get("key")
        if not isinstance(key, str):
            continue
        value = kv.get("value")
        if type(value) is dict and "stringValue" in value:  # the common OTLP value
            out[key] = value["stringValue"]
        elif "type" in kv and not isinstance(value, dict):  # Jaeger tag
            kind = kv.get("type")
            if kind in ("int64", "float64") and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = int(value) if kind == "int64" else float(value)
            out[key] = value
        else:
            out[key] = _any_value(value)
    return out


def _ns(value: Any, unit: int = 1) -> int:
    if type(value) is str and value.isdecimal():  # OTLP JSON's nanoseconds (a string)
        return int(value) * unit
    if value is None:
        return 0
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value * unit)
    if isinstance(value, str):
        try:
            return int(value) * unit
        except ValueError:
            try:
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
                           * 1e9)
            except ValueError:
                return 0
    return 0


def _hex(value: Any) -> str | None:
    if type(value) is str and value[:2] != "0x":  # the common id
        return value or None
    if value is None or value == "":
        return None
    text = str(value)
    return text[2:] if text.startswith("0x") else text


def _status_error(status: Any, attrs: dict) -> str | None:
    if isinstance(status, dict):
        code = status.get("code", status.get("status_code"))
        if code in (2, "STATUS_CODE_ERROR", "ERROR"):
            return status.get("message") or status.get("description") or "error"
    if attrs.get("otel.status_code") == "ERROR" or attrs.get("error") is True:
        return attrs.get("otel.status_description") or attrs.get("error.type") or "error"
    if attrs.get("error.type"):
        return str(attrs["error.type"])
    return None


def _dotted(value: dict, prefix: str = "", out: dict | None = None) -> dict:
    """Nested attributes as OpenInference's flat names: `{"llm": {"input_messages": [{
    "message": {...}}]}}` → `llm.input_messages.0.message.role`, ... (a list of scalars
    stays a value)."""
    out = {} if out is None else out
    for key, v in value.items():
        name = f"{prefix}{key}"
        if isinstance(v, dict):
            _dotted(v, f"{name}.", out)
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for k, x in enumerate(v):
                _dotted(x, f"{name}.{k}.", out)
        else:
            out[name] = v
    return out


def _otlp_span(s: dict, pointer: str, service: str | None) -> Span:
    attrs = _attrs(s.get("attributes"))
    if isinstance(attrs.get("openinference"), dict) or "span_kind" in s:
        # Phoenix's span JSON: attributes nested by namespace, the kind beside them
        attrs = _dotted(attrs)
        if isinstance(s.get("span_kind"), str):
            attrs.setdefault("openinference.span.kind", s["span_kind"])
    raw_events = s.get("events")
    events = [Event(e.get("name") or "", _ns(e.get("timeUnixNano", e.get("time_unix_nano",
                                                                         e.get("timestamp")))),
                    _attrs(e.get("attributes")))
              for e in raw_events if isinstance(e, dict)] if raw_events else []
    if "traceId" in s and "spanId" in s:  # OTLP JSON's own (camelCase) names
        trace, span_id = _hex(s["traceId"]), _hex(s["spanId"])
    else:
        context = s.get("context") if isinstance(s.get("context"), dict) else {}
        trace = _hex(s.get("traceId", s.get("trace_id", context.get("trace_id"))))
        span_id = _hex(s.get("spanId", s.get("span_id", context.get("span_id"))))
    parent = _hex(s["parentSpanId"] if "parentSpanId" in s
                  else s.get("parent_span_id", s.get("parent_id")))
    start = _ns(s["startTimeUnixNano"] if "startTimeUnixNano" in s
                else s.get("start_time_unix_nano", s.get("start_time")))
    end = _ns(s["endTimeUnixNano"] if "endTimeUnixNano" in s
              else s.get("end_time_unix_nano", s.get("end_time")))
    if "events" in attrs:
        events += _attribute_events(attrs, start)
    resource = s.get("resource")
    if service is None and isinstance(resource, dict):
        service = _attrs(resource.get("attributes")).get("service.name")
    status = s.get("status")
    if status is None and "status_code" in s:  # Phoenix's span JSON
        status = {"code": s["status_code"], "message": s.get("status_message")}
    return Span(trace or "", span_id or pointer, parent, s.get("name") or "", start, end, attrs,
                events, pointer, service, _status_error(status, attrs))


def _jaeger_span(s: dict, pointer: str, processes: dict) -> Span:
    attrs = _attrs(s.get("tags"))
    parent = None
    for ref in s.get("references") or ():
        if isinstance(ref, dict) and ref.get("refType", "CHILD_OF") in ("CHILD_OF",
                                                                       "FOLLOWS_FROM"):
            parent = _hex(ref.get("spanID"))
            break
    if parent is None and s.get("parentSpanID"):
        parent = _hex(s.get("parentSpanID"))
    events = []
    for log in s.get("logs") or ():
        if not isinstance(log, dict):
            continue
        fields = _attrs(log.get("fields"))
        events.append(Event(str(fields.pop("event", "")), _ns(log.get("timestamp"), 1000),
                            fields))
    start = _ns(s.get("startTime"), 1000)
    if "events" in attrs:
        events += _attribute_events(attrs, start)
    process = processes.get(s.get("processID")) if isinstance(processes, dict) else None
    if isinstance(s.get("process"), dict):
        process = s["process"]
    service = process.get("serviceName") if isinstance(process, dict) else None
    return Span(_hex(s.get("traceID")) or "", _hex(s.get("spanID")) or pointer, parent,
                s.get("operationName") or "", start, start + _ns(s.get("duration"), 1000),
                attrs, events, pointer, service, _status_error(None, attrs))


def _attribute_events(attrs: dict, time: int) -> list[Event]:
    """Logfire / pydantic-ai: a span's GenAI events as a JSON list in its attribute
    `events` (objects with `event.name`), read as its span events (the attribute is
    dropped); any other `events` attribute is left as it is."""
    value = _json(attrs["events"])
    if not (isinstance(value, list) and value and all(
            isinstance(e, dict) and isinstance(e.get("event.name"), str) for e in value)):
        return []
    del attrs["events"]
    return [Event(e["event.name"], time, {k: v for k, v in e.items() if k != "event.name"})
            for e in value]


def _log_event(r: dict) -> tuple[str | None, str | None, Event]:
    attrs = _attrs(r.get("attributes"))
    name = r.get("eventName") or r.get("event_name") or attrs.get("event.name") or ""
    event = Event(name, _ns(r.get("timeUnixNano", r.get("time_unix_nano",
                                                        r.get("observedTimeUnixNano")))),
                  attrs, _any_value(r.get("body")))
    return _hex(r.get("traceId", r.get("trace_id"))), _hex(r.get("spanId", r.get("span_id"))), \
        event


@dataclass
class _Loaded:
    spans: list = field(default_factory=list)
    logs: list = field(default_factory=list)  # (trace id, span id, Event)


def _load(value: Any, where: str, out: _Loaded) -> bool:
    """Add the spans (and log events) of one JSON value; False when it holds none of the
    containers."""
    if isinstance(value, list):
        found = False
        for k, v in enumerate(value):
            found |= _load(v, f"{where}/{k}", out)
        return found
    if not isinstance(value, dict):
        return False
    found = False
    if isinstance(value.get("result"), dict):  # Jaeger API v3 wraps OTLP in `result`
        found |= _load(value["result"], f"{where}/result", out)
    # Grafana Tempo's trace API names the resource spans `batches` (same content)
    for rkey in ("resourceSpans", "resource_spans", "batches"):
        for i, rs in enumerate(value.get(rkey) or ()):
            found = True
            if not isinstance(rs, dict):
                continue
            resource = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
            service = _attrs(resource.get("attributes")).get("service.name")
            for skey in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"):
                for j, ss in enumerate(rs.get(skey) or ()):
                    base = f"{where}/{rkey}/{i}/{skey}/{j}/spans/"
                    for k, s in enumerate((ss or {}).get("spans") or ()):
                        if isinstance(s, dict):
                            out.spans.append(_otlp_span(s, base + str(k), service))
    for rkey in ("resourceLogs", "resource_logs"):
        for rl in value.get(rkey) or ():
            found = True
            for skey in ("scopeLogs", "scope_logs", "instrumentationLibraryLogs"):
                for sl in (rl or {}).get(skey) or ():
                    for r in (sl or {}).get("logRecords", (sl or {}).get("log_records")) or ():
                        if isinstance(r, dict):
                            out.logs.append(_log_event(r))
    data = value.get("data")
    if isinstance(data, list):
        for i, trace in enumerate(data):
            if isinstance(trace, dict) and isinstance(trace.get("spans"), list):
                found = True
                processes = trace.get("processes") or {}
                for k, s in enumerate(trace["spans"]):
                    if isinstance(s, dict):
                        out.spans.append(_jaeger_span(s, f"{where}/data/{i}/spans/{k}",
                                                      processes))
    if isinstance(value.get("spans"), list) and ("traceID" in value or "processes" in value):
        found = True
        for k, s in enumerate(value["spans"]):
            if isinstance(s, dict):
                out.spans.append(_jaeger_span(s, f"{where}/spans/{k}",
                                              value.get("processes") or {}))
    if not found and ("traceId" in value or "trace_id" in value or "context" in value):
        if "tags" in value and "operationName" in value:
            out.spans.append(_jaeger_span(value, where or "/", {}))
        elif "body" in value and ("severityNumber" in value or "eventName" in value):
            out.logs.append(_log_event(value))
        else:
            out.spans.append(_otlp_span(value, where or "/", None))
        found = True
    return found


# --- reading a span ---------------------------------------------------------------------

def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


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


# --- conversations ----------------------------------------------------------------------

@dataclass
class _Call:
    span: Span
    inputs: list | _TextMessages  # raw message dicts (normalized when needed: see
    # _new_context)
    output: Message | None
    has_output: bool
    error: AdapterError | None = None  # its output cannot be read: its episode's error


@dataclass
class _Tool:
    span: Span
    name: str | None
    call_id: str | None
    arguments: Any
    result: Any
    has_result: bool
    error: str | None


class SpanIndex:
    """Spans by (trace id, span id) (a span exported twice is one), with their parents
    and children, and each span's place in the file (ties in time are broken by it)."""

    def __init__(self, spans: list[Span]) -> None:
        self.spans: dict[tuple, Span] = {}
        for s in spans:
            self.spans.setdefault((s.trace_id, s.span_id), s)
        self.position = {key: at for at, key in enumerate(self.spans)}
        self.parent: dict[tuple, tuple] = {}  # of spans whose parent is in the file
        self.children: dict[tuple, list] = defaultdict(list)
        spans_ = self.spans
        for key, s in spans_.items():
            if s.parent_id is not None:
                up = (s.trace_id, s.parent_id)
                self.children[up].append(key)
                if up in spans_:
                    self.parent[key] = up

    def ancestors(self, key: tuple) -> Iterator[tuple]:
        parent = self.parent
        up = parent.get(key)
        if up is None:
            return
        seen = set()
        while up is not None and up not in seen:
            seen.add(up)
            yield up
            up = parent.get(up)

    def descendants(self, key: tuple) -> Iterator[tuple]:
        stack = list(self.children.get(key, ()))
        while stack:
            c = stack.pop()
            yield c
            stack.extend(self.children.get(c, ()))

    def with_descendant_in(self, keys: Any) -> set[tuple]:
        """The spans with one of `keys` below them (each ancestor chain walked once)."""
        above: set[tuple] = set()
        parent = self.parent
        for k in keys:
            if k not in parent:
                continue  # (a root: no ancestor)
            for a in self.ancestors(k):
                if a in above:
                    break  # and so are its ancestors
                above.add(a)
        return above


def model_call(span: Span, inputs: list | None, outputs: list | None,
               max_depth: int) -> _Call:
    """A model call from its raw input and output messages (any dialect); input messages
    that are not messages are skipped (an input is context, not an action)."""
    ins = inputs if isinstance(inputs, _TextMessages) \
        else [m for m in inputs or () if isinstance(m, dict)]
    outs = [m for m in _normalize_all(outputs, f"{span.pointer}#output", max_depth)
            if m.role == "assistant"]
    out = outs[0] if outs else None
    for m in outs[1:]:  # several assistant messages out: one turn
        out.calls += m.calls
        out.results += m.results
        if m.text:
            out.text = (out.text or "") + m.text
        if m.reasoning:
            out.reasoning = (out.reasoning or "") + m.reasoning
    return _Call(span, ins, out, out is not None)


def single_layer(index: SpanIndex, calls: Mapping[tuple, _Call]) -> set[tuple]:
    """The model calls that are turns: two instrumentation layers often describe one call
    (a framework span around a client-library span); the inner one is the turn, or the
    outer one when only it holds the content."""
    wrapping = index.with_descendant_in(calls)
    turns = {k for k in calls if k not in wrapping}
    for k in list(turns):
        if k not in index.parent:
            continue  # (a root: no call around it)
        outer_calls = [a for a in index.ancestors(k) if a in calls]
        if not outer_calls or calls[k].has_output:
            continue
        outer = next((a for a in outer_calls if calls[a].has_output), None)
        if outer is not None:
            turns.discard(k)
            turns.add(outer)
    return turns


class _Lazy(dict):
    """key -> made(key) for a fixed set of keys (in file order), made when asked and not
    kept: a shard makes only its own episodes' model calls and tool runs, and memory
    holds one episode's at a time."""

    def __init__(self, keys: list[tuple], made: Callable[[tuple], Any]) -> None:
        super().__init__(dict.fromkeys(keys))
        self._make = made

    def __getitem__(self, key: tuple) -> Any:
        if key not in self:
            raise KeyError(key)
        return self._make(key)


def read_otel(path: Path | list[Path], limits: Limits | None = None,
              options: ReadOptions | None = None, shard: tuple[int, int] | None = None,
              names: list[str] | None = None, batch: Any = None) -> Iterator[AdaptedRecord]:
    """The conversations of one file, or of several (see the module's docstring).

    Several files (a list: the OTel files of one input, such as the collector file
    exporter's rotated files) are read as one: their spans join, so a trace cut across
    them is one conversation. Each record names its file (`source_file`): a line that
    cannot be read, its own; a conversation, the file of its first row's span, numbered
    among that file's conversations (in the order all are yielded); a row whose span is
    in another of the files has the pointer `<name>#<pointer>`, names[k] (default: the
    file's name) naming paths[k]. One file reads exactly as it does alone.
    shard (k, n), of one file: the k-th of n contiguous slices of the records it yields
    unsharded (every shard reads the whole file, spans join across it, but adapts only
    its own conversations); the file's own records (lines that cannot be read, notes)
    are in shard 0; shards 0..n-1 in turn are the unsharded records exactly.
    batch, of one JSON Lines file: only those lines (a GuardedBatch, or several), as
    `read_lines` reads them."""
    if batch is not None:
        if shard is not None or not isinstance(path, str | Path):
            raise ValueError("batch is for one file, unsharded")
        yield from (record for _, record in read_lines(path, batch, limits, options))
        return
    limits = limits or Limits()
    options = options or ReadOptions()
    paths = [path] if isinstance(path, str | Path) else [Path(p) for p in path]
    joined = len(paths) > 1
    if joined and shard is not None:
        raise ValueError("shard is for one file; several files are read as one")
    part, parts = _check_shard(shard)
    names = list(names) if names is not None else [p.name for p in paths]
    loaded = _Loaded()
    for at, file in enumerate(paths):
        prefix, source = (f"{names[at]}#", str(file)) if joined else ("", None)
        for raw in json_records(Path(file), limits):
            if raw.error is not None:
                if part == 0:
                    yield AdaptedRecord(raw.number, raw.pointer, error=raw.error,
                                        text=raw.text, source_file=source)
                continue
            where = prefix + (f"/lines/{raw.number}" if raw.jsonl else raw.pointer)
            # a line, or a whole document, that holds no span is a record of its own,
            # refused with its reason (never a silent read of nothing)
            if not _load(raw.value, where, loaded) and part == 0:
                yield AdaptedRecord(raw.number, "" if raw.jsonl else raw.pointer,
                                    error=AdapterError("<record>", _NO_SPANS),
                                    text=str(raw.value)[:200], source_file=source)
    records = conversations(loaded, limits.max_depth, options, (part, parts))
    yield from _in_own_files(records, paths, names) if joined else records


def read_lines(path: Path | str, batch: Any, limits: Limits | None = None,
               options: ReadOptions | None = None) -> Iterator[tuple[tuple, AdaptedRecord]]:
    """The records of some lines of one JSON Lines file (`batch`: a GuardedBatch of its
    lines, or several in file order), each with its place among the records of the whole
    file (read_otel of the file), for lines that hold every span of their traces and
    conversations (the runner cuts a large file into such jobs, tracerl.data.ingest.run):
    (0, line) a line that cannot be read or holds no span, (1,) the notes, (2, first
    start, 0 / 1 (its first span a turn / a tool run), that span's line and place, number)
    a conversation (per agent): by its earliest span start, then where its first span
    is, as `episodes` orders them. Sorting the records of all such jobs of a file by place
    gives read_otel's order; a conversation's number is its place among this read's (the
    runner numbers them in the file). Lines keep their file line numbers (record numbers,
    pointers)."""
    limits = limits or Limits()
    batches = list(batch) if isinstance(batch, list | tuple) else [batch]
    loaded = _Loaded()
    for one in batches:
        for raw in json_records(Path(path), limits, batch=one):
            if raw.error is not None:
                yield (0, raw.number), AdaptedRecord(raw.number, raw.pointer, error=raw.error,
                                                     text=raw.text)
            elif not _load(raw.value, f"/lines/{raw.number}", loaded):
                yield (0, raw.number), AdaptedRecord(
                    raw.number, "", error=AdapterError("<record>", _NO_SPANS),
                    text=str(raw.value)[:200])
    places: dict[int, tuple] = {}
    for record in conversations(loaded, limits.max_depth, options, places=places):
        yield ((2, *places[record.number]) if record.is_record else (1,)), record


def _line_of(pointer: str) -> int:
    """The line of a span read from JSON Lines (its pointer `/lines/<line>/...`)."""
    return int(pointer.split("/", 3)[2])


def _in_own_files(records: Iterator[AdaptedRecord], paths: list[Path], names: list[str]
                  ) -> Iterator[AdaptedRecord]:
    """The conversations of several files read as one (read_otel), each given the file of
    its first row's span (that file's prefix taken off its pointers), numbered per file."""
    files = {f"{name}#": str(p) for p, name in zip(paths, names, strict=True)}
    lengths = sorted({len(prefix) for prefix in files})
    numbers: Counter = Counter()

    def prefix_of(pointer: str) -> str | None:
        return next((pointer[:n] for n in lengths if pointer[:n] in files), None)

    for record in records:
        if record.source_file is not None:
            yield record
            continue
        if not record.is_record:  # the notes of all the files
            record.source_file = str(paths[0])
            yield record
            continue
        error = record.error
        own = next(filter(None, map(prefix_of, record.row_pointers)), None) \
            or (prefix_of(error.where) if error is not None else None) or f"{names[0]}#"
        cut = len(own)
        record.row_pointers = [p[cut:] or "/" if p.startswith(own) else p
                               for p in record.row_pointers]
        if error is not None:
            where = error.where[cut:] if error.where.startswith(own) else error.where
            record.error = AdapterError(where, error.reason.replace(own, ""))
        record.source_file = files[own]
        numbers[own] += 1
        record.number = numbers[own]
        yield record


_NO_SPANS = ("not an OpenTelemetry export, trace or span (no resourceSpans, batches, "
             "resourceLogs, data[].spans, result or span ids)")


def _link_keys(path: Path) -> set[str]:
    """The trace and conversation ids a file's spans name (otel_links): the runner joins
    only the files of one input that share one (bounded memory, files read in parallel)."""
    from tracerl.data.formats.otel_genai import links as otel_links

    return otel_links.link_keys(path)


read_otel.link_keys = _link_keys


def _batch_link_keys(batch: Any) -> set[str]:
    """The trace and conversation ids a batch of a file's lines names (otel_links): the
    runner reads a large file in jobs of lines, the batches that share one in one job."""
    from tracerl.data.formats.otel_genai import links as otel_links

    return otel_links.batch_keys(batch)


read_otel.read_lines = read_lines
read_otel.batch_link_keys = _batch_link_keys


def _check_shard(shard: tuple[int, int] | None) -> tuple[int, int]:
    if shard is None:
        return 0, 1
    part, parts = shard
    if not (isinstance(part, int) and isinstance(parts, int) and 0 <= part < parts):
        raise ValueError(f"shard must be (k, n) with 0 <= k < n, got {shard!r}")
    return part, parts


def conversations(loaded: _Loaded, max_depth: int = DEFAULT_MAX_DEPTH,
                  options: ReadOptions | None = None,
                  shard: tuple[int, int] | None = None, places: dict | None = None
                  ) -> Iterator[AdaptedRecord]:
    """The episodes of a file's spans (see the module's docstring); of shard (k, n), the
    k-th slice (see read_otel); places: see `episodes`."""
    options = options or ReadOptions()
    index = SpanIndex(loaded.spans)
    spans = index.spans
    logs_by_span: dict[tuple, list[Event]] = defaultdict(list)
    for trace, span_id, e in loaded.logs:
        logs_by_span[(trace, span_id)].append(e)
    ops: dict[tuple, str | None] = {}
    inference: list[tuple] = []  # model calls, and tool spans that are not one, in file order
    tool_keys: dict[tuple, None] = {}
    for key, s in spans.items():
        op = ops[key] = _op(s)
        if _is_inference(s, op):
            inference.append(key)
        elif _is_tool(s, op) and not _merged_record(s):
            tool_keys[key] = None

    prior: list[_TextMessages | None] = [None]  # the last call's input text, made

    def make_call(k: tuple) -> _Call:
        s = spans[k]
        inputs, outputs = _io(s, logs_by_span.get(k, ()), defer=True, prior=prior[0])
        if isinstance(inputs, _TextMessages):
            prior[0] = inputs  # (an episode's calls are made in time order)
        try:
            return model_call(s, inputs, outputs, max_depth)
        except AdapterError as exc:  # a turn whose output cannot be read
            return _Call(s, [], None, True, exc)

    calls = _Lazy(inference, make_call)
    runs = []
    for k in tool_keys:
        outer = next((t for t in index.ancestors(k) if t in tool_keys), None) \
            if k in index.parent else None
        if outer is not None and _tool_name(spans[outer]) in (_tool_name(spans[k]), None):
            continue  # the same call, seen by a second layer
        runs.append(k)
    def make_run(k: tuple) -> _Tool:
        run = _tool_run(spans[k], max_depth)
        if run.error is None and run.call_id is not None:
            # the same call seen deeper, without a tool name (Claude Code's
            # claude_code.tool.execution inside claude_code.tool): its failure is the call's
            for d in index.descendants(k):
                inner = spans[d]
                if inner.error and inner.attrs.get("gen_ai.tool.call.id") == run.call_id:
                    run.error = inner.error
                    break
        return run

    tool_runs = _Lazy(runs, make_run)

    parent = index.parent

    def own_conversation(key: tuple) -> str | None:
        attrs = spans[key].attrs
        for name in CONVERSATION_KEYS:  # (a loop: no generator made per span)
            cid = attrs.get(name)
            if isinstance(cid, str) and cid:
                return cid
        return None

    def conversation_of(key: tuple) -> str:
        cid = own_conversation(key)
        if cid is not None:
            return cid
        if key in parent:
            for k in index.ancestors(key):
                cid = own_conversation(k)
                if cid is not None:
                    return cid
        return spans[key].trace_id

    def agent_of(key: tuple) -> str | None:
        if key not in parent:
            return None
        for k in index.ancestors(key):
            if ops[k] == "invoke_agent":
                a = spans[k].attrs
                who = a.get("gen_ai.agent.name") or a.get("gen_ai.agent.id") or \
                    a.get("agent.name")  # OpenInference's
                return str(who) if who else (spans[k].name.removeprefix("invoke_agent ")
                                             .strip() or k[1])
        return None

    evaluations = _evaluations(spans, logs_by_span)

    def reward_of(group: set[tuple]) -> tuple[float | None, dict | None, str]:
        reward, components = _reward(group, index, evaluations, options)
        return reward, components, "otel:" + (options.reward_attribute
                                              or "gen_ai.evaluation.result")

    turns = single_layer(index, calls)
    notes: Counter = Counter()
    traces = {s.trace_id for s in spans.values()}
    covered = {k[0] for k in (*turns, *tool_runs)}
    notes["traces_without_genai_spans"] += len(traces - covered)
    part, _ = shard or (0, 1)
    if +notes and part == 0:  # the file's own facts, before its episodes (shard 0)
        yield AdaptedRecord(0, "", notes=+notes, is_record=False)
    yield from episodes(index, calls, tool_runs, conversation_of, agent_of, reward_of,
                        max_depth, notes, shard, turns, places)


def _merged_record(s: Span) -> bool:
    """Google ADK's `execute_tool (merged)` span (Python, Go, JS): after parallel calls,
    one more tool span (`gen_ai.tool.name` `(merged tools)`, arguments `N/A`) holds their
    merged response event; each call has its own `execute_tool <name>` span."""
    return s.name == "execute_tool (merged)" or s.attrs.get("gen_ai.tool.name") == "(merged tools)"


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


def episodes(index: SpanIndex, calls: Mapping[tuple, _Call],
             tool_runs: Mapping[tuple, _Tool], conversation_of, agent_of, reward_of,
             max_depth: int, notes: Counter, shard: tuple[int, int] | None = None,
             turns: set[tuple] | None = None, places: dict | None = None
             ) -> Iterator[AdaptedRecord]:
    """One record per (conversation, agent): its turns and tool runs in time order (spans
    that start and end together: turns first, then in file order). shard (k, n): only the
    k-th contiguous slice of them, by spans (each shard numbers them as the whole does).
    places (a dict, spans read from JSON Lines): each record's number -> what orders it
    among the records of the whole file (read_lines)."""
    spans = index.spans
    if turns is None:
        turns = single_layer(index, calls)
    position = index.position
    groups: dict[str, dict[str | None, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    first: dict[str, int] = {}  # each conversation's earliest start
    ordered = (*sorted(turns, key=position.__getitem__), *tool_runs)
    anchor: dict[str, tuple[int, tuple]] = {}  # each conversation's first span in `ordered`
    for at, k in enumerate(ordered):
        conversation = conversation_of(k)
        if places is not None and conversation not in groups:
            anchor[conversation] = (int(at >= len(turns)), k)
        groups[conversation][agent_of(k)].append(k)
        start = spans[k].start
        if start < first.get(conversation, start + 1):
            first[conversation] = start
    units = []  # (conversation, agent, its keys in time order)
    for conversation in sorted(groups, key=first.__getitem__):
        agents = groups[conversation]
        order = list(agents) if len(agents) == 1 else \
            sorted(agents, key=lambda a: min(spans[k].start for k in agents[a]))
        for agent in order:
            keys = sorted(agents[agent], key=lambda k: (spans[k].start, spans[k].end))
            episode_id = conversation if len(agents) == 1 or agent is None \
                else f"{conversation}/{agent}"
            units.append((episode_id, keys, len(agents) > 1))
            if places is not None:  # groups are ordered by first start, then insertion
                without_call, k = anchor[conversation]
                places[len(units)] = (first[conversation], without_call,
                                      _line_of(spans[k].pointer), position[k], len(units))
    part, parts = shard or (0, 1)
    total = sum(len(keys) for _, keys, _ in units) or 1
    before = 0
    for number, (episode_id, keys, several) in enumerate(units, 1):
        mine = min(parts - 1, before * parts // total) == part
        before += len(keys)
        if not mine:
            continue
        group = set(keys)
        for k in keys:
            if k in index.parent:
                group.update(index.ancestors(k))
        try:
            rows, pointers, built = _episode(episode_id, keys, calls, tool_runs,
                                             reward_of(group), max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(number, "", error=exc, episode_id=episode_id)
            continue
        if several:
            built["agent_episodes"] += 1
        yield AdaptedRecord(number, "", rows, pointers, episode_id=episode_id, notes=built)


def _evaluations(spans: dict, logs_by_span: dict) -> dict[tuple, list[Event]]:
    found: dict[tuple, list[Event]] = defaultdict(list)
    for key, s in spans.items():
        if not s.events and key not in logs_by_span:
            continue
        for e in [*s.events, *logs_by_span.get(key, ())]:
            if e.name == "gen_ai.evaluation.result" or "gen_ai.evaluation.name" in e.attrs:
                found[key].append(e)
    return found


def _model(span: Span) -> str | None:
    a = span.attrs
    for key in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name"):
        v = a.get(key)
        if isinstance(v, str) and v and v != "unknown":
            return v
    for k, v in a.items():
        if k.endswith(".ls_model_name") and isinstance(v, str) and v:
            return v
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e308:
        return float(v)
    return None


def _usage(a: dict) -> tuple[int, int]:
    return _tokens(a, _PROMPT_TOKENS), _tokens(a, _COMPLETION_TOKENS)


_PROMPT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                  "llm.token_count.prompt")
_COMPLETION_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                      "llm.token_count.completion")


def _tokens(a: dict, keys: tuple[str, ...]) -> int:
    """The first of `keys` that holds a count (an int, or its digits)."""
    for key in keys:
        v = a.get(key)
        if v is None:
            continue
        if type(v) is int:
            return v
        if isinstance(v, str) and v.isdecimal():
            return int(v)
    return 0


def _tool_names(spans: list[Span]) -> list[str] | None:
    names = set()
    for s in spans:
        a = s.attrs
        defs = a.get("gen_ai.tool.definitions")
        if defs is not None:
            defs = _json(defs)
        if isinstance(defs, list):
            for d in defs:
                if isinstance(d, dict):
                    fn = d.get("function") if isinstance(d.get("function"), dict) else d
                    if isinstance(fn.get("name"), str):
                        names.add(fn["name"])
        for k in a:
            if k.startswith("llm.request.functions.") and k.endswith(".name") \
                    and isinstance(a[k], str):
                names.add(a[k])
    return sorted(names) or None


def _episode(episode_id: str, keys: list[tuple], calls: dict, tool_runs: dict,
             reward: tuple[float | None, dict | None, str],
             max_depth: int) -> tuple[list[dict], list[str], Counter]:
    calls = {k: calls[k] for k in keys if k in calls}  # each made once, here
    tool_runs = {k: tool_runs[k] for k in keys if k in tool_runs}
    span_model: dict[tuple, str | None] = {}
    model = None  # the first call's that names one
    prompt = completion = 0
    for k, call in calls.items():
        span_model[k] = found = _model(call.span)
        if model is None and found:
            model = found
        p, c = _usage(call.span.attrs)
        prompt, completion = prompt + p, completion + c
    common = {"state": {"available_tools": _tool_names([c.span for c in calls.values()])},
              "metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "prompt_tokens": prompt or None,
                          "completion_tokens": completion or None}}
    b = EpisodeBuilder(episode_id, common, max_depth)
    fed = _Fed()
    first_turn = True
    pending: list[_Tool] = []  # tool spans no turn's output named
    consumed: set[tuple] = set()  # tool spans already made calls of a content-less turn

    def flush_tools() -> None:
        """Tool spans no turn's output named: the calls of a turn of their own."""
        if not pending:
            return
        b.assistant(pending[0].span.pointer, None,
                    [ToolCall(t.call_id, t.name, t.arguments, t.span.pointer)
                     for t in pending])
        for t in pending:
            if t.has_result or t.error:
                b.tool_result(t.span.pointer, t.call_id, t.result, t.error,
                              None if t.call_id else t.name)
        pending.clear()

    ahead: dict[tuple, list[Message]] = {}  # a later call's new context, made early

    for at, k in enumerate(keys):
        if k in consumed:
            continue
        if k in tool_runs:
            t = tool_runs[k]
            if not (b.rows and _answer(b, t)):
                pending.append(t)
            continue
        flush_tools()
        call = calls[k]
        if call.error is not None:
            raise call.error
        new = ahead.pop(k) if k in ahead else _new_context(call, first_turn, fed, max_depth)
        history = first_turn and not b.rows  # (tool spans before it are actions)
        for m in new:
            if history:
                b.history(m)
            else:
                _feed_lenient(b, m)
        first_turn = False
        out = call.output
        if out is None:
            # no content captured: a turn with no text, whose calls are the tool spans
            # that follow it (before the next model call)
            after = []
            for later in keys[at + 1:]:
                if later in calls:
                    break
                if later in tool_runs:
                    after.append(tool_runs[later])
                    consumed.add(later)
            b.assistant(call.span.pointer, None,
                        [ToolCall(t.call_id, t.name, t.arguments, t.span.pointer)
                         for t in after], metadata=_row_meta(call.span, span_model[k]))
            for t in after:
                if t.has_result or t.error:
                    b.tool_result(t.span.pointer, t.call_id, t.result, t.error,
                                  None if t.call_id else t.name)
            continue
        out_calls = out.calls
        if not out_calls:
            nk = next((later for later in keys[at + 1:] if later in calls), None)
            if nk is not None and calls[nk].error is None:
                ahead[nk] = _new_context(calls[nk], False, fed, max_depth)
                out_calls = _recorded_calls(calls[nk], ahead[nk], out.text, max_depth)
        extra = out.extra  # (the builder copies it)
        if out.reasoning:
            extra = {**(extra or {}), "reasoning": out.reasoning}
        b.assistant(out.pointer, out.text, out_calls, extra=extra or None,
                    metadata=_row_meta(call.span, span_model[k]))
    flush_tools()
    value, components, source = reward
    rows, pointers = b.finish("/", value, components, source, None)
    return rows, pointers, b.notes


def _recorded_calls(following: _Call, new: list[Message], text: str | None,
                    max_depth: int) -> list[ToolCall]:
    """The tool calls of a turn whose output names none, as the following call's input
    records them: when that input's new messages answer calls, its last assistant
    message (this turn, its text the same) holds them. Some producers leave a call out
    of the output they record: OpenLLMetry's Bedrock Converse spans before the parts
    generation keep only the answer's text blocks."""
    if not any(m.results for m in new):
        return []
    raw = following.inputs
    if isinstance(raw, _TextMessages):  # (parsed from the end, as far as needed)
        skip = len(raw.before)
        backwards = ((skip + i, orjson.loads(memoryview(raw.elements[i])))
                     for i in range(len(raw.elements) - 1, -1, -1))
    else:
        raw = raw or []
        backwards = ((i, raw[i]) for i in range(len(raw) - 1, -1, -1))
    for i, m in backwards:
        if isinstance(m, dict) and _role_of(m) in _ASSISTANT_ROLES:
            last = _normalize_all([m], f"{following.span.pointer}#input/{i}", max_depth,
                                  lenient=True)
            if last and last[0].calls and (text is None or (last[0].text or "") == text):
                return last[0].calls
            return []
    return []


def _answer(b: EpisodeBuilder, t: _Tool) -> bool:
    """Give a tool span's result to the open call it answers (by call id, else tool name);
    False when no open call takes it (it is then a call of its own)."""
    at = b.match(t.call_id, None) if t.call_id is not None else None
    if at is None and t.name:
        at = b.match(None, t.name, t.arguments)
    if at is None:
        return t.call_id is not None and t.call_id in b.answered_ids
    call_id = b.open_call_id(at)
    if t.has_result or t.error:
        b.tool_result(t.span.pointer, call_id, t.result, t.error,
                      None if call_id is not None else t.name)
    return True


def _row_meta(span: Span | None, model: str | None) -> dict | None:
    if span is None:
        return None
    meta: dict = {}
    if model:
        meta["behavior_policy"] = model
    temperature = span.attrs.get("gen_ai.request.temperature")
    if temperature is not None:
        temperature = _number(temperature)
    if temperature is not None:
        meta["temperature"] = temperature
    if span.end > span.start > 0:
        meta["latency_ms"] = (span.end - span.start) / 1e6
    return meta or None


def _key_of(m: Message) -> tuple:
    return (m.role, m.text, tuple((c.call_id, c.name) for c in m.calls),
            tuple((r.call_id, str(r.content)[:200]) for r in m.results))


def _role_of(m: dict) -> str | None:
    role = m.get("role", m.get("type"))
    return role.lower() if isinstance(role, str) else None


class _Fed:
    """The context messages fed so far, and (made only when asked) their keys."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._keys: set[tuple] = set()
        self._hashed = 0

    def keys(self) -> set[tuple]:
        for m in self.messages[self._hashed:]:
            self._keys.add(_key_of(m))
        self._hashed = len(self.messages)
        return self._keys


_ASSISTANT_ROLES = frozenset({"assistant", "model", "ai"})


def _new_context(call: _Call, first: bool, fed: _Fed, max_depth: int) -> list[Message]:
    """The messages of a model call's input that are new: all of the first call's; then
    those after the input's last assistant message (else those not fed before). Only
    they are normalized (an input repeats the whole history)."""
    raw = call.inputs
    where = f"{call.span.pointer}#input"
    if isinstance(raw, _TextMessages):
        after = None if first else raw.after_last_assistant()
        if after is not None:
            new = _normalize_all(after, where, max_depth, lenient=True)
            fed.messages += new
            return new
        raw = [m for m in raw.full() if isinstance(m, dict)]
    if first:
        new = _normalize_all(raw, where, max_depth, lenient=True)
    else:
        last = None
        for i in range(len(raw) - 1, -1, -1):
            m = raw[i]
            role = m["role"] if "role" in m else m.get("type")
            if isinstance(role, str) and role.lower() in _ASSISTANT_ROLES:  # (_role_of)
                last = i
                break
        if last is not None:
            new = _normalize_all(raw[last + 1:], where, max_depth, lenient=True)
        else:
            seen = fed.keys()
            new = [m for m in _normalize_all(raw, where, max_depth, lenient=True)
                   if _key_of(m) not in seen]
    fed.messages += new
    return new


def _feed_lenient(b: EpisodeBuilder, m: Message) -> None:
    """A context message: a tool result answers its open call; one whose call is already
    answered (by a tool span) is the same result again; one with no call is an
    environment event."""
    if m.role == "tools":
        return
    if m.role == "assistant":  # an assistant message only in the input: not a turn here
        b.event("system", "message", content=m.text)
        return
    for r in m.results:
        if b.match(r.call_id, r.name) is not None:
            b.tool_result(r.pointer, r.call_id, r.content, r.error, r.name)
        elif r.call_id is not None and r.call_id in b.answered_ids:
            continue
        else:
            b.notes["results_without_call"] += 1
            b.event("environment", "tool_result", content=r.content, call_id=r.call_id,
                    error=r.error)
    if m.role in ("user", "system") and (m.text is not None or not m.results):
        b.event("system" if m.role == "system" else "user", "message", content=m.text)


def _reward(group: set[tuple], index: SpanIndex, evaluations: dict,
            options: ReadOptions) -> tuple[float | None, dict | None]:
    spans = index.spans
    attribute = options.reward_attribute
    if not (attribute or evaluations):
        return None, None
    # the group's spans that can hold a reward, in file order (ties: the later span's)
    group = sorted((k for k in group if k in evaluations or (
        attribute and attribute in spans[k].attrs)), key=index.position.__getitem__)
    if options.reward_attribute:
        found = [(spans[k].end, _number(spans[k].attrs.get(options.reward_attribute)))
                 for k in group if options.reward_attribute in spans[k].attrs]
        found = [f for f in found if f[1] is not None]
        if found:
            return max(found)[1], None
    scores: dict[str, tuple[int, float]] = {}
    for k in group:
        for e in evaluations.get(k, ()):
            name = e.attrs.get("gen_ai.evaluation.name")
            value = _number(e.attrs.get("gen_ai.evaluation.score.value"))
            if isinstance(name, str) and value is not None and (
                    name not in scores or e.time >= scores[name][0]):
                scores[name] = (e.time, value)
    if not scores:
        return None, None
    components = {n: v for n, (_, v) in sorted(scores.items())}
    if options.reward_evaluation:
        return components.get(options.reward_evaluation), components
    return (next(iter(components.values())) if len(components) == 1 else None), components

