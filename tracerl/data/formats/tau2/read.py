"""tau2-bench results files (`tau2 run` output: one JSON object with `info`, `tasks` and
`simulations`) → native step records, one episode per simulation.

Mapping (see tracerl.data.formats.common.dialogue for rows and observations):
- episode_id = the simulation's `id`; task = `task_id`; environment_version =
  ``tau2:<domain>@<git_commit>``; metadata.behavior_policy / temperature from
  `info.agent_info`; metadata.cost_usd = the assistant message's `cost` (on the turn's
  first row, so costs add up).
- `episode` on every row: trial, agent and user model, domain, termination reason, agent
  and user cost, the agent's prompt and completion tokens (sum of its messages' `usage`),
  duration.
- The done row (last agent action): reward = `reward_info.reward`, reward_components =
  `reward_info.reward_breakdown`, and `extra` holds `episode` (the simulation's fields the
  schema does not name, `reward_info` in full) and `task` (the task definition, with its
  `evaluation_criteria`), so the tau2 verifiers need nothing but the step table.
- A results file with no `info` that names its run at the top level (`domain`, `model`,
  `agent` beside `simulations`, as some leaderboard submissions are re-packed) takes those.
- A tool message answers the call with its `id`; `error: true` puts its text in
  observation.error; a MultiToolMessage (`{role: tool, tool_messages: [...]}`) is its
  tool messages. Tool calls made by the user (`requestor: user`, telecom) and their
  results are observation events with actor user.
- Row `extra`: the assistant message's fields the schema does not name (`turn_idx`,
  `timestamp`, `usage`, ...; null ones dropped). `raw_data`, the provider's copy of the
  same message, is not kept.

`read` counts simulations. The file is streamed (tracerl.data.formats.common.jsonstream): `info` and
`tasks` are read first, then one simulation at a time, so memory does not grow with the
file.

A full-duplex (voice) simulation has no `messages` but `ticks` (its agent and user chunks
and tool calls and results, tick by tick): they are read as tau2's get_messages flattens
them, a run of one speaker's speaking chunks one message (see tick_messages). One
simulation in a file of its own (a directory layout's `simulations/<id>.json` given by
itself, or such a folder without its results.json) is a record; beside its layout's
results.json it takes that file's `info` and `tasks`.

The directory layout (`tau2 run --save-format dir`, the default for voice runs): a
`results.json` holding `info`, `tasks` and a `simulation_index` but no simulations, and
one `simulations/<id>.json` per simulation beside it. The results file is read for its
header and each simulation file is a record (rows name the simulation file as their
source); a simulation the index lists with no file is a quarantined record, saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError
from tracerl.data.formats.common.dialogue import (
    DEFAULT_MAX_DEPTH,
    EpisodeBuilder,
    numeric_components,
)
from tracerl.data.formats.common.jsonstream import ObjectPlan, plan_object, stream_object
from tracerl.data.formats.common.records import document
from tracerl.data.ingest.limits import Limits, compressed
from tracerl.data.ingest.reader import InputError

SIMULATIONS_DIR = "simulations"

_ASSISTANT_MAPPED = frozenset({"role", "content", "tool_calls", "cost", "raw_data"})
_SIMULATION_MAPPED = frozenset({"id", "task_id", "trial", "termination_reason", "agent_cost",
                                "user_cost", "duration", "messages"})
_CALL_MAPPED = frozenset({"id", "name", "arguments", "requestor"})
_NO_CALLS: list = []  # never changed


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _number(v: Any) -> float | None:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return None
    return float(v) if abs(v) < 1e308 else None  # an integer past every float: no number


def simulation_files(results: Path) -> list[Path] | None:
    """The simulation files of a directory-layout results file (its sibling
    `simulations/*.json`, sorted), or None when it has no such folder."""
    folder = results.parent / SIMULATIONS_DIR
    if not folder.is_dir():
        return None
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(".json"))


def plan_slices(path: Path, limits: Limits | None = None) -> ObjectPlan:
    """What every slice of a results file would read for itself (its header, and where
    each simulation is), read once: a runner hands it to read_tau2 (`plan`) in each
    slice's process, so no slice scans the file."""
    return plan_object(path, "simulations", limits or Limits())


