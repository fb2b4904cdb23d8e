"""Langfuse trace exports → native step records, one episode per trace (and agent).

A record is one trace: `{"trace": {...}, "observations": [...]}` (Langfuse's export and
`download_traces`), or a trace object with its `observations` inline (the public API's
`GET /traces/{id}`); a file holds one, a JSON list of them, or JSONL. Observations on
their own (a public API list, `GET /observations`: `{"data": [observation, ...],
"meta"}`; or a JSON list or JSONL of observations, as the UI exports an observations
table, or the blob storage export's JSONL, whose fields are snake_case: `trace_id`,
`start_time`, `provided_model_name`, the trace's `trace_name` / `user_id` / `session_id`
/ `tags` on each observation) are grouped by `traceId`, one trace record each, in the
order first seen, after the file's other records (a large JSONL is read in jobs of its
lines, the lines that name one trace id in one job: `read_lines`). A list of traces
whose `observations` are ids only (`GET /traces`) cannot be read: each such trace is
quarantined saying so (export the traces with their observations). A score on its own
(the blob storage export's `scores/` rows, snake_case; the public API's score list
`GET /scores`), a trace row without observations (the blob export's legacy `traces/`
files, beside its `observations/`; the UI's traces table export) and a session (the UI's
`session-<id>.json`, `GET /sessions/{id}`: its traces without observations) are no
record: counted, `scores_apart_from_traces` / `trace_rows_without_observations` /
`sessions_without_observations`, unless they join a trace: the runner gives the reader
the files of one input that name a trace id in common as one read (`link_keys`,
`_read_joined`): a trace cut across the blob export's time windows is one trace, an
observation written twice (`observations/` and `observations_v2/`) is read once, its
trace row gives the trace's name, user, session and tags, its scores the reward.
Observations:
`{id, traceId, parentObservationId, type, name, startTime, endTime, input, output, model,
modelParameters, usageDetails, costDetails, level, statusMessage, metadata}`; input and
output are values or JSON text of them (sometimes twice encoded); `metadata` (an object
or JSON text) holds the original OpenTelemetry `attributes` when the trace came in over
OTLP.

The trace is read like OpenTelemetry spans (tracerl.data.formats.otel_genai.read: the same turns,
layers, tool matching and agents), with Langfuse's own fields first:
- a GENERATION is a model call: its `input` (the messages sent: chat, Anthropic,
  Gemini `contents`, Responses API items, LangChain, a prompt string) and `output` (a
  chat completion, Responses API object, Gemini response, message, the bare list of an
  Anthropic message's content blocks, the Vercel AI SDK's bare tool-call list, or text)
  are read by tracerl.data.formats.common.messages (with producers' own dialects first: the
  Vercel AI SDK's tool-call / tool-result parts, Koog's tool calls as JSON text in the
  content, langfuse-langchain JS's tool messages whose role is the tool's name); without
  them, its OTel attributes are;
- a TOOL observation is a tool run (`input` the arguments, `output` the result, level
  ERROR the error), matched to its call by `gen_ai.tool.call.id`, else by name and
  arguments; so is a SPAN named after a call the agent made and not yet answered (how
  LangChain logs a tool), or whose output is a tool message;
- AGENT observations (and spans with `gen_ai.agent.name`) separate agents: each its own
  episode (`<trace id>/<agent name>`);
- scores (`trace.scores`, or `scores` beside the trace) with numeric values (`dataType`
  / `data_type` NUMERIC or BOOLEAN; not CATEGORICAL) are the done row's
  reward_components; the reward is the score named `ingest.reward_evaluation` (or
  `ingest.reward_attribute`), else the only one.
episode_id = the trace id; task = the trace `name`; the trace's `sessionId`, `userId`,
`tags` and `metadata` are under the done row's `extra.episode`. `read` counts traces.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError, ReadOptions
from tracerl.data.formats.common.dialogue import DEFAULT_MAX_DEPTH
from tracerl.data.formats.common.messages import (
    ROLES,
    input_messages,
    output_messages,
    parse_json_text,
    text_of,
)
from tracerl.data.formats.common.records import RawRecord, json_records
from tracerl.data.formats.langfuse.detect import (
    is_langfuse_observation,
    is_langfuse_score,
    is_langfuse_session,
    is_langfuse_trace_row,
)
from tracerl.data.formats.otel_genai.links import file_pieces
from tracerl.data.formats.otel_genai.read import (
    Span,
    SpanIndex,
    _Call,
    _io,
    _Tool,
    episodes,
    model_call,
)
from tracerl.data.formats.otel_genai.tools import _empty, tool_arguments
from tracerl.data.ingest.limits import Limits


def read_langfuse(path: Path | list[Path], limits: Limits | None = None,
                  options: ReadOptions | None = None, batch: Any = None,
                  names: list[str] | None = None) -> Iterator[AdaptedRecord]:
    """The traces of one file, or of several read as one (a list: the Langfuse files of
    one input that name a trace id in common, `link_keys`; see `_read_joined`)."""
    limits = limits or Limits()
    options = options or ReadOptions()
    if not isinstance(path, str | Path):
        paths = [Path(p) for p in path]
        yield from _read_joined(paths, list(names) if names else [p.name for p in paths],
                                limits, options)
        return
    for _, record in _read(json_records(Path(path), limits, batch=batch), limits, options):
        yield record


def _read_joined(paths: list[Path], names: list[str], limits: Limits,
                 options: ReadOptions) -> Iterator[AdaptedRecord]:
    """The files of one input read as one, as the blob storage export writes them: a
    trace's observations in the files of two time windows (or twice, in `observations/`
    and `observations_v2/`: an observation id seen again is left out, counted
    `repeated_observations`), its trace row in `traces/`, its scores in `scores/` (the
    trace's done row's reward_components). A trace's record names the file of its first
    observation (`source_file`); a row whose observation is in another of the files has
    the pointer `<name>#<pointer>`, names[k] naming paths[k]. A public API list's items
    are read as such records (a `GET /traces` list's traces, whose observations are ids,
    as trace rows; `GET /observations`, `GET /scores`). Records that are whole in a
    line or document (a trace with its observations, a line that cannot be read) are
    read as alone, named by their file; a trace row or a score that no observation of the
    files joins is counted as alone, a trace listing its observations by id quarantined
    as alone."""
    loose: dict[str, list[tuple[int, int, str, dict]]] = {}  # trace id -> observations
    context: dict[str, dict] = {}  # trace id -> what its observations say of the trace
    seen: set[tuple[str, str]] = set()
    rows: dict[str, list[dict]] = {}  # trace id -> its trace rows
    scores: dict[str, dict[str, dict]] = {}  # trace id -> its scores, by id
    by_id: dict[str, list[tuple[int, RawRecord]]] = {}  # traces listing observations by id
    notes: Counter = Counter()
    for k, file in enumerate(paths):
        source = str(file)
        for raw in (one for whole in json_records(file, limits) for one in _items(whole)):
            value = raw.value
            if raw.error is None and _ids_only(value):  # a GET /traces list's trace
                by_id.setdefault(str(value["id"]), []).append((k, raw))
                continue
            if raw.error is None and is_langfuse_observation(value):
                value = _camel(value)
                trace_id = str(value["traceId"])
                context[trace_id] = {**_trace_context(trace_id, value),
                                     **context.get(trace_id, {})}
                key = (trace_id, str(value.get("id")))
                if value.get("id") is not None and key in seen:
                    notes["repeated_observations"] += 1
                    continue
                seen.add(key)
                loose.setdefault(trace_id, []).append((k, raw.number, raw.pointer, value))
                continue
            if raw.error is None and is_langfuse_score(value) \
                    and value.get("traceId", value.get("trace_id")) is not None:
                trace_id = str(value.get("traceId", value.get("trace_id")))
                scores.setdefault(trace_id, {}).setdefault(
                    str(value.get("id", len(scores.get(trace_id, ())))), value)
                continue
            if raw.error is None and is_langfuse_trace_row(value):
                rows.setdefault(str(value["id"]), []).append(value)
                continue
            for _, record in _read(iter([raw]), limits, options):
                record.source_file = source
                yield record
    for trace_id, members in loose.items():
        k, number, at, _ = members[0]
        trace = context[trace_id]
        listed = [{key: v for key, v in raw.value.items() if key not in ("observations",
                                                                          "scores")}
                  for _, raw in by_id.pop(trace_id, [])]
        for row in [*rows.pop(trace_id, []), *listed]:
            trace = {**trace, **{key: v for key, v in row.items()
                                 if v not in (None, "", []) and key not in ("input", "output")}}
        record = {"trace": trace, "observations": [o for *_, o in members],
                  "scores": list(scores.pop(trace_id, {}).values())}
        pointers = [(f"{names[j]}#" if j != k else "") + (where or f"/lines/{n}")
                    for j, n, where, _ in members]
        try:
            found = list(trace_records(record, number, at, limits.max_depth, options,
                                       pointers))
        except AdapterError as exc:
            found = [AdaptedRecord(number, at, error=exc, episode_id=trace_id)]
        for one in found:
            one.source_file = str(paths[k])
            yield one
    for k, raw in (one for listed in by_id.values() for one in listed):
        for _, record in _read(iter([raw]), limits, options):  # no observation joins it
            record.source_file = str(paths[k])
            yield record
    notes["trace_rows_without_observations"] += sum(map(len, rows.values()))
    notes["scores_apart_from_traces"] += sum(map(len, scores.values()))
    if +notes:
        yield AdaptedRecord(0, "", notes=+notes, is_record=False, source_file=str(paths[0]))


def _items(raw: RawRecord) -> Iterator[RawRecord]:
    """A record of a joined read, or the items of a public API list (`{data: [...]}`:
    each at its `/data/<k>`; the traces numbered among the list's traces, as alone)."""
    if raw.error is not None or not _is_api_list(raw.value):
        yield raw
        return
    number = 0
    for j, item in enumerate(raw.value["data"]):
        number += not is_langfuse_observation(item)
        yield RawRecord(max(number, 1), f"{raw.pointer}/data/{j}", item)


def _ids_only(value: Any) -> bool:
    """A trace whose `observations` are ids only (the public API's `GET /traces`)."""
    observations = value.get("observations") if isinstance(value, dict) else None
    return isinstance(observations, list) and bool(observations) \
        and all(isinstance(o, str) for o in observations) and isinstance(value.get("id"), str)


def _link_keys(path: Path) -> set[str]:
    """The trace ids a file names (a raw scan, no parse: its observations' and scores'
    `traceId` / `trace_id`, and for a file of trace rows, the blob export's `traces/`, the
    rows' ids): the runner reads the files of one input that share one as one (a missed
    link reads a trace in two parts, whose duplicate the runner quarantines; an extra one
    only joins files that did not need it)."""
    keys: set[bytes] = set()
    tail = b""
    rows = _trace_row_file(Path(path))
    for piece in file_pieces(Path(path)):
        text = tail + piece
        keys.update(_TRACE_ID.findall(text))
        if rows:
            keys.update(_ID.findall(text))
        tail = text[-4096:]
    return {key.decode("utf-8", "replace") for key in keys}


def _trace_row_file(path: Path) -> bool:
    """Whether the file's first record (read up to 1 MiB) is a trace row, or a public API
    list of traces that list their observations by id (traces named by their `id`)."""
    try:
        first = next(json_records(path, Limits(max_record_bytes=1 << 20)), None)
    except (OSError, ValueError):
        return False
    if first is None or first.error is not None:
        return False
    value = first.value
    if _is_api_list(value) and value["data"]:
        value = value["data"][0]
        return is_langfuse_trace_row(value) or _ids_only(value)
    return is_langfuse_trace_row(value)


_ID = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.){1,1024})"')


