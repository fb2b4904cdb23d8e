"""The step table: one row per agent decision, one versioned Arrow schema.

Field layout follows the "Practical Logging Schema" of the book chapter
(shared/seeds/000_*.txt). Heterogeneous JSON (tool arguments, tool results) is kept
as canonical JSON text (sorted keys, no whitespace) so that it hashes stably; every
other field is typed. Lineage columns record where each row came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

SCHEMA_VERSION = 1

ACTION_TYPES = ("tool_call", "message", "final_answer")
SPLITS = ("train", "validation", "test")

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
    ]
)
OBSERVATION_TYPE = pa.struct(
    [
        pa.field("tool_result", pa.string()),  # canonical JSON text
        pa.field("error", pa.string()),
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
REWARD_COMPONENTS_TYPE = pa.map_(pa.string(), pa.float64())

# The logged fields, in the seed's order. Lineage and version columns follow.
LOGGED_FIELDS: list[pa.Field] = [
    pa.field("episode_id", pa.string(), nullable=False),
    pa.field("t", pa.int32(), nullable=False),
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
]
LINEAGE_FIELDS: list[pa.Field] = [
    pa.field("source_file", pa.string(), nullable=False),
    pa.field("source_record", pa.int64(), nullable=False),  # 1-based line number
    pa.field("schema_version", pa.int16(), nullable=False),
]
STEP_SCHEMA = pa.schema(
    LOGGED_FIELDS + LINEAGE_FIELDS, metadata={"tracerl.schema_version": str(SCHEMA_VERSION)}
)

# Fields stored as canonical JSON text: any JSON value is accepted.
JSON_TEXT_FIELDS = frozenset({"action.arguments", "observation.tool_result"})
INT32_LIMIT = 2**31


def canonical_json(value: Any) -> str | None:
    """Canonical JSON text (sorted keys, compact) of a JSON value; None stays None."""
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


class RecordError(ValueError):
    """A record does not fit the step schema: names the field and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


# --- Rules -------------------------------------------------------------------------------
# One rule per checked value. The per-record validator (check_record) and the column-wise
# batch parser (tracerl.ingest.parse) evaluate the same rules, so the two paths cannot
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
    return not present or max(present) <= 0


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
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() \
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
        parent, child = path.split(".")
        if row[parent] is not None:
            row[parent] = {**row[parent], child: canonical_json(row[parent].get(child))}
    return row


def row_to_record(row: dict) -> dict:
    """Inverse of record_to_row for a row read back from Arrow: the native JSON layout."""
    record = {f.name: row.get(f.name) for f in LOGGED_FIELDS}
    for path in JSON_TEXT_FIELDS:
        parent, child = path.split(".")
        if record[parent] is not None and record[parent][child] is not None:
            record[parent] = {**record[parent], child: orjson.loads(record[parent][child])}
    if isinstance(record["reward_components"], list):  # Arrow maps read back as pairs
        record["reward_components"] = dict(record["reward_components"])
    return record
