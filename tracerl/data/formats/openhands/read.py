"""OpenHands event streams (V0 `action`/`observation` events and the Agent SDK's typed
events) → native step records, one episode per conversation.

Shapes read:
- V0 (All-Hands-AI/OpenHands, openhands/events/serialization/event.py `event_to_dict`;
  frontend/src/types/core/base.ts): an action `{id, timestamp, source: agent | user |
  environment, message, action: run | run_ipython | read | edit | browse |
  browse_interactive | think | finish | reject | message | system | recall | delegate |
  ..., args, tool_call_metadata?: {function_name, tool_call_id, model_response,
  total_calls_in_response}, llm_metrics?}`, an observation `{id, ..., observation: run |
  read | edit | error | agent_state_changed | ..., content, extras, cause: <action id>,
  tool_call_metadata?, success?}`;
- SDK / V1 (OpenHands/software-agent-sdk, openhands/sdk/event/): `{kind: ActionEvent, id,
  source, thought: [text parts], reasoning_content?, action, tool_name, tool_call_id,
  tool_call: {id, name, arguments}, llm_response_id}`, `ObservationEvent {tool_call_id,
  action_id, observation: {content: [parts], is_error?}}`, `AgentErrorEvent {tool_call_id,
  error}`, `UserRejectObservation {tool_call_id, rejection_reason}`, `MessageEvent {source,
  llm_message: {role, content}}`, `SystemPromptEvent`; state, pause and condensation events
  carry no step;
- as files: a JSON array of events (a trajectory export), `{trajectory: [...]}`, an
  evaluation's output.jsonl line `{instance_id, history: [...], metrics?, ...}`, or one
  event per file in an `events/` folder (V0 `sessions/<id>/events/<n>.json`, SDK
  `conversations/<id>/events/event-<n>-<uuid>.json`): the folder is read with its first
  file, the others are its sidecars (`sidecars`).

Mapping: each agent tool call is one `tool_call` row: V0 an agent action with
`tool_call_metadata` (tool = its function_name, arguments the call's in model_response, else
the action's args), or a runnable agent action of a log without function calling (tool =
the action, arguments its args); SDK an ActionEvent (tool_name, tool_call.arguments). Calls
of one model response (V0 model_response.id, SDK llm_response_id) share a turn, the
response's text (V0) or the thought (SDK) the turn's content. An observation answers its
call (by tool_call_id, else by `cause`); its error: an `error` observation, `success:
false`, a non-zero exit code (`exit_code N`), SDK `is_error` / AgentErrorEvent /
UserRejectObservation. An agent message (and V0 `finish` / `reject` without a call) is a
`message` row; user messages are events (the first the user_goal), the system prompt a
system event; agent state changes, null observations, recalls and condensations are not
steps. An observation of a call that no action recorded (V0: arguments that failed to
parse) is an environment event with its error. behaviour policy = the model response's
`model`; episode: cost and tokens from the last `llm_metrics` (accumulated). episode_id:
the instance_id, else the conversation's folder, else the file's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import arguments, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

# V0 agent actions that are not tool calls (messages, bookkeeping)
_NOT_CALLS = frozenset({"message", "system", "finish", "reject", "recall", "null",
                        "change_agent_state", "condensation", "condensation_request"})
_SKIPPED_OBSERVATIONS = frozenset({"agent_state_changed", "null", "recall"})
_SKIPPED_KINDS = frozenset({"ConversationStateUpdateEvent", "PauseEvent", "Condensation",
                            "CondensationRequest", "CondensationSummaryEvent"})
_BOOKKEEPING_ARGS = frozenset({"thought", "blocking", "keep_prompt", "hidden",
                               "confirmation_state", "is_input", "security_risk",
                               "impl_source", "wait_for_response"})
_EVENT_FILE = re.compile(r"^(?:event-)?(\d+)(?:-[^/]*)?\.json$")


def is_event(value: Any) -> bool:
    """One OpenHands event (V0 or SDK)."""
    if not isinstance(value, dict) or "id" not in value:
        return False
    if isinstance(value.get("kind"), str) and value["kind"].endswith(("Event",
                                                                      "Observation")):
        return "source" in value
    return "source" in value and ("action" in value and "args" in value
                                  or "observation" in value and "cause" in value
                                  or "observation" in value and "extras" in value)


def is_stream(value: Any) -> bool:
    """Events of one conversation: a list of events, `{trajectory: [...]}`, or an eval
    output line with its `history`."""
    if isinstance(value, list):
        return bool(value) and is_event(value[0])
    if isinstance(value, dict):
        events = value.get("trajectory", value.get("history"))
        return isinstance(events, list) and bool(events) and is_event(events[0])
    return False


def event_files(folder: Path) -> list[Path]:
    """The event files of an `events/` folder, in event order."""
    found = []
    for p in folder.iterdir():
        m = _EVENT_FILE.match(p.name)
        if m and p.is_file():
            found.append((int(m.group(1)), p.name, p))
    return [p for _, _, p in sorted(found)]


def sidecars(path: Path) -> list[Path]:
    """The other event files of the `events/` folder whose first file `path` is."""
    if path.parent.name != "events" or not _EVENT_FILE.match(path.name):
        return []
    files = event_files(path.parent)
    return files[1:] if files and files[0] == path else []


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    for raw in json_records(path, limits, whole=is_event, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        value, base = raw.value, raw.pointer
        folder_id = None
        if is_event(value) and path.parent.name == "events":
            # one event a file: the conversation is the folder, read from its first file
            files = event_files(path.parent)
            if files and files[0] != path:
                continue  # read with the first file
            events, pointers, error = _folder_events(files, limits)
            if error is not None:
                yield AdaptedRecord(raw.number, raw.pointer, error=error)
                continue
            folder_id = path.parent.parent.name or None
        elif isinstance(value, list):
            events, pointers = value, [f"{base}/{j}" for j in range(len(value))]
        elif isinstance(value, dict) and isinstance(value.get("trajectory",
                                                              value.get("history")), list):
            key = "trajectory" if "trajectory" in value else "history"
            events = value[key]
            pointers = [f"{base}/{key}/{j}" for j in range(len(events))]
        else:
            yield AdaptedRecord(raw.number, raw.pointer, error=AdapterError(
                base or "/", "not OpenHands events (a list of events, `trajectory`, "
                             "`history`, or an event of an `events/` folder)"))
            continue
        episode_id = (value.get("instance_id") if isinstance(value, dict) and isinstance(
            value.get("instance_id"), str) else None) or folder_id or \
            (path.stem if raw.number == 1 and not raw.jsonl else None) or \
            fallback_episode_id(path, raw.number, options)
        episode_id = str(episode_id)
        try:
            rows, row_pointers, notes = events_rows(events, pointers, episode_id,
                                                    limits.max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(raw.number, raw.pointer, error=exc, episode_id=episode_id)
            continue
        yield AdaptedRecord(raw.number, raw.pointer, rows, row_pointers,
                            episode_id=episode_id, notes=notes)


def _folder_events(files: list[Path], limits: Limits
                   ) -> tuple[list, list[str], AdapterError | None]:
    events, pointers = [], []
    for p in files:
        raws = list(json_records(p, limits))
        if len(raws) != 1 or raws[0].error is not None:
            reason = raws[0].error.reason if raws and raws[0].error else "expected one event"
            return [], [], AdapterError(f"/{p.name}", f"the event file {p.name} cannot be "
                                                      f"read: {reason}")
        events.append(raws[0].value)
        pointers.append(f"/{p.name}")
    return events, pointers, None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _response_message(metadata: dict) -> dict:
    choices = _dict(metadata.get("model_response")).get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    return _dict(_dict(first).get("message"))


class _Stream:
    """One conversation's events fed in order to an EpisodeBuilder."""

    def __init__(self, builder: EpisodeBuilder, events: list, pointers: list[str],
                 max_depth: int) -> None:
        self.builder = builder
        self.max_depth = max_depth
        self.events = events
        self.pointers = pointers
        self.emitted: set[int] = set()  # indices of call events already in a turn
        self.call_ids: set[str] = set()
        self.by_event_id: dict[Any, str | None] = {}  # V0 action id -> its call id
        self.model: str | None = None
        # the call events of each model response, in order: parallel calls are one turn
        self.turns: dict[Any, list[int]] = {}
        for k, e in enumerate(events):
            if isinstance(e, dict) and self._is_call(e):
                self.turns.setdefault(self._response(e), []).append(k)

    def _response(self, e: dict) -> Any:
        if "kind" in e:
            return ("sdk", e.get("llm_response_id"))
        metadata = _dict(e.get("tool_call_metadata"))
        rid = _dict(metadata.get("model_response")).get("id")
        return ("v0", rid) if rid is not None else ("event", e.get("id"))

    @staticmethod
    def _is_call(e: dict) -> bool:
        if e.get("kind") == "ActionEvent":
            return True
        if "kind" in e or "action" not in e or e.get("source") != "agent":
            return False
        return bool(e.get("tool_call_metadata")) or e.get("action") not in _NOT_CALLS

    def call(self, e: dict, where: str) -> tuple[str | None, str, Any, str, str | None]:
        """(call id, tool, arguments, pointer, the turn's text) of a call event."""
        if "kind" in e:
            tool_call = _dict(e.get("tool_call"))
            raw = tool_call.get("arguments")
            if raw is None:
                raw = {k: v for k, v in _dict(e.get("action")).items() if k != "kind"}
            text = text_of(e.get("thought")) or None
            return (e.get("tool_call_id") or tool_call.get("id"),
                    e.get("tool_name") or tool_call.get("name"),
                    arguments(raw, f"{where}/tool_call/arguments", self.max_depth), where,
                    text)
        metadata = _dict(e.get("tool_call_metadata"))
        args = _dict(e.get("args"))
        if not metadata:
            return (None, e.get("action"), {k: v for k, v in args.items()
                                            if k not in _BOOKKEEPING_ARGS}, where,
                    args.get("thought") or None)
        call_id = metadata.get("tool_call_id")
        message = _response_message(metadata)
        raw: Any = None
        for c in message.get("tool_calls") or []:
            if isinstance(c, dict) and c.get("id") == call_id:
                raw = _dict(c.get("function")).get("arguments")
        at = f"{where}/tool_call_metadata"
        value = arguments(raw, f"{at}/model_response/arguments", self.max_depth) \
            if raw is not None else {k: v for k, v in args.items()
                                     if k not in _BOOKKEEPING_ARGS}
        text = text_of(message.get("content")) or args.get("thought") or None
        model = _dict(metadata.get("model_response")).get("model")
        if isinstance(model, str):
            self.model = model
        return call_id, metadata.get("function_name") or e.get("action"), value, where, text

    def feed(self, j: int) -> None:
        e = self.events[j]
        where = self.pointers[j]
        if not isinstance(e, dict):
            raise AdapterError(where, f"an event is an object, got {type(e).__name__}")
        if j in self.emitted:
            return
        if self._is_call(e):
            turn = [k for k in self.turns[self._response(e)] if k not in self.emitted]
            calls = [self.call(self.events[k], self.pointers[k]) for k in turn]
            self.emitted.update(turn)
            for k, c in zip(turn, calls, strict=True):
                self.by_event_id[self.events[k].get("id")] = c[0]
                if c[0] is not None:
                    self.call_ids.add(c[0])
            text = next((c[4] for c in calls if c[4]), None)
            self.builder.assistant(where, text, [c[:4] for c in calls],
                                   metadata={"behavior_policy": self.model}
                                   if self.model else None)
            return
        if "kind" in e:
            self._sdk(e, where)
        elif "observation" in e:
            self._v0_observation(e, where)
        elif "action" in e:
            self._v0_action(e, where)
        else:
            raise AdapterError(where, "neither an action, an observation nor an SDK event")

    def _answer(self, where: str, call_id: str | None, cause: Any, content: Any,
                error: str | None) -> None:
        """A tool result: its call's (by id, else by the action it was caused by), or an
        environment event when no recorded call made it."""
        if call_id is None and cause in self.by_event_id:
            call_id = self.by_event_id[cause]
            if call_id is None:  # a call without an id: the turn's open call
                self.builder.tool_result(where, None, content, error)
                return
        if call_id is not None and call_id in self.call_ids and \
                self.builder.match(call_id, None) is not None:
            self.builder.tool_result(where, call_id, content, error)
            return
        self.builder.notes["observations_without_a_call"] += 1
        self.builder.event("environment", "tool_result" if call_id else "message",
                           content=content, call_id=call_id, error=error)

    def _v0_observation(self, e: dict, where: str) -> None:
        kind = e.get("observation")
        if kind in _SKIPPED_OBSERVATIONS:
            return
        content = e.get("content") if isinstance(e.get("content"), str) else \
            text_of(e.get("content"))
        extras = _dict(e.get("extras"))
        error = None
        code = extras.get("exit_code", _dict(extras.get("metadata")).get("exit_code"))
        if kind == "error" or e.get("success") is False:
            error = content or "error"
        elif isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1):
            error = f"exit_code {code}"
        metadata = _dict(e.get("tool_call_metadata"))
        cause = e.get("cause")
        if metadata or cause in self.by_event_id:
            self._answer(where, metadata.get("tool_call_id"), cause, content, error)
            return
        source = e.get("source")
        self.builder.event("user" if source == "user" else "environment", "message",
                           content=content, error=error)

    def _v0_action(self, e: dict, where: str) -> None:
        kind, source = e.get("action"), e.get("source")
        args = _dict(e.get("args"))
        if kind in ("recall", "null", "change_agent_state", "condensation",
                    "condensation_request"):
            return
        if kind == "system":
            self.builder.event("system", "message", content=args.get("content"))
            return
        if source == "agent":  # message, finish, reject
            text = args.get("content") or args.get("final_thought") or args.get("outputs") \
                or args.get("reason") or e.get("message")
            self.builder.assistant(where, text if isinstance(text, str) or text is None
                                   else text_of(text), [],
                                   extra={"action": kind} if kind != "message" else None)
            return
        self.builder.event("user" if source == "user" else "environment", "message",
                           content=args.get("content", e.get("message")))

    def _sdk(self, e: dict, where: str) -> None:
        kind, source = e.get("kind"), e.get("source")
        if kind in _SKIPPED_KINDS:
            return
        if kind == "SystemPromptEvent":
            self.builder.event("system", "message", content=text_of(e.get("system_prompt")))
            return
        if kind == "MessageEvent":
            message = _dict(e.get("llm_message"))
            text = text_of(message.get("content"))
            if source == "agent" or message.get("role") == "assistant":
                self.builder.assistant(where, text, [])
            else:
                self.builder.event("user", "message", content=text)
            return
        if kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            observation = _dict(e.get("observation"))
            if kind == "AgentErrorEvent":
                content = error = e.get("error") or "error"
            elif kind == "UserRejectObservation":
                content = error = f"Action rejected: {e.get('rejection_reason') or ''}"
            else:
                content = text_of(observation.get("content")) \
                    if observation.get("content") is not None else observation.get("output")
                error = (content or "error") if observation.get("is_error") is True \
                    else None
            self._answer(where, e.get("tool_call_id"), e.get("action_id"), content, error)
            return
        self.builder.notes["unread_events"] += 1  # a kind this reader does not know


def events_rows(events: list, pointers: list[str], episode_id: str,
                max_depth: int) -> tuple[list[dict], list[str], Any]:
    metrics = {}
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("llm_metrics"), dict):
            metrics = e["llm_metrics"]
    usage = _dict(metrics.get("accumulated_token_usage"))
    cost = metrics.get("accumulated_cost")

    def whole(v: Any) -> int | None:
        return v if type(v) is int else None

    builder = EpisodeBuilder(episode_id, {"episode": {
        "agent_cost_usd": float(cost) if isinstance(cost, int | float) and not isinstance(
            cost, bool) else None,
        "prompt_tokens": whole(usage.get("prompt_tokens")),
        "completion_tokens": whole(usage.get("completion_tokens"))}}, max_depth)
    stream = _Stream(builder, events, pointers, max_depth)
    for j in range(len(events)):
        stream.feed(j)
    if stream.model:
        for row in builder.rows:
            row["metadata"] = {**(row.get("metadata") or {}), "behavior_policy":
                               row.get("metadata", {}).get("behavior_policy") or stream.model}
            row["episode"] = {**row["episode"], "agent_model": stream.model}
    rows, row_pointers = builder.finish("/", None, None, None, None)
    return list(rows), list(row_pointers), builder.notes