# The runner gives the reader (unit "folder") the Langfuse files of one input that share a
# trace id in one call (a list): the blob storage export cuts a trace across the files of
# its time windows and writes its trace row and scores in files of their own.
read_langfuse.link_keys = _link_keys


def read_lines(path: Path | str, batch: Any, limits: Limits | None = None,
               options: ReadOptions | None = None) -> Iterator[tuple[tuple, AdaptedRecord]]:
    """The records of some lines of one JSON Lines file (`batch`: a GuardedBatch of its
    lines, or several in file order) that hold every observation of their traces (the
    runner cuts a large file into such jobs by `batch_link_keys`, tracerl.data.ingest.run),
    each with its place among the records of the whole file's read: (0, line) a line's
    own record (a trace, a line that cannot be read, a note), (1, first line) a trace of
    loose observations (read_langfuse yields those after the others, in the order first
    seen). Sorting all jobs' records by place gives read_langfuse's order; records keep
    their line numbers."""
    limits = limits or Limits()
    batches = list(batch) if isinstance(batch, list | tuple) else [batch]
    raws = (raw for one in batches for raw in json_records(Path(path), limits, batch=one))
    yield from _read(raws, limits, options or ReadOptions())


# a trace id as written in a line (observations' traceId / trace_id): the batches of a
# file's lines that name one are read together, so a trace's observations are one trace
_TRACE_ID = re.compile(rb'"trace(?:Id|_id)"\s*:\s*"((?:[^"\\]|\\.){1,1024})"')


