"""Whether a file is OpenTelemetry (GenAI) traces: `resourceSpans` / `resourceLogs`
(OTLP JSON; also wrapped as `result`, Jaeger v2's API v3), `batches` of resource spans
(Grafana Tempo), `data[].spans` (Jaeger query API), or one span (`traceId` / `trace_id` /
`traceID` with `spanId` or `name` and attributes or tags)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed

_TEMPO_SPANS = ("scopeSpans", "instrumentationLibrarySpans", "scope_spans",
                "instrumentation_library_spans")


def is_otel(value: dict) -> bool:
    if "resourceSpans" in value or "resource_spans" in value or "resourceLogs" in value \
            or "resource_logs" in value:
        return True
    if isinstance(value.get("result"), dict) and value["result"] is not value \
            and ("resourceSpans" in value["result"] or "resource_spans" in value["result"]):
        return True  # Jaeger v2 API v3: {"result": {resourceSpans...}}
    batches = value.get("batches")
    if isinstance(batches, list) and batches and isinstance(batches[0], dict) \
            and any(k in batches[0] for k in _TEMPO_SPANS):
        return True  # Grafana Tempo: {"batches": [{resource, scopeSpans...}]}
    data = value.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict) and "spans" in data[0]:
        return True
    if "spans" in value and ("traceID" in value or "traceId" in value):
        return True
    trace = value.get("traceId", value.get("trace_id", value.get("traceID")))
    context = value.get("context")
    if trace is None and isinstance(context, dict):
        trace = context.get("trace_id", context.get("traceId"))
    return trace is not None and ("spanId" in value or "span_id" in value or "spanID" in value
                                  or "name" in value or "operationName" in value
                                  or isinstance(context, dict))


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"resourceSpans", b"resource_spans", b"resourceLogs") or (
            s.has(b"batches") and s.has(*(k.encode() for k in _TEMPO_SPANS))) or (
            s.has(b"traceID") and s.has(b"spans"))
    return isinstance(s.record, dict) and is_otel(s.record)
