"""The step table: one row per agent action, one versioned Arrow schema.

Field layout follows the "Practical Logging Schema" of the book chapter
(shared/seeds/000_*.txt). Heterogeneous JSON (tool arguments, tool results, the open
`extra` map) is kept as canonical JSON text (sorted keys, no whitespace) so that it hashes
stably; every other field is typed. Lineage columns record where each row came from.

Version 2 adds what real agent logs hold (v1 records and files still ingest and read; a v2
field a record does not carry is null):

- ``turn``: index (0, 1, ...) of the assistant message the action belongs to. Parallel tool
  calls of one message share it and carry ``call_index`` (0, 1, ...) and ``call_id``. The
  joint decision is the turn; ``t`` stays the action index (0, 1, 2, ... with no gaps). A
  null turn (v1 logs) means the action is its own turn.
- ``action.content``: the assistant's text (a message to the user, or text sent beside
  tool calls; then on the turn's first call).
- ``observation.events``: what came back before the next agent action that is not this
  action's tool result, in order: user messages, and tool calls made by the user or the
  environment with their results, each with its ``actor`` (user | environment | system).
- ``episode``: episode-level facts repeated on each row of the episode (trial, models,
  domain, termination reason, costs, tokens, duration); the episode's reward breakdown is
  ``reward_components`` of its done row, and source fields about the episode that the
  schema does not name are under ``extra.episode`` of the done row.
- ``extra``: an open map (canonical JSON object text) for fields the schema does not name:
  unknown fields are kept there instead of being rejected (native JSONL rejects them only
  in strict mode).
- lineage ``source_pointer``: a JSON pointer to where in the source file the row came from
  (``/simulations/3/messages/7``); null for native JSONL, whose line is ``source_record``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

SCHEMA_VERSION = 2

ACTION_TYPES = ("tool_call", "message", "final_answer")
SPLITS = ("train", "validation", "test")
ACTORS = ("user", "environment", "system")
EVENT_KINDS = ("message", "tool_call", "tool_result")

STATE_TYPE = pa.struct(
    [
        pa.field("user_goal", pa.string()),
        pa.field("conversation_history", pa.string()),
        pa.field("available_tools", pa.list_(pa.string())),
        pa.field("memory", pa.string()),
        pa.field("retrieved_context", pa.string()),
    ]
)
ACTION_TYPE = pa.struct(
    [
        pa.field("type", pa.string()),
        pa.field("tool", pa.string()),
        pa.field("arguments", pa.string()),  # canonical JSON text
        pa.field("content", pa.string()),
    ]
)
# Something another actor did between two agent actions (see observation.events).
EVENT_TYPE = pa.struct(
    [
        pa.field("actor", pa.string()),  # one of ACTORS
        pa.field("kind", pa.string()),  # one of EVENT_KINDS
        pa.field("tool", pa.string()),
        pa.field("arguments", pa.string()),  # canonical JSON text
        pa.field("content", pa.string()),  # message text or tool result as logged
        pa.field("call_id", pa.string()),
        pa.field("error", pa.string()),
    ]
)
OBSERVATION_TYPE = pa.struct(
    [
        pa.field("tool_result", pa.string()),  # canonical JSON text
        pa.field("error", pa.string()),
        pa.field("events", pa.list_(EVENT_TYPE)),
    ]
)
METADATA_TYPE = pa.struct(
    [
        pa.field("behavior_policy", pa.string()),
        pa.field("temperature", pa.float64()),
        pa.field("latency_ms", pa.float64()),
        pa.field("cost_usd", pa.float64()),
        pa.field("safety_flags", pa.list_(pa.string())),
    ]
)
EPISODE_TYPE = pa.struct(
    [
        pa.field("trial", pa.int64()),
        pa.field("agent_model", pa.string()),
        pa.field("user_model", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("termination_reason", pa.string()),
        pa.field("agent_cost_usd", pa.float64()),
        pa.field("user_cost_usd", pa.float64()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("duration_s", pa.float64()),
    ]
)
REWARD_COMPONENTS_TYPE = pa.map_(pa.string(), pa.float64())

# The logged fields, in the seed's order. Lineage and version columns follow.
LOGGED_FIELDS: list[pa.Field] = [
    pa.field("episode_id", pa.string(), nullable=False),
    pa.field("t", pa.int32(), nullable=False),
    pa.field("turn", pa.int32()),
    pa.field("call_index", pa.int32()),
    pa.field("call_id", pa.string()),
    pa.field("task", pa.string()),
    pa.field("state", STATE_TYPE),
    pa.field("action", ACTION_TYPE, nullable=False),
    pa.field("observation", OBSERVATION_TYPE),
    pa.field("reward", pa.float64()),
    pa.field("done", pa.bool_(), nullable=False),
    pa.field("prompt_version", pa.string()),
    pa.field("tool_schema_version", pa.string()),
    pa.field("environment_version", pa.string()),
    pa.field("action_logprobs", pa.float64()),
    pa.field("reward_components", REWARD_COMPONENTS_TYPE),
    pa.field("reward_source", pa.string()),
    pa.field("verifier_version", pa.string()),
    pa.field("split", pa.string()),
    pa.field("metadata", METADATA_TYPE),
    pa.field("episode", EPISODE_TYPE),
    pa.field("extra", pa.string()),  # canonical JSON object text
]
LINEAGE_FIELDS: list[pa.Field] = [
    pa.field("source_file", pa.string(), nullable=False),
    pa.field("source_record", pa.int64(), nullable=False),  # 1-based line or record number
    pa.field("source_pointer", pa.string()),  # JSON pointer into the record's file
    pa.field("schema_version", pa.int16(), nullable=False),
]
STEP_SCHEMA = pa.schema(
    LOGGED_FIELDS + LINEAGE_FIELDS, metadata={"tracerl.schema_version": str(SCHEMA_VERSION)}
)

# Fields stored as canonical JSON text: any JSON value is accepted (`extra`: any object).
JSON_TEXT_FIELDS = frozenset({"action.arguments", "observation.tool_result", "extra"})
# Fields added by schema version 2; `row_to_record` leaves them out when null, as v1
# records never carried them.
V2_FIELDS = frozenset({"turn", "call_index", "call_id", "episode", "extra", "action.content",
                       "observation.events"})
INT32_LIMIT = 2**31


def canonical_json(value: Any) -> str | None:
    """Canonical JSON text (sorted keys, compact) of a JSON value; None stays None."""
    if value is None:
        return None
    return dumps_exact(value, orjson.OPT_SORT_KEYS).decode()


# JSON allows integers of any size; orjson reads one beyond 64 bits as a float and refuses
# to write it. A run of 19 digits or more may be such an integer (or a long fraction).
_LONG_DIGITS = re.compile(rb"\d{19,}")
_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1
_DIGIT_MASK = bytes(49 if 48 <= b <= 57 else 48 for b in range(256))  # digit -> "1"
_NINETEEN_DIGITS = b"1" * 19
# bytes a JSON number can follow: `[`, `:`, `,`, whitespace, or its own `-`
_BEFORE_NUMBER = frozenset(b"[:, \t\r\n-")


def may_hold_big_int(data: bytes) -> bool:
    """Whether JSON text may hold an integer beyond 64 bits: a run of 19 digits or more.
    Each byte becomes 1 (a digit) or 0 by one C-speed translate, then a plain substring
    search finds 19 ones: over 10x faster than the regex on a record, as fast as numpy on
    a batch, and one way for both."""
    return _NINETEEN_DIGITS in data.translate(_DIGIT_MASK)


def may_hold_long_number(data: bytes) -> bool:
    """may_hold_big_int, of runs that can be a JSON number: one that starts the text or
    follows a byte a number can follow. A run after anything else (a quote: OTLP's
    nanosecond times and trace ids are strings of 19 digits and more) is inside a string,
    so a text this rules out reads the same by orjson and by the stdlib."""
    mask = data.translate(_DIGIT_MASK)
    at = mask.find(_NINETEEN_DIGITS)
    while at >= 0:
        if at == 0 or data[at - 1] in _BEFORE_NUMBER:
            return True
        end = mask.find(b"0", at)  # past this run of digits
        if end < 0:
            return False
        at = mask.find(_NINETEEN_DIGITS, end)
    return False


def loads_exact(data: bytes | str) -> Any:
    """orjson.loads, but an integer beyond 64 bits stays an exact int (not a float).

    orjson decides what is valid JSON (it refuses NaN, lone surrogates, invalid UTF-8);
    only text that parsed and may hold a long integer is read again by the stdlib parser,
    which keeps every integer exact."""
    value = orjson.loads(data)
    raw = data.encode() if isinstance(data, str) else data
    if not may_hold_long_number(raw):
        return value
    try:
        return json.loads(raw)
    except (RecursionError, ValueError):  # deeper than the stdlib parser goes, or an
        return value  # integer over its 4,300 digits: keep orjson's reading


def _fragments(value: Any) -> Any:
    """The value with every integer beyond 64 bits as a pre-written orjson.Fragment."""
    if type(value) is int:
        return value if _INT_MIN <= value <= _UINT_MAX else orjson.Fragment(str(value))
    if type(value) is dict:
        return {k: _fragments(v) for k, v in value.items()}
    if type(value) is list:
        return [_fragments(v) for v in value]
    return value


def dumps_exact(value: Any, option: int = 0) -> bytes:
    """orjson.dumps that also writes integers beyond 64 bits, digit for digit."""
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError as exc:
        if "Integer exceeds 64-bit range" not in str(exc):
            raise
    return orjson.dumps(_fragments(value), option=option)


class RecordError(ValueError):
    """A record does not fit the step schema: names the field and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