def _batch_link_keys(batch: Any) -> set[str]:
    """The trace ids a batch of a JSON Lines file's lines names (a raw scan, no parse: a
    key seen where it is not an observation's only joins batches that did not need it; a
    key missed reads a trace in two parts, whose duplicate episode the runner
    quarantines, never a silent loss)."""
    lines, text = batch.read()
    if text is None:
        text = b"\n".join(lines)
    return {key.decode("utf-8", "replace") for key in _TRACE_ID.findall(text)}


# A large JSON Lines file is read in jobs of its lines (tracerl.data.ingest.run): loose
# observations of one trace may lie far apart in it (the blob storage export writes them
# in no order), so the batches that share a trace id are one job.
read_langfuse.read_lines = read_lines
read_langfuse.batch_link_keys = _batch_link_keys


def _read(raws: Iterator, limits: Limits, options: ReadOptions
          ) -> Iterator[tuple[tuple, AdaptedRecord]]:
    """The records of these raw records, each with its place (read_lines)."""
    loose: dict[str, list[tuple[int, str, dict]]] = {}  # trace id -> its observations
    for raw in raws:
        here = (0, raw.number)
        if raw.error is not None:
            yield here, AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        value = raw.value
        if is_langfuse_observation(value):
            value = _camel(value)
            loose.setdefault(str(value["traceId"]), []).append((raw.number, raw.pointer,
                                                                value))
            continue
        apart = _apart(value)
        if apart is not None:
            yield here, AdaptedRecord(raw.number, raw.pointer, notes=Counter({apart: 1}),
                                      is_record=False)
            continue
        if _is_api_list(value):
            for record in _api_list(value, raw.pointer, limits.max_depth, options):
                yield here, record
            continue
        try:
            for record in trace_records(value, raw.number, raw.pointer, limits.max_depth,
                                        options):
                yield here, record
        except AdapterError as exc:
            yield here, AdaptedRecord(raw.number, raw.pointer, error=exc)

    for trace_id, members in loose.items():  # a list or JSONL of observations
        number = members[0][0]
        here = (1, number)
        record = {"trace": _trace_context(trace_id, members[0][2]),
                  "observations": [o for _, _, o in members]}
        try:
            for one in trace_records(record, number, members[0][1], limits.max_depth,
                                     options, [at or f"/lines/{n}" for n, at, _ in members]):
                yield here, one
        except AdapterError as exc:
            yield here, AdaptedRecord(number, members[0][1], error=exc, episode_id=trace_id)