def read_tau2(path: Path, limits: Limits | None = None, options: Any = None,
              shard: tuple[int, int] | None = None,
              plan: ObjectPlan | None = None) -> Iterator[AdaptedRecord]:
    """One AdaptedRecord per simulation of a tau2-bench results file. A simulation is a
    record under the native reader's guards (see
    tracerl.data.formats.common.jsonstream.stream_object): one over max_record_bytes is
    rejected without being held whole.

    shard=(k, n): the k-th of n contiguous slices of those records (the simulations that
    start in the k-th n-th of the file's bytes; a .gz file, whose size is not known ahead,
    is all in slice 0; the records after the simulations, the directory layout's files, in
    the last slice): slices 0..n-1
    one after the other are the records unsharded (tracerl.data.ingest.run reads a large
    file in n worker processes this way). plan: plan_slices of this file, made already."""
    limits = limits or Limits()
    span = None
    if shard is not None:
        k, n = shard
        if compressed(path):
            if k:
                return
        else:
            size = path.stat().st_size
            span = (size * k // n, size * (k + 1) // n if k < n - 1 else None)
    header, simulations = stream_object(path, "simulations", limits, required=False,
                                        span=span, plan=plan)
    info = header.get("info") if isinstance(header.get("info"), dict) else _wrapper_info(header)
    tasks = {str(t.get("id")): t for t in header.get("tasks") or [] if isinstance(t, dict)}
    number = 0
    for element in simulations:
        i = element.index
        number = i + 1
        if element.skipped:
            continue
        pointer = f"/simulations/{i}"
        if element.rejected is not None:
            yield AdaptedRecord(number, pointer, error=AdapterError(
                element.rejected.field, element.rejected.reason), text=element.text)
            continue
        yield _simulation(element.value, info, tasks, number, pointer, limits.max_depth)
    if span is not None and span[1] is not None:
        return  # what follows the simulations is the last slice's
    if number == 0 and is_simulation(header):  # one simulation, a file of its own
        info, tasks = _layout_header(path, limits)
        yield _simulation(header, info, tasks, 1, "", limits.max_depth)
        return
    files = simulation_files(path) if number == 0 else None
    if not files and number == 0 and not isinstance(header.get("simulation_index"), list):
        return
    on_disk = set()
    for k, sim_path in enumerate(files or []):
        on_disk.add(sim_path.name[:-len(".json")])
        raw = document(sim_path, limits)
        if raw.error is not None:
            yield AdaptedRecord(number + k + 1, "", error=raw.error, text=raw.text,
                                source_file=str(sim_path))
            continue
        record = _simulation(raw.value, info, tasks, number + k + 1, "", limits.max_depth)
        record.source_file = str(sim_path)
        yield record
    number += len(files or [])
    index = header.get("simulation_index")
    for entry in index if isinstance(index, list) else []:
        sim_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(sim_id, str) and sim_id not in on_disk:
            number += 1
            yield AdaptedRecord(number, f"/simulation_index/{index.index(entry)}",
                                error=AdapterError("<file>", (
                                    f"simulation {sim_id!r} is in the results' "
                                    f"simulation_index but {SIMULATIONS_DIR}/{sim_id}.json "
                                    "is missing")), episode_id=sim_id)


def _wrapper_info(header: dict) -> dict:
    """An `info` for a results file without one that names its run at the top level
    (`{"domain", "agent", "model", "simulations"}`, as leaderboard submissions re-packed
    by their own scripts write), else none."""
    domain, model, agent = (header.get(k) for k in ("domain", "model", "agent"))
    if not any(isinstance(v, str) for v in (domain, model, agent)):
        return {}
    return {"environment_info": {"domain_name": domain if isinstance(domain, str) else None},
            "agent_info": {"llm": model if isinstance(model, str) else None,
                           "implementation": agent if isinstance(agent, str) else None}}


def _layout_header(path: Path, limits: Limits) -> tuple[dict, dict]:
    """(info, tasks by id) of the results.json beside the `simulations/` folder a
    simulation file is in (its directory layout's header), or empty ones."""
    results = path.parent.parent / "results.json"
    if path.parent.name != SIMULATIONS_DIR or not results.is_file():
        return {}, {}
    try:
        header = plan_object(results, "simulations", limits).header
    except (InputError, OSError, ValueError):
        return {}, {}
    info = header.get("info") if isinstance(header.get("info"), dict) else {}
    tasks = header.get("tasks") if isinstance(header.get("tasks"), list) else []
    return info, {str(t.get("id")): t for t in tasks if isinstance(t, dict)}


def _simulation(sim: Any, info: dict, tasks: dict, number: int, pointer: str,
                max_depth: int) -> AdaptedRecord:
    episode_id = _get(sim, "id")
    try:
        rows, pointers, notes = simulation_rows(sim, info, tasks, pointer, max_depth)
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc,
                             episode_id=episode_id if isinstance(episode_id, str) else None)
    return AdaptedRecord(number, pointer, rows, pointers, episode_id=episode_id, notes=notes)