# --- Rules -------------------------------------------------------------------------------
# One rule per checked value. The per-record validator (check_record) and the column-wise
# batch parser (tracerl.data.ingest.parse) evaluate the same rules, so the two paths cannot
# disagree about what is valid. `column_ok` is a fast whole-column form of `ok`: it must
# be true exactly when `ok` holds for every value (tests check the equivalence).

NoneType = type(None)


@dataclass(frozen=True)
class Rule:
    field: str  # dotted path reported in quarantine, e.g. "action.type"
    ok: Callable[[Any], bool]
    column_ok: Callable[[list], bool]
    expected: str  # what a valid value looks like, for the reason text
    required: bool = False
    names: frozenset[str] | None = None  # for objects: the fields they may have
    at: str | None = None  # the value the rule reads, when not `field` itself

    @property
    def path(self) -> tuple[str, ...]:
        where = self.field if self.at is None else self.at
        return () if where == "<record>" else tuple(where.split("."))

    def get(self, record: Any) -> Any:
        value = record
        for key in self.path:
            value = value.get(key) if type(value) is dict else None
        return value


def _types_within(values: list, allowed: frozenset[type]) -> bool:
    return set(map(type, values)) <= allowed


def _chain(values: list) -> list:
    return [x for v in values if v is not None for x in v]