def _apart(value: Any) -> str | None:
    """The note that counts a score or a trace exported apart from the trace's
    observations (the blob storage export's `scores/` and legacy `traces/` files, the
    public API's score list): no agent action of its own, so no record; None for others."""
    if is_langfuse_score(value):
        return "scores_apart_from_traces"
    if is_langfuse_trace_row(value):
        return "trace_rows_without_observations"
    if is_langfuse_session(value):
        return "sessions_without_observations"
    return None


_CAMEL = {"trace_id": "traceId", "parent_observation_id": "parentObservationId",
          "start_time": "startTime", "end_time": "endTime", "status_message": "statusMessage",
          "model_parameters": "modelParameters", "usage_details": "usageDetails",
          "cost_details": "costDetails", "provided_model_name": "model",
          "completion_start_time": "completionStartTime", "project_id": "projectId"}
# an enriched observation's trace context (blob storage export, observations_v2)
_TRACE_CONTEXT = {"trace_name": "name", "user_id": "userId", "session_id": "sessionId",
                  "tags": "tags", "release": "release", "trace_tags": "tags",
                  "trace_metadata": "metadata", "userId": "userId", "sessionId": "sessionId",
                  "traceName": "name", "traceTags": "tags"}  # (the UI's observations export)


def _camel(o: dict) -> dict:
    """An observation with snake_case fields (the blob storage export's, the SDK models'
    dumped without aliases) under the API's camelCase names; others as they are."""
    if "traceId" in o:
        return o
    return {_CAMEL.get(k, k): v for k, v in o.items()
            if not (k == "provided_model_name" and "model" in o)}


