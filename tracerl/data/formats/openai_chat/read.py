"""OpenAI chat-completions conversations → native step records, one episode each.

Accepted shapes (JSON or JSONL; JSONL: one conversation per line, in any of these forms):
- a bare list of messages (`[{"role": ...}, ...]`), or `{"messages": [...]}`;
- a list of records, each with a `messages` (or `traj`) list and optional `reward`,
  `task_id`, `trial`, `info`, `id` (and `tools`: the tool definitions offered);
- a logged chat completion call: `{request: {messages, tools?, ...}, response:
  <ChatCompletion>}` (call loggers, gateways) or OpenPipe's export `{input, output, tags}`:
  the request's messages, then the response's first choice's message (a response with
  none, such as an error, adds none); the request's and response's other fields are kept
  under `extra.episode`.
- a conversational prompt-completion record (TRL's dataset format; the verifiers
  library's eval results): `prompt` and `completion` message lists, read one after the
  other, with `reward` and the other columns as above;
- `conversations` instead of `messages`: OpenAI messages, or ShareGPT turns (`from`
  human | gpt | system | function_call | observation, `value`; LLaMA-Factory's tool
  turns: a function_call's value is JSON text of `{name, arguments}` or a list of them,
  an observation answers the earliest unanswered call; the calls get ids
  `sharegpt:<turn>:<k>`), with a `system` string and `tools` as JSON text.
`messages` (and `tools`) given as JSON text, as datasets with string columns keep them,
are parsed.
A bare list is a conversation when its first element is a message (`role`, or a
LangChain dump's `type` human | ai | system | tool, also messages_to_dict's `{type,
data}`).

Messages (tracerl.data.formats.common.messages): `role` system | developer | user | assistant |
tool | function; `content` a string, null (beside tool calls), or a list of typed parts
(text parts are joined); assistant `tool_calls[].function{name, arguments}` where arguments
is a JSON string (as the API sends it) or an object (a malformed string quarantines the
conversation, naming it); `tool` messages answer a call by `tool_call_id` within its turn
(a call id reused in a later turn is kept, and counted); the older `function_call` on the
assistant and `role: function` answering it by name. LangChain and Responses-API message
dicts in a conversation are read the same way.

episode_id = the record's `id` (or `episode_id`) when it has one, else
``<file name>:<record number>``; task = `task_id`; episode.trial = `trial`; reward on the
done row = `reward` (a number, or an object whose numeric entries become the done row's
reward_components, with `reward`/`total` as the reward). Fields the schema does not name
are kept: the record's under `extra.episode` of the done row, an assistant message's under
its row's `extra`. `read` counts conversations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import (
    DEFAULT_MAX_DEPTH,
    EpisodeBuilder,
    numeric_components,
)
from tracerl.data.formats.common.messages import json_in_text, normalize, output_messages
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits, RecordRejected

_RECORD_MAPPED = frozenset({"messages", "traj", "reward", "task_id", "trial", "id",
                            "episode_id", "tools"})
_PART_KEYS = frozenset({"prompt", "completion", "conversations", "system"})


_LANGCHAIN_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat",
                              "AIMessageChunk", "HumanMessageChunk", "ToolMessageChunk"})


def is_message(value: Any) -> bool:
    """A chat message (so a list starting with one is a bare conversation): `role`, or a
    LangChain message dump (`type` human | ai | system | tool with `content`, or the
    serialised `{"lc": 1, "type": "constructor", ...}`)."""
    if not isinstance(value, dict):
        return False
    if "role" in value:
        return True
    return (value.get("type") in _LANGCHAIN_TYPES and (
        "content" in value or (isinstance(value.get("data"), dict)
                               and "content" in value["data"]))) or (
        value.get("lc") == 1 and isinstance(value.get("kwargs"), dict))


# A logged model call: the request and the completion it got, under these key pairs
# (`{request, response}` of hand-rolled call loggers and gateways; `{input, output}` of
# OpenPipe's request-log export).
CALL_PAIRS = (("request", "response"), ("input", "output"))


def call_pair(value: Any) -> tuple[str, str] | None:
    """The (request key, response key) of a logged chat completion call: a record whose
    request is a chat request (`messages` list), or None."""
    if not isinstance(value, dict) or "messages" in value or "traj" in value:
        return None
    for request, response in CALL_PAIRS:
        inner = value.get(request)
        if isinstance(inner, dict) and isinstance(inner.get("messages"), list) \
                and response in value:
            return request, response
    return None


def read_openai_chat(path: Path, limits: Limits | None = None,
                     options: Any = None, batch: Any = None) -> Iterator[AdaptedRecord]:
    """One AdaptedRecord per conversation of a JSON or JSONL file (records under the
    native reader's guards: tracerl.data.formats.common.records)."""
    limits = limits or Limits()
    for raw in json_records(path, limits, whole=is_message, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        yield adapt(raw.value, raw.number, raw.pointer,
                    fallback_episode_id(path, raw.number, options), limits.max_depth)


def adapt(value: Any, number: int, pointer: str, default_id: str,
          max_depth: int = DEFAULT_MAX_DEPTH) -> AdaptedRecord:
    episode_id = _get_id(value) or default_id
    try:
        rows, pointers, notes = conversation_rows(value, pointer, episode_id, max_depth)
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc, episode_id=episode_id)
    return AdaptedRecord(number, pointer, rows, pointers, episode_id=episode_id, notes=notes)


def _get_id(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in ("id", "episode_id"):
            if isinstance(value.get(key), str) and value[key]:
                return value[key]
    return None


def conversation_rows(value: Any, pointer: str, episode_id: str,
                      max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[list[dict], list[str], Any]:
    """(native step records, their JSON pointers, the builder's notes) of one
    conversation."""
    record: dict = {}
    pair = call_pair(value)
    if pair is not None:
        return _call_rows(value, pair, pointer, episode_id, max_depth)
    if isinstance(value, list):
        parts = [(value, pointer)]
    elif isinstance(value, dict):
        record = value
        parts = _record_messages(value, pointer)
    else:
        raise AdapterError(pointer or "/", f"expected a list of messages or an object with "
                                           f"`messages`, got {type(value).__name__}")
    tools = record.get("tools")
    if isinstance(tools, str) and tools.lstrip()[:1] == "[":  # (datasets: JSON text)
        try:
            tools = json_in_text(tools, max_depth)
        except RecordRejected:
            tools = None
    tool_names = tool_names_of(tools)
    trial = record.get("trial")
    common = {"task": None if record.get("task_id") is None else str(record["task_id"]),
              "state": {"available_tools": tool_names},
              "episode": {"trial": trial} if type(trial) is int else None}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    for messages, base in parts:
        builder.feed_all(messages, base)
    reward, components = reward_value(record.get("reward"), f"{pointer}/reward")
    read = {part.rsplit("/", 1)[-1] for _, part in parts}
    episode_extra = {k: v for k, v in record.items() if k not in _RECORD_MAPPED
                     and not (k in _PART_KEYS and k in read)}
    done_extra = {"episode": episode_extra} if episode_extra else {}
    definitions = [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    if definitions:  # the offered tools' definitions, for the exports (tracerl.export.tools)
        done_extra["tool_definitions"] = definitions
    rows, pointers = builder.finish(pointer or "/", reward, components, "openai-chat:reward",
                                    done_extra or None)
    return rows, pointers, builder.notes


def prompt_completion(value: Any) -> bool:
    """A conversational prompt-completion record (TRL's dataset format, the verifiers
    library's eval results): `prompt` and `completion`, both lists of messages."""
    if not isinstance(value, dict) or "messages" in value or "traj" in value:
        return False
    prompt, completion = value.get("prompt"), value.get("completion")
    return isinstance(prompt, list) and isinstance(completion, list) and any(
        is_message(m) for m in prompt[:1] + completion[:1])


def _record_messages(value: dict, pointer: str) -> list[tuple[list, str]]:
    """The (messages, their pointer) lists of a conversation record, in order."""
    if prompt_completion(value):
        return [(value["prompt"], f"{pointer}/prompt"),
                (value["completion"], f"{pointer}/completion")]
    key = "messages" if "messages" in value else "traj" if "traj" in value \
        else "conversations" if isinstance(value.get("conversations"), list) else "messages"
    messages = value.get(key)
    if isinstance(messages, str) and messages.lstrip()[:1] == "[":
        # datasets that keep the list as JSON text (a string column)
        try:
            messages = json_in_text(messages, DEFAULT_MAX_DEPTH)
        except RecordRejected as exc:
            raise AdapterError(f"{pointer}/{key}", f"messages given as text are "
                                                   f"{exc.reason}") from None
    if not isinstance(messages, list):
        raise AdapterError(f"{pointer}/{key}", "a conversation needs a `messages` (or "
                                               "`traj`, `conversations`) list")
    if key == "conversations" and is_sharegpt(messages):
        parts = [(sharegpt_messages(messages, f"{pointer}/{key}"), f"{pointer}/{key}")]
        if isinstance(value.get("system"), str) and value["system"]:
            parts.insert(0, ([{"role": "system", "content": value["system"]}],
                             f"{pointer}/system"))
        return parts
    return [(messages, f"{pointer}/{key}")]


# ShareGPT `from` values (LLaMA-Factory's dataset format, with its tool-calling turns)
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant",
                   "assistant": "assistant", "chatgpt": "assistant", "bard": "assistant",
                   "model": "assistant", "system": "system", "function_call": "call",
                   "tool_call": "call", "observation": "result", "tool": "result",
                   "function_response": "result", "tool_response": "result"}


def is_sharegpt(messages: list) -> bool:
    """ShareGPT turns: `{from, value}` objects."""
    return bool(messages) and isinstance(messages[0], dict) and "from" in messages[0] \
        and "value" in messages[0] and "role" not in messages[0]


def sharegpt_messages(turns: list, where: str) -> list[dict]:
    """ShareGPT turns as chat messages, one for one: human → user, gpt → assistant,
    system; `function_call` (value: JSON text of `{name, arguments}`, or a list of them,
    or that object) → an assistant message calling them; `observation` → the tool
    result of the earliest call not answered yet (the format has no call ids: the calls
    are given `sharegpt:<turn>:<k>`)."""
    out: list[dict] = []
    pending: list[str] = []
    for j, turn in enumerate(turns):
        at = f"{where}/{j}"
        if not isinstance(turn, dict):
            raise AdapterError(at, f"a turn is an object, got {type(turn).__name__}")
        kind = _SHAREGPT_ROLES.get(str(turn.get("from")).lower())
        if kind is None:
            raise AdapterError(f"{at}/from", f"unknown ShareGPT role {turn.get('from')!r} "
                                             "(expected human, gpt, system, function_call "
                                             "or observation)")
        rest = {k: v for k, v in turn.items() if k not in ("from", "value")}
        value = turn.get("value")
        if kind == "call":
            calls = value
            if isinstance(calls, str):
                try:
                    calls = json_in_text(calls, DEFAULT_MAX_DEPTH)
                except RecordRejected as exc:
                    raise AdapterError(f"{at}/value", f"a function_call is JSON text of "
                                       f"{{name, arguments}}: {exc.reason}: "
                                       f"{value[:60]!r}") from None
            calls = calls if isinstance(calls, list) else [calls]
            tool_calls = []
            for k, c in enumerate(calls):
                if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                    raise AdapterError(f"{at}/value", "a function_call names its tool "
                                                      "(`{name, arguments}`)")
                call_id = f"sharegpt:{j}:{k}"
                pending.append(call_id)
                tool_calls.append({"id": call_id, "type": "function", "function": {
                    "name": c["name"], "arguments": c.get("arguments")}})
            out.append({**rest, "role": "assistant", "content": None,
                        "tool_calls": tool_calls})
        elif kind == "result":
            out.append({"role": "tool", "tool_call_id": pending.pop(0) if pending else None,
                        "content": value})
        else:
            if kind != "assistant":
                rest = {}
            out.append({**rest, "role": kind, "content": value})
    return out


def _call_rows(value: dict, pair: tuple[str, str], pointer: str, episode_id: str,
               max_depth: int) -> tuple[list[dict], list[str], Any]:
    """A logged call: the request's messages, then the completion's message (its first
    choice; a response that holds no message, such as an error, adds none)."""
    request_key, response_key = pair
    request = value[request_key]
    tool_names = tool_names_of(request.get("tools", request.get("functions")))
    builder = EpisodeBuilder(episode_id, {"task": None, "state": {"available_tools": tool_names},
                                          "episode": None}, max_depth)
    builder.feed_all(request["messages"], f"{pointer}/{request_key}/messages")
    response = value.get(response_key)
    replies = output_messages(response) or []
    where = f"{pointer}/{response_key}"
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        for m in replies:  # (the first choice's message)
            builder.feed(normalize(m, f"{where}/choices/0/message", max_depth))
    else:
        builder.feed_all(replies, where)
    reward, components = reward_value(value.get("reward"), f"{pointer}/reward")
    episode_extra = {k: v for k, v in value.items() if k not in pair and k != "reward"}
    episode_extra[request_key] = {k: v for k, v in request.items()
                                  if k not in ("messages", "tools", "functions")}
    if isinstance(response, dict):
        episode_extra[response_key] = {k: v for k, v in response.items() if k != "choices"}
    elif response is not None and not replies:
        episode_extra[response_key] = response
    rows, pointers = builder.finish(pointer or "/", reward, components, "openai-chat:reward",
                                    {"episode": episode_extra})
    return rows, pointers, builder.notes


def tool_names_of(tools: Any) -> list[str] | None:
    """The sorted names of a list of tool definitions (None when not a list)."""
    return sorted({tool_name(t) for t in tools} - {None}) if isinstance(tools, list) else None


def tool_name(tool: Any) -> str | None:
    """The name of a tool definition (OpenAI `{function: {name}}`, or `{name}`)."""
    if not isinstance(tool, dict):
        return None
    name = tool.get("function", {}).get("name") if isinstance(tool.get("function"), dict) \
        else tool.get("name")
    return name if isinstance(name, str) else None


def reward_value(value: Any, where: str) -> tuple[float | None, dict[str, float] | None]:
    """A reward: a number, or an object whose numeric entries are its components (its
    `reward` or `total` entry the reward)."""
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
