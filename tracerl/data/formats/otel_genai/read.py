"""OpenTelemetry GenAI spans → native step records, one episode per agent conversation.

Containers (each auto-detected, each also as JSON Lines, one export per line):
- OTLP JSON: `{"resourceSpans": [{resource, scopeSpans: [{scope, spans: [...]}]}]}` (the
  collector's file exporter, OTLP/HTTP JSON; camelCase or proto field names), with
  `resourceLogs` (log-record events) in the same file; typed attribute values
  (`stringValue`, `intValue`, `arrayValue`, `kvlistValue`, ...); nanosecond times;
- JSON Lines of single spans: OTLP-shaped, or the SDK console exporter's (`context:
  {trace_id, span_id}`, `parent_id`, attributes as an object, ISO times);
- Jaeger query-API JSON: `{"data": [{traceID, spans: [...], processes}]}` with `tags` as
  `{key, type, value}`, `references` (CHILD_OF), `logs` (span events) and microsecond
  `startTime` / `duration`.

Attribute generations (all three, and OpenInference's `llm.*` as a fourth shape):
1. indexed: `gen_ai.prompt.N.{role, content, tool_call_id, tool_calls.M.{id, name,
   arguments}}` and `gen_ai.completion.N.{role, content, finish_reason, tool_calls.M.*}`;
2. per-message events: `gen_ai.system.message`, `gen_ai.user.message`,
   `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice` (span events or log
   records; the body, or `gen_ai.event.content`, or the attributes themselves), and the
   older `gen_ai.content.prompt` / `gen_ai.content.completion` events;
3. `gen_ai.input.messages` / `gen_ai.output.messages` (+ `gen_ai.system_instructions`)
   with typed parts (text, reasoning, tool_call, tool_call_response), on the span or on a
   `gen_ai.client.inference.operation.details` event; `execute_tool` spans with
   `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments` / `.result`.

Producers' own attributes, read where no `gen_ai` attribute says the same (the `gen_ai`
ones come first):
- OpenLLMetry / traceloop: a tool span (`traceloop.span.kind = tool`, named `<tool>.tool`)
  is an execute_tool span: its tool `traceloop.entity.name`, its arguments and result
  `traceloop.entity.input` / `.output` (JSON: the `@tool` decorator's `{args, kwargs}`,
  LangChain's `{input_str, inputs}` / `{output}`);
- Logfire / pydantic-ai: the GenAI events as a JSON list in the span attribute `events`
  (objects with `event.name`) are the span's events (generation 2); tool spans `running
  tool: <name>` with `gen_ai.tool.name`, `gen_ai.tool.call.id`, `tool_arguments`,
  `tool_response`;
- Vercel AI SDK (`ai.operationId`): `ai.<fn>.doGenerate` / `.doStream` is a model call
  (`ai.prompt.messages` with text / tool-call / tool-result parts in; `ai.response.text`,
  `.toolCalls`, `.reasoning`, or `ai.result.*` before v5, out), `ai.toolCall` a tool span
  (`ai.toolCall.name`, `.id`, `.args`, `.result`), `ai.<fn>` the run around them;
  generateObject's answer is `ai.response.object` (its JSON text);
- Google ADK: `call_llm` is a model call (`gcp.vertex.agent.llm_request`: Gemini
  `contents` and `config.system_instruction`; `.llm_response`: `content`), `execute_tool
  <name>` reads `gcp.vertex.agent.tool_call_args` / `.tool_response`; an MCP tool's
  `{content: [parts], isError}` result is its text (isError: the tool's error); the
  `execute_tool (merged)` span of parallel calls is not a call; "<not specified>" (ADK's
  placeholder) is no call id, `{"result": "<not specified>"}` no result;
- Strands Agents (legacy conventions): event content as Amazon Bedrock Converse blocks
  (`{text}`, `{toolUse}`, `{toolResult}`, `{reasoningContent}`; also OpenLLMetry's Bedrock
  spans, the blocks' JSON as a message's content), a `gen_ai.choice` whose `message` is
  the answer's blocks; a tool span's arguments / result in its `gen_ai.tool.message` /
  `gen_ai.choice` events;
- Spring AI: `tool_call <name>` spans (`spring.ai.kind` tool_call,
  `spring.ai.tool.definition.name`, `spring.ai.tool.call.arguments` / `.result`);
  `gen_ai.prompt` / `gen_ai.completion` as plain text or a list of texts;
- Latitude: `gen_ai.system.instructions`, tool spans of operation `tool` with
  `gen_ai.tool.result.value` / `.is_error`; Braintrust: `braintrust.span_attributes`
  type llm / tool with `braintrust.input_json` / `.output_json`; Claude Code:
  `claude_code.tool`'s `tool.output` event is its result, a failure of the deeper
  `claude_code.tool.execution` (same call id) its error; LiteLLM: an output message
  with no parts gives way to the indexed `gen_ai.completion.N.function_call.*`.
A turn whose recorded output names no call takes the calls the next call's input
records for it (its last assistant message, the same text), when that input answers
calls (producers that keep only the answer's text).

Conversations. Spans are joined by `gen_ai.conversation.id` (a span without one takes its
nearest ancestor's), else by trace id; a conversation's model calls are split by agent
(the nearest `invoke_agent` ancestor's `gen_ai.agent.name` / `.id`): each agent is its own
episode (episode_id = the conversation, `<conversation>/<agent>` when it has several; a
sub-agent invoked twice in a trace, `<agent>#1`, `<agent>#2`: one episode per task).
A model-call span is one turn: its output message's text and tool calls (several: parallel
calls). Two instrumentation layers often describe one call (a framework's `call_llm`
around a client library's `chat`): a model-call span with a model-call span inside is not
a turn of its own (the inner one is, or the outer one when only it has the content).
What comes back before the next turn: the tool results (from `execute_tool` spans by call
id, else by tool name, else in order; and from the next call's input, the messages after
its last assistant message), user and system messages (events). The first call's input
is the state's history. Without captured content (OTel's default), a model call is a turn
with no text, and the `execute_tool` spans after it are its calls. A tool span two layers
deep (an MCP client inside the framework's tool span) is one call.
Rewards: `gen_ai.evaluation.result` events (`gen_ai.evaluation.name`,
`gen_ai.evaluation.score.value`) of the episode's spans are the done row's
reward_components; the reward is the score of `ingest.reward_evaluation` (or of the only
evaluation); `ingest.reward_attribute` names an attribute whose (last) numeric value is
the reward instead. Row metadata: behavior_policy = the response (else request) model,
temperature, latency_ms (the span's duration); episode tokens sum the turns' usage.

A record is one conversation (per agent) with at least one model call or tool span; a
trace with no GenAI model call, tool or agent span (HTTP plumbing only) is not one (the
summary counts them). A JSONL line that cannot be read is a record of its own; so is
an episode one of whose spans cannot be read (its output message is not a message).
Records: the lines that cannot be read, the file's notes, then the conversations in
time order (spans that start and end together: turns first, then in file order). Rows:
source_record = the conversation's number in the file, source_pointer = the span's
place (`/data/0/spans/17`, `/resourceSpans/0/scopeSpans/0/spans/5`, `/lines/12/...`).

Work and memory. The file is read once into compact spans (attributes flattened to a
dict, message content kept as its text); the conversations are found from the span tree
(a parent map, one pass per ancestor chain); a model call's messages are parsed and
normalized only when its episode is built, and dropped after: a later call's input only
after its last assistant message. A short input text (under 8 kB) is parsed whole (orjson
is quicker than finding where its messages end); a longer one is delimited (msgspec) and
parsed from its end, and when it repeats the previous call's text and adds messages (the
whole history re-sent), only the added text is delimited. `read_otel(...,
shard=(k, n))` yields the k-th of n contiguous slices of the records (by spans): every
shard reads the whole file but builds only its own episodes, so n processes share one
file's work. `read_lines(path, batch)` reads only some lines of a JSON Lines file (those
that hold every span of their traces and conversations: the runner cuts a large file into
such jobs by otel_links' scan) and gives each record its place among the whole file's, so
that the jobs' records, merged by place and numbered, are those of one read of the file.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError, ReadOptions
from tracerl.data.formats.common.dialogue import DEFAULT_MAX_DEPTH, EpisodeBuilder
from tracerl.data.formats.common.messages import (
    Message,
    ToolCall,
)
from tracerl.data.formats.common.records import json_records
from tracerl.data.formats.otel_genai.span_io import (
    _ASSISTANT_ROLES,
    _io,
    _is_inference,
    _is_tool,
    _normalize_all,
    _op,
    _role_of,
    _TextMessages,
)
from tracerl.data.formats.otel_genai.spans import (
    CONVERSATION_KEYS,
    Event,
    Span,
    _json,
    _load,
    _Loaded,
)
from tracerl.data.formats.otel_genai.tools import (
    _Tool,
    _tool_name,
    _tool_run,
)
from tracerl.data.ingest.limits import Limits

# --- conversations ----------------------------------------------------------------------

@dataclass(slots=True)
class _Call:
    span: Span
    inputs: list | _TextMessages  # raw message dicts (normalized when needed: see
    # _new_context)
    output: Message | None
    has_output: bool
    error: AdapterError | None = None  # its output cannot be read: its episode's error


class SpanIndex:
    """Spans by (trace id, span id) (a span exported twice is one), with their parents
    and children, and each span's place in the file (ties in time are broken by it)."""

    def __init__(self, spans: list[Span]) -> None:
        self.spans: dict[tuple, Span] = {(s.trace_id, s.span_id): s for s in spans}
        if len(self.spans) < len(spans):  # a span exported twice: its first copy
            self.spans = {}
            for s in spans:
                self.spans.setdefault((s.trace_id, s.span_id), s)
        self.position = dict(zip(self.spans, range(len(self.spans)), strict=True))
        self.parent: dict[tuple, tuple] = {}  # of spans whose parent is in the file
        self.children: dict[tuple, list] = defaultdict(list)
        spans_ = self.spans
        for key, s in spans_.items():
            if s.parent_id is not None:
                up = (s.trace_id, s.parent_id)
                self.children[up].append(key)
                if up in spans_:
                    self.parent[key] = up

    def ancestors(self, key: tuple) -> Iterator[tuple]:
        parent = self.parent
        up = parent.get(key)
        if up is None:
            return
        seen = set()
        while up is not None and up not in seen:
            seen.add(up)
            yield up
            up = parent.get(up)

    def descendants(self, key: tuple) -> Iterator[tuple]:
        stack = list(self.children.get(key, ()))
        while stack:
            c = stack.pop()
            yield c
            stack.extend(self.children.get(c, ()))

    def with_descendant_in(self, keys: Any) -> set[tuple]:
        """The spans with one of `keys` below them (each ancestor chain walked once)."""
        above: set[tuple] = set()
        parent = self.parent
        for k in keys:
            if k not in parent:
                continue  # (a root: no ancestor)
            for a in self.ancestors(k):
                if a in above:
                    break  # and so are its ancestors
                above.add(a)
        return above


