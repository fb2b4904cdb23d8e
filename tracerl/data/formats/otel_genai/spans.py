"""OpenTelemetry containers: spans and log events from OTLP JSON, Jaeger, Tempo and the
console exporter, with their attributes as plain values (`_load`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

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
        trace, span_id = s["traceId"], s["spanId"]
        if not (type(trace) is str and trace and trace[:2] != "0x"):
            trace = _hex(trace)  # (else: itself)
        if not (type(span_id) is str and span_id and span_id[:2] != "0x"):
            span_id = _hex(span_id)
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


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value