def _trace_context(trace_id: str, o: dict) -> dict:
    """The trace of observations exported without it: its id, and the trace fields an
    enriched observation carries (name, user, session, tags)."""
    trace = {"id": trace_id}
    for theirs, ours in _TRACE_CONTEXT.items():
        if o.get(theirs) not in (None, "", []):
            trace.setdefault(ours, o[theirs])
    return trace


def _is_api_list(value: Any) -> bool:
    """A public API list response: `{"data": [...]}` of observations or traces."""
    return isinstance(value, dict) and isinstance(value.get("data"), list) \
        and "observations" not in value and "trace" not in value


def _api_list(value: dict, pointer: str, max_depth: int,
              options: ReadOptions) -> Iterator[AdaptedRecord]:
    """The traces of a public API list: observations grouped by traceId, or traces."""
    data = value["data"]
    groups: dict[str, list[tuple[str, dict]]] = {}
    number = 0
    for k, item in enumerate(data):
        at = f"{pointer}/data/{k}"
        if is_langfuse_observation(item):
            item = _camel(item)
            groups.setdefault(str(item["traceId"]), []).append((at, item))
            continue
        apart = _apart(item)
        if apart is not None:
            yield AdaptedRecord(0, at, notes=Counter({apart: 1}), is_record=False)
            continue
        number += 1
        try:
            yield from trace_records(item, number, at, max_depth, options)
        except AdapterError as exc:
            yield AdaptedRecord(number, at, error=exc)
    for trace_id, members in groups.items():
        number += 1
        record = {"trace": _trace_context(trace_id, members[0][1]),
                  "observations": [o for _, o in members]}
        try:
            yield from trace_records(record, number, pointer, max_depth, options,
                                     [at for at, _ in members])
        except AdapterError as exc:
            yield AdaptedRecord(number, members[0][0], error=exc, episode_id=trace_id)


def _unwrap(value: Any, pointer: str) -> tuple[dict, list, str, list]:
    """(trace, observations, their pointer, scores)."""
    if not isinstance(value, dict):
        raise AdapterError(pointer or "/", f"a trace export is an object, got "
                                           f"{type(value).__name__}")
    if isinstance(value.get("trace"), dict):
        trace = value["trace"]
        observations = value.get("observations")
        where = f"{pointer}/observations"
        if observations is None and isinstance(trace.get("observations"), list):
            observations, where = trace["observations"], f"{pointer}/trace/observations"
        scores = value.get("scores") if isinstance(value.get("scores"), list) \
            else trace.get("scores")
    else:
        trace, observations, where = value, value.get("observations"), f"{pointer}/observations"
        scores = value.get("scores")
    if not isinstance(observations, list):
        raise AdapterError(where, "a trace export needs a list of `observations`")
    if observations and all(isinstance(o, str) for o in observations):
        raise AdapterError(where, "the trace lists its observations by id only (as the "
                                  "public API's trace list does): export the traces with "
                                  "their observations (GET /api/public/traces/{id}, or the "
                                  "UI's download)")
    return trace, observations, where, scores if isinstance(scores, list) else []


def _time(value: Any) -> int:
    from tracerl.data.formats.otel_genai.spans import _ns

    return _ns(value)


def _metadata_attrs(o: dict) -> dict:
    metadata = parse_json_text(o.get("metadata"))
    if isinstance(metadata, dict):
        attrs = metadata.get("attributes")
        attrs = parse_json_text(attrs)
        if isinstance(attrs, dict):
            return attrs
    return {}