def model_call(span: Span, inputs: list | None, outputs: list | None,
               max_depth: int) -> _Call:
    """A model call from its raw input and output messages (any dialect); input messages
    that are not messages are skipped (an input is context, not an action)."""
    ins = inputs if isinstance(inputs, _TextMessages) \
        else [m for m in inputs or () if isinstance(m, dict)]
    outs = [m for m in _normalize_all(outputs, f"{span.pointer}#output", max_depth)
            if m.role == "assistant"]
    out = outs[0] if outs else None
    for m in outs[1:]:  # several assistant messages out: one turn
        out.calls += m.calls
        out.results += m.results
        if m.text:
            out.text = (out.text or "") + m.text
        if m.reasoning:
            out.reasoning = (out.reasoning or "") + m.reasoning
    return _Call(span, ins, out, out is not None)


def single_layer(index: SpanIndex, calls: Mapping[tuple, _Call]) -> set[tuple]:
    """The model calls that are turns: two instrumentation layers often describe one call
    (a framework span around a client-library span); the inner one is the turn, or the
    outer one when only it holds the content."""
    wrapping = index.with_descendant_in(calls)
    turns = {k for k in calls if k not in wrapping}
    for k in list(turns):
        if k not in index.parent:
            continue  # (a root: no call around it)
        outer_calls = [a for a in index.ancestors(k) if a in calls]
        if not outer_calls or calls[k].has_output:
            continue
        outer = next((a for a in outer_calls if calls[a].has_output), None)
        if outer is not None:
            turns.discard(k)
            turns.add(outer)
    return turns


