"""ATIF trajectories (Harbor's Agent Trajectory Interchange Format, v1.0 – v1.8) → native
step records, one episode per trajectory (and one per embedded subagent trajectory).

A file holds one trajectory object, a JSON list of them, or JSONL (one per line); a
record is one top-level trajectory. Fields (RFC 0001):
`{schema_version, session_id, trajectory_id?, agent{name, version, model_name?,
tool_definitions?}, steps[...], final_metrics?, notes?, extra?, subagent_trajectories?}`;
each step `{step_id, timestamp?, source: system | user | agent, model_name?, message (a
string or content parts), reasoning_content?, tool_calls[{tool_call_id, function_name,
arguments}], observation{results[{source_call_id, content, subagent_trajectory_ref}]},
metrics{prompt_tokens, completion_tokens, cached_tokens, cost_usd, logprobs, ...},
is_copied_context?, extra?}`; `continued_trajectory_ref?` (v1.7+: the file, beside this
one, that continues the trajectory after a context reset).

Mapping:
- an agent step is one turn: its message the action's content, each tool call one action
  (arguments an object, or JSON text of one); its observation's results answer the step's
  calls by `source_call_id` (real converters reuse one id, `call_1`, in every step: ids
  are matched within the step, and reuse is counted), a result without one answers the
  step's calls in order, or, when the step made no call, is an environment event; a
  result with `is_error: true` (at the result, or in its `extra`, as the OpenHands
  bridge writes it) puts its content in observation.error;
- a trajectory continued in another file (`continued_trajectory_ref`) is one episode:
  the continuation's steps follow this file's, its `is_copied_context` steps (the
  context it repeats) left out; its rows point into it as `/continued/<n>/steps/<j>`
  (n = 1 for the first continuation), and the continuation file is read with this one,
  not as an input of its own (`sidecars`);
- subagent trajectories in files of their own, named by a result's
  `subagent_trajectory_ref[].trajectory_path` (terminus-2's context summarization writes
  three beside trajectory.json: `trajectory.summarization-<n>-summary.json`,
  `-questions.json`, `-answers.json`), are read with the trajectory that names them, as
  its subagents (episodes `<id>/<their id>`, rows at `/subagent_files/<k>/steps/<j>`,
  without the trial's reward), not as inputs of their own (`sidecars`);
- an agent step copied from another trajectory for context (`is_copied_context`: the
  parent's steps a summarization subagent starts from) is not an action: before the
  first action, its calls and results are the first row's conversation_history, later
  its text an event (counted in `copied_context_steps`);
- `metrics.logprobs` (per completion token) sum to the turn's behaviour log-probability
  (`action_logprobs` of its first row, 0.0 on its other rows); `metrics.cost_usd` is the
  first row's metadata.cost_usd; step `model_name` (else `agent.model_name`) is
  metadata.behavior_policy; `reasoning_content` is kept in the row's `extra.reasoning`;
- system and user steps are events (before the first agent step: the state's history and
  user goal);
- episode: agent model, prompt/completion tokens (the steps' sums, else final_metrics);
  the trajectory's fields the schema does not name are under the done row's
  `extra.episode`. ATIF has no reward field: a numeric `reward` at the root, in `extra` or
  in `final_metrics.extra`, or the Harbor trial's `result.json` (`verifier_result.rewards`,
  beside the `agent/` folder the trajectory is in) is the episode's reward.
episode_id: `trajectory_id`, else `session_id`, else `<file>:<record number>` (the
file's path under the input root when the runner gives it, else its name:
tracerl.data.formats.fallback_episode_id; an embedded subagent's: `<parent id>/<its
id>`). `read` counts top-level trajectories.

Files of a Harbor trial or job folder that are not trajectories are read with the
trajectory, not as inputs (`sidecars`): the trial's `result.json`, `config.json`,
`verifier/reward.json`, an agent's per-episode LLM logs (`agent/episode-<n>/debug.json`,
terminus-2), and the job's `config.json` / `result.json` one folder up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError, fallback_episode_id
from tracerl.data.formats.common.dialogue import (
    DEFAULT_MAX_DEPTH,
    EpisodeBuilder,
    numeric_components,
)
from tracerl.data.formats.common.messages import (
    Message,
    ToolCall,
    ToolResult,
    arguments,
    result_content,
    text_of,
)
from tracerl.data.formats.common.records import json_records
from tracerl.data.formats.openai_chat.read import reward_value, tool_names_of
from tracerl.data.ingest.limits import Limits

_MAPPED = frozenset({"schema_version", "session_id", "trajectory_id", "steps",
                     "subagent_trajectories", "reward"})
_MAX_CONTINUATIONS = 1000


def harbor_result(path: Path) -> Path | None:
    """The Harbor trial's result.json of a trajectory at <trial>/agent/<file>, if any."""
    if path.parent.name != "agent":
        return None
    result = path.parent.parent / "result.json"
    return result if result.is_file() else None


