"""Google ADK sessions, eval sets and eval set results → native step records.

Shapes (google/adk-python; every model is written with snake_case names or, through the
API server and `adk web`, their camelCase aliases — both are read):
- a session (src/google/adk/sessions/session.py: `{id, app_name, user_id, state, events,
  last_update_time}`), each event (events/event.py) `{id, invocation_id, author, content:
  {role, parts: [{text, thought?} | {function_call: {id, name, args}} | {function_response:
  {id, name, response}}]}, partial?, turn_complete?, error_code?, error_message?,
  usage_metadata?, model_version?, actions, branch?}`: one episode;
- an eval set (evaluation/eval_set.py, eval_case.py: `{eval_set_id, eval_cases: [{eval_id,
  conversation: [Invocation{invocation_id, user_content, final_response,
  intermediate_data}], session_input}]}`), `intermediate_data` either `{tool_uses,
  tool_responses, intermediate_responses: [[author, parts]]}` or `{invocation_events:
  [{author, content}]}`: one episode per eval case;
- an eval set result (evaluation/eval_result.py: `{eval_set_result_id, eval_set_id,
  eval_case_results: [{eval_id, final_eval_status, overall_eval_metric_results: [{
  metric_name, score, eval_status}], eval_metric_result_per_invocation: [{
  actual_invocation, expected_invocation}], session_id, session_details?}]}`): one episode
  per case result, from the session's events when `session_details` holds them, else from
  the actual invocations.

Mapping: a model event (an invocation event) with function calls is one turn, each call
a `tool_call` row (parallel calls of one event share it); a model event with only text is
a `message` row (thought parts → `extra.reasoning`); partial (streamed) events are left
out, the final event repeats them; function responses answer their calls by id (else by
name); user text is an event (the first the user_goal), an event's `error_code` a system
event with the error. Of IntermediateData (no events), each tool use is a turn, its
response by id, then the intermediate responses and the final response `message` rows.
A multi-agent session (events of several `author`s: a coordinator's `transfer_to_agent`
call hands the conversation to a sub-agent, whose events follow in the same session and
invocation) stays one episode — the agents share one conversation, state and user goal, and
a transfer is one of the episode's actions — each step's agent its `extra.author`.
behaviour policy = the event's `model_version`; tokens from `usage_metadata`. Reward (eval
set results): the case's `final_eval_status` (1 passed → 1.0, 2 failed → 0.0), the metrics'
scores its components; `ingest.reward_evaluation` names a metric whose score is the reward
instead. episode_id: the session id; `<eval set id>/<eval id>` (of a result,
`<eval set result id>/<eval id>`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import EpisodeBuilder, numeric_components
from tracerl.data.formats.common.messages import arguments
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

_PASSED, _FAILED = 1, 2  # EvalStatus


def get(d: Any, snake: str, default: Any = None) -> Any:
    """`d[snake]`, else its camelCase alias (ADK's API writes the aliases)."""
    if not isinstance(d, dict):
        return default
    if snake in d:
        return d[snake]
    head, *rest = snake.split("_")
    return d.get(head + "".join(w.title() for w in rest), default)


def kind_of(value: Any) -> str | None:
    """"session", "eval_set", "eval_result" or None."""
    if not isinstance(value, dict):
        return None
    if isinstance(get(value, "eval_case_results"), list):
        return "eval_result"
    if isinstance(get(value, "eval_cases"), list) and (
            get(value, "eval_set_id") is not None or "name" in value):
        return "eval_set"
    events = value.get("events")
    if isinstance(events, list) and (get(value, "app_name") is not None
                                     or get(value, "user_id") is not None):
        return "session"
    return None


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    chosen = getattr(options, "reward_evaluation", None)
    for raw in json_records(path, limits, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        value, base = raw.value, raw.pointer
        kind = kind_of(value)
        if kind == "session":
            episode_id = str(value.get("id") or fallback_episode_id(path, raw.number,
                                                                    options))
            yield _record(raw.number, base, episode_id, limits.max_depth,
                          lambda b, v=value, w=base: _events(b, v["events"], f"{w}/events",
                                                             limits.max_depth))
            continue
        if kind is None:
            yield AdaptedRecord(raw.number, base, error=AdapterError(
                base or "/", "not an ADK session, eval set or eval set result"))
            continue
        # a result's id tells two runs of one eval set apart
        set_id = (get(value, "eval_set_result_id") if kind == "eval_result" else None) or \
            get(value, "eval_set_id") or path.stem
        key = "eval_cases" if kind == "eval_set" else "eval_case_results"
        cases = get(value, key)
        camel = key if key in value else "evalCases" if kind == "eval_set" \
            else "evalCaseResults"
        for k, case in enumerate(cases):
            where = f"{base}/{camel}/{k}"
            case_id = get(case, "eval_id", k)
            episode_id = f"{set_id}/{case_id}"
            if kind == "eval_set":
                yield _record(k + 1, where, episode_id, limits.max_depth,
                              lambda b, c=case, w=where:
                              _conversation(b, get(c, "conversation"), f"{w}/conversation",
                                            limits.max_depth))
            else:
                yield _result_record(k + 1, where, episode_id, case, limits.max_depth,
                                     chosen)


def _record(number: int, where: str, episode_id: str, max_depth: int, feed: Any,
            reward: tuple = (None, None, None)) -> AdaptedRecord:
    """The record of one episode that `feed(builder)` builds."""
    builder = EpisodeBuilder(episode_id, {}, max_depth)
    try:
        feed(builder)
        rows, pointers = builder.finish(where or "/", *reward, None)
    except AdapterError as exc:
        return AdaptedRecord(number, where, error=exc, episode_id=episode_id)
    _totals(rows)
    return AdaptedRecord(number, where, list(rows), list(pointers), episode_id=episode_id,
                         notes=builder.notes)


def _totals(rows: list[dict]) -> None:
    """The episode's model and tokens (kept on each row's `_usage` while feeding)."""
    prompt = completion = 0
    model = None
    for r in rows:
        usage = r.pop("_usage", None) or {}
        prompt += usage.get("prompt", 0)
        completion += usage.get("completion", 0)
        model = model or (r.get("metadata") or {}).get("behavior_policy")
    for r in rows:
        r["episode"] = {"agent_model": model, "prompt_tokens": prompt or None,
                        "completion_tokens": completion or None}


def _result_record(number: int, where: str, episode_id: str, case: Any, max_depth: int,
                   chosen: str | None) -> AdaptedRecord:
    metrics = {get(m, "metric_name"): get(m, "score")
               for m in get(case, "overall_eval_metric_results") or []
               if isinstance(m, dict)}
    components = numeric_components(metrics)
    status = get(case, "final_eval_status")
    reward = 1.0 if status == _PASSED else 0.0 if status == _FAILED else None
    source = "adk:final_eval_status"
    if chosen is not None and components and chosen in components:
        reward, source = components[chosen], f"adk:{chosen}"
    details = get(case, "session_details")
    events = get(details, "events") if isinstance(details, dict) else None
    per_invocation = get(case, "eval_metric_result_per_invocation") or []

    def feed(builder: EpisodeBuilder) -> None:
        if isinstance(events, list) and events:
            _events(builder, events, f"{where}/session_details/events", max_depth)
            return
        invocations = [get(p, "actual_invocation") for p in per_invocation]
        _conversation(builder, invocations, f"{where}/eval_metric_result_per_invocation",
                      max_depth, suffix="/actual_invocation")

    return _record(number, where, episode_id, max_depth, feed, (reward, components, source))


def _parts(content: Any) -> list:
    parts = get(content, "parts")
    return parts if isinstance(parts, list) else []


def _events(builder: EpisodeBuilder, events: Any, where: str, max_depth: int) -> None:
    if not isinstance(events, list):
        raise AdapterError(where, "expected a list of events")
    for j, e in enumerate(events):
        at = f"{where}/{j}"
        if not isinstance(e, dict):
            raise AdapterError(at, f"an event is an object, got {type(e).__name__}")
        if e.get("partial") is True:
            builder.notes["partial_events"] += 1
            continue
        _content(builder, e.get("author"), e.get("content"), f"{at}/content", max_depth,
                 get(e, "model_version"), get(e, "usage_metadata"))
        if get(e, "error_code") or get(e, "error_message"):
            message = str(get(e, "error_message") or get(e, "error_code"))
            builder.event("system", "message", content=message, error=message)


def _content(builder: EpisodeBuilder, author: Any, content: Any, where: str,
             max_depth: int, model: Any = None, usage: Any = None) -> None:
    """One event's content: user text, a model turn, or function responses."""
    parts = _parts(content)
    role = get(content, "role")
    calls, texts, thoughts, responses = [], [], [], []
    for k, p in enumerate(parts):
        at = f"{where}/parts/{k}"
        if not isinstance(p, dict):
            raise AdapterError(at, "a part is an object")
        call = get(p, "function_call")
        response = get(p, "function_response")
        if isinstance(call, dict):
            calls.append((call.get("id"), call.get("name"),
                          arguments(call.get("args"), f"{at}/function_call/args", max_depth),
                          at))
        elif isinstance(response, dict):
            responses.append((at, response))
        elif isinstance(p.get("text"), str):
            (thoughts if p.get("thought") is True else texts).append(p["text"])
    for at, response in responses:
        builder.tool_result(at, response.get("id"), response.get("response"), None,
                            response.get("name"))
    text = "".join(texts) or None
    if author == "user" or (role == "user" and not calls):
        if text is not None:
            builder.event("user", "message", content=text)
        return
    if not calls and text is None and not thoughts:
        return  # an event with no content (state changes, transfers' bookkeeping)
    first = len(builder.rows)
    builder.assistant(where, text, calls,
                      extra={"reasoning": "\n".join(thoughts), "author": author}
                      if thoughts else {"author": author} if author else None,
                      metadata={"behavior_policy": model} if isinstance(model, str) else None)
    if isinstance(usage, dict):
        builder.rows[first]["_usage"] = {
            "prompt": get(usage, "prompt_token_count") or 0,
            "completion": get(usage, "candidates_token_count") or 0}


def _conversation(builder: EpisodeBuilder, invocations: Any, where: str, max_depth: int,
                  suffix: str = "") -> None:
    if not isinstance(invocations, list):
        raise AdapterError(where, "expected a list of invocations")
    for j, inv in enumerate(invocations):
        at = f"{where}/{j}{suffix}"
        if not isinstance(inv, dict):
            raise AdapterError(at, "an invocation is an object")
        _content(builder, "user", get(inv, "user_content"), f"{at}/user_content", max_depth)
        data = get(inv, "intermediate_data")
        events = get(data, "invocation_events")
        if isinstance(events, list):
            for k, e in enumerate(events):
                _content(builder, get(e, "author"), get(e, "content"),
                         f"{at}/intermediate_data/invocation_events/{k}/content", max_depth,
                         get(e, "model_version"), get(e, "usage_metadata"))
        elif isinstance(data, dict):
            _intermediate(builder, data, f"{at}/intermediate_data", max_depth)
        final = get(inv, "final_response")
        if final is not None:
            _content(builder, "agent", final, f"{at}/final_response", max_depth)


def _intermediate(builder: EpisodeBuilder, data: dict, where: str, max_depth: int) -> None:
    """IntermediateData: tool uses (each a turn, answered by id, else in order), then the
    intermediate responses."""
    responses = get(data, "tool_responses") or []
    by_id = {r.get("id"): r for r in responses if isinstance(r, dict) and r.get("id")}
    unnamed = [r for r in responses if isinstance(r, dict) and not r.get("id")]
    for k, use in enumerate(get(data, "tool_uses") or []):
        at = f"{where}/tool_uses/{k}"
        if not isinstance(use, dict):
            raise AdapterError(at, "a tool use is an object")
        builder.assistant(at, None, [(use.get("id"), use.get("name"),
                                      arguments(use.get("args"), f"{at}/args", max_depth),
                                      at)])
        answer = by_id.get(use.get("id")) if use.get("id") else None
        if answer is None and unnamed:
            answer = unnamed.pop(0)
        if answer is not None:
            builder.tool_result(f"{where}/tool_responses", use.get("id"),
                                answer.get("response"))
    for k, item in enumerate(get(data, "intermediate_responses") or []):
        if isinstance(item, list) and len(item) == 2:
            author, parts = item
            _content(builder, author, {"role": "model", "parts": parts},
                     f"{where}/intermediate_responses/{k}", max_depth)