def trace_records(value: Any, number: int, pointer: str, max_depth: int = DEFAULT_MAX_DEPTH,
                  options: ReadOptions | None = None,
                  observation_pointers: list[str] | None = None) -> Iterator[AdaptedRecord]:
    """The episodes of one trace; observation_pointers: where each observation is, when
    not at `<observations>/<k>` (an API list grouped by trace)."""
    options = options or ReadOptions()
    trace, observations, where, scores = _unwrap(value, pointer)
    trace_id = trace.get("id") if isinstance(trace.get("id"), str) and trace.get("id") \
        else f"trace-{number}"
    spans: list[Span] = []
    kinds: dict[tuple, str] = {}
    raw_by_key: dict[tuple, dict] = {}
    for k, o in enumerate(observations):
        at = observation_pointers[k] if observation_pointers else f"{where}/{k}"
        if not isinstance(o, dict):
            raise AdapterError(at, "an observation is an object")
        o = _camel(o) if "trace_id" in o else o
        oid = o.get("id") if isinstance(o.get("id"), str) else at
        attrs = _metadata_attrs(o)
        error = o.get("statusMessage") or "error" if o.get("level") == "ERROR" else None
        span = Span(trace_id, oid, o.get("parentObservationId"), o.get("name") or "",
                    _time(o.get("startTime")), _time(o.get("endTime") or o.get("startTime")),
                    attrs, [], at, None, error)
        model = o.get("model") if isinstance(o.get("model"), str) else o.get(
            "providedModelName")  # (the v2 observations API's name for it)
        if isinstance(model, str) and "gen_ai.response.model" not in attrs:
            attrs["gen_ai.response.model"] = model
        params = parse_json_text(o.get("modelParameters"))
        if isinstance(params, dict) and "temperature" in params:
            attrs.setdefault("gen_ai.request.temperature", params["temperature"])
        usage = o.get("usageDetails") or o.get("usage")
        if isinstance(usage, dict):
            for ours, theirs in (("gen_ai.usage.input_tokens", ("input", "promptTokens")),
                                 ("gen_ai.usage.output_tokens", ("output", "completionTokens"))):
                for key in theirs:
                    if type(usage.get(key)) is int:
                        attrs.setdefault(ours, usage[key])
                        break
        spans.append(span)
        kinds[(trace_id, oid)] = o.get("type") or "SPAN"
        raw_by_key[(trace_id, oid)] = o
    index = SpanIndex(spans)
    calls: dict[tuple, _Call] = {}
    for key, kind in kinds.items():
        if kind != "GENERATION":
            continue
        o, s = raw_by_key[key], index.spans[key]
        inputs = _producer_messages(input_messages(_call_arguments(o.get("input"))))
        outputs = _producer_messages(output_messages(_output_value(o.get("output"))))
        if inputs is None or outputs is None:  # what is missing, from its OTel attributes
            attr_inputs, attr_outputs = _io(s, [])
            inputs = attr_inputs if inputs is None else inputs
            outputs = attr_outputs if outputs is None else outputs
        calls[key] = model_call(s, inputs, outputs, max_depth)
    tool_names = {c.name for call in calls.values() if call.output
                  for c in call.output.calls if isinstance(c.name, str)}
    tool_runs: dict[tuple, _Tool] = {}
    for key, kind in kinds.items():
        if key in calls:
            continue
        o, s = raw_by_key[key], index.spans[key]
        output = parse_json_text(o.get("output"))
        tool_message = isinstance(output, dict) and output.get("type") == "tool" \
            and "tool_call_id" in output
        attrs = s.attrs
        named = attrs.get("gen_ai.tool.name", attrs.get("tool.name"))
        if kind == "TOOL" or (kind == "SPAN" and (s.name in tool_names or tool_message
                                                   or isinstance(named, str))):
            if any(a in tool_runs for a in index.ancestors(key)):
                continue
            tool_runs[key] = _tool(s, o, output, tool_message, max_depth)
    # an outer tool-like span around a tool run is the same call: keep the inner one;
    # unless only the outer names its tool and the inner ones are its run's events
    # (BeeAI's OpenInference instrumentation writes each emitter event — start, finish,
    # retry — as a child span of the tool's kind, named after the event)
    for key in list(tool_runs):
        inner = [d for d in index.descendants(key) if d in tool_runs]
        if not inner or key not in tool_runs:
            continue
        if _names_tool(index.spans[key]) and not any(_names_tool(index.spans[d])
                                                     for d in inner):
            for d in inner:
                del tool_runs[d]
        else:
            del tool_runs[key]

    def agent_of(key: tuple) -> str | None:
        for a in index.ancestors(key):
            s = index.spans[a]
            name = s.attrs.get("gen_ai.agent.name")
            if kinds.get(a) == "AGENT" or isinstance(name, str) \
                    or s.attrs.get("gen_ai.operation.name") == "invoke_agent":
                return str(name) if isinstance(name, str) else s.name
        return None

    def reward_of(group: set[tuple]) -> tuple[float | None, dict | None, str]:
        return (*_scores(scores, options), "langfuse:scores")

    notes: Counter = Counter()
    rows: list[dict] = []
    pointers: list[str] = []
    merged: Counter = Counter()
    for record in episodes(index, calls, tool_runs, lambda _: trace_id, agent_of, reward_of,
                           max_depth, notes):
        if record.error is not None:  # the trace is one record: one bad episode costs it
            yield AdaptedRecord(number, pointer, error=record.error, episode_id=trace_id)
            return
        rows += record.rows
        pointers += record.row_pointers
        merged.update(record.notes or {})
    if not rows:
        yield AdaptedRecord(number, pointer, error=AdapterError(
            where, "the trace has no model call (GENERATION) and no tool observation: "
                   "no agent action"), episode_id=trace_id)
        return
    _trace_facts(rows, trace)
    merged.update(notes)
    yield AdaptedRecord(number, pointer, rows, pointers, episode_id=trace_id, notes=+merged)


