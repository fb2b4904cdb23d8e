"""A logged episode as the conversation the agent had: messages in order, one assistant
message per turn.

Built from the step table alone (tracerl.data.schema), whatever adapter wrote it:

- before the first action: the events of row 0's `state.conversation_history` when it
  holds them (the dialogue adapters: system and user messages, as JSON), and the
  `user_goal` as a user message when no opening message already says it; a history kept
  as plain text (native JSONL) becomes a user message before the goal;
- each turn (consecutive rows sharing `turn`; a row with a null turn is its own) is one
  assistant message: its text (`action.content`; a `final_answer` without text says its
  arguments) and one tool call per `tool_call` row, with the row's `call_id` (or
  `call_<t>` when the log has none);
- after a turn: one tool message per call (its `tool_result`, else its `error`, as text),
  then the turn's `observation.events` in order: messages by the user (role user), the
  system (role system) or the environment (role user). A tool call or result by the user
  or the environment is that actor's action, not a message to the agent: it is counted
  (`other_actor_events`), not exported;
- what came after the last turn (its tool results, the user's closing message) taught the
  agent nothing and is left out, so every conversation ends with an assistant message.

Messages are neutral dicts (tool-call arguments as parsed JSON); tracerl.export.formats
turns them into each trainer's shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import orjson

from tracerl.data.schema import loads_exact

# observation.events actors -> chat roles (an environment's message has no role of its own)
ROLE_OF_ACTOR = {"user": "user", "system": "system", "environment": "user"}

# The step-table columns the conversation is built from.
COLUMNS = ("episode_id", "t", "turn", "call_id", "task", "state", "action", "observation",
           "source_file", "source_record", "source_pointer")


@dataclass
class Turn:
    rows: list[int]        # indices of the turn's rows (t order) in the batch
    before: list[dict]     # messages between the previous turn and this one
    message: dict          # the assistant message


@dataclass
class Conversation:
    episode_id: str
    task: str | None
    turns: list[Turn]
    tools: list[str] | None          # the tools the log says were offered
    other_actor_events: int = 0      # tool calls / results by the user or environment
    rows: list[int] = field(default_factory=list)


def tool_text(value: str | None) -> str:
    """A tool result (canonical JSON text) as the text a tool message carries: a JSON
    string is its text, anything else its canonical JSON."""
    if value is None:
        return ""
    parsed = loads_exact(value)
    return parsed if isinstance(parsed, str) else value


def _event_messages(events: Sequence[dict] | None) -> tuple[list[dict], int]:
    messages, others = [], 0
    for e in events or ():
        if e.get("kind") != "message":
            others += 1
            continue
        content = e.get("content")
        messages.append({"role": ROLE_OF_ACTOR.get(e.get("actor"), "user"),
                         "content": "" if content is None else content})
    return messages, others


def _history_events(text: str | None) -> list[dict] | None:
    """The events a dialogue adapter kept in conversation_history, or None when the text
    is not such a list (native logs keep a plain-text history there)."""
    if not text or text[:1] != "[":
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, list) and all(isinstance(e, dict) and "kind" in e and "actor" in e
                                       for e in value):
        return value
    return None


def _opening(state: dict | None) -> tuple[list[dict], int]:
    state = state or {}
    goal, history = state.get("user_goal"), state.get("conversation_history")
    events = _history_events(history)
    if events is None:
        messages = [{"role": "user", "content": history}] if history else []
        others = 0
    else:
        messages, others = _event_messages(events)
    if goal is not None and not any(m["role"] == "user" and m["content"] == goal
                                    for m in messages):
        messages.append({"role": "user", "content": goal})
    return messages, others


def _turns(turns: Sequence[int | None]) -> Iterator[list[int]]:
    """Row indices grouped into turns: consecutive rows sharing a non-null turn."""
    group: list[int] = []
    for i, turn in enumerate(turns):
        if group and (turn is None or turn != turns[group[-1]]):
            yield group
            group = []
        group.append(i)
    if group:
        yield group


def _assistant(rows: list[int], col: dict[str, list], logged: set[str],
               assigned: set[str]) -> dict:
    """The turn's assistant message. Call ids: the logged one, else `call_<t>` (made
    unique against the episode's logged ids and those already given)."""
    texts, calls = [], []
    for i in rows:
        action = col["action"][i]
        kind, content = action.get("type"), action.get("content")
        if kind == "final_answer" and content is None and action.get("arguments") is not None:
            content = action["arguments"]
        if content is not None:
            texts.append(content)
        if kind == "tool_call":
            call_id = col["call_id"][i]
            if call_id is None or call_id in assigned:  # none logged, or logged twice
                base = f"call_{col['t'][i]}"
                call_id, k = base, 1
                while call_id in logged or call_id in assigned:
                    call_id, k = f"{base}_{k}", k + 1
            assigned.add(call_id)
            arguments = action.get("arguments")
            calls.append({"id": call_id, "name": action.get("tool"),
                          "arguments": {} if arguments is None else loads_exact(arguments)})
    return {"role": "assistant", "content": "\n".join(texts) if texts else None,
            "tool_calls": calls}


def conversations(col: dict[str, list], episode_slices: Sequence[tuple[int, int]]
                  ) -> Iterator[Conversation]:
    """One Conversation per episode. `col`: the COLUMNS of a batch as Python lists, rows
    sorted by (episode_id, t); `episode_slices`: [start, stop) of each episode in it."""
    for start, stop in episode_slices:
        rows = list(range(start, stop))
        before, others = _opening(col["state"][start])
        logged = {c for c in col["call_id"][start:stop] if c is not None}
        assigned: set[str] = set()
        turns: list[Turn] = []
        for group in _turns(col["turn"][start:stop]):
            group = [start + i for i in group]
            message = _assistant(group, col, logged, assigned)
            turns.append(Turn(group, before, message))
            before = [{"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                       "content": tool_message_text(col["observation"][i])}
                      for i, call in zip((i for i in group if col["action"][i].get("type")
                                          == "tool_call"), message["tool_calls"],
                                         strict=True)]
            for i in group:
                said, n = _event_messages((col["observation"][i] or {}).get("events"))
                before += said
                others += n
        tools = next((s["available_tools"] for s in col["state"][start:stop]
                      if s and s.get("available_tools") is not None), None)
        yield Conversation(col["episode_id"][start], col["task"][start], turns, tools,
                           others, rows)


def tool_message_text(observation: dict | None) -> str:
    """What a tool message says: the tool result, else the error, else nothing."""
    observation = observation or {}
    if observation.get("tool_result") is not None:
        return tool_text(observation["tool_result"])
    return observation.get("error") or ""
