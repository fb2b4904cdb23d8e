"""tau2-bench results files (`tau2 run` output: one JSON object with `info`, `tasks` and
`simulations`) → native step records, one episode per simulation.

Mapping (see tracerl.data.adapters.dialogue for rows and observations):
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
- A tool message answers the call with its `id`; `error: true` puts its text in
  observation.error. Tool calls made by the user (`requestor: user`, telecom) and their
  results are observation events with actor user.
- Row `extra`: the assistant message's fields the schema does not name (`turn_idx`,
  `timestamp`, `usage`, ...; null ones dropped). `raw_data`, the provider's copy of the
  same message, is not kept.

`read` counts simulations. The file is streamed (tracerl.data.adapters.jsonstream): `info` and
`tasks` are read first, then one simulation at a time, so memory does not grow with the
file.

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

from tracerl.data.adapters import AdaptedRecord, AdapterError
from tracerl.data.adapters.dialogue import DEFAULT_MAX_DEPTH, EpisodeBuilder, numeric_components
from tracerl.data.adapters.jsonstream import ObjectPlan, plan_object, stream_object
from tracerl.data.adapters.records import document
from tracerl.data.ingest.limits import Limits

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
    record under the native reader's guards (see tracerl.data.adapters.jsonstream.stream_object):
    one over max_record_bytes is rejected without being held whole.

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
        if path.name.endswith(".gz"):
            if k:
                return
        else:
            size = path.stat().st_size
            span = (size * k // n, size * (k + 1) // n if k < n - 1 else None)
    header, simulations = stream_object(path, "simulations", limits, required=False,
                                        span=span, plan=plan)
    info = header.get("info") if isinstance(header.get("info"), dict) else {}
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
    if not isinstance(messages, list):
        raise AdapterError(f"{pointer}/messages", "a simulation needs a list of messages")
    domain = _get(info, "environment_info", "domain_name")
    tools = _get(info, "environment_info", "tool_defs")
    tool_names = sorted({_get(t, "name") or _get(t, "function", "name") for t in tools
                         if isinstance(t, dict)} - {None}) if isinstance(tools, list) else None
    tokens = [0, 0]
    for j, m in enumerate(messages):
        if isinstance(m, dict) and "usage" in m and m.get("role") == "assistant":
            usage = m["usage"]
            if not isinstance(usage, dict):
                continue
            for k, name in enumerate(("prompt_tokens", "completion_tokens")):
                count = usage.get(name)
                if count is not None and type(count) is not int:
                    raise AdapterError(f"{pointer}/messages/{j}/usage/{name}",
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
    for j, m in enumerate(messages):
        _feed(builder, m, f"{pointer}/messages/{j}")
    reward_info = sim.get("reward_info") if isinstance(sim.get("reward_info"), dict) else {}
    reward = _number(reward_info.get("reward"))
    if reward is None and reward_info.get("reward") is not None:
        raise AdapterError(f"{pointer}/reward_info/reward", "expected a number, got "
                           f"{type(reward_info['reward']).__name__} {reward_info['reward']!r:.60}")
    episode_extra = {k: v for k, v in sim.items() if k not in _SIMULATION_MAPPED}
    task = tasks.get(str(sim.get("task_id")))
    rows, pointers = builder.finish(pointer, reward,
                                    numeric_components(reward_info.get("reward_breakdown")),
                                    "tau2:reward_info.reward",
                                    {"episode": episode_extra, "task": task})
    return rows, pointers, builder.notes


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
    elif role == "tool":
        content = m.get("content")
        error = (content if isinstance(content, str) and content else "error") \
            if m.get("error") is True else None
        builder.tool_result(where, m.get("id"), content, error)
    else:
        raise AdapterError(f"{where}/role", f"unknown role {role!r} (expected assistant, "
                                            "user, system or tool)")


read_tau2.shardable = True  # type: ignore[attr-defined]  # see its `shard`
read_tau2.plan_slices = plan_slices  # type: ignore[attr-defined]  # see its `plan`