_CONTENT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking",
                             "server_tool_use", "web_search_tool_result", "mcp_tool_use",
                             "mcp_tool_result", "image", "document", "search_result",
                             "code_execution_tool_result", "container_upload"})


def _output_value(output: Any) -> Any:
    """A GENERATION's output that is a bare list of parts as the assistant message they
    make: an Anthropic message's content blocks (what an `@observe`d function returning
    `response.content` records), or the Vercel AI SDK's tool calls (`[{toolCallId,
    toolName, input | args}]`: its `ai.response.toolCalls`, which Langfuse makes the
    output of `ai.generateText` and its `.doGenerate`)."""
    value = parse_json_text(output)
    if isinstance(value, list) and value and all(
            isinstance(b, dict) and "role" not in b and b.get("type") in _CONTENT_BLOCKS
            for b in value):
        return {"role": "assistant", "content": value}
    if isinstance(value, list) and value and all(
            isinstance(c, dict) and "role" not in c and "toolCallId" in c and "toolName" in c
            for c in value):
        return {"role": "assistant", "parts": [
            {"type": "tool_call", "id": c["toolCallId"], "name": c["toolName"],
             "arguments": c.get("input", c.get("args"))} for c in value]}
    return output


def _call_arguments(value: Any) -> Any:
    """A GENERATION's input that is the arguments of the function it observed (`{args,
    kwargs}`: the Python SDK's @observe, OpenInference's LlamaIndex `input.value`) as the
    model call's input: the messages (or prompt) among them, else its text arguments as
    the prompt. An input whose `messages` are only strings (Agno writes each Message's
    repr()) holds no messages: None (its OTel attributes are read instead)."""
    parsed = parse_json_text(value)
    if isinstance(parsed, dict) and isinstance(parsed.get("messages"), list) \
            and parsed["messages"] and all(isinstance(m, str) for m in parsed["messages"]):
        return None  # Agno: its Message objects' repr() text, not messages
    if not (isinstance(parsed, dict) and parsed and parsed.keys() <= {"args", "kwargs"}):
        return value
    kwargs = parsed.get("kwargs") if isinstance(parsed.get("kwargs"), dict) else {}
    for key in ("messages", "contents", "input", "prompt"):
        if isinstance(kwargs.get(key), list | str):
            return {key: kwargs[key]}
    args = parsed.get("args") if isinstance(parsed.get("args"), list) else []
    for a in args:
        if isinstance(a, list) and a and all(isinstance(m, dict) for m in a):
            return a
        if isinstance(a, dict) and any(k in a for k in ("messages", "contents")):
            return a
    texts = [a for a in args if isinstance(a, str)]
    return "\n".join(texts) if texts else value


_VERCEL_PARTS = frozenset({"tool-call", "tool-result"})


