"""`--format auto`: which adapter reads a file, from the shape of its first record.

The first record is read the way its adapter would read it (the first non-blank line of
JSON Lines, the first element of a top-level array, the whole of a small document, the
first value of JSON values one after another); a document too large to parse for this is
judged by the keys near its start. Shapes, in
the order they are tried:

- jsonl (native steps): `episode_id` with `t` and `action`;
- otel-genai: `resourceSpans` / `resourceLogs` (OTLP JSON; also wrapped as `result`, Jaeger
  v2's API v3), `batches` of resource spans (Grafana Tempo's trace API), `data[].spans`
  (Jaeger query API), or one span (`traceId`/`trace_id`/`traceID` with `spanId` or `name`
  and attributes or tags);
- tau2: an object with `info` and `tasks` (a results file; its simulations inline or in a
  sibling `simulations/` folder), or `simulations`; or one simulation (`id`, `task_id`,
  `messages` or `ticks`, and `termination_reason` / `reward_info` / `start_time`);
- langfuse: `trace` with `observations`, a trace with its `observations` inline, a
  public API list `{"data": [...]}` of observations (`traceId` and `type`), traces or
  scores, or one observation (`traceId`, `startTime` and a Langfuse `type`, or the blob
  export's `trace_id`, `start_time`: a list or JSONL of them), one score (`name`, `value`,
  `dataType` / `data_type` or `source`, `traceId` / `trace_id`), one trace without its
  observations (`id`, `timestamp`, `bookmarked` / `public`: the blob export's `scores/`
  and legacy `traces/` files, the UI's traces export) or a session (`id`, `traces`,
  `createdAt`: the UI's session download);
- atif: `schema_version` "ATIF-…", or `steps` with `session_id` / `agent`;
- claude-code: an event line with `type` user | assistant | summary | system | progress |
  file-history-snapshot | queue-operation and `sessionId` / `uuid` / `parentUuid` (also
  after leading session-state lines `{type: mode | permission-mode | ..., sessionId}`),
  or a sub-agent's `agent-<id>.meta.json` sidecar (`agentType` / `toolUseId`), a
  project's `sessions-index.json`, a Workflow run's `workflows/<runId>.json` or
  `journal.jsonl` (read as no record); or a Claude Agent SDK / `claude -p
  --output-format stream-json` message (`system` init with `session_id` and `tools`, or a
  message with `session_id` and `parent_tool_use_id`), as lines or a JSON array;
- anthropic: a Messages API request (`messages` beside a top-level `system`, or messages
  with tool_use / tool_result blocks), response (`type: "message"`), API error (`type:
  "error"` with an Anthropic error type), SSE stream (as events, or a text file of
  `event:` / `data:` lines, also one that is only an `error` event), a Message Batches
  result line (`custom_id` with `result` succeeded / errored / expired / canceled) or
  request line (`custom_id` with `params`), an Amazon Bedrock batch inference line
  (`recordId`, `modelInput` an Anthropic request, `modelOutput` or `error`), or a
  recorded HTTP exchange whose body is one of those;
- openai-chat: a list of messages (also LangChain message dumps), a record with
  `messages` / `traj` / `conversations` (OpenAI messages or ShareGPT turns), a
  conversational prompt-completion record (`prompt` and `completion` message lists), or a
  logged chat completion call (`{request: {messages}, response}` or OpenPipe's `{input:
  {messages}, output}`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tracerl.data.ingest.parse import _BOM

_CLAUDE_CODE_TYPES = frozenset({"user", "assistant", "summary", "system", "progress",
                                "file-history-snapshot", "queue-operation", "attachment"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking",
                               "server_tool_use"})
_SMALL_DOCUMENT = 8 << 20
LANGFUSE_OBSERVATION_TYPES = frozenset({"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL",
                                        "CHAIN", "RETRIEVER", "EVALUATOR", "EMBEDDING",
                                        "GUARDRAIL"})


def detect(path: Path, head_bytes: int = 1 << 20) -> str:
    """The format of `path`; native JSONL when no shape fits (its reader then says why,
    naming the file, record and field)."""
    return sniff(path, head_bytes) or "jsonl"


def sniff(path: Path, head_bytes: int = 1 << 20) -> str | None:
    """The format of `path`, or None when it is unreadable, empty or of no known shape
    (`tracerl init` refuses such a file instead of ingesting it as native steps)."""
    from tracerl.data.adapters import _head
    from tracerl.data.adapters.records import first_of_values, is_json_lines

    try:
        head = _head(path, head_bytes)
    except OSError:
        return None
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    text = head.lstrip(b" \t\r\n")
    if not text:
        return None
    if text.startswith((b"event:", b"data:")):  # a server-sent event stream saved as text
        return "anthropic" if b"message_start" in text[:4096] \
            or _anthropic_error_stream(text[:4096]) else None
    if path.name.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")) \
            or is_json_lines(path):
        line = text.split(b"\n", 1)[0]
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return _by_keys(line, jsonl=True)
        if path.name == "journal.jsonl" and isinstance(value, dict) \
                and value.get("type") in ("started", "result") and "agentId" in value:
            return "claude-code"  # a Claude Code Workflow run's journal
        return classify(value, path, jsonl=True) or _claude_code_session_head(value, text)
    value = _first_value(path, text)
    if path.name.startswith("agent-") and path.name.endswith(".meta.json") \
            and isinstance(value, dict) and ("agentType" in value or "toolUseId" in value):
        return "claude-code"  # a sub-agent transcript's sidecar
    if isinstance(value, dict) and _claude_code_side_file(path, value):
        return "claude-code"  # Claude Code's sessions index or a Workflow run's snapshot
    if value is _TOO_LARGE or value is None:
        # JSON values one after another (Python OpenTelemetry's console exporter writes
        # each span as an indented object): judged by the first of them
        first = first_of_values(text)
        if first is not None:
            return classify(first, path, jsonl=True)
        return _by_keys(text, jsonl=False)
    if isinstance(value, list):
        first = value[0] if value else None
        if isinstance(first, dict) and "role" in first:
            return classify({"messages": value}, path) or "openai-chat"
        return (classify(first, path) if first is not None else None) or "openai-chat"
    return classify(value, path)


_TOO_LARGE = object()


def _first_value(path: Path, text: bytes) -> Any:
    """The document (small enough), or for a top-level array its first element(s)."""
    from tracerl.data.adapters.jsonstream import stream_array
    from tracerl.data.ingest.limits import Limits

    if text[:1] == b"[":
        try:
            first = next(stream_array(path, Limits(max_record_bytes=_SMALL_DOCUMENT)), None)
        except ValueError:
            return None
        if first is None:
            return []
        return [first.value] if first.rejected is None else None
    size = path.stat().st_size
    if size > _SMALL_DOCUMENT and not path.name.endswith(".gz"):
        return _TOO_LARGE
    from tracerl.data.adapters.jsonstream import read_capped

    data, _, _, _ = read_capped(path, _SMALL_DOCUMENT)
    if data is None:
        return _TOO_LARGE
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def classify(value: Any, path: Path | None = None, jsonl: bool = False) -> str | None:
    """The format whose record `value` is, or None."""
    if isinstance(value, list):
        if value and isinstance(value[0], dict) and "role" in value[0]:
            return anthropic_or_chat({"messages": value})
        return None
    if not isinstance(value, dict):
        return None
    keys = value.keys()
    if "episode_id" in keys and "t" in keys and "action" in keys:
        return "jsonl"
    if is_langfuse_observation(value):
        return "langfuse"  # one observation (of a list or JSONL of them)
    if is_langfuse_score(value) or is_langfuse_trace_row(value) or is_langfuse_session(value):
        return "langfuse"  # a score, trace or session alone (blob storage / UI exports)
    if is_otel(value):
        return "otel-genai"
    if ("info" in keys and "tasks" in keys) or (
            "simulations" in keys and isinstance(value.get("simulations"), list)):
        return "tau2"
    if _is_tau2_simulation(value):
        return "tau2"  # one simulation, a file of its own (`simulations/<id>.json`)
    if ("trace" in keys and "observations" in keys) or (
            isinstance(value.get("observations"), list) and "id" in keys
            and ("timestamp" in keys or "projectId" in keys)) or _is_langfuse_list(value):
        return "langfuse"
    schema = value.get("schema_version")
    if (isinstance(schema, str) and schema.upper().startswith("ATIF")) or (
            isinstance(value.get("steps"), list)
            and ("session_id" in keys or "agent" in keys or "trajectory_id" in keys)):
        return "atif"
    if value.get("type") in _CLAUDE_CODE_TYPES and (
            "sessionId" in keys or "uuid" in keys or "parentUuid" in keys
            or value.get("type") in ("summary", "file-history-snapshot", "queue-operation")):
        return "claude-code"
    if "session_id" in keys and ((value.get("type") == "system" and value.get("subtype")
                                  == "init" and isinstance(value.get("tools"), list))
                                 or "parent_tool_use_id" in keys):
        return "claude-code"  # the Agent SDK's / `claude -p --output-format stream-json`'s
        # (its init line lists the tools; Cursor's CLI copies the shape without them)
    if is_anthropic(value):
        return "anthropic"
    if _is_chat_call_log(value):
        return "openai-chat"  # a logged call: {request, response} / {input, output}, a
        # conversational prompt-completion record (TRL, verifiers), `conversations`
    if "messages" in keys or "traj" in keys:
        return anthropic_or_chat(value)
    if "role" in keys and ("content" in keys or "tool_calls" in keys):
        return "openai-chat"
    return None


def _is_tau2_simulation(value: dict) -> bool:
    from tracerl.data.adapters.tau2 import is_simulation

    return is_simulation(value)


def _is_chat_call_log(value: dict) -> bool:
    from tracerl.data.adapters.openai_chat import call_pair, prompt_completion

    turns = value.get("conversations")
    return call_pair(value) is not None or prompt_completion(value) or (
        isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict)
        and ("role" in turns[0] or ("from" in turns[0] and "value" in turns[0]))
        and "messages" not in value)


def _claude_code_side_file(path: Path, value: dict) -> bool:
    if path.name == "sessions-index.json":
        return isinstance(value.get("entries"), list) and "originalPath" in value
    return path.parent.name == "workflows" and isinstance(value.get("runId"), str) \
        and ("workflowProgress" in value or "workflowName" in value)


def _claude_code_session_head(first: Any, text: bytes) -> str | None:
    """A Claude Code transcript that opens with session-state lines (`mode`,
    `permission-mode`, `last-prompt`, `ai-title`, `custom-title`, `agent-name`, ...: a
    `type` and the `sessionId`, no uuid), as Claude Code 2.1 writes a session's first
    lines: claude-code when a line after them, in the head, is a transcript event."""
    if not (isinstance(first, dict) and isinstance(first.get("type"), str)
            and isinstance(first.get("sessionId"), str)):
        return None
    for line in text.split(b"\n")[1:50]:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not (isinstance(value, dict) and isinstance(value.get("type"), str)):
            return None
        if value.get("type") in _CLAUDE_CODE_TYPES and classify(value) == "claude-code":
            return "claude-code"
        if not isinstance(value.get("sessionId"), str):
            return None
    return None


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
            return anthropic_or_chat(body) == "anthropic"
    request = value.get("request")
    if isinstance(request, dict) and isinstance(request.get("body", request), dict):
        inner = request.get("body", request)
        if isinstance(inner, dict) and isinstance(inner.get("messages"), list):
            return anthropic_or_chat(inner) == "anthropic"
    return False


def anthropic_or_chat(record: dict) -> str:
    """A record of messages: Anthropic when it has a top-level system prompt beside them
    or content blocks only Anthropic writes, else OpenAI chat."""
    messages = record.get("messages", record.get("traj"))
    if not isinstance(messages, list):
        return "openai-chat"
    roles = set()
    for m in messages[:200]:
        if not isinstance(m, dict):
            continue
        roles.add(m.get("role"))
        content = m.get("content")
        if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content):
            return "anthropic"
        if "tool_calls" in m or m.get("role") in ("tool", "function", "developer"):
            return "openai-chat"
    if ("system" in record and "system" not in roles) or "max_tokens" in record \
            and "anthropic_version" in record:
        return "anthropic"
    return "openai-chat"


def _by_keys(head: bytes, jsonl: bool) -> str | None:
    """Judged by the keys near the start of a record too large to parse here."""
    def has(*keys: bytes) -> bool:
        return any(b'"' + k + b'"' in head for k in keys)

    if has(b"resourceSpans", b"resource_spans", b"resourceLogs"):
        return "otel-genai"
    if has(b"batches") and has(*(k.encode() for k in _TEMPO_SPANS)):
        return "otel-genai"
    if has(b"traceID") and has(b"spans"):
        return "otel-genai"
    if has(b"simulations") or (has(b"info") and has(b"tasks")) or (
            has(b"task_id") and has(b"termination_reason") and has(b"messages", b"ticks")):
        return "tau2"
    if has(b"observations") and has(b"trace"):
        return "langfuse"
    if has(b"data") and has(b"traceId") and has(b"parentObservationId"):
        return "langfuse"
    if b'"ATIF' in head or (has(b"steps") and has(b"session_id")):
        return "atif"
    if has(b"sessionId") and has(b"parentUuid"):
        return "claude-code"
    if has(b"episode_id") and has(b"action") and not has(b"messages"):
        return "jsonl"
    if has(b"messages", b"traj", b"role"):
        return "anthropic" if has(b"tool_use", b"tool_result") else "openai-chat"
    return None