class _Lazy(dict):
    """key -> made(key) for a fixed set of keys (in file order), made when asked and not
    kept: a shard makes only its own episodes' model calls and tool runs, and memory
    holds one episode's at a time."""

    def __init__(self, keys: list[tuple], made: Callable[[tuple], Any]) -> None:
        super().__init__(dict.fromkeys(keys))
        self._make = made

    def __getitem__(self, key: tuple) -> Any:
        if key not in self:
            raise KeyError(key)
        return self._make(key)


def read_otel(path: Path | list[Path], limits: Limits | None = None,
              options: ReadOptions | None = None, shard: tuple[int, int] | None = None,
              names: list[str] | None = None, batch: Any = None) -> Iterator[AdaptedRecord]:
    """The conversations of one file, or of several (see the module's docstring).

    Several files (a list: the OTel files of one input, such as the collector file
    exporter's rotated files) are read as one: their spans join, so a trace cut across
    them is one conversation. Each record names its file (`source_file`): a line that
    cannot be read, its own; a conversation, the file of its first row's span, numbered
    among that file's conversations (in the order all are yielded); a row whose span is
    in another of the files has the pointer `<name>#<pointer>`, names[k] (default: the
    file's name) naming paths[k]. One file reads exactly as it does alone.
    shard (k, n), of one file: the k-th of n contiguous slices of the records it yields
    unsharded (every shard reads the whole file, spans join across it, but adapts only
    its own conversations); the file's own records (lines that cannot be read, notes)
    are in shard 0; shards 0..n-1 in turn are the unsharded records exactly.
    batch, of one JSON Lines file: only those lines (a GuardedBatch, or several), as
    `read_lines` reads them."""
    if batch is not None:
        if shard is not None or not isinstance(path, str | Path):
            raise ValueError("batch is for one file, unsharded")
        yield from (record for _, record in read_lines(path, batch, limits, options))
        return
    limits = limits or Limits()
    options = options or ReadOptions()
    paths = [path] if isinstance(path, str | Path) else [Path(p) for p in path]
    joined = len(paths) > 1
    if joined and shard is not None:
        raise ValueError("shard is for one file; several files are read as one")
    part, parts = _check_shard(shard)
    names = list(names) if names is not None else [p.name for p in paths]
    loaded = _Loaded()
    for at, file in enumerate(paths):
        prefix, source = (f"{names[at]}#", str(file)) if joined else ("", None)
        for raw in json_records(Path(file), limits):
            if raw.error is not None:
                if part == 0:
                    yield AdaptedRecord(raw.number, raw.pointer, error=raw.error,
                                        text=raw.text, source_file=source)
                continue
            where = prefix + (f"/lines/{raw.number}" if raw.jsonl else raw.pointer)
            # a line, or a whole document, that holds no span is a record of its own,
            # refused with its reason (never a silent read of nothing)
            if not _load(raw.value, where, loaded) and part == 0:
                yield AdaptedRecord(raw.number, "" if raw.jsonl else raw.pointer,
                                    error=AdapterError("<record>", _NO_SPANS),
                                    text=str(raw.value)[:200], source_file=source)
    records = conversations(loaded, limits.max_depth, options, (part, parts))
    yield from _in_own_files(records, paths, names) if joined else records


