"""Turn one dialogue (assistant, user, tool and system messages) into native step records.

One row per agent action: each assistant tool call (parallel calls of one message share a
`turn` and carry `call_index` and `call_id`), or one `message` row for an assistant message
without calls. A tool result is matched to its call by id and becomes the call's
`observation.tool_result`; everything else that comes back before the next agent action
(user messages, tool calls by the user or environment and their results, system messages)
is appended to the latest row's `observation.events`, with its actor. What precedes the
first agent action goes to row 0's state: `user_goal` (the first user message) and
`conversation_history` (the events, as canonical JSON text). The last row is the
episode's `done` step and carries its reward and reward breakdown.
"""

from __future__ import annotations

from typing import Any

from tracerl.data.adapters import AdapterError
from tracerl.data.ingest.limits import Limits, RecordRejected, load_record
from tracerl.data.schema import canonical_json

DEFAULT_MAX_DEPTH = Limits().max_depth


def json_in_text(text: str, max_depth: int) -> Any:
    """JSON held in a string (tool arguments, a tool result) under the record guards:
    integers exact, RecordRejected for text that is not JSON or nests deeper than
    max_depth (counted from the string's own value)."""
    return load_record(text.encode("utf-8", "surrogatepass"), Limits(max_depth=max_depth))


def tool_result_value(content: Any, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """A tool result as stored: JSON object/array text is parsed (so it hashes by value),
    any other text, or JSON nested deeper than max_depth, is kept as a JSON string."""
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json_in_text(content, max_depth)
        except RecordRejected:
            return content
    return content


class EpisodeBuilder:
    """Collects one episode's rows as its messages are fed in order."""

    def __init__(self, episode_id: str, common: dict[str, Any],
                 max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self.episode_id = episode_id
        self.max_depth = max_depth  # of JSON held in strings (arguments, tool results)
        self.common = common  # fields every row carries (task, episode, metadata, state, ...)
        self.rows: list[dict] = []
        self.pointers: list[str] = []
        self.turn = -1
        self._before_first: list[dict] = []
        self._user_goal: str | None = None
        # call id -> ("row", row index) for the agent's calls, ("event", actor) for others'
        self._calls: dict[str, tuple[str, int | str]] = {}
        self._answered: set[str] = set()

    # --- agent --------------------------------------------------------------------------
    def assistant(self, pointer: str, content: str | None, calls: list[tuple[str | None, str, Any]],
                  cost: float | None = None, extra: dict | None = None,
                  call_pointers: list[str] | None = None) -> None:
        """One assistant message: (call id, tool name, arguments) per tool call."""
        self.turn += 1
        first = len(self.rows)
        if not calls:
            self._row(pointer, {"type": "message", "tool": None, "arguments": None,
                                "content": content}, None, None)
        for k, (call_id, name, arguments) in enumerate(calls):
            where = call_pointers[k] if call_pointers else f"{pointer}/tool_calls/{k}"
            if not isinstance(name, str) or not name:
                raise AdapterError(where, f"a tool call without a tool name (got {name!r})")
            _check_call_id(call_id, f"{where}/id")
            if call_id is not None:
                if call_id in self._calls:
                    raise AdapterError(where, f"tool call id {call_id!r} is used twice")
                self._calls[call_id] = ("row", len(self.rows))
            self._row(where, {"type": "tool_call", "tool": name, "arguments": arguments,
                              "content": content if k == 0 else None}, k, call_id)
        row = self.rows[first]
        if cost is not None:
            row["metadata"] = {**row["metadata"], "cost_usd": float(cost)}
        if extra:
            row["extra"] = {**(row.get("extra") or {}), **extra}

    def _row(self, pointer: str, action: dict, call_index: int | None,
             call_id: str | None) -> None:
        row = {**self.common, "episode_id": self.episode_id, "t": len(self.rows),
               "turn": self.turn, "call_index": call_index, "call_id": call_id,
               "action": action, "observation": {"tool_result": None, "error": None,
                                                 "events": None},
               "reward": None, "done": False}
        self.rows.append(row)
        self.pointers.append(pointer)

    # --- everyone else ------------------------------------------------------------------
    def event(self, actor: str, kind: str, *, content: Any = None, tool: str | None = None,
              arguments: Any = None, call_id: str | None = None,
              error: str | None = None) -> None:
        """Something another actor did, appended to the latest row's observation."""
        _check_call_id(call_id, f"a {actor} {kind}")
        if kind == "tool_call" and call_id is not None:
            self._calls[call_id] = ("event", actor)
        if actor == "user" and kind == "message" and not self.rows and self._user_goal is None:
            self._user_goal = content if isinstance(content, str) else canonical_json(content)
        event = {"actor": actor, "kind": kind, "tool": tool, "arguments": arguments,
                 "content": content if content is None or isinstance(content, str)
                 else canonical_json(content), "call_id": call_id, "error": error}
        if not self.rows:
            self._before_first.append(event)
            return
        observation = self.rows[-1]["observation"]
        observation["events"] = (observation["events"] or []) + [event]

    def tool_result(self, pointer: str, call_id: str | None, content: Any,
                    error: str | None = None) -> None:
        """A tool result, matched to its call by id."""
        _check_call_id(call_id, pointer)
        if call_id is None or call_id not in self._calls:
            raise AdapterError(pointer, f"tool result for call id {call_id!r}, which no earlier "
                                        "tool call in the episode has")
        if call_id in self._answered:
            raise AdapterError(pointer, f"a second tool result for call id {call_id!r}")
        self._answered.add(call_id)
        where, who = self._calls[call_id]
        if where == "row":
            observation = self.rows[who]["observation"]
            observation["tool_result"] = tool_result_value(content, self.max_depth)
            observation["error"] = error
        else:
            self.event(who, "tool_result", content=content, call_id=call_id, error=error)

    def unanswered_call(self, name: str) -> str | None:
        """The id of the latest agent call of `name` with no result yet (legacy function
        messages carry a name, not an id)."""
        for call_id, (where, i) in reversed(list(self._calls.items())):
            if where == "row" and call_id not in self._answered \
                    and self.rows[i]["action"]["tool"] == name:
                return call_id
        return None

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
        last["reward_components"] = components or None
        last["reward_source"] = reward_source if reward is not None else None
        if episode_extra:
            last["extra"] = {**(last.get("extra") or {}), **episode_extra}
        return self.rows, self.pointers


def _check_call_id(call_id: Any, where: str) -> None:
    """A tool call id is a string (or absent): anything else names where it is."""
    if call_id is not None and not isinstance(call_id, str):
        raise AdapterError(where, f"a tool call id is a string, got {type(call_id).__name__} "
                                  f"{call_id!r:.60}")


def numeric_components(breakdown: Any) -> dict[str, float] | None:
    """The numeric entries of a reward breakdown (others are not reward components)."""
    if not isinstance(breakdown, dict):
        return None
    out = {str(k): float(v) for k, v in breakdown.items()
           if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e308}
    return out or None