def _in_set(values: list, allowed: frozenset) -> bool:
    try:
        return set(values) <= allowed
    except TypeError:  # an unhashable value (list, object) is not in any value set
        return False


def _typed(allowed: frozenset[type]) -> tuple[Callable[[Any], bool], Callable[[list], bool]]:
    return (lambda v: type(v) in allowed), (lambda vs: _types_within(vs, allowed))


_STR = frozenset({str, NoneType})
_NUMBER = frozenset({int, float, NoneType})
_INT = frozenset({int, NoneType})


def _in_int64(v: int) -> bool:
    return -(2**63) <= v < 2**63


def _object_rule(field: str, names: frozenset[str], required: bool) -> Rule:
    allowed = frozenset({dict}) if required else frozenset({dict, NoneType})

    def ok(v: Any) -> bool:
        return type(v) in allowed and (v is None or v.keys() <= names)

    def column_ok(vs: list) -> bool:
        return _types_within(vs, allowed) and set(_chain(vs)) <= names

    return Rule(field, ok, column_ok, "an object", required=required, names=names)


def _scalar_rule(field: str, arrow_type: pa.DataType) -> Rule:
    if pa.types.is_string(arrow_type):
        return Rule(field, *_typed(_STR), "a string or null")
    if pa.types.is_floating(arrow_type):
        return Rule(field, *_typed(_NUMBER), "a number or null")
    if pa.types.is_boolean(arrow_type):
        return Rule(field, *_typed(frozenset({bool, NoneType})), "true, false or null")
    if pa.types.is_integer(arrow_type):
        return Rule(field, lambda v: v is None or (type(v) is int and _in_int64(v)),
                    lambda vs: _types_within(vs, _INT) and all(map(_in_int64, filter(None, vs))),
                    "an integer or null")
    if pa.types.is_list(arrow_type):
        return Rule(field,
                    lambda v: v is None or (type(v) is list and all(type(x) is str for x in v)),
                    lambda vs: _types_within(vs, frozenset({list, NoneType}))
                    and _types_within(_chain(vs), frozenset({str})),
                    "a list of strings or null")
    if pa.types.is_map(arrow_type):
        return Rule(field,
                    lambda v: v is None or (type(v) is dict and all(
                        type(x) is float or type(x) is int for x in v.values())),
                    lambda vs: _types_within(vs, frozenset({dict, NoneType}))
                    and _types_within([x for v in vs if v is not None for x in v.values()],
                                      frozenset({int, float})),
                    "an object whose values are numbers, or null")
    raise TypeError(f"no rule for {arrow_type}")