def _producer_messages(messages: list | None) -> list | None:
    """Messages in a producer's own dialect as the common ones: the Vercel AI SDK's
    (content parts `tool-call{toolCallId, toolName, input | args}` / `tool-result
    {toolCallId, output | result}`); Koog's, whose tool calls are the JSON text of an
    OpenAI `tool_calls` list in the `content` of an assistant message (of a `tool` one in
    the next call's input)."""
    if not messages:
        return messages
    from tracerl.data.formats.otel_genai.span_io import _vercel_message

    out = []
    unanswered: list = []  # ids of Koog calls whose results (tool messages, no id) follow
    by_name: dict[str, list] = {}  # ids of the calls made so far, by tool name
    for m in messages:
        role = m.get("role")
        if isinstance(role, str) and role.lower() not in ROLES and "tool_call_id" not in m \
                and by_name.get(role):
            # langfuse-langchain (JS) writes a ToolMessage with its tool's name as the role
            m = {**m, "role": "tool", "name": role, "tool_call_id": by_name[role].pop(0)}
        calls = m.get("tool_calls")
        for c in calls if isinstance(calls, list) else ():
            if not isinstance(c, dict) or c.get("id") is None:
                continue
            function = c.get("function")
            name = function.get("name") if isinstance(function, dict) else c.get("name")
            if isinstance(name, str):
                by_name.setdefault(name, []).append(c["id"])
        content = m.get("content")
        if isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") in _VERCEL_PARTS for p in content):
            m = _vercel_message(m)
        elif isinstance(content, str) and content[:1] == "[" and "tool_calls" not in m \
                and m.get("role") in ("assistant", "tool"):
            calls = parse_json_text(content)
            if isinstance(calls, list) and calls and all(
                    isinstance(c, dict) and c.get("type") == "function"
                    and isinstance(c.get("function"), dict)
                    and isinstance(c["function"].get("name"), str) for c in calls):
                m = {**m, "role": "assistant", "content": None, "tool_calls": calls}
                unanswered = [c.get("id") for c in calls]
                out.append(m)
                continue
        if m.get("role") == "tool" and "tool_call_id" not in m and unanswered:
            m = {**m, "tool_call_id": unanswered.pop(0)}  # Koog: its results in order
        elif m.get("role") != "tool":
            unanswered = []
        out.append(m)
    return out


def _names_tool(s: Span) -> bool:
    """Whether a span names the tool it runs (an attribute says which)."""
    return isinstance(s.attrs.get("gen_ai.tool.name", s.attrs.get("tool.name")), str)


def _tool(s: Span, o: dict, output: Any, tool_message: bool, max_depth: int) -> _Tool:
    attrs = s.attrs
    name = attrs.get("gen_ai.tool.name", attrs.get("tool.name"))
    if not isinstance(name, str):
        name = s.name.removeprefix("running tool: ").removeprefix("execute_tool ").strip() \
            or None
    call_id = attrs.get("gen_ai.tool.call.id")
    if isinstance(call_id, list) and len(call_id) == 1:
        call_id = call_id[0]  # an attribute value written as a list of one
    args = parse_json_text(o.get("input"))
    if args is None:  # OpenInference's attribute, kept in the observation's metadata
        args = parse_json_text(attrs.get("input.value"))
    if output is None:
        output = parse_json_text(attrs.get("output.value"))
    if isinstance(args, dict) and set(args) == {"input"}:  # Claude Agent SDK wraps them
        args = args["input"]
    if isinstance(args, str):
        args = tool_arguments(args, s.pointer, max_depth)
    result = output
    if tool_message:
        call_id = call_id or output.get("tool_call_id")
        result = output.get("content")
    elif isinstance(output, dict) and isinstance(output.get("content"), list):
        result = text_of(output["content"])
    result = parse_json_text(result) if isinstance(result, str) else result
    return _Tool(s, name, str(call_id) if call_id is not None else None, args, result,
                 not _empty(result), s.error)


def _scores(scores: list, options: ReadOptions) -> tuple[float | None, dict | None]:
    from tracerl.data.formats.otel_genai.read import _number

    found: dict[str, float] = {}
    for sc in scores:
        if not isinstance(sc, dict) or not isinstance(sc.get("name"), str):
            continue
        value = _number(sc.get("value"))
        kind = sc.get("dataType", sc.get("data_type"))  # (snake_case: an SDK model dumped)
        if value is not None and kind in (None, "NUMERIC", "BOOLEAN"):
            found[sc["name"]] = value
    if not found:
        return None, None
    components = dict(sorted(found.items()))
    chosen = options.reward_evaluation or options.reward_attribute
    if chosen:
        return components.get(chosen), components
    return (next(iter(components.values())) if len(components) == 1 else None), components


def _trace_facts(rows: list[dict], trace: dict) -> None:
    name = trace.get("name") if isinstance(trace.get("name"), str) else None
    snake = {"session_id": "sessionId", "user_id": "userId"}  # an SDK model dumped as is
    kept = {snake.get(k, k): v for k, v in trace.items()
            if snake.get(k, k) in ("sessionId", "userId", "tags", "metadata", "release",
                                   "version", "environment") and v not in (None, [], "")}
    for row in rows:
        if name is not None:
            row["task"] = name
    if kept:
        for row in rows:
            if row["done"]:
                extra = dict(row.get("extra") or {})
                extra["episode"] = {**extra.get("episode", {}), **kept}
                row["extra"] = extra