def simulation_rows(sim: Any, info: dict, tasks: dict[str, Any], pointer: str,
                    max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[list[dict], list[str], Any]:
    """(native step records, their JSON pointers, the builder's notes) of one
    simulation."""
    if not isinstance(sim, dict):
        raise AdapterError(pointer, f"a simulation is an object, got {type(sim).__name__}")
    episode_id = sim.get("id")
    if not isinstance(episode_id, str) or not episode_id:
        raise AdapterError(f"{pointer}/id", "a simulation needs a non-empty string id")
    messages = sim.get("messages")
    if messages is None and isinstance(sim.get("ticks"), list):
        fed = tick_messages(sim["ticks"], f"{pointer}/ticks")  # a full-duplex run
    elif not isinstance(messages, list):
        raise AdapterError(f"{pointer}/messages", "a simulation needs a list of messages "
                                                  "(or, of a full-duplex run, of ticks)")
    else:
        fed = [(m, f"{pointer}/messages/{j}") for j, m in enumerate(messages)]
    domain = _get(info, "environment_info", "domain_name")
    tools = _get(info, "environment_info", "tool_defs")
    tool_names = sorted({_get(t, "name") or _get(t, "function", "name") for t in tools
                         if isinstance(t, dict)} - {None}) if isinstance(tools, list) else None
    tokens = [0, 0]
    for m, where in fed:
        if isinstance(m, dict) and "usage" in m and m.get("role") == "assistant":
            usage = m["usage"]
            if not isinstance(usage, dict):
                continue
            for k, name in enumerate(("prompt_tokens", "completion_tokens")):
                count = usage.get(name)
                if count is not None and type(count) is not int:
                    raise AdapterError(f"{where}/usage/{name}",
                                       f"expected an integer, got {type(count).__name__} "
                                       f"{count!r:.60}")
                tokens[k] += count or 0
    trial = sim.get("trial")
    common = {
        "task": None if sim.get("task_id") is None else str(sim["task_id"]),
        "state": {"available_tools": tool_names},
        "environment_version": f"tau2:{domain}@{info.get('git_commit')}",
        "metadata": {"behavior_policy": _get(info, "agent_info", "llm"),
                     "temperature": _number(_get(info, "agent_info", "llm_args",
                                                 "temperature"))},
        "episode": {
            "trial": trial if type(trial) is int else None,
            "agent_model": _get(info, "agent_info", "llm"),
            "user_model": _get(info, "user_info", "llm"),
            "domain": domain,
            "termination_reason": sim.get("termination_reason"),
            "agent_cost_usd": _number(sim.get("agent_cost")),
            "user_cost_usd": _number(sim.get("user_cost")),
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "duration_s": _number(sim.get("duration")),
        },
    }
    builder = EpisodeBuilder(episode_id, common, max_depth)
    for m, where in fed:
        _feed(builder, m, where)
    reward_info = sim.get("reward_info") if isinstance(sim.get("reward_info"), dict) else {}
    reward = _number(reward_info.get("reward"))
    if reward is None and reward_info.get("reward") is not None:
        raise AdapterError(f"{pointer}/reward_info/reward", "expected a number, got "
                           f"{type(reward_info['reward']).__name__} {reward_info['reward']!r:.60}")
    episode_extra = {k: v for k, v in sim.items() if k not in _SIMULATION_MAPPED
                     and not (k == "ticks" and messages is None)}
    task = tasks.get(str(sim.get("task_id")))
    rows, pointers = builder.finish(pointer, reward,
                                    numeric_components(reward_info.get("reward_breakdown")),
                                    "tau2:reward_info.reward",
                                    {"episode": episode_extra, "task": task})
    return rows, pointers, builder.notes


def is_simulation(value: Any) -> bool:
    """One simulation run on its own (a directory layout's `simulations/<id>.json`, or a
    run saved by itself): an `id`, `task_id`, its `messages` or `ticks`, and one of the
    fields every tau2 simulation has."""
    return isinstance(value, dict) and isinstance(value.get("id"), str) \
        and "task_id" in value and ("messages" in value or "ticks" in value) \
        and ("termination_reason" in value or "reward_info" in value
             or "start_time" in value)


def _chunk_text(chunk: dict) -> str | None:
    """A tick chunk's text: its content, or of an audio chunk (content base64 audio),
    the script it spoke (`audio_script_gold`) when one is logged."""
    text = chunk.get("audio_script_gold") if chunk.get("is_audio") is True \
        else chunk.get("content")
    return text if isinstance(text, str) and text else None


def tick_messages(ticks: list, where: str) -> list[tuple[dict, str]]:
    """The messages of a full-duplex run's `ticks` (each: `agent_chunk`, `user_chunk`,
    `agent_tool_calls`, `user_tool_calls`, `agent_tool_results`, `user_tool_results`), as
    tau2's SimulationRun.get_messages flattens them, tick by tick: the agent's chunk with
    its tool calls, their results, the user's chunk with its tool calls, theirs. A chunk
    with no text, no call and no `contains_speech: true` (a silent tick) is no message;
    consecutive speaking chunks of one speaker with nothing between them are one message
    (their texts joined, a space between different utterances, as tau2's merge_chunks
    does; null when no chunk of it logged text). (message, pointer of its first chunk)
    pairs; a message's `tick_ids` name its first and last tick."""
    out: list[tuple[dict, str]] = []
    open_text: dict | None = None  # the last message, while text may still join it
    open_utterances: set = set()
    for i, tick in enumerate(ticks):
        at = f"{where}/{i}"
        if not isinstance(tick, dict):
            raise AdapterError(at, f"a tick is an object, got {type(tick).__name__}")
        tick_id = tick.get("tick_id", i)
        for side, role in (("agent", "assistant"), ("user", "user")):
            chunk = tick.get(f"{side}_chunk")
            if chunk is not None and not isinstance(chunk, dict):
                raise AdapterError(f"{at}/{side}_chunk", "a chunk is an object, got "
                                                         f"{type(chunk).__name__}")
            calls = tick.get(f"{side}_tool_calls") or []
            if not isinstance(calls, list):
                raise AdapterError(f"{at}/{side}_tool_calls", "expected a list of tool calls")
            text = _chunk_text(chunk) if chunk else None
            speaks = text is not None or (chunk is not None
                                          and chunk.get("contains_speech") is True)
            utterances = set(chunk.get("utterance_ids") or []) if chunk else set()
            if speaks and not calls and open_text is not None and open_text["role"] == role:
                if text is not None and open_text["content"] is not None:
                    if utterances and open_utterances \
                            and utterances.isdisjoint(open_utterances):
                        text = " " + text
                    open_text["content"] += text
                elif text is not None:
                    open_text["content"] = text
                open_text["tick_ids"][1] = tick_id
                open_utterances = utterances or open_utterances
            elif speaks or calls:
                m: dict = {"role": role, "content": text, "tool_calls": calls or None,
                           "tick_ids": [tick_id, tick_id]}
                for key in ("timestamp", "cost", "usage"):
                    if chunk and chunk.get(key) is not None:
                        m[key] = chunk[key]
                out.append((m, f"{at}/{side}_chunk" if chunk else f"{at}/{side}_tool_calls"))
                open_text, open_utterances = (m, utterances) if speaks and not calls \
                    else (None, set())
            results = tick.get(f"{side}_tool_results") or []
            if not isinstance(results, list):
                raise AdapterError(f"{at}/{side}_tool_results", "expected a list of tool "
                                                                "messages")
            for k, result in enumerate(results):
                out.append((result, f"{at}/{side}_tool_results/{k}"))
                open_text = None
    return out


def _feed(builder: EpisodeBuilder, m: Any, where: str) -> None:
    if not isinstance(m, dict):
        raise AdapterError(where, f"a message is an object, got {type(m).__name__}")
    role = m.get("role")
    calls = m.get("tool_calls") or _NO_CALLS
    if calls:
        if not isinstance(calls, list):
            raise AdapterError(f"{where}/tool_calls", "expected a list of tool-call objects")
        bad_arguments = None  # the first call whose arguments are not an object
        for k, c in enumerate(calls):
            if not isinstance(c, dict):
                raise AdapterError(f"{where}/tool_calls", "expected a list of tool-call objects")
            arguments = c.get("arguments")
            if bad_arguments is None and arguments is not None \
                    and not isinstance(arguments, dict):
                bad_arguments = k
        if bad_arguments is not None:  # (said after every call is known to be an object)
            arguments = calls[bad_arguments].get("arguments")
            raise AdapterError(f"{where}/tool_calls/{bad_arguments}/arguments",
                               f"expected an object, got {type(arguments).__name__}")
    if role == "assistant":
        extra = None if m.keys() <= _ASSISTANT_MAPPED else {
            k: v for k, v in m.items() if k not in _ASSISTANT_MAPPED and v is not None}
        for c in calls:
            if not c.keys() <= _CALL_MAPPED:
                unknown_call_fields = [{k: v for k, v in c.items() if k not in _CALL_MAPPED}
                                       for c in calls]
                if any(unknown_call_fields):
                    extra = extra or {}
                    extra["tool_calls"] = unknown_call_fields
                break
        cost = m.get("cost")
        builder.assistant_turn(where, m.get("content"),
                               [(c.get("id"), c.get("name"), c.get("arguments"),
                                 f"{where}/tool_calls/{k}") for k, c in enumerate(calls)],
                               cost=None if cost is None else _number(cost),
                               extra=extra or None)
    elif role == "user" or role == "system":
        content = m.get("content")
        if content is not None or not calls:
            builder.event(role, "message", content=content)
        for c in calls:
            builder.event(role, "tool_call", tool=c.get("name"), arguments=c.get("arguments"),
                          call_id=c.get("id"))
    elif role == "tool" and isinstance(m.get("tool_messages"), list) and "id" not in m:
        for k, inner in enumerate(m["tool_messages"]):  # a MultiToolMessage
            _feed(builder, inner, f"{where}/tool_messages/{k}")
    elif role == "tool":
        content = m.get("content")
        error = (content if isinstance(content, str) and content else "error") \
            if m.get("error") is True else None
        builder.tool_result(where, m.get("id"), content, error)
    else:
        raise AdapterError(f"{where}/role", f"unknown role {role!r} (expected assistant, "
                                            "user, system or tool)")


read_tau2.plan_slices = plan_slices  # type: ignore[attr-defined]  # see its `plan`


def sidecars(path: Path) -> list[Path]:
    """A directory-layout results file's simulation files (read with it)."""
    return list(simulation_files(path) or ())