def _t_column_ok(vs: list) -> bool:
    return _types_within(vs, frozenset({int})) and (not vs or (min(vs) >= 0
                                                               and max(vs) < INT32_LIMIT))


def _logprob_column_ok(vs: list) -> bool:
    if not _types_within(vs, _NUMBER):
        return False
    present = [v for v in vs if v is not None]
    # each value compared: max() of values holding a NaN depends on where the NaN is
    return all(map((0.0).__ge__, present))


def _index_column_ok(vs: list) -> bool:
    """Optional non-negative int32 (turn, call_index)."""
    present = [v for v in vs if v is not None]
    return _types_within(vs, _INT) and (not present or (min(present) >= 0
                                                        and max(present) < INT32_LIMIT))


_EVENT_NAMES = frozenset(EVENT_TYPE.names)
_EVENT_TEXT = frozenset(n for n in _EVENT_NAMES if n != "arguments")  # arguments: any JSON


def _event_ok(e: Any) -> bool:
    return (type(e) is dict and e.keys() <= _EVENT_NAMES and e.get("actor") in ACTORS
            and e.get("kind") in EVENT_KINDS
            and all(type(e.get(k)) in _STR for k in _EVENT_TEXT))


def _events_ok(v: Any) -> bool:
    return v is None or (type(v) is list and all(map(_event_ok, v)))


def _tool_named(action: Any) -> bool:
    return (type(action) is not dict or action.get("type") != "tool_call"
            or (type(action.get("tool")) is str and action["tool"] != ""))


_SPLIT_SET = frozenset(SPLITS) | {None}
_ACTION_TYPE_SET = frozenset(ACTION_TYPES)

