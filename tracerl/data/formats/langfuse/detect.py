"""Whether a file is Langfuse's: a trace with its observations, a public API list of
observations, traces or scores, one observation (a list or JSONL of them; the blob
export's `trace_id`, `start_time`), one score, one trace without its observations
(blob `scores/` and legacy `traces/` files, the UI's traces export) or a session (the
UI's session download)."""

from __future__ import annotations

from typing import Any

from tracerl.data.formats.common.detect import Sniffed

LANGFUSE_OBSERVATION_TYPES = frozenset({"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL",
                                        "CHAIN", "RETRIEVER", "EVALUATOR", "EMBEDDING",
                                        "GUARDRAIL"})


def is_langfuse_observation(value: Any) -> bool:
    """One Langfuse observation (not a trace): `traceId`, `startTime`, a Langfuse `type`
    (or `trace_id`, `start_time`: the blob storage export's and the SDK models' field
    names)."""
    return isinstance(value, dict) and value.get("type") in LANGFUSE_OBSERVATION_TYPES \
        and "observations" not in value and (
            ("traceId" in value and "startTime" in value)
            or ("trace_id" in value and "start_time" in value and "span_id" not in value))


def is_langfuse_score(value: Any) -> bool:
    """One Langfuse score: `name`, `value`, `dataType` (or `data_type`, the blob storage
    export's `scores/` rows) or `source`, beside `traceId` / `trace_id` (null for a
    session's or dataset run's score), and no span or observation timing."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) \
            or "value" not in value:
        return False
    keys = value.keys()
    return ("traceId" in keys or "trace_id" in keys) \
        and ("dataType" in keys or "data_type" in keys or "source" in keys) \
        and not any(k in keys for k in ("startTime", "start_time", "spanId", "span_id",
                                        "observations", "attributes"))


def is_langfuse_trace_row(value: Any) -> bool:
    """One Langfuse trace without its observations, as the blob storage export's legacy
    `traces/` files and the UI's export of the traces table hold them: `id`, `timestamp`,
    the `bookmarked` / `public` flags, with the project (`project_id` / `projectId`) or
    both flags (the UI's rows name no project)."""
    if not isinstance(value, dict) or "observations" in value:
        return False
    keys = value.keys()
    return "id" in keys and "timestamp" in keys \
        and ((("project_id" in keys or "projectId" in keys)
              and ("bookmarked" in keys or "public" in keys))
             or ("bookmarked" in keys and "public" in keys)) \
        and not any(k in keys for k in ("messages", "steps", "traceId", "trace_id"))


def is_langfuse_session(value: Any) -> bool:
    """A Langfuse session (the UI's "Download session as JSON", `session-<id>.json`; the
    public API's `GET /sessions/{id}`): `id`, its `traces` (objects without their
    observations), `createdAt` / `projectId` / `bookmarked`."""
    if not isinstance(value, dict) or not isinstance(value.get("traces"), list) \
            or "id" not in value:
        return False
    first = value["traces"][0] if value["traces"] else {}
    return isinstance(first, dict) and (not first or ("id" in first and "timestamp" in first)) \
        and any(k in value for k in ("createdAt", "projectId", "bookmarked"))


def _is_langfuse_list(value: dict) -> bool:
    """Langfuse's public API list: `{"data": [observation | trace | score, ...], "meta"}`."""
    data = value.get("data")
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return False
    first = data[0]
    return is_langfuse_observation(first) or is_langfuse_score(first) or (
        "observations" in first and "id" in first
        and ("timestamp" in first or "projectId" in first))


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return (s.has(b"observations") and s.has(b"trace")) or (
            s.has(b"data") and s.has(b"traceId") and s.has(b"parentObservationId"))
    value = s.record
    if not isinstance(value, dict):
        return False
    keys = value.keys()
    return is_langfuse_observation(value) or is_langfuse_score(value) \
        or is_langfuse_trace_row(value) or is_langfuse_session(value) \
        or ("trace" in keys and "observations" in keys) \
        or (isinstance(value.get("observations"), list) and "id" in keys
            and ("timestamp" in keys or "projectId" in keys)) or _is_langfuse_list(value)
