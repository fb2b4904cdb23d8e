"""OpenAI chat-completions conversations → native step records, one episode each.

Accepted shapes (JSON or JSONL; JSONL: one conversation per line, in any of these forms):
- a bare list of messages (`[{"role": ...}, ...]`), or `{"messages": [...]}`;
- a list of records, each with a `messages` (or `traj`) list and optional `reward`,
  `task_id`, `trial`, `info`, `id` (and `tools`: the tool definitions offered).

Messages: `role` system | user | assistant | tool | function; `content` a string, null, or
a list of parts (text parts are joined); assistant `tool_calls[].function{name, arguments}`
where arguments is a JSON *string* (a malformed one quarantines the conversation, naming
it), `tool` messages answer a call by `tool_call_id`; the older `function_call` on the
assistant and `role: function` answering it by name.

episode_id = the record's `id` (or `episode_id`) when it has one, else
``<file name>:<record number>``; task = `task_id`; episode.trial = `trial`; reward on the
done row = `reward` (a number, or an object whose numeric entries become the done row's
reward_components, with `reward`/`total` as the reward). Fields the schema does not name
are kept: the record's under `extra.episode` of the done row, an assistant message's under
its row's `extra`. `read` counts conversations.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from tracerl.data.adapters import AdaptedRecord, AdapterError
from tracerl.data.adapters.dialogue import (
    DEFAULT_MAX_DEPTH,
    EpisodeBuilder,
    json_in_text,
    numeric_components,
)
from tracerl.data.adapters.jsonstream import first_byte, read_capped, stream_array
from tracerl.data.ingest.limits import (
    Limits,
    RecordRejected,
    head_text,
    load_record,
    oversize_reason,
    plan_guarded,
    skipped_field,
)
from tracerl.data.ingest.parse import _BOM, raw_text
from tracerl.data.schema import canonical_json

_RECORD_MAPPED = frozenset({"messages", "traj", "reward", "task_id", "trial", "id",
                            "episode_id", "tools"})
_ASSISTANT_MAPPED = frozenset({"role", "content", "tool_calls", "function_call"})
_QUARANTINED_BYTES = 1000  # of a rejected line's text (the native reader keeps the same)


def read_openai_chat(path: Path, limits: Limits | None = None) -> Iterator[AdaptedRecord]:
    """One AdaptedRecord per conversation of a JSON or JSONL file.

    JSONL goes through the native reader's guards (tracerl.data.ingest.limits): a line over
    max_record_bytes is rejected from newline positions alone, never loaded; nesting,
    encoding and NaN/Infinity are named; a cut .gz is read up to the cut."""
    limits = limits or Limits()
    name = path.name
    if name.endswith((".jsonl", ".jsonl.gz")):
        for batch in plan_guarded(path, 1000, limits):
            lines, _ = batch.read()
            skipped = {line: (reason, head) for line, reason, head in batch.skipped}
            for number in sorted({*range(batch.first_line, batch.first_line + len(lines)),
                                  *skipped}):
                if number in skipped:
                    reason, head = skipped[number]
                    yield AdaptedRecord(number, "", error=AdapterError(
                        skipped_field(reason), reason), text=head)
                    continue
                line = lines[number - batch.first_line]
                if number == 1 and line.startswith(_BOM):
                    line = line[len(_BOM):]
                if not line.strip():
                    continue
                try:
                    value = load_record(line, limits)
                except RecordRejected as exc:
                    yield AdaptedRecord(number, "", error=AdapterError(exc.field, exc.reason),
                                        text=raw_text(line[:_QUARANTINED_BYTES]))
                    continue
                yield _adapt(value, number, "", f"{path.name}:{number}", limits.max_depth)
        return
    yield from _read_document(path, limits)


def _read_document(path: Path, limits: Limits) -> Iterator[AdaptedRecord]:
    """A JSON document: a list of records (each one a record under the guards, streamed),
    or one conversation (a bare list of messages or an object), which is one record: over
    max_record_bytes it is rejected without being loaded."""
    name = path.name
    first = first_byte(path)
    if not first:
        return  # an empty file holds no record
    if first == b"[":
        elements = stream_array(path, limits)
        head = next(elements, None)
        if head is None:
            return
        bare = head.rejected is None and isinstance(head.value, dict) and "role" in head.value
        if not bare:  # a list of records
            for element in chain([head], elements):
                number = element.index + 1
                if element.rejected is not None:
                    yield AdaptedRecord(number, f"/{element.index}", error=AdapterError(
                        element.rejected.field, element.rejected.reason), text=element.text)
                else:
                    yield _adapt(element.value, number, f"/{element.index}", f"{name}:{number}",
                                 limits.max_depth)
            return
    data, size, head_bytes, cut = read_capped(path, limits.max_record_bytes)
    if cut is not None:
        yield AdaptedRecord(1, "", error=AdapterError("<file>", f"{cut} inside this record, "
                                                      f"after {size:,} bytes of it"),
                            text=head_text(head_bytes, size))
    elif data is None:
        yield AdaptedRecord(1, "", error=AdapterError(
            "<record>", oversize_reason(size, limits.max_record_bytes)),
            text=head_text(head_bytes, size))
    else:
        try:
            value = load_record(data, limits)
        except RecordRejected as exc:
            yield AdaptedRecord(1, "", error=AdapterError(exc.field, exc.reason),
                                text=raw_text(data[:_QUARANTINED_BYTES]))
            return
        yield _adapt(value, 1, "", f"{name}:1", limits.max_depth)


def _adapt(value: Any, number: int, pointer: str, default_id: str,
           max_depth: int) -> AdaptedRecord:
    episode_id = _get_id(value) or default_id
    try:
        rows, pointers = conversation_rows(value, pointer, episode_id, max_depth)
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc, episode_id=episode_id)
    return AdaptedRecord(number, pointer, rows, pointers, episode_id=episode_id)


def _get_id(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in ("id", "episode_id"):
            if isinstance(value.get(key), str) and value[key]:
                return value[key]
    return None


def _text(content: Any) -> str | None:
    """Message content as text: list-of-parts content is joined from its text parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    return canonical_json(content)