_SPECIAL = {
    "episode_id": Rule("episode_id", lambda v: type(v) is str and v != "",
                       lambda vs: _types_within(vs, frozenset({str})) and "" not in vs,
                       "a non-empty string", required=True),
    "t": Rule("t", lambda v: type(v) is int and 0 <= v < INT32_LIMIT, _t_column_ok,
              "an integer in [0, 2^31)", required=True),
    "done": Rule("done", *_typed(frozenset({bool})), "true or false", required=True),
    "split": Rule("split", lambda v: _in_set([v], _SPLIT_SET),
                  lambda vs: _in_set(vs, _SPLIT_SET), f"one of {list(SPLITS)} or null"),
    "action_logprobs": Rule("action_logprobs",
                            lambda v: v is None or (type(v) in _NUMBER and v <= 0),
                            _logprob_column_ok, "a log-probability (a number <= 0) or null"),
    "turn": Rule("turn", lambda v: _index_column_ok([v]), _index_column_ok,
                 "an integer in [0, 2^31) or null"),
    "call_index": Rule("call_index", lambda v: _index_column_ok([v]), _index_column_ok,
                       "an integer in [0, 2^31) or null"),
    "observation.events": Rule(
        "observation.events", _events_ok,
        lambda vs: vs.count(None) == len(vs) or all(map(_events_ok, vs)),
        f"a list of events (objects with actor in {list(ACTORS)}, kind in "
        f"{list(EVENT_KINDS)}, and string tool/content/call_id/error) or null"),
    "extra": Rule("extra", *_typed(frozenset({dict, NoneType})), "an object or null"),
    "action.type": Rule("action.type", lambda v: _in_set([v], _ACTION_TYPE_SET),
                        lambda vs: _in_set(vs, _ACTION_TYPE_SET),
                        f"one of {list(ACTION_TYPES)}", required=True),
}

LOGGED_NAMES = frozenset(f.name for f in LOGGED_FIELDS)


def _build_rules() -> list[Rule]:
    rules = [Rule("<record>", lambda v: type(v) is dict and v.keys() <= LOGGED_NAMES,
                  lambda vs: _types_within(vs, frozenset({dict}))
                  and set(_chain(vs)) <= LOGGED_NAMES,
                  "a JSON object", names=LOGGED_NAMES)]
    for f in LOGGED_FIELDS:
        if f.name in _SPECIAL:
            rules.append(_SPECIAL[f.name])
        elif pa.types.is_struct(f.type):
            names = frozenset(f.type.field(i).name for i in range(f.type.num_fields))
            rules.append(_object_rule(f.name, names, required=f.name == "action"))
            for i in range(f.type.num_fields):
                path = f"{f.name}.{f.type.field(i).name}"
                if path in _SPECIAL:
                    rules.append(_SPECIAL[path])
                elif path not in JSON_TEXT_FIELDS:  # any JSON value is accepted there
                    rules.append(_scalar_rule(path, f.type.field(i).type))
        else:
            rules.append(_scalar_rule(f.name, f.type))
    # Cross-field: a tool call names its tool.
    rules.append(Rule("action.tool", _tool_named, lambda vs: all(map(_tool_named, vs)),
                      "a tool name when action.type is tool_call", at="action"))
    return rules


RULES: list[Rule] = _build_rules()


def describe(value: Any) -> str:
    """Short description of an offending value for a quarantine reason."""
    if value is None:
        return "null"
    text = dumps_exact(value, orjson.OPT_NON_STR_KEYS).decode() \
        if not isinstance(value, str) else repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def broken_rule_error(rule: Rule, value: Any) -> RecordError:
    """The error for a value that fails its rule, naming the most precise field."""
    if value is None and rule.required:
        return RecordError(rule.field, "required field is missing or null")
    if rule.names is not None and type(value) is dict:
        unknown = sorted(set(value) - rule.names)
        prefix = "" if rule.field == "<record>" else rule.field + "."
        return RecordError(prefix + unknown[0],
                           f"unknown field (the step schema has no {prefix + unknown[0]})")
    return RecordError(rule.field, f"expected {rule.expected}, got {describe(value)}")


def check_record(record: Any) -> None:
    """Raise RecordError for the first rule the record breaks."""
    for rule in RULES:
        value = rule.get(record)
        if not rule.ok(value):
            raise broken_rule_error(rule, value)


