"""Gemini CLI sessions (`~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.jsonl`, and
the older whole-file `.json`) → native step records, one episode per session file.

Written by ChatRecordingService (google-gemini/gemini-cli, packages/core/src/services/
chatRecordingService.ts, chatRecordingTypes.ts): the `.json` is a ConversationRecord
`{sessionId, projectHash, startTime, lastUpdated, messages: [MessageRecord], summary?,
kind?}`; the `.jsonl` starts with that metadata (no messages), then appends lines: a
MessageRecord (a message written again with the same `id` replaces it, in its first place),
`{$rewindTo: <id>}` (that message and every later one are dropped: a rewind), `{$set:
{...}}` (metadata updates). A MessageRecord `{id, timestamp, type: user | gemini | info |
error | warning, content (text or parts), thoughts?, tokens?: {input, output, cached,
thoughts, tool, total}, model?, toolCalls?: [{id, name, args, result (functionResponse
parts), status: success | error | cancelled | ..., timestamp}]}`. A sub-agent's session is
a file of its own (`chats/<parent session>/<id>.jsonl`, `kind: "subagent"`).

Mapping: a `gemini` message is one turn: its tool calls one `tool_call` row each (their
`result`s the observations: the functionResponse's `response`; status `error` or
`cancelled`, or a response carrying an `error` → observation.error, that error's text
when it has one), or a
`message` row; its thought summaries `extra.reasoning`, its `model` the behaviour policy,
its tokens summed into the episode's. User messages are events (the first the user_goal);
info, warning and error messages system events. A rewind's dropped messages are no
actions (counted: `rewound_messages`). No reward. episode_id: the sessionId.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import arguments, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.formats.gemini_cli.stream_json import (
    is_json_output,
    is_stream_event,
    json_output_error,
    stream_rows,
)
from tracerl.data.ingest.limits import Limits


def is_session(value: Any) -> bool:
    """A session's metadata (the `.jsonl`'s first line) or a whole `.json` session:
    `sessionId` beside `projectHash`."""
    return isinstance(value, dict) and isinstance(value.get("sessionId"), str) and \
        isinstance(value.get("projectHash"), str)


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    lines: list[tuple[Any, str]] = []
    for raw in json_records(path, limits):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer or f"/{raw.number}", error=raw.error,
                                text=raw.text)
            continue
        lines.append((raw.value, raw.pointer if not raw.jsonl else f"/{raw.number}"))
    if not lines:
        return
    if is_json_output(lines[0][0]):  # `--output-format json` (one a line): no actions
        for number, (value, where) in enumerate(lines, 1):
            yield AdaptedRecord(number, where, error=json_output_error(value, where)
                                if is_json_output(value) else
                                AdapterError(where, "not a Gemini CLI `--output-format json` "
                                                    "result like the file's first"))
        return
    if any(is_stream_event(value) for value, _ in lines[:3]):  # `--output-format stream-json`
        try:
            episode_id, rows, pointers, more = stream_rows(
                lines, path.name.removesuffix(".jsonl") or fallback_episode_id(path, 1, options),
                limits.max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(1, "", error=exc)
            return
        yield AdaptedRecord(1, "", rows, pointers, episode_id=episode_id, notes=more)
        return
    try:
        metadata, messages, notes = session(lines)
        episode_id = metadata.get("sessionId") if isinstance(metadata.get("sessionId"), str) \
            else fallback_episode_id(path, 1, options)
        rows, pointers, more = session_rows(metadata, messages, episode_id, limits.max_depth)
    except AdapterError as exc:
        yield AdaptedRecord(1, "", error=exc)
        return
    more.update(notes)
    yield AdaptedRecord(1, "", rows, pointers, episode_id=episode_id, notes=more)


def session(lines: list[tuple[Any, str]]) -> tuple[dict, list[tuple[dict, str]], Counter]:
    """(metadata, the live messages with their pointers, notes) of a session's records,
    as loadConversationRecord reads them."""
    notes: Counter = Counter()
    metadata: dict = {}
    messages: dict[str, tuple[dict, str]] = {}  # insertion order: a rewrite keeps its place
    for value, where in lines:
        if not isinstance(value, dict):
            raise AdapterError(where, f"a session record is an object, got "
                                      f"{type(value).__name__}")
        if isinstance(value.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(value["$rewindTo"]) if value["$rewindTo"] in ids else 0
            for dropped in ids[cut:]:
                del messages[dropped]
            notes["rewound_messages"] += len(ids) - cut
        elif isinstance(value.get("id"), str):
            messages[value["id"]] = (value, where)
        elif isinstance(value.get("$set"), dict):
            metadata.update(value["$set"])
        elif is_session(value):
            metadata.update({k: v for k, v in value.items() if k != "messages"})
            if isinstance(value.get("messages"), list):  # the whole-file .json
                for j, m in enumerate(value["messages"]):
                    at = f"{where}/messages/{j}"
                    if not isinstance(m, dict):
                        raise AdapterError(at, "a message is an object")
                    messages[str(m.get("id", at))] = (m, at)
        else:
            notes["unknown_records"] += 1
    listed = metadata.get("messages")
    if isinstance(listed, list) and listed:  # messages set as metadata win, as the CLI reads
        return metadata, [(m, f"/$set/messages/{j}") for j, m in enumerate(listed)
                          if isinstance(m, dict)], notes
    return metadata, list(messages.values()), notes


def session_rows(metadata: dict, messages: list[tuple[dict, str]], episode_id: str,
                 max_depth: int) -> tuple[list[dict], list[str], Counter]:
    prompt = completion = 0
    model = None
    for m, _ in messages:
        tokens = m.get("tokens") if isinstance(m.get("tokens"), dict) else {}
        prompt += tokens.get("input") if type(tokens.get("input")) is int else 0
        completion += tokens.get("output") if type(tokens.get("output")) is int else 0
        if model is None and isinstance(m.get("model"), str):
            model = m["model"]
    builder = EpisodeBuilder(episode_id, {"episode": {
        "agent_model": model, "prompt_tokens": prompt or None,
        "completion_tokens": completion or None}}, max_depth)
    for m, where in messages:
        kind = m.get("type")
        text = text_of(m.get("content"))
        if kind == "gemini":
            _turn(builder, m, where, text, max_depth)
        elif kind == "user":
            builder.event("user", "message", content=text)
        elif kind in ("info", "warning", "error"):
            builder.event("system", "message", content=text, error=text if kind == "error"
                          else None)
        else:
            raise AdapterError(f"{where}/type", f"unknown message type {kind!r} (expected "
                                                "user, gemini, info, warning or error)")
    kept = {k: v for k, v in metadata.items() if k in ("summary", "kind", "projectHash",
                                                        "startTime", "lastUpdated")}
    rows, pointers = builder.finish("/", None, None, None, {"episode": kept} if kept else None)
    return list(rows), list(pointers), builder.notes


def _turn(builder: EpisodeBuilder, m: dict, where: str, text: str | None,
          max_depth: int) -> None:
    raw_calls = m.get("toolCalls") or []
    if not isinstance(raw_calls, list):
        raise AdapterError(f"{where}/toolCalls", "expected a list of tool calls")
    calls = []
    for k, c in enumerate(raw_calls):
        at = f"{where}/toolCalls/{k}"
        if not isinstance(c, dict):
            raise AdapterError(at, "a tool call is an object")
        calls.append((c.get("id"), c.get("name"), arguments(c.get("args"), f"{at}/args",
                                                            max_depth), at))
    thoughts = [f"{t.get('subject', '')}: {t.get('description', '')}".strip(": ")
                for t in m.get("thoughts") or [] if isinstance(t, dict)]
    model = m.get("model") if isinstance(m.get("model"), str) else None
    builder.assistant(where, text, calls,
                      extra={"reasoning": "\n".join(thoughts)} if thoughts else None,
                      metadata={"behavior_policy": model} if model else None)
    for k, c in enumerate(raw_calls):
        if c.get("result") is None and c.get("status") not in ("error", "cancelled"):
            continue  # not run (yet): no observation
        content, error = _result(c)
        builder.tool_result(f"{where}/toolCalls/{k}/result", c.get("id"), content, error)


def _result(call: dict) -> tuple[Any, str | None]:
    """(a call's result as stored, its error): the functionResponse's `response` (its
    `output` when that is all it holds)."""
    result = call.get("result")
    parts = result if isinstance(result, list) else [result] if result is not None else []
    responses = []
    for p in parts:
        inner = p.get("functionResponse") if isinstance(p, dict) else None
        if isinstance(inner, dict):
            responses.append(inner.get("response"))
        elif p is not None:
            responses.append(text_of(p) if not isinstance(p, str) else p)
    content: Any = responses[0] if len(responses) == 1 else responses or None
    if isinstance(content, dict) and content.keys() == {"output"}:
        content = content["output"]
    status = call.get("status")
    detail = content.get("error") if isinstance(content, dict) else None
    error = None
    if status in ("error", "cancelled") or detail:  # a response `{error: ...}` failed too
        error = str(detail) if detail else str(status)
    return content, error
