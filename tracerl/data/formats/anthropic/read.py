"""Anthropic Messages API conversations → native step records, one episode each.

A record (JSON, a JSON list of records, or JSONL) is any of:
- a request body: `{model, system?, messages: [...], tools?}` (or a bare list of
  messages, or `{"messages": [...]}`), the conversation so far;
- a response body: `{id, type: "message", role: "assistant", content: [...], stop_reason,
  usage, model}`, one assistant turn;
- a request with its response: `{request: {...}, response: {...}}` (the response is the
  conversation's last turn), also as claude-trace logs each call (`.claude-trace/log-*.jsonl`:
  `request.body`, `response.body` or, streamed, `response.body_raw` the event stream; a
  request whose response never came, `response: null`, is the conversation so far; a
  response `{type: error, error}` is quarantined: the call failed; a logged call to another
  Anthropic endpoint, as count_tokens, is no record: counted `calls_to_other_endpoints`);
- a recorded HTTP exchange: `{status, headers, body}` whose body is a response (JSON text
  or an object) or a server-sent event stream (`event: message_start` / `data: {...}`
  lines, which are put back together into the message);
- a server-sent event stream as a list of its events (`{type: message_start, ...}`), or
  a file that is the stream itself as text (`event: message_start` / `data: {...}`
  lines, as `curl -N` saves it; each message_start begins a record);
- a Message Batches result line: `{custom_id, result: {type: "succeeded", message}}`
  (the message is the conversation's one turn); an `errored`, `expired` or `canceled`
  result is a quarantined record with its reason (the batch request did not run); a
  batch request line `{custom_id, params: {model, messages, ...}}` is a request body;
- an Amazon Bedrock batch inference line (`<input>.jsonl.out`: `{recordId, modelInput,
  modelOutput}`, an InvokeModel request body and its Messages response; `error:
  {errorCode, errorMessage}` in place of the output is a quarantined record with its
  reason; an input line, without output, is a request body); episode_id the recordId;
  so is a Vertex AI batch prediction row (`{custom_id, request, response, status}`; a
  failed row, without response, is quarantined with its status), by its custom_id;
- an API error on its own (`{type: "error", error: {type, message}}`, as a body, or a
  stream that is only an `error` event: overloaded before the message started) is a
  quarantined record with its reason (the call failed).

Messages (tracerl.data.formats.common.messages): `role` user | assistant; `content` a string
or blocks: `text`, `thinking` (kept in the row's `extra.reasoning`, its signature not),
`tool_use{id, name, input}` (one action each; several in one message share a turn),
`tool_result{tool_use_id, content, is_error}` in a user message (the call's
observation; `is_error: true` puts the text in observation.error). Server tools
(`server_tool_use` → `web_search_tool_result`, ...) and MCP connector calls
(`mcp_tool_use` → `mcp_tool_result`) are calls too, answered by their result blocks in the
same message (matched by `tool_use_id`; a `{type: ..._error, error_code}` content is the
observation's error; a result whose call is not in the conversation is an environment
event, counted `results_without_call`). A streamed tool_use whose input_json_delta pieces
do not make JSON (the stream was cut by max_tokens) keeps the text as its arguments (a
JSON string) and its id in the row's `extra.tool_input_not_json`. A `fallback` block
(`{from: {model}, to: {model}, trigger}`: the API or SDK retried a refused turn on another
model) makes the turn's behavior_policy the `to` model (kept in `extra.fallback`).
`system` (a string or text blocks) and user text before the first assistant turn are the
state's history.

episode_id: a batch line's `custom_id` (`recordId`), else the request record's `episode_id` or `id`,
else `<file>:<record number>` (also for a response alone: its `msg_…` id is kept in
`extra.id`) (the file's path under the input root when the runner
gives it, else its name: tracerl.data.formats.fallback_episode_id); behavior_policy:
`model`; usage (input, cache and output tokens) is summed into episode.prompt_tokens /
completion_tokens, and each response's `usage`, `stop_reason` and `id` are kept in its
row's `extra`. A record's `reward` (a number or an object of
numbers) becomes the done row's reward. `read` counts records (conversations).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.anthropic.detect import is_anthropic_error
from tracerl.data.formats.common.dialogue import DEFAULT_MAX_DEPTH, EpisodeBuilder
from tracerl.data.formats.common.messages import Message, normalize, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.formats.openai_chat.read import reward_value, tool_names_of
from tracerl.data.ingest.limits import Limits, RecordRejected, load_record


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and value.get("type") != "message"


def _is_event(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "message_start"


def read_anthropic(path: Path, limits: Limits | None = None,
                   options: Any = None, batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    if _is_sse_text(path):
        yield from _read_sse_text(path, limits, options)
        return
    for raw in json_records(path, limits, whole=lambda v: _is_message(v) or _is_event(v),
                            batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        yield adapt(raw.value, raw.number, raw.pointer,
                    fallback_episode_id(path, raw.number, options), limits)


def _is_sse_text(path: Path) -> bool:
    from tracerl.data.formats import _head

    try:
        head = _head(path, 4096).removeprefix(b"\xef\xbb\xbf").lstrip()
    except OSError:
        return False
    return head.startswith((b"event:", b"data:"))


def _read_sse_text(path: Path, limits: Limits, options: Any) -> Iterator[AdaptedRecord]:
    """A file that is a server-sent event stream: one record per message it streams."""
    from tracerl.data.formats.common.jsonstream import read_capped

    data, size, head, cut = read_capped(path, limits.max_record_bytes)
    if data is None:
        reason = cut or f"{size} bytes, over ingest.max_record_bytes"
        yield AdaptedRecord(1, "", error=AdapterError("<record>", f"the event stream is {reason}"),
                            text=head[:200].decode("utf-8", "replace"))
        return
    text = data.decode("utf-8", "replace").removeprefix("\ufeff")
    try:
        events = sse_events(text, "/", limits)
    except AdapterError as exc:
        yield AdaptedRecord(1, "", error=exc, text=text[:200])
        return
    starts = [k for k, e in enumerate(events) if _is_event(e)]
    if not starts or starts[0] > 0:  # what comes before the first message (an error)
        starts.insert(0, 0)
    for n, (a, b) in enumerate(zip(starts, [*starts[1:], len(events)], strict=True), start=1):
        yield adapt(events[a:b], n, f"/{a}", fallback_episode_id(path, n, options), limits)


_BATCH_FAILED = ("errored", "expired", "canceled")


def _batch_result(value: Any, pointer: str) -> tuple[Any, str] | None:
    """(the record inside a Message Batches result or request line, or an Amazon Bedrock
    batch inference line, its custom_id / recordId)."""
    if isinstance(value, dict) and isinstance(value.get("modelInput"), dict) \
            and "recordId" in value:
        return _bedrock_batch(value, pointer)
    if not isinstance(value, dict) or not isinstance(value.get("custom_id"), str):
        return None
    custom_id = value["custom_id"]
    result = value.get("result")
    if isinstance(result, dict):
        kind = result.get("type")
        if kind == "succeeded" and isinstance(result.get("message"), dict):
            return result["message"], custom_id
        if kind in _BATCH_FAILED:
            error = result.get("error")
            while isinstance(error, dict) and isinstance(error.get("error"), dict):
                error = error["error"]  # {type: error, error: {type, message}}
            detail = ""
            if isinstance(error, dict):
                detail = ": " + ", ".join(str(error[k]) for k in ("type", "message")
                                          if error.get(k) is not None)
            raise AdapterError(f"{pointer}/result/type", f"the batch request {custom_id!r} "
                                                         f"did not run: {kind}{detail}")
        raise AdapterError(f"{pointer}/result", "a batch result is `succeeded` with a "
                                                f"message, or errored / expired / canceled; "
                                                f"got type {kind!r}")
    if isinstance(value.get("params"), dict):
        return value["params"], custom_id
    request = value.get("request")
    if isinstance(request, dict) and isinstance(request.get("messages"), list):
        # Vertex AI batch prediction (partner-models/claude/batch): `{custom_id, request}`
        # in, `{custom_id, request, response, status}` out (a failed row: no response,
        # its `status` says why)
        response = value.get("response")
        if isinstance(response, dict) and "body" in response and "content" not in response:
            response = response["body"]
        if response is not None:
            return {"request": request, "response": response}, custom_id
        status = value.get("status")
        if isinstance(status, dict):
            status = status.get("message") or status.get("code")
        if status not in (None, ""):
            raise AdapterError(f"{pointer}/status", f"the batch request {custom_id!r} "
                                                    f"did not run: {status}")
        return request, custom_id
    return None


def _bedrock_batch(value: dict, pointer: str) -> tuple[Any, str]:
    """An Amazon Bedrock batch inference line (`.jsonl.out`: `{recordId, modelInput,
    modelOutput}`, or `error: {errorCode, errorMessage}` in place of the output when the
    inference failed; an input line has no output): the request with its response."""
    record_id = str(value["recordId"])
    error = value.get("error")
    if "modelOutput" not in value and isinstance(error, dict):
        detail = ", ".join(str(error[k]) for k in ("errorCode", "errorMessage")
                           if error.get(k) is not None)
        raise AdapterError(f"{pointer}/error", f"the batch record {record_id!r} did not run"
                                               + (f": {detail}" if detail else ""))
    if value.get("modelOutput") is None:
        return value["modelInput"], record_id
    return {k: value[k] for k in ("modelInput", "modelOutput")}, record_id  # (_unwrap)


def adapt(value: Any, number: int, pointer: str, default_id: str,
          limits: Limits, episode_id: str | None = None) -> AdaptedRecord:
    try:
        batch = _batch_result(value, pointer or "")
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc, episode_id=str(
            value.get("custom_id", value.get("recordId"))))
    if batch is not None:
        inner, custom_id = batch
        where = f"{pointer}/result/message" if "result" in value else f"{pointer}/params" \
            if "params" in value else f"{pointer}/modelInput" \
            if inner is value.get("modelInput") else f"{pointer}/request" \
            if inner is value.get("request") else pointer
        record = adapt(inner, number, where, custom_id, limits, episode_id=custom_id)
        record.pointer = pointer
        return record
    if _other_endpoint(value):
        return AdaptedRecord(number, pointer, notes=Counter(calls_to_other_endpoints=1),
                             is_record=False)
    try:
        record, messages, base, response = _unwrap(value, pointer or "", limits)
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc)
    episode_id = episode_id or _id(record) or _id(response) or default_id
    try:
        rows, pointers, notes = conversation_rows(record, messages, base, response,
                                                  pointer, episode_id, limits.max_depth)
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc, episode_id=episode_id)
    return AdaptedRecord(number, pointer, rows, pointers, episode_id=episode_id, notes=notes)


def _other_endpoint(value: Any) -> bool:
    """A logged call to an Anthropic endpoint other than Messages (claude-trace
    --include-all-requests: count_tokens, the OAuth and settings endpoints): no turn."""
    request = value.get("request") if isinstance(value, dict) else None
    url = request.get("url") if isinstance(request, dict) else None
    if not isinstance(url, str) or "anthropic.com" not in url:
        return False
    return not urlsplit(url).path.rstrip("/").endswith("/v1/messages")


def _id(record: Any) -> str | None:
    if isinstance(record, dict):
        for key in ("episode_id", "id"):
            if isinstance(record.get(key), str) and record[key]:
                return record[key]
    return None


def _unwrap(value: Any, pointer: str, limits: Limits
            ) -> tuple[dict, list, str, tuple[dict, str] | None]:
    """(the request-like record, its messages, their pointer, the response and its
    pointer) of any accepted shape."""
    if isinstance(value, list):
        if value and (_is_event(value[0]) or is_anthropic_error(value[0])):
            return {}, [], pointer, (stream_message(value, pointer), pointer)
        return {}, value, pointer, None
    if not isinstance(value, dict):
        raise AdapterError(pointer or "/", "expected a request, a response, an HTTP exchange "
                                           f"or a list of messages, got {type(value).__name__}")
    if "body" in value and ("status" in value or "headers" in value) \
            and not isinstance(value.get("messages"), list):
        body = _body(value["body"], f"{pointer}/body", limits)
        _api_error(body, f"{pointer}/body")
        record, messages, base, response = _unwrap(body, f"{pointer}/body", limits)
        request = value.get("request")
        if isinstance(request, dict):
            req = _body(request.get("body", request), f"{pointer}/request/body", limits)
            if isinstance(req, dict) and isinstance(req.get("messages"), list):
                return req, req["messages"], f"{pointer}/request/body/messages", response
        return record, messages, base, response
    if "request" in value and value.get("response") is None \
            and not isinstance(value.get("messages"), list):
        # a request whose response was never recorded (claude-trace's orphaned request)
        request = _body(value.get("request") or {}, f"{pointer}/request", limits)
        request = request.get("body", request) if isinstance(request, dict) else None
        if isinstance(request, dict) and isinstance(request.get("messages"), list):
            return request, request["messages"], f"{pointer}/request/body/messages", None
    if isinstance(value.get("response"), dict | str) and not isinstance(
            value.get("messages"), list) and "request" in value:
        request = _body(value.get("request") or {}, f"{pointer}/request", limits)
        request = request.get("body", request) if isinstance(request, dict) else {}
        response = _body(value["response"], f"{pointer}/response", limits)
        if isinstance(response, dict) and "content" not in response and "body" not in response \
                and isinstance(response.get("body_raw"), str):  # claude-trace: an SSE body
            response = _body(response["body_raw"], f"{pointer}/response/body_raw", limits)
        elif isinstance(response, dict) and "body" in response and "content" not in response:
            response = _body(response["body"], f"{pointer}/response/body", limits)
        _api_error(response, f"{pointer}/response")
        messages = request.get("messages") if isinstance(request, dict) else None
        return (request if isinstance(request, dict) else {}, messages or [],
                f"{pointer}/request/messages", (_response(response, f"{pointer}/response"),
                                                f"{pointer}/response"))
    if value.get("type") == "message" and value.get("role") == "assistant":
        return {}, [], pointer, (value, pointer)
    _api_error(value, pointer)  # an error response on its own
    if isinstance(value.get("modelInput"), dict) and "modelOutput" in value:
        request, response = value["modelInput"], value["modelOutput"]  # Bedrock batch
        _api_error(response, f"{pointer}/modelOutput")
        return (request, request.get("messages") or [], f"{pointer}/modelInput/messages",
                (_response(response, f"{pointer}/modelOutput"), f"{pointer}/modelOutput"))
    if value.get("type") == "message_start":
        return {}, [], pointer, (stream_message([value], pointer), pointer)
    messages = value.get("messages")
    if not isinstance(messages, list):
        raise AdapterError(f"{pointer}/messages", "a conversation needs a `messages` list (or "
                                                  "the record is a response, `type: message`)")
    return value, messages, f"{pointer}/messages", None


def _api_error(response: Any, where: str) -> None:
    """A recorded call that the API answered with an error (`{type: error, error: {type,
    message}}`, an overloaded or invalid request): no turn of the model to read."""
    if isinstance(response, dict) and response.get("type") == "error":
        error = response.get("error") if isinstance(response.get("error"), dict) else {}
        detail = ", ".join(str(error[k]) for k in ("type", "message") if error.get(k))
        raise AdapterError(f"{where}/type", "the API call failed" +
                           (f": {detail}" if detail else ""))


def _response(value: Any, where: str) -> dict:
    if isinstance(value, list) and value and _is_event(value[0]):
        return stream_message(value, where)
    if not isinstance(value, dict):
        raise AdapterError(where, f"a response is an object, got {type(value).__name__}")
    return value


def _body(body: Any, where: str, limits: Limits) -> Any:
    """An HTTP body: an object as is, JSON text parsed, an event stream put together."""
    if not isinstance(body, str):
        return body
    text = body.lstrip()
    if text.startswith(("event:", "data:")):
        return stream_message(sse_events(text, where, limits), where)
    try:
        return load_record(body.encode("utf-8", "surrogatepass"), limits)
    except RecordRejected as exc:
        raise AdapterError(where, f"the body is {exc.reason}") from None


def sse_events(text: str, where: str, limits: Limits) -> list[dict]:
    """The `data:` payloads of a server-sent event stream, in order."""
    events = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            events.append(load_record(payload.encode("utf-8", "surrogatepass"), limits))
        except RecordRejected as exc:
            raise AdapterError(where, f"an event of the stream is {exc.reason}") from None
    return events


def stream_message(events: list, where: str) -> dict:
    """The message a Messages API event stream describes (message_start, content_block_*,
    message_delta); tool_use input from its input_json_delta pieces. An `error` event
    (overloaded mid-stream) ends it: what came before is kept, the error in the message's
    `stream_error`; a stream that is only an error is one."""
    message: dict | None = None
    blocks: dict[int, dict] = {}
    partial: dict[int, list[str]] = {}
    for k, e in enumerate(events):
        if not isinstance(e, dict):
            raise AdapterError(f"{where}/{k}", "a stream event is an object")
        kind = e.get("type")
        if kind == "message_start":
            message = dict(e.get("message") or {})
        elif kind == "content_block_start":
            blocks[int(e.get("index", len(blocks)))] = dict(e.get("content_block") or {})
        elif kind == "content_block_delta":
            i = int(e.get("index", 0))
            block = blocks.setdefault(i, {"type": "text", "text": ""})
            delta = e.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = (block.get("text") or "") + (delta.get("text") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = (block.get("thinking") or "") + (delta.get("thinking") or "")
            elif dtype == "input_json_delta":
                partial.setdefault(i, []).append(delta.get("partial_json") or "")
        elif kind == "error":  # the API's error event: the stream stopped there
            error = e.get("error") if isinstance(e.get("error"), dict) else {}
            if message is None:
                detail = ", ".join(str(error[k]) for k in ("type", "message") if error.get(k))
                raise AdapterError(f"{where}/{k}", "the stream is an API error" +
                                   (f": {detail}" if detail else ""))
            message["stream_error"] = error
        elif kind == "message_delta" and message is not None:
            delta = e.get("delta") or {}
            message.update({k2: v for k2, v in delta.items() if v is not None})
            if isinstance(e.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **e["usage"]}
    if message is None:
        raise AdapterError(where, "an event stream without a message_start event")
    cut = []
    for i, pieces in partial.items():
        text = "".join(pieces)
        try:
            blocks[i]["input"] = orjson.loads(text) if text.strip() else {}
        except orjson.JSONDecodeError:  # cut by max_tokens, or the model's own bad JSON
            blocks[i]["input"] = orjson.dumps(text).decode()  # kept: the text, a string
            cut.append(blocks[i].get("id"))
    if cut:
        message["tool_input_not_json"] = cut
    message["content"] = [blocks[i] for i in sorted(blocks)]
    message.setdefault("role", "assistant")
    return message


def _tokens(usage: Any) -> tuple[int, int]:
    if not isinstance(usage, dict):
        return 0, 0
    prompt = sum(v for k, v in usage.items() if type(v) is int and k in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    completion = usage.get("output_tokens")
    return prompt, completion if type(completion) is int else 0


_RESPONSE_KEPT = ("id", "stop_reason", "stop_sequence", "usage", "model", "container")


def conversation_rows(record: dict, messages: list, base: str,
                      response: tuple[dict, str] | None, pointer: str, episode_id: str,
                      max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[list[dict], list[str], Any]:
    tool_names = tool_names_of(record.get("tools"))
    model = record.get("model") if isinstance(record.get("model"), str) else None
    if response is not None and isinstance(response[0].get("model"), str):
        model = model or response[0]["model"]
    turns = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    prompt = completion = 0
    for m in [*turns, *([response[0]] if response else [])]:
        p, c = _tokens(m.get("usage"))
        prompt, completion = prompt + p, completion + c
    common = {"task": None if record.get("task_id") is None else str(record["task_id"]),
              "state": {"available_tools": tool_names},
              "metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "prompt_tokens": prompt or None,
                          "completion_tokens": completion or None}}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    system = record.get("system")
    if system is not None:
        builder.feed(Message("system", text_of(system), f"{pointer}/system"))
    for j, m in enumerate(messages):
        _feed(builder, _message(m, f"{base}/{j}", max_depth))
    if response is not None:
        body, where = response
        _feed(builder, _message(body, where, max_depth))
    reward, components = reward_value(record.get("reward"), f"{pointer}/reward")
    kept = {k: v for k, v in record.items() if k not in ("messages", "system", "tools", "reward",
                                                          "id", "episode_id", "task_id")}
    rows, pointers = builder.finish(pointer or "/", reward, components, "anthropic:reward",
                                    {"episode": kept} if kept else None)
    return rows, pointers, builder.notes


def _feed(builder: EpisodeBuilder, msg: Message) -> None:
    """A message into the episode. A server tool's result in an assistant message whose
    call is not in the conversation (a response logged alone that continues a
    `pause_turn`, whose server_tool_use was in the request) is an environment event,
    counted `results_without_call`, not an error."""
    fallback = (msg.extra or {}).get("fallback") if msg.role == "assistant" else None
    metadata = {"behavior_policy": fallback["to"]} if fallback and fallback.get("to") else None
    if msg.role != "assistant" or not msg.results:
        builder.feed(msg, metadata=metadata)
        return
    builder.feed(replace(msg, results=[]), metadata=metadata)
    for r in msg.results:
        if builder.match(r.call_id, r.name) is not None:
            builder.tool_result(r.pointer, r.call_id, r.content, r.error, r.name)
        else:
            builder.notes["results_without_call"] += 1
            builder.event("environment", "tool_result", content=r.content,
                          call_id=r.call_id, error=r.error)


def _message(m: Any, where: str, max_depth: int) -> Message:
    msg = normalize(m, where, max_depth)
    if msg.role == "assistant" and isinstance(m, dict):
        extra = {k: v for k, v in (msg.extra or {}).items() if k not in ("type",)}
        msg.extra = {k: v for k, v in extra.items() if k in _RESPONSE_KEPT or k not in (
            "stop_details",) or v is not None} or None  # a refusal's stop_details: kept
        switch = _fallback(m.get("content"))
        if switch is not None:
            msg.extra = {**(msg.extra or {}), "fallback": switch}
    return msg


def _fallback(content: Any) -> dict | None:
    """A `fallback` block (the API's refusal fallback: `{from: {model}, to: {model},
    trigger}`): the blocks after it are the `to` model's, so the turn's behaviour policy."""
    if not isinstance(content, list):
        return None
    for block in content:
        if isinstance(block, dict) and block.get("type") == "fallback":
            ends = {k: (block.get(k) or {}).get("model") if isinstance(block.get(k), dict)
                    else None for k in ("from", "to")}
            trigger = block.get("trigger")
            return {**ends, "trigger": trigger.get("type") if isinstance(trigger, dict)
                    else None}
    return None