def sidecars(path: Path) -> list[Path]:
    """Files of a Harbor trial that belong to this trajectory (read with it, not as inputs
    of their own)."""
    found = continuations(path)
    found += [p for p in subagent_files(path) if p not in found]
    if path.parent.name == "agent":  # an agent's own logs beside its trajectory
        found += sorted(p for p in path.parent.glob("episode-*/debug.json") if p.is_file())
    result = harbor_result(path)
    if result is None:
        return found
    trial = result.parent
    job = trial.parent
    return [*found, *(p for p in (result, trial / "config.json",
                                  trial / "verifier" / "reward.json",
                                  job / "config.json", job / "result.json") if p.is_file())]


def continuations(path: Path) -> list[Path]:
    """The files that continue the trajectory in `path` (`continued_trajectory_ref`,
    followed from file to file), in order."""
    found: list[Path] = []
    current = path
    while len(found) < _MAX_CONTINUATIONS:
        ref = _continuation_ref(current)
        nxt = (current.parent / ref) if ref else None
        if nxt is None or not nxt.is_file() or nxt in found or nxt == path:
            return found
        found.append(nxt)
        current = nxt
    return found


def _continuation_ref(path: Path) -> str | None:
    """A trajectory file's `continued_trajectory_ref` (a single trajectory of a small
    file; a list or JSONL of trajectories is not continued)."""
    doc = _small_doc(path, b"continued_trajectory_ref")
    ref = doc.get("continued_trajectory_ref") if isinstance(doc, dict) else None
    return ref if isinstance(ref, str) and ref else None