def read_lines(path: Path | str, batch: Any, limits: Limits | None = None,
               options: ReadOptions | None = None) -> Iterator[tuple[tuple, AdaptedRecord]]:
    """The records of some lines of one JSON Lines file (`batch`: a GuardedBatch of its
    lines, or several in file order), each with its place among the records of the whole
    file (read_otel of the file), for lines that hold every span of their traces and
    conversations (the runner cuts a large file into such jobs, tracerl.data.ingest.run):
    (0, line) a line that cannot be read or holds no span, (1,) the notes, (2, first
    start, 0 / 1 (its first span a turn / a tool run), that span's line and place, number)
    a conversation (per agent): by its earliest span start, then where its first span
    is, as `episodes` orders them. Sorting the records of all such jobs of a file by place
    gives read_otel's order; a conversation's number is its place among this read's (the
    runner numbers them in the file). Lines keep their file line numbers (record numbers,
    pointers)."""
    limits = limits or Limits()
    batches = list(batch) if isinstance(batch, list | tuple) else [batch]
    loaded = _Loaded()
    for one in batches:
        for raw in json_records(Path(path), limits, batch=one):
            if raw.error is not None:
                yield (0, raw.number), AdaptedRecord(raw.number, raw.pointer, error=raw.error,
                                                     text=raw.text)
            elif not _load(raw.value, f"/lines/{raw.number}", loaded):
                yield (0, raw.number), AdaptedRecord(
                    raw.number, "", error=AdapterError("<record>", _NO_SPANS),
                    text=str(raw.value)[:200])
    places: dict[int, tuple] = {}
    for record in conversations(loaded, limits.max_depth, options, places=places):
        yield ((2, *places[record.number]) if record.is_record else (1,)), record


def _line_of(pointer: str) -> int:
    """The line of a span read from JSON Lines (its pointer `/lines/<line>/...`)."""
    return int(pointer.split("/", 3)[2])


def _in_own_files(records: Iterator[AdaptedRecord], paths: list[Path], names: list[str]
                  ) -> Iterator[AdaptedRecord]:
    """The conversations of several files read as one (read_otel), each given the file of
    its first row's span (that file's prefix taken off its pointers), numbered per file."""
    files = {f"{name}#": str(p) for p, name in zip(paths, names, strict=True)}
    lengths = sorted({len(prefix) for prefix in files})
    numbers: Counter = Counter()

    def prefix_of(pointer: str) -> str | None:
        return next((pointer[:n] for n in lengths if pointer[:n] in files), None)

    for record in records:
        if record.source_file is not None:
            yield record
            continue
        if not record.is_record:  # the notes of all the files
            record.source_file = str(paths[0])
            yield record
            continue
        error = record.error
        own = next(filter(None, map(prefix_of, record.row_pointers)), None) \
            or (prefix_of(error.where) if error is not None else None) or f"{names[0]}#"
        cut = len(own)
        record.row_pointers = [p[cut:] or "/" if p.startswith(own) else p
                               for p in record.row_pointers]
        if error is not None:
            where = error.where[cut:] if error.where.startswith(own) else error.where
            record.error = AdapterError(where, error.reason.replace(own, ""))
        record.source_file = files[own]
        numbers[own] += 1
        record.number = numbers[own]
        yield record


_NO_SPANS = ("not an OpenTelemetry export, trace or span (no resourceSpans, batches, "
             "resourceLogs, data[].spans, result or span ids)")


def _link_keys(path: Path) -> set[str]:
    """The trace and conversation ids a file's spans name (otel_links): the runner joins
    only the files of one input that share one (bounded memory, files read in parallel)."""
    from tracerl.data.formats.otel_genai import links as otel_links

    return otel_links.link_keys(path)


read_otel.link_keys = _link_keys


def _batch_link_keys(batch: Any) -> set[str]:
    """The trace and conversation ids a batch of a file's lines names (otel_links): the
    runner reads a large file in jobs of lines, the batches that share one in one job."""
    from tracerl.data.formats.otel_genai import links as otel_links

    return otel_links.batch_keys(batch)


read_otel.read_lines = read_lines
read_otel.batch_link_keys = _batch_link_keys


def _check_shard(shard: tuple[int, int] | None) -> tuple[int, int]:
    if shard is None:
        return 0, 1
    part, parts = shard
    if not (isinstance(part, int) and isinstance(parts, int) and 0 <= part < parts):
        raise ValueError(f"shard must be (k, n) with 0 <= k < n, got {shard!r}")
    return part, parts