def record_to_row(record: Any) -> dict:
    """Check one parsed JSON record against the step schema; return the Arrow-ready row.

    Raises RecordError naming the first offending field. Lineage columns are not set here.
    """
    check_record(record)
    row = {f.name: record.get(f.name) for f in LOGGED_FIELDS}
    for path in JSON_TEXT_FIELDS:
        parent, _, child = path.partition(".")
        if not child:
            row[parent] = canonical_json(row[parent])
        elif row[parent] is not None:
            row[parent] = {**row[parent], child: canonical_json(row[parent].get(child))}
    observation = row["observation"]
    if observation is not None and observation.get("events"):
        row["observation"] = {**observation, "events": canonical_events(observation["events"])}
    if row["reward_components"]:  # stored in key order: the same data, the same bytes
        row["reward_components"] = dict(sorted(row["reward_components"].items()))
    return row


def canonical_events(events: list[dict] | None) -> list[dict] | None:
    """Events as stored: every field present, arguments as canonical JSON text."""
    if events is None:
        return None
    return [{**dict.fromkeys(_EVENT_NAMES), **e, "arguments": canonical_json(e.get("arguments"))}
            for e in events]


def row_to_record(row: dict) -> dict:
    """Inverse of record_to_row for a row read back from Arrow: the native JSON layout."""
    record = {f.name: row.get(f.name) for f in LOGGED_FIELDS}
    for path in JSON_TEXT_FIELDS:
        parent, _, child = path.partition(".")
        if not child:
            if record[parent] is not None:
                record[parent] = loads_exact(record[parent])
        elif record[parent] is not None and record[parent].get(child) is not None:
            record[parent] = {**record[parent], child: loads_exact(record[parent][child])}
    events = (record["observation"] or {}).get("events")
    if events:
        record["observation"]["events"] = [
            {k: (loads_exact(v) if k == "arguments" and v is not None else v)
             for k, v in e.items() if v is not None} for e in events]
    if isinstance(record["reward_components"], list):  # Arrow maps read back as pairs
        record["reward_components"] = dict(record["reward_components"])
    for path in V2_FIELDS:  # absent from v1 records: leave them out when null
        parent, _, child = path.partition(".")
        if not child:
            if record.get(parent) is None:
                record.pop(parent, None)
        elif isinstance(record.get(parent), dict) and record[parent].get(child) is None:
            record[parent].pop(child, None)
    return record


_V2_COLUMNS = frozenset({"turn", "call_index", "call_id", "episode", "extra", "source_pointer"})
_V2_CHILDREN = {"action": ("content",), "observation": ("events",)}


def upgrade_table(table: pa.Table) -> pa.Table:
    """A step table read from a v1 file, with the columns v2 added (null). Only what v2
    added is filled in: a column missing or mistyped otherwise stays so, for validation to
    report. A v2 table comes back unchanged."""
    names = set(table.column_names)
    n = table.num_rows
    columns, fields, changed = [], [], False
    for f in STEP_SCHEMA:
        if f.name in names:
            col, field = table.column(f.name), table.schema.field(f.name)
            missing = [c for c in _V2_CHILDREN.get(f.name, ())
                       if pa.types.is_struct(col.type) and col.type.get_field_index(c) < 0]
            if missing:
                col = col.combine_chunks()
                children = [col.field(i) for i in range(col.type.num_fields)]
                child_fields = list(col.type)
                for c in missing:
                    children.append(pa.nulls(n, f.type.field(c).type))
                    child_fields.append(f.type.field(c))
                col = pa.StructArray.from_arrays(children, fields=child_fields,
                                                 mask=col.is_null())
                field = pa.field(f.name, col.type, nullable=field.nullable)
                changed = True
        elif f.name in _V2_COLUMNS:
            col, field, changed = pa.nulls(n, f.type), f, True
        else:
            continue
        columns.append(col)
        fields.append(field)
    if not changed:
        return table
    # Columns the schema does not name (e.g. reward_logged after relabel) stay at the end.
    for name in table.column_names:
        if name not in STEP_SCHEMA.names:
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))