def _small_doc(path: Path, marker: bytes) -> Any:
    """The JSON document of a small file that holds `marker` (else None)."""
    try:
        if path.stat().st_size > 64 << 20:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if marker not in data:
        return None
    try:
        return orjson.loads(data.removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError:
        return None


def subagent_files(path: Path) -> list[Path]:
    """The trajectory files beside `path` that its steps (and its continuations') name in a
    result's `subagent_trajectory_ref[].trajectory_path` (terminus-2 writes its context
    summarization's three subagents so: `trajectory.summarization-<n>-summary.json`,
    `-questions.json`, `-answers.json`), in order; only files that hold one trajectory."""
    found: list[Path] = []
    skip = {path, *continuations(path)}
    for doc_path in [path, *continuations(path)]:
        doc = _small_doc(doc_path, b"trajectory_path")
        steps = doc.get("steps") if isinstance(doc, dict) else None
        for step in steps if isinstance(steps, list) else ():
            observation = step.get("observation") if isinstance(step, dict) else None
            results = observation.get("results") if isinstance(observation, dict) else None
            for r in results if isinstance(results, list) else ():
                refs = r.get("subagent_trajectory_ref") if isinstance(r, dict) else None
                for ref in refs if isinstance(refs, list) else [refs]:
                    name = ref.get("trajectory_path") if isinstance(ref, dict) else None
                    if not isinstance(name, str) or not name or len(found) >= \
                            _MAX_CONTINUATIONS:
                        continue
                    sub = doc_path.parent / name
                    if sub in skip or sub in found or not sub.is_file():
                        continue
                    value = _small_doc(sub, b"steps")
                    if isinstance(value, dict) and isinstance(value.get("steps"), list):
                        found.append(sub)
    return found


def _trial_reward(path: Path) -> tuple[float | None, dict | None, str | None]:
    result = harbor_result(path)
    if result is None:
        return None, None, None
    try:
        doc = orjson.loads(result.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None, None, None
    rewards = (doc.get("verifier_result") or {}).get("rewards") if isinstance(doc, dict) \
        else None
    components = numeric_components(rewards)
    if not components:
        return None, None, doc.get("task_name") if isinstance(doc, dict) else None
    reward = components.get("reward", next(iter(components.values()))
                            if len(components) == 1 else None)
    return reward, components, doc.get("task_name")


def read_atif(path: Path, limits: Limits | None = None,
              options: Any = None, batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    trial = _trial_reward(path)
    for raw in json_records(path, limits, batch=batch):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        value = raw.value
        episode_id = _episode_id(value) or fallback_episode_id(path, raw.number, options)
        try:
            more = _continued(path, value, limits) if raw.number == 1 else []
            referenced = _referenced(path, limits) if raw.number == 1 and \
                isinstance(value, dict) else []
            rows, pointers, notes = trajectory_rows(value, raw.pointer, episode_id,
                                                    limits.max_depth, trial, more,
                                                    referenced)
        except AdapterError as exc:
            yield AdaptedRecord(raw.number, raw.pointer, error=exc, episode_id=episode_id)
            continue
        yield AdaptedRecord(raw.number, raw.pointer, rows, pointers, episode_id=episode_id,
                            notes=notes)


def _continued(path: Path, value: Any, limits: Limits) -> list[Any]:
    """The trajectories continuing `value` (read from their files), in order."""
    if not isinstance(value, dict) or not isinstance(value.get("continued_trajectory_ref"),
                                                     str):
        return []
    found = []
    for k, cont in enumerate(continuations(path), start=1):
        where = f"/continued/{k}"
        raws = list(json_records(cont, limits))
        if len(raws) != 1 or raws[0].error is not None:
            reason = raws[0].error.reason if raws and raws[0].error else \
                "expected one trajectory"
            raise AdapterError(where, f"the continuation {cont.name} cannot be read: {reason}")
        found.append(raws[0].value)
    return found


def _referenced(path: Path, limits: Limits) -> list[tuple[str, Any]]:
    """(file name, trajectory) of the subagent trajectory files `path` names."""
    found = []
    for k, sub in enumerate(subagent_files(path)):
        raws = list(json_records(sub, limits))
        if len(raws) != 1 or raws[0].error is not None:
            reason = raws[0].error.reason if raws and raws[0].error else \
                "expected one trajectory"
            raise AdapterError(f"/subagent_files/{k}",
                               f"the subagent trajectory {sub.name} cannot be read: {reason}")
        found.append((sub.name, raws[0].value))
    return found


def _episode_id(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in ("trajectory_id", "session_id"):
            if isinstance(value.get(key), str) and value[key]:
                return value[key]
    return None


def trajectory_rows(value: Any, pointer: str, episode_id: str,
                    max_depth: int = DEFAULT_MAX_DEPTH,
                    trial: tuple = (None, None, None),
                    continued: list | None = None,
                    referenced: list | None = None) -> tuple[list[dict], list[str], Counter]:
    """(rows, pointers, notes) of a trajectory (with the trajectories `continued` in other
    files), of the subagent trajectories it embeds, and of those in the files it names
    (`referenced`: (file name, trajectory); their rows point at `/subagent_files/<k>`)."""
    if not isinstance(value, dict):
        raise AdapterError(pointer or "/", f"a trajectory is an object, got "
                                           f"{type(value).__name__}")
    rows, pointers, notes = _one(value, pointer, episode_id, max_depth, trial,
                                 continued or [])
    if continued:
        notes["continued_trajectories"] += len(continued)
    subs = value.get("subagent_trajectories")
    for k, sub in enumerate(subs if isinstance(subs, list) else []):
        where = f"{pointer}/subagent_trajectories/{k}"
        sub_id = f"{episode_id}/{_episode_id(sub) or k}"
        more, more_pointers, more_notes = trajectory_rows(sub, where, sub_id, max_depth)
        rows += more
        pointers += more_pointers
        notes.update(more_notes)
        notes["subagent_episodes"] += 1
    for k, (name, sub) in enumerate(referenced or []):
        where = f"/subagent_files/{k}"
        if not isinstance(sub, dict):
            raise AdapterError(where, f"the subagent trajectory {name} is not an object")
        sub_id = f"{episode_id}/{_episode_id(sub) or Path(name).stem}"
        more, more_pointers, more_notes = trajectory_rows(
            {**sub, "trajectory_path": name}, where, sub_id, max_depth)
        rows += more
        pointers += more_pointers
        notes.update(more_notes)
        notes["subagent_episodes"] += 1
    return rows, pointers, notes


def _one(value: dict, pointer: str, episode_id: str, max_depth: int,
         trial: tuple, continued: list) -> tuple[list[dict], list[str], Counter]:
    steps = value.get("steps")
    if not isinstance(steps, list):
        raise AdapterError(f"{pointer}/steps", "a trajectory needs a `steps` list")
    segments = [(f"{pointer}/steps", list(enumerate(steps)))]
    for k, cont in enumerate(continued, start=1):
        more = cont.get("steps") if isinstance(cont, dict) else None
        if not isinstance(more, list):
            raise AdapterError(f"/continued/{k}/steps", "a trajectory needs a `steps` list")
        segments.append((f"/continued/{k}/steps", [
            (j, s) for j, s in enumerate(more)
            if not (isinstance(s, dict) and s.get("is_copied_context") is True)]))
    steps = [s for _, part in segments for _, s in part]
    agent = value.get("agent") if isinstance(value.get("agent"), dict) else {}
    model = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
    tool_names = tool_names_of(agent.get("tool_definitions"))
    prompt = completion = 0
    for s in steps:
        metrics = s.get("metrics") if isinstance(s, dict) else None
        if isinstance(metrics, dict):
            prompt += metrics.get("prompt_tokens") if type(metrics.get("prompt_tokens")) is int \
                else 0
            completion += metrics.get("completion_tokens") \
                if type(metrics.get("completion_tokens")) is int else 0
    final = value.get("final_metrics") if isinstance(value.get("final_metrics"), dict) else {}
    if not prompt and type(final.get("total_prompt_tokens")) is int:
        prompt = final["total_prompt_tokens"]
    if not completion and type(final.get("total_completion_tokens")) is int:
        completion = final["total_completion_tokens"]
    reward, components, task = trial
    common = {"task": task,
              "state": {"available_tools": tool_names},
              "metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "prompt_tokens": prompt or None,
                          "completion_tokens": completion or None}}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    for n, (base, part) in enumerate(segments):
        for j, step in part:
            if n == 0 and isinstance(step, dict) and step.get("is_copied_context") is True \
                    and step.get("source") == "agent":
                _copied(builder, step, f"{base}/{j}", max_depth)
            else:
                _step(builder, step, f"{base}/{j}", model, max_depth)
    if reward is None:
        for holder, where in ((value, f"{pointer}/reward"),
                              (value.get("extra"), f"{pointer}/extra/reward"),
                              (final.get("extra"), f"{pointer}/final_metrics/extra/reward")):
            if isinstance(holder, dict) and holder.get("reward") is not None:
                reward, components = reward_value(holder["reward"], where)
                break
    kept = {k: v for k, v in value.items() if k not in _MAPPED}
    rows, pointers = builder.finish(pointer or "/", reward, components, "atif:reward",
                                    {"episode": kept} if kept else None)
    return list(rows), list(pointers), builder.notes


def _step(builder: EpisodeBuilder, step: Any, where: str, model: str | None,
          max_depth: int) -> None:
    if not isinstance(step, dict):
        raise AdapterError(where, f"a step is an object, got {type(step).__name__}")
    source = step.get("source")
    message = text_of(step.get("message"))
    observation = step.get("observation")
    results = observation.get("results") if isinstance(observation, dict) else None
    if results is not None and not isinstance(results, list):
        raise AdapterError(f"{where}/observation/results", "expected a list of results")
    if source == "agent":
        calls = []
        raw_calls = step.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise AdapterError(f"{where}/tool_calls", "expected a list of tool calls")
        for k, c in enumerate(raw_calls):
            at = f"{where}/tool_calls/{k}"
            if not isinstance(c, dict):
                raise AdapterError(at, "a tool call is an object")
            calls.append(_tool_call(c, at, max_depth))
        metrics = step.get("metrics") if isinstance(step.get("metrics"), dict) else {}
        logprob = _logprob(metrics.get("logprobs"), f"{where}/metrics/logprobs")
        cost = metrics.get("cost_usd")
        cost = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) \
            and abs(cost) < 1e308 else None
        step_model = step.get("model_name") if isinstance(step.get("model_name"), str) \
            else model
        extra = {k: v for k, v in step.items() if k not in (
            "step_id", "source", "message", "tool_calls", "observation", "metrics",
            "reasoning_content", "model_name") and v is not None}
        if isinstance(step.get("reasoning_content"), str):
            extra["reasoning"] = step["reasoning_content"]
        kept_metrics = {k: v for k, v in metrics.items() if k not in (
            "logprobs", "completion_token_ids", "prompt_token_ids", "cost_usd")}
        if kept_metrics:
            extra["metrics"] = kept_metrics
        if isinstance(step.get("message"), list):
            extra["message_parts"] = step["message"]
        builder.assistant(where, message, calls, cost=cost, extra=extra or None,
                          logprob=logprob, metadata={"behavior_policy": step_model})
        for k, r in enumerate(results or []):
            at = f"{where}/observation/results/{k}"
            if not isinstance(r, dict):
                raise AdapterError(at, "a result is an object")
            content = result_content(r.get("content"))
            if r.get("subagent_trajectory_ref") is not None and content is None:
                content = {"subagent_trajectory_ref": r["subagent_trajectory_ref"]}
            extra = r.get("extra")
            failed = r.get("is_error") is True or (
                isinstance(extra, dict) and extra.get("is_error") is True)
            error = (text_of(content) or "error") if failed else None
            if r.get("source_call_id") is None and not calls:
                builder.event("environment", "message", content=content, error=error)
            else:
                builder.tool_result(at, r.get("source_call_id"), content, error)
        return
    if source not in ("user", "system"):
        raise AdapterError(f"{where}/source", f"unknown source {source!r} (expected system, "
                                              "user or agent)")
    builder.event(source, "message", content=message)
    for k, r in enumerate(results or []):
        if isinstance(r, dict):
            content = result_content(r.get("content"))
            if content is None and r.get("subagent_trajectory_ref") is not None:
                content = {"subagent_trajectory_ref": r["subagent_trajectory_ref"]}
            builder.event("environment" if source == "system" else "user", "message",
                          content=content)
        else:
            raise AdapterError(f"{where}/observation/results/{k}", "a result is an object")


def _copied(builder: EpisodeBuilder, step: dict, where: str, max_depth: int) -> None:
    """An agent step copied from another trajectory for context (`is_copied_context`: a
    summarization subagent's copy of the parent's steps): not an action of this one; its
    call and results are the first row's conversation_history (after the first action,
    its text an event)."""
    builder.notes["copied_context_steps"] += 1
    message = text_of(step.get("message"))
    if builder.rows:
        builder.event("system", "message", content=message)
        return
    raw_calls = step.get("tool_calls")
    calls = []
    for k, c in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        if isinstance(c, dict):
            at = f"{where}/tool_calls/{k}"
            calls.append(_tool_call(c, at, max_depth))
    observation = step.get("observation")
    results = observation.get("results") if isinstance(observation, dict) else None
    answers = []
    for k, r in enumerate(results if isinstance(results, list) else []):
        if isinstance(r, dict):
            call_id = r.get("source_call_id")
            if call_id is None and k < len(calls):
                call_id = calls[k].call_id
            answers.append(ToolResult(call_id, result_content(r.get("content")), None,
                                      f"{where}/observation/results/{k}"))
    builder.history(Message("assistant", message, where, calls, answers))


def _logprob(values: Any, where: str) -> float | None:
    """The completion's log-probability: the sum of its tokens' log-probabilities."""
    if values is None:
        return None
    if not isinstance(values, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise AdapterError(where, "expected a list of numbers (per-token log-probabilities)")
    if not values:
        return None
    total = float(sum(values))
    if total > 0:
        raise AdapterError(where, f"log-probabilities sum to {total} > 0")
    return total


def _tool_call(c: dict, at: str, max_depth: int) -> ToolCall:
    """One step's tool call: ATIF's `{tool_call_id, function_name, arguments}`, also as
    writers that follow chat APIs spell it (`{id, name, arguments}`, or `{id, function:
    {name, arguments}}`): the same call, never a trajectory quarantined for its spelling."""
    function = c.get("function") if isinstance(c.get("function"), dict) else {}
    name = c.get("function_name", c.get("name", function.get("name")))
    args, key = (c["arguments"], "arguments") if "arguments" in c else (
        function.get("arguments"), "function/arguments")
    return ToolCall(c.get("tool_call_id", c.get("id")), name,
                    arguments(args, f"{at}/{key}", max_depth), at)