def conversations(loaded: _Loaded, max_depth: int = DEFAULT_MAX_DEPTH,
                  options: ReadOptions | None = None,
                  shard: tuple[int, int] | None = None, places: dict | None = None
                  ) -> Iterator[AdaptedRecord]:
    """The episodes of a file's spans (see the module's docstring); of shard (k, n), the
    k-th slice (see read_otel); places: see `episodes`."""
    options = options or ReadOptions()
    index = SpanIndex(loaded.spans)
    spans = index.spans
    logs_by_span: dict[tuple, list[Event]] = defaultdict(list)
    for trace, span_id, e in loaded.logs:
        logs_by_span[(trace, span_id)].append(e)
    ops: dict[tuple, str | None] = {}
    inference: list[tuple] = []  # model calls, and tool spans that are not one, in file order
    tool_keys: dict[tuple, None] = {}
    for key, s in spans.items():
        op = ops[key] = _op(s)
        if _is_inference(s, op):
            inference.append(key)
        elif _is_tool(s, op) and not _merged_record(s):
            tool_keys[key] = None

    prior: list[_TextMessages | None] = [None]  # the last call's input text, made

    def make_call(k: tuple) -> _Call:
        s = spans[k]
        inputs, outputs = _io(s, logs_by_span.get(k, ()), defer=True, prior=prior[0])
        if isinstance(inputs, _TextMessages):
            prior[0] = inputs  # (an episode's calls are made in time order)
        try:
            return model_call(s, inputs, outputs, max_depth)
        except AdapterError as exc:  # a turn whose output cannot be read
            return _Call(s, [], None, True, exc)

    calls = _Lazy(inference, make_call)
    runs = []
    for k in tool_keys:
        outer = next((t for t in index.ancestors(k) if t in tool_keys), None) \
            if k in index.parent else None
        if outer is not None and _tool_name(spans[outer]) in (_tool_name(spans[k]), None):
            continue  # the same call, seen by a second layer
        runs.append(k)
    def make_run(k: tuple) -> _Tool:
        run = _tool_run(spans[k], max_depth)
        if run.error is None and run.call_id is not None:
            # the same call seen deeper, without a tool name (Claude Code's
            # claude_code.tool.execution inside claude_code.tool): its failure is the call's
            for d in index.descendants(k):
                inner = spans[d]
                if inner.error and inner.attrs.get("gen_ai.tool.call.id") == run.call_id:
                    run.error = inner.error
                    break
        return run

    tool_runs = _Lazy(runs, make_run)

    parent = index.parent

    def own_conversation(key: tuple) -> str | None:
        attrs = spans[key].attrs
        for name in CONVERSATION_KEYS:  # (a loop: no generator made per span)
            cid = attrs.get(name)
            if isinstance(cid, str) and cid:
                return cid
        return None

    def conversation_of(key: tuple) -> str:
        s = spans[key]
        attrs = s.attrs
        for name in CONVERSATION_KEYS:  # (own_conversation, without a second look-up)
            cid = attrs.get(name)
            if isinstance(cid, str) and cid:
                return cid
        if key in parent:
            for k in index.ancestors(key):
                cid = own_conversation(k)
                if cid is not None:
                    return cid
        return s.trace_id

    invocations = _agent_invocations(spans, ops, index.ancestors)

    def agent_of(key: tuple) -> str | None:
        if key not in parent:
            return None
        for k in index.ancestors(key):
            if ops[k] == "invoke_agent":
                return invocations[k]
        return None

    evaluations = _evaluations(spans, logs_by_span)

    def reward_of(group: set[tuple]) -> tuple[float | None, dict | None, str]:
        reward, components = _reward(group, index, evaluations, options)
        return reward, components, "otel:" + (options.reward_attribute
                                              or "gen_ai.evaluation.result")

    turns = single_layer(index, calls)
    notes: Counter = Counter()
    traces = {s.trace_id for s in spans.values()}
    covered = {k[0] for k in (*turns, *tool_runs)}
    notes["traces_without_genai_spans"] += len(traces - covered)
    part, _ = shard or (0, 1)
    if +notes and part == 0:  # the file's own facts, before its episodes (shard 0)
        yield AdaptedRecord(0, "", notes=+notes, is_record=False)
    yield from episodes(index, calls, tool_runs, conversation_of, agent_of, reward_of,
                        max_depth, notes, shard, turns, places)


def _merged_record(s: Span) -> bool:
    """Google ADK's `execute_tool (merged)` span (Python, Go, JS): after parallel calls,
    one more tool span (`gen_ai.tool.name` `(merged tools)`, arguments `N/A`) holds their
    merged response event; each call has its own `execute_tool <name>` span."""
    return s.name == "execute_tool (merged)" or s.attrs.get("gen_ai.tool.name") == "(merged tools)"


def _agent_name(span: Any, key: tuple) -> str:
    a = span.attrs
    who = a.get("gen_ai.agent.name") or a.get("gen_ai.agent.id") or \
        a.get("agent.name")  # OpenInference's
    return str(who) if who else (span.name.removeprefix("invoke_agent ").strip() or key[1])


def _agent_invocations(spans: Mapping[tuple, Any], ops: Mapping[tuple, str],
                       ancestors: Callable[[tuple], Iterator[tuple]]) -> dict:
    """Each agent span's episode label: its agent's name; a sub-agent (an agent span inside
    another's) invoked more than once in a trace — given two tasks — labels each invocation
    `<name>#<n>` in start order, one episode each (OpenInference AGENT spans,
    `invoke_agent` spans). A top-level agent invoked at each turn of a chat stays one."""
    names = {k: _agent_name(spans[k], k) for k, op in ops.items() if op == "invoke_agent"}
    sub = {k for k in names if any(a in names for a in ancestors(k))}
    seen = Counter((k[0], name) for k, name in names.items() if k in sub)
    order: Counter = Counter()
    labels = {}
    for k in sorted(names, key=lambda k: (spans[k].start, spans[k].end, k)):
        name = names[k]
        if k in sub and seen[(k[0], name)] > 1:
            order[(k[0], name)] += 1
            name = f"{name}#{order[(k[0], name)]}"
        labels[k] = name
    return labels


