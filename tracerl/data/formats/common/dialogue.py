"""Turn one dialogue (assistant, user, tool and system messages) into native step records.

One row per agent action: each assistant tool call (parallel calls of one message share a
`turn` and carry `call_index` and `call_id`), or one `message` row for an assistant message
without calls. A tool result becomes its call's `observation.tool_result`; everything else
that comes back before the next agent action (user messages, tool calls by the user or
environment and their results, system messages) is appended to the latest row's
`observation.events`, with its actor. What precedes the first agent action goes to row 0's
state: `user_goal` (the first user message) and `conversation_history` (the events, as
canonical JSON text). The last row is the episode's `done` step and carries its reward and
reward breakdown (keys in sorted order, so the same data gives the same bytes).

Matching results to calls. A call id is unique within its assistant turn, not within a
conversation: real exporters reuse ids across turns (`call_1` in every step). A result
with an id answers the earliest unanswered call with that id in the latest turn that has
one (so a reused id answers its own turn's call); a result without an id answers the
latest turn's first unanswered call (by order); a legacy `function` message answers the
latest unanswered call of its name. A call whose id an earlier call in the episode already
had is kept and counted (`notes["reused_call_ids"]`). A result that no call can take (no
call with that id, or every one already answered) is an error naming where it is.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tracerl.data.formats import AdapterError
from tracerl.data.formats.common.messages import (
    DEFAULT_MAX_DEPTH,
    Message,
    ToolCall,
    json_in_text,
    normalize,
    plain_message,
)
from tracerl.data.ingest.limits import RecordRejected
from tracerl.data.schema import canonical_json

__all__ = ["DEFAULT_MAX_DEPTH", "EpisodeBuilder", "json_in_text", "numeric_components",
           "tool_result_value"]


def tool_result_value(content: Any, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """A tool result as stored: JSON object/array text is parsed (so it hashes by value),
    any other text, or JSON nested deeper than max_depth, is kept as a JSON string."""
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json_in_text(content, max_depth)
        except RecordRejected:
            return content
    return content


_ANY = object()  # match(): no arguments to compare


class EpisodeBuilder:
    """Collects one episode's rows as its messages are fed in order."""

    def __init__(self, episode_id: str, common: dict[str, Any],
                 max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self.episode_id = episode_id
        self.max_depth = max_depth  # of JSON held in strings (arguments, tool results)
        self.common = common  # fields every row carries (task, episode, metadata, state, ...)
        self._common = {**common, "episode_id": episode_id}  # a row's first fields
        self.rows: list[dict] = []
        self.pointers: list[str] = []
        self.turn = -1
        self.notes: Counter[str] = Counter()
        self._before_first: list[dict] = []
        self._user_goal: str | None = None
        # unanswered calls, in order: (turn, call id, ("row", row index) | ("event", actor))
        self._open: list[tuple[int, str | None, tuple[str, Any]]] = []
        self._ids: set[str] = set()  # every call id seen in the episode
        self._answered: set[str] = set()  # ids of calls answered at least once

    # --- agent --------------------------------------------------------------------------
    def assistant(self, pointer: str, content: str | None,
                  calls: list[tuple[str | None, Any, Any]] | list[tuple[str | None, Any, Any, str]]
                  | list[ToolCall],
                  cost: float | None = None, extra: dict | None = None,
                  call_pointers: list[str] | None = None, logprob: float | None = None,
                  metadata: dict | None = None) -> None:
        """One assistant message (one turn): its text and its tool calls, each (call id,
        tool name, arguments), (call id, tool name, arguments, its pointer) or a ToolCall.
        `logprob`: the log-probability of the whole completion, on the turn's first row
        (its other rows 0.0: given the completion, they are certain)."""
        self.assistant_turn(pointer, content, [
            (c.call_id, c.name, c.arguments, c.pointer) if isinstance(c, ToolCall)
            else c if len(c) == 4
            else (*c, call_pointers[k] if call_pointers else f"{pointer}/tool_calls/{k}")
            for k, c in enumerate(calls)], cost, extra, logprob, metadata)

    def assistant_turn(self, pointer: str, content: str | None,
                       calls: list[tuple[str | None, Any, Any, str]],
                       cost: float | None = None, extra: dict | None = None,
                       logprob: float | None = None, metadata: dict | None = None) -> None:
        """`assistant` with each call given as (call id, tool name, arguments, its
        pointer) already."""
        first = len(self.rows)
        self._turn(pointer, content, calls)
        row = self.rows[first]
        if metadata:
            for r in self.rows[first:]:
                r["metadata"] = {**(r.get("metadata") or {}), **metadata}
        if cost is not None:
            row["metadata"] = {**(row.get("metadata") or {}), "cost_usd": float(cost)}
        if extra:
            row["extra"] = {**(row.get("extra") or {}), **extra}
        if logprob is not None:
            for r in self.rows[first:]:
                r["action_logprobs"] = 0.0
            row["action_logprobs"] = logprob

    def _turn(self, pointer: str, content: str | None,
              calls: list[tuple[str | None, Any, Any, str]]) -> None:
        """A turn's rows: one per call (call id, tool name, arguments, its pointer), or one
        message row."""
        self.turn += 1
        if not calls:
            self._row(pointer, {"type": "message", "tool": None, "arguments": None,
                                "content": content}, None, None)
            return
        ids = self._ids
        seen_in_turn: set[str] = set()
        for k, (call_id, name, arguments, where) in enumerate(calls):
            if not isinstance(name, str) or not name:
                raise AdapterError(where, f"a tool call without a tool name (got {name!r})")
            if call_id is not None:
                if type(call_id) is not str:
                    call_id = call_id_of(call_id, f"{where}/id")
                if call_id in ids or call_id in seen_in_turn:
                    self.notes["reused_call_ids"] += 1
                seen_in_turn.add(call_id)
            self._open.append((self.turn, call_id, ("row", len(self.rows))))
            self._row(where, {"type": "tool_call", "tool": name, "arguments": arguments,
                              "content": content if k == 0 else None}, k, call_id)
        ids |= seen_in_turn

    def _row(self, pointer: str, action: dict, call_index: int | None,
             call_id: str | None) -> None:
        row = {**self._common, "t": len(self.rows), "turn": self.turn,
               "call_index": call_index, "call_id": call_id, "action": action,
               "observation": {"tool_result": None, "error": None, "events": None},
               "reward": None, "done": False}
        self.rows.append(row)
        self.pointers.append(pointer)

    # --- everyone else ------------------------------------------------------------------
    def event(self, actor: str, kind: str, *, content: Any = None, tool: str | None = None,
              arguments: Any = None, call_id: str | None = None,
              error: str | None = None) -> None:
        """Something another actor did, appended to the latest row's observation."""
        if call_id is not None and type(call_id) is not str:
            call_id = call_id_of(call_id, f"a {actor} {kind}")
        if kind == "tool_call":
            self._open.append((self.turn, call_id, ("event", actor)))
            if call_id is not None:
                self._ids.add(call_id)
        if actor == "user" and kind == "message" and not self.rows and self._user_goal is None:
            self._user_goal = content if isinstance(content, str) else canonical_json(content)
        event = {"actor": actor, "kind": kind, "tool": tool, "arguments": arguments,
                 "content": content if content is None or isinstance(content, str)
                 else canonical_json(content), "call_id": call_id, "error": error}
        if not self.rows:
            self._before_first.append(event)
            return
        observation = self.rows[-1]["observation"]
        if observation["events"] is None:
            observation["events"] = [event]
        else:
            observation["events"].append(event)

    def tool_result(self, pointer: str, call_id: str | None, content: Any,
                    error: str | None = None, name: str | None = None) -> None:
        """A tool result, matched to its call (see the module's docstring)."""
        if call_id is not None and type(call_id) is not str:
            call_id = call_id_of(call_id, pointer)
        at = self.match(call_id, name)
        if at is None:
            if call_id is not None and call_id in self._answered:
                raise AdapterError(pointer, f"a second tool result for call id {call_id!r}")
            what = f"call id {call_id!r}" if call_id is not None or name is None \
                else f"tool {name!r}"
            raise AdapterError(pointer, f"tool result for {what}, which no earlier tool call "
                                        "in the episode has")
        _, matched_id, (where, who) = self._open.pop(at)
        if matched_id is not None:
            self._answered.add(matched_id)
        if where == "row":
            observation = self.rows[who]["observation"]
            observation["tool_result"] = tool_result_value(content, self.max_depth)
            observation["error"] = error
        else:
            self.event(who, "tool_result", content=content, call_id=call_id, error=error)

    @property
    def answered_ids(self) -> set[str]:
        """Ids of the calls answered so far."""
        return self._answered

    def open_call_id(self, at: int) -> str | None:
        """The call id of the open call at index `at` (see match)."""
        return self._open[at][1]

    def match(self, call_id: str | None, name: str | None,
              arguments: Any = _ANY) -> int | None:
        """Index of the open call a result with this id answers (see the module's
        docstring); without an id, the earliest open call of tool `name` (the one with
        these `arguments` when several are open), else the latest turn's first open call
        (by order). None when no open call takes it."""
        open_ = self._open
        if call_id is not None:
            best = None
            for i in range(len(open_) - 1, -1, -1):  # latest turn first, earliest within
                turn, cid, _ = open_[i]
                if cid == call_id:
                    if best is not None and open_[best][0] != turn:
                        break
                    best = i
            return best
        if name is not None:
            named = [i for i, (_, _, (where, who)) in enumerate(open_)
                     if where == "row" and self.rows[who]["action"]["tool"] == name]
            if arguments is not _ANY and len(named) > 1:
                same = [i for i in named
                        if self.rows[open_[i][2][1]]["action"]["arguments"] == arguments]
                if same:
                    return same[0]
            return named[0] if named else None
        for i, (turn, _, (where, _)) in enumerate(open_):  # by order, in the latest turn
            if turn == self.turn and where == "row":
                return i
        return None

    def unanswered_call(self, name: str) -> str | None:
        """The id of the latest agent call of `name` with no result yet (legacy function
        messages carry a name, not an id)."""
        for _, call_id, (where, i) in reversed(self._open):
            if where == "row" and self.rows[i]["action"]["tool"] == name:
                return call_id
        return None

    def history(self, msg: Message) -> None:
        """A message from before this log's first action (a trace that starts mid
        conversation): kept in row 0's conversation_history, with its role, not as an
        action or an answer."""
        if self.rows:
            raise ValueError("history comes before the first action")
        if msg.role == "tools":
            return
        if msg.role == "user" and self._user_goal is None and msg.text is not None:
            self._user_goal = msg.text
        entry = {"actor": msg.role, "kind": "message", "tool": None, "arguments": None,
                 "content": msg.text, "call_id": None, "error": None}
        if msg.text is not None or not (msg.calls or msg.results):
            self._before_first.append(entry)
        for c in msg.calls:
            self._before_first.append({**entry, "kind": "tool_call", "tool": c.name,
                                       "arguments": c.arguments, "content": None,
                                       "call_id": c.call_id})
        for r in msg.results:
            content = r.content if r.content is None or isinstance(r.content, str) \
                else canonical_json(r.content)
            self._before_first.append({**entry, "kind": "tool_result", "content": content,
                                       "call_id": r.call_id, "error": r.error})

    # --- whole messages -----------------------------------------------------------------
    def feed_all(self, messages: list, base: str) -> None:
        """`feed(normalize(m, f"{base}/{j}"))` of each message j, the common OpenAI chat
        message (tracerl.data.formats.common.messages.plain_message) fed without building a
        Message."""
        max_depth = self.max_depth
        for j, m in enumerate(messages):
            where = f"{base}/{j}"
            plain = plain_message(m, where, max_depth) if type(m) is dict else None
            if plain is None:
                self.feed(normalize(m, where, max_depth))
                continue
            role, content, more = plain
            if role == "assistant":
                self._turn(where, content, more)
            elif role == "tool":
                self.tool_result(where, more, content)
            else:
                self.event(role, "message", content=content)

    def feed(self, msg: Message, *, actor: str | None = None, cost: float | None = None,
             logprob: float | None = None, metadata: dict | None = None) -> None:
        """One normalized message (tracerl.data.formats.common.messages): an assistant message
        is a turn; a user message's tool results answer their calls before its text is an
        event; a tool message's results answer their calls; a tool definition is none."""
        if msg.role == "tools":
            return
        if msg.role == "assistant":
            extra = dict(msg.extra or {})
            if msg.reasoning:
                extra["reasoning"] = msg.reasoning
            self.assistant(msg.pointer, msg.text, msg.calls, cost=cost, extra=extra or None,
                           logprob=logprob, metadata=metadata)
            for r in msg.results:  # rare: a result inside an assistant message
                self.tool_result(r.pointer, r.call_id, r.content, r.error, r.name)
            return
        for r in msg.results:
            self.tool_result(r.pointer, r.call_id, r.content, r.error, r.name)
        who = actor or ("system" if msg.role == "system" else "user")
        if msg.role in ("user", "system") and (msg.text is not None or not msg.results):
            self.event(who, "message", content=msg.text)
        for c in msg.calls:  # a tool call made by the user or the environment
            self.event(who, "tool_call", tool=c.name, arguments=c.arguments, call_id=c.call_id)

    # --- end ----------------------------------------------------------------------------
    def finish(self, pointer: str, reward: float | None, components: dict[str, float] | None,
               reward_source: str | None, episode_extra: dict | None) -> tuple[list[dict],
                                                                              list[str]]:
        """(rows, their JSON pointers): the last row is done with the episode's reward."""
        if not self.rows:
            raise AdapterError(pointer, "the episode has no agent action (no assistant message)")
        first = self.rows[0]
        if self._before_first or self._user_goal is not None:
            state = dict(first.get("state") or {})
            state["user_goal"] = self._user_goal
            state["conversation_history"] = canonical_json(self._before_first) \
                if self._before_first else None
            first["state"] = state
        last = self.rows[-1]
        last["done"] = True
        last["reward"] = reward
        last["reward_components"] = dict(sorted(components.items())) if components else None
        last["reward_source"] = reward_source if reward is not None else None
        if episode_extra:
            last["extra"] = {**(last.get("extra") or {}), **episode_extra}
        return self.rows, self.pointers


def call_id_of(call_id: Any, where: str) -> str | None:
    """A tool call id: a string (or absent), or a list of one string (as some exporters
    write attribute values: Langfuse's): the string. Anything else names where it is."""
    if isinstance(call_id, list) and len(call_id) == 1 and isinstance(call_id[0], str):
        return call_id[0]
    if call_id is not None and not isinstance(call_id, str):
        raise AdapterError(where, f"a tool call id is a string, got {type(call_id).__name__} "
                                  f"{call_id!r:.60}")
    return call_id


def numeric_components(breakdown: Any) -> dict[str, float] | None:
    """The numeric entries of a reward breakdown (others are not reward components), in
    sorted key order."""
    if not isinstance(breakdown, dict):
        return None
    out = {str(k): float(v) for k, v in sorted(breakdown.items(), key=lambda kv: str(kv[0]))
           if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e308}
    return out or None