def _arguments(raw: Any, where: str, max_depth: int) -> Any:
    """Tool-call arguments: a JSON string (as the API sends them) or an already parsed
    object; a string that is not JSON, or nests deeper than max_depth, is an error naming
    where it is."""
    if raw is None or isinstance(raw, dict | list):
        return raw
    if not isinstance(raw, str):
        raise AdapterError(where, f"arguments must be a JSON string, got {type(raw).__name__}")
    if not raw.strip():
        return None
    try:
        return json_in_text(raw, max_depth)
    except RecordRejected as exc:
        raise AdapterError(where, f"arguments are {exc.reason}: {raw[:60]!r}") from None


def conversation_rows(value: Any, pointer: str, episode_id: str,
                      max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[list[dict], list[str]]:
    """(native step records, their JSON pointers) of one conversation."""
    record: dict = {}
    if isinstance(value, list):
        messages, base = value, pointer
    elif isinstance(value, dict):
        record = value
        key = "messages" if "messages" in value else "traj"
        messages, base = value.get(key), f"{pointer}/{key}"
        if not isinstance(messages, list):
            raise AdapterError(base, "a conversation needs a `messages` (or `traj`) list")
    else:
        raise AdapterError(pointer or "/", f"expected a list of messages or an object with "
                                           f"`messages`, got {type(value).__name__}")
    tools = record.get("tools")
    tool_names = sorted({_tool_name(t) for t in tools} - {None}) \
        if isinstance(tools, list) else None
    trial = record.get("trial")
    common = {"task": None if record.get("task_id") is None else str(record["task_id"]),
              "state": {"available_tools": tool_names},
              "episode": {"trial": trial} if type(trial) is int else None}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    for j, m in enumerate(messages):
        _feed(builder, m, f"{base}/{j}")
    reward, components = _reward(record.get("reward"), f"{pointer}/reward")
    episode_extra = {k: v for k, v in record.items() if k not in _RECORD_MAPPED}
    return builder.finish(pointer or "/", reward, components, "openai-chat:reward",
                          {"episode": episode_extra} if episode_extra else None)


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return None
    name = tool.get("function", {}).get("name") if isinstance(tool.get("function"), dict) \
        else tool.get("name")
    return name if isinstance(name, str) else None


def _reward(value: Any, where: str) -> tuple[float | None, dict[str, float] | None]:
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e308:
        return float(value), None
    if value is not None and not isinstance(value, dict):
        raise AdapterError(where, f"expected a number or an object of numbers, got "
                                  f"{type(value).__name__} {value!r:.60}")
    components = numeric_components(value)
    if components is None:
        return None, None
    total = components.get("reward", components.get("total"))
    return total, components


def _feed(builder: EpisodeBuilder, m: Any, where: str) -> None:
    if not isinstance(m, dict):
        raise AdapterError(where, f"a message is an object, got {type(m).__name__}")
    role = m.get("role")
    if role == "assistant":
        calls, pointers = [], []
        raw_calls = m.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise AdapterError(f"{where}/tool_calls", "expected a list")
        for k, c in enumerate(raw_calls):
            at = f"{where}/tool_calls/{k}"
            function = c.get("function") if isinstance(c, dict) else None
            if not isinstance(function, dict):
                raise AdapterError(f"{at}/function", "a tool call needs a `function` object")
            calls.append((c.get("id"), function.get("name"),
                          _arguments(function.get("arguments"), f"{at}/function/arguments",
                                     builder.max_depth)))
            pointers.append(at)
        legacy = m.get("function_call")
        if isinstance(legacy, dict):
            at = f"{where}/function_call"
            # No id in the legacy form: the `function` message answers it by name.
            calls.append((f"{where}#function_call", legacy.get("name"),
                          _arguments(legacy.get("arguments"), f"{at}/arguments",
                                     builder.max_depth)))
            pointers.append(at)
        extra = {k: v for k, v in m.items() if k not in _ASSISTANT_MAPPED and v is not None}
        builder.assistant(where, _text(m.get("content")), calls, extra=extra or None,
                          call_pointers=pointers)
    elif role in ("user", "system", "developer"):
        builder.event("system" if role == "developer" else role, "message",
                      content=_text(m.get("content")))
    elif role == "tool":
        builder.tool_result(where, m.get("tool_call_id"), m.get("content"))
    elif role == "function":
        name = m.get("name")
        builder.tool_result(where, builder.unanswered_call(name) if isinstance(name, str)
                            else None, m.get("content"))
    else:
        raise AdapterError(f"{where}/role", f"unknown role {role!r} (expected system, user, "
                                            "assistant, tool or function)")