def episodes(index: SpanIndex, calls: Mapping[tuple, _Call],
             tool_runs: Mapping[tuple, _Tool], conversation_of, agent_of, reward_of,
             max_depth: int, notes: Counter, shard: tuple[int, int] | None = None,
             turns: set[tuple] | None = None, places: dict | None = None
             ) -> Iterator[AdaptedRecord]:
    """One record per (conversation, agent): its turns and tool runs in time order (spans
    that start and end together: turns first, then in file order). shard (k, n): only the
    k-th contiguous slice of them, by spans (each shard numbers them as the whole does).
    places (a dict, spans read from JSON Lines): each record's number -> what orders it
    among the records of the whole file (read_lines)."""
    spans = index.spans
    if turns is None:
        turns = single_layer(index, calls)
    position = index.position
    groups: dict[str, dict[str | None, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    first: dict[str, int] = {}  # each conversation's earliest start
    ordered = (*sorted(turns, key=position.__getitem__), *tool_runs)
    anchor: dict[str, tuple[int, tuple]] = {}  # each conversation's first span in `ordered`
    when: dict[tuple, tuple[int, int]] = {}  # each span's (start, end): its time order
    for at, k in enumerate(ordered):
        conversation = conversation_of(k)
        if places is not None and conversation not in groups:
            anchor[conversation] = (int(at >= len(turns)), k)
        groups[conversation][agent_of(k)].append(k)
        s = spans[k]
        start = s.start
        when[k] = (start, s.end)
        if start < first.get(conversation, start + 1):
            first[conversation] = start
    units = []  # (conversation, agent, its keys in time order)
    for conversation in sorted(groups, key=first.__getitem__):
        agents = groups[conversation]
        order = list(agents) if len(agents) == 1 else \
            sorted(agents, key=lambda a: min(spans[k].start for k in agents[a]))
        for agent in order:
            keys = sorted(agents[agent], key=when.__getitem__)
            episode_id = conversation if len(agents) == 1 or agent is None \
                else f"{conversation}/{agent}"
            units.append((episode_id, keys, len(agents) > 1))
            if places is not None:  # groups are ordered by first start, then insertion
                without_call, k = anchor[conversation]
                places[len(units)] = (first[conversation], without_call,
                                      _line_of(spans[k].pointer), position[k], len(units))
    part, parts = shard or (0, 1)
    total = sum(len(keys) for _, keys, _ in units) or 1
    before = 0
    for number, (episode_id, keys, several) in enumerate(units, 1):
        mine = min(parts - 1, before * parts // total) == part
        before += len(keys)
        if not mine:
            continue
        group = set(keys)
        for k in keys:
            if k in index.parent:
                group.update(index.ancestors(k))
        try:
            rows, pointers, built = _episode(episode_id, keys, calls, tool_runs,
                                             reward_of(group), max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(number, "", error=exc, episode_id=episode_id)
            continue
        if several:
            built["agent_episodes"] += 1
        yield AdaptedRecord(number, "", rows, pointers, episode_id=episode_id, notes=built)


def _evaluations(spans: dict, logs_by_span: dict) -> dict[tuple, list[Event]]:
    found: dict[tuple, list[Event]] = defaultdict(list)
    for key, s in spans.items():
        if not s.events and key not in logs_by_span:
            continue
        for e in [*s.events, *logs_by_span.get(key, ())]:
            if e.name == "gen_ai.evaluation.result" or "gen_ai.evaluation.name" in e.attrs:
                found[key].append(e)
    return found


def _model(span: Span) -> str | None:
    a = span.attrs
    for key in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name"):
        v = a.get(key)
        if isinstance(v, str) and v and v != "unknown":
            return v
    for k, v in a.items():
        if k.endswith(".ls_model_name") and isinstance(v, str) and v:
            return v
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e308:
        return float(v)
    return None


def _usage(a: dict) -> tuple[int, int]:
    return _tokens(a, _PROMPT_TOKENS), _tokens(a, _COMPLETION_TOKENS)


_PROMPT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                  "llm.token_count.prompt")
_COMPLETION_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                      "llm.token_count.completion")


def _tokens(a: dict, keys: tuple[str, ...]) -> int:
    """The first of `keys` that holds a count (an int, or its digits)."""
    for key in keys:
        v = a.get(key)
        if v is None:
            continue
        if type(v) is int:
            return v
        if isinstance(v, str) and v.isdecimal():
            return int(v)
    return 0


def _tool_names(spans: list[Span]) -> list[str] | None:
    names = set()
    for s in spans:
        a = s.attrs
        defs = a.get("gen_ai.tool.definitions")
        if defs is not None:
            defs = _json(defs)
        if isinstance(defs, list):
            for d in defs:
                if isinstance(d, dict):
                    fn = d.get("function") if isinstance(d.get("function"), dict) else d
                    if isinstance(fn.get("name"), str):
                        names.add(fn["name"])
        for k in a:
            if k.startswith("llm.request.functions.") and k.endswith(".name") \
                    and isinstance(a[k], str):
                names.add(a[k])
    return sorted(names) or None


def _episode(episode_id: str, keys: list[tuple], calls: dict, tool_runs: dict,
             reward: tuple[float | None, dict | None, str],
             max_depth: int) -> tuple[list[dict], list[str], Counter]:
    made = calls._make if type(calls) is _Lazy else calls.__getitem__
    calls = {k: made(k) for k in keys if k in calls}  # each made once, here
    made = tool_runs._make if type(tool_runs) is _Lazy else tool_runs.__getitem__
    tool_runs = {k: made(k) for k in keys if k in tool_runs}
    span_model: dict[tuple, str | None] = {}
    model = None  # the first call's that names one
    prompt = completion = 0
    for k, call in calls.items():
        span_model[k] = found = _model(call.span)
        if model is None and found:
            model = found
        p, c = _usage(call.span.attrs)
        prompt, completion = prompt + p, completion + c
    common = {"state": {"available_tools": _tool_names([c.span for c in calls.values()])},
              "metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "prompt_tokens": prompt or None,
                          "completion_tokens": completion or None}}
    b = EpisodeBuilder(episode_id, common, max_depth)
    fed = _Fed()
    first_turn = True
    pending: list[_Tool] = []  # tool spans no turn's output named
    consumed: set[tuple] = set()  # tool spans already made calls of a content-less turn

    def flush_tools() -> None:
        """Tool spans no turn's output named: the calls of a turn of their own."""
        if not pending:
            return
        b.assistant(pending[0].span.pointer, None,
                    [ToolCall(t.call_id, t.name, t.arguments, t.span.pointer)
                     for t in pending])
        for t in pending:
            if t.has_result or t.error:
                b.tool_result(t.span.pointer, t.call_id, t.result, t.error,
                              None if t.call_id else t.name)
        pending.clear()

    ahead: dict[tuple, list[Message]] = {}  # a later call's new context, made early

    for at, k in enumerate(keys):
        if k in consumed:
            continue
        if k in tool_runs:
            t = tool_runs[k]
            if not (b.rows and _answer(b, t)):
                pending.append(t)
            continue
        flush_tools()
        call = calls[k]
        if call.error is not None:
            raise call.error
        new = ahead.pop(k) if k in ahead else _new_context(call, first_turn, fed, max_depth)
        history = first_turn and not b.rows  # (tool spans before it are actions)
        for m in new:
            if history:
                b.history(m)
            else:
                _feed_lenient(b, m)
        first_turn = False
        out = call.output
        if out is None:
            # no content captured: a turn with no text, whose calls are the tool spans
            # that follow it (before the next model call)
            after = []
            for later in keys[at + 1:]:
                if later in calls:
                    break
                if later in tool_runs:
                    after.append(tool_runs[later])
                    consumed.add(later)
            b.assistant(call.span.pointer, None,
                        [ToolCall(t.call_id, t.name, t.arguments, t.span.pointer)
                         for t in after], metadata=_row_meta(call.span, span_model[k]))
            for t in after:
                if t.has_result or t.error:
                    b.tool_result(t.span.pointer, t.call_id, t.result, t.error,
                                  None if t.call_id else t.name)
            continue
        out_calls = out.calls
        if not out_calls:
            nk = next((later for later in keys[at + 1:] if later in calls), None)
            if nk is not None and calls[nk].error is None:
                ahead[nk] = _new_context(calls[nk], False, fed, max_depth)
                out_calls = _recorded_calls(calls[nk], ahead[nk], out.text, max_depth)
        extra = out.extra  # (the builder copies it)
        if out.reasoning:
            extra = {**(extra or {}), "reasoning": out.reasoning}
        b.assistant_turn(out.pointer, out.text, [(c.call_id, c.name, c.arguments, c.pointer)
                                                 for c in out_calls],
                         extra=extra or None, metadata=_row_meta(call.span, span_model[k]))
    flush_tools()
    value, components, source = reward
    rows, pointers = b.finish("/", value, components, source, None)
    return rows, pointers, b.notes


def _recorded_calls(following: _Call, new: list[Message], text: str | None,
                    max_depth: int) -> list[ToolCall]:
    """The tool calls of a turn whose output names none, as the following call's input
    records them: when that input's new messages answer calls, its last assistant
    message (this turn, its text the same) holds them. Some producers leave a call out
    of the output they record: OpenLLMetry's Bedrock Converse spans before the parts
    generation keep only the answer's text blocks."""
    if not any(m.results for m in new):
        return []
    raw = following.inputs
    if isinstance(raw, _TextMessages):  # (parsed from the end, as far as needed)
        skip = len(raw.before)
        backwards = ((skip + i, orjson.loads(memoryview(raw.elements[i])))
                     for i in range(len(raw.elements) - 1, -1, -1))
    else:
        raw = raw or []
        backwards = ((i, raw[i]) for i in range(len(raw) - 1, -1, -1))
    for i, m in backwards:
        if isinstance(m, dict) and _role_of(m) in _ASSISTANT_ROLES:
            last = _normalize_all([m], f"{following.span.pointer}#input/{i}", max_depth,
                                  lenient=True)
            if last and last[0].calls and (text is None or (last[0].text or "") == text):
                return last[0].calls
            return []
    return []


def _answer(b: EpisodeBuilder, t: _Tool) -> bool:
    """Give a tool span's result to the open call it answers (by call id, else tool name);
    False when no open call takes it (it is then a call of its own)."""
    at = b.match(t.call_id, None) if t.call_id is not None else None
    if at is None and t.name:
        at = b.match(None, t.name, t.arguments)
    if at is None:
        return t.call_id is not None and t.call_id in b.answered_ids
    call_id = b.open_call_id(at)
    if t.has_result or t.error:
        b.tool_result(t.span.pointer, call_id, t.result, t.error,
                      None if call_id is not None else t.name)
    return True


def _row_meta(span: Span | None, model: str | None) -> dict | None:
    if span is None:
        return None
    meta: dict = {}
    if model:
        meta["behavior_policy"] = model
    temperature = span.attrs.get("gen_ai.request.temperature")
    if temperature is not None:
        temperature = _number(temperature)
    if temperature is not None:
        meta["temperature"] = temperature
    if span.end > span.start > 0:
        meta["latency_ms"] = (span.end - span.start) / 1e6
    return meta or None


def _key_of(m: Message) -> tuple:
    return (m.role, m.text, tuple((c.call_id, c.name) for c in m.calls),
            tuple((r.call_id, str(r.content)[:200]) for r in m.results))


class _Fed:
    """The context messages fed so far, and (made only when asked) their keys."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._keys: set[tuple] = set()
        self._hashed = 0

    def keys(self) -> set[tuple]:
        for m in self.messages[self._hashed:]:
            self._keys.add(_key_of(m))
        self._hashed = len(self.messages)
        return self._keys


def _new_context(call: _Call, first: bool, fed: _Fed, max_depth: int) -> list[Message]:
    """The messages of a model call's input that are new: all of the first call's; then
    those after the input's last assistant message (else those not fed before). Only
    they are normalized (an input repeats the whole history)."""
    raw = call.inputs
    where = f"{call.span.pointer}#input"
    if isinstance(raw, _TextMessages):
        after = None if first else raw.after_last_assistant()
        if after is not None:
            new = _normalize_all(after, where, max_depth, lenient=True)
            fed.messages += new
            return new
        raw = [m for m in raw.full() if isinstance(m, dict)]
    if first:
        new = _normalize_all(raw, where, max_depth, lenient=True)
    else:
        last = None
        for i in range(len(raw) - 1, -1, -1):
            m = raw[i]
            role = m["role"] if "role" in m else m.get("type")
            if isinstance(role, str) and role.lower() in _ASSISTANT_ROLES:  # (_role_of)
                last = i
                break
        if last is not None:
            new = _normalize_all(raw[last + 1:], where, max_depth, lenient=True)
        else:
            seen = fed.keys()
            new = [m for m in _normalize_all(raw, where, max_depth, lenient=True)
                   if _key_of(m) not in seen]
    fed.messages += new
    return new


def _feed_lenient(b: EpisodeBuilder, m: Message) -> None:
    """A context message: a tool result answers its open call; one whose call is already
    answered (by a tool span) is the same result again; one with no call is an
    environment event."""
    if m.role == "tools":
        return
    if m.role == "assistant":  # an assistant message only in the input: not a turn here
        b.event("system", "message", content=m.text)
        return
    for r in m.results:
        if b.match(r.call_id, r.name) is not None:
            b.tool_result(r.pointer, r.call_id, r.content, r.error, r.name)
        elif r.call_id is not None and r.call_id in b.answered_ids:
            continue
        else:
            b.notes["results_without_call"] += 1
            b.event("environment", "tool_result", content=r.content, call_id=r.call_id,
                    error=r.error)
    if m.role in ("user", "system") and (m.text is not None or not m.results):
        b.event("system" if m.role == "system" else "user", "message", content=m.text)


def _reward(group: set[tuple], index: SpanIndex, evaluations: dict,
            options: ReadOptions) -> tuple[float | None, dict | None]:
    spans = index.spans
    attribute = options.reward_attribute
    if not (attribute or evaluations):
        return None, None
    # the group's spans that can hold a reward, in file order (ties: the later span's)
    group = sorted((k for k in group if k in evaluations or (
        attribute and attribute in spans[k].attrs)), key=index.position.__getitem__)
    if options.reward_attribute:
        found = [(spans[k].end, _number(spans[k].attrs.get(options.reward_attribute)))
                 for k in group if options.reward_attribute in spans[k].attrs]
        found = [f for f in found if f[1] is not None]
        if found:
            return max(found)[1], None
    scores: dict[str, tuple[int, float]] = {}
    for k in group:
        for e in evaluations.get(k, ()):
            name = e.attrs.get("gen_ai.evaluation.name")
            value = _number(e.attrs.get("gen_ai.evaluation.score.value"))
            if isinstance(name, str) and value is not None and (
                    name not in scores or e.time >= scores[name][0]):
                scores[name] = (e.time, value)
    if not scores:
        return None, None
    components = {n: v for n, (_, v) in sorted(scores.items())}
    if options.reward_evaluation:
        return components.get(options.reward_evaluation), components
    return (next(iter(components.values())) if len(components) == 1 else None), components

