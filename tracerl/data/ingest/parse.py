"""Parse a batch of native JSONL lines into a typed Arrow table plus rejected records.

Column-wise: each rule of tracerl.data.schema is checked over a whole column at once, and
Arrow arrays are built once per column. Only records in a column that fails its fast
check are looked at one by one, and only rejected records go through the per-record
validator, which names the field and the reason. Both paths evaluate the same rules.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from tracerl.data.schema import (
    ACTION_TYPES,
    ACTORS,
    EVENT_KINDS,
    EVENT_TYPE,
    INT32_LIMIT,
    JSON_TEXT_FIELDS,
    LOGGED_FIELDS,
    LOGGED_NAMES,
    REWARD_COMPONENTS_TYPE,
    RULES,
    SCHEMA_VERSION,
    SPLITS,
    STEP_SCHEMA,
    RecordError,
    canonical_events,
    check_record,
    dumps_exact,
    loads_exact,
    may_hold_big_int,
)


@dataclass(frozen=True)
class Reject:
    source_file: str
    source_record: int
    field: str
    reason: str
    raw: str

    def to_dict(self) -> dict:
        return {
            "source_file": self.source_file,
            "source_record": self.source_record,
            "field": self.field,
            "reason": self.reason,
            "raw": self.raw,
        }


@dataclass
class ParsedBatch:
    table: pa.Table  # accepted rows, STEP_SCHEMA
    rejects: list[Reject]
    read: int  # records read (non-blank lines)
    fast: bool = False  # parsed by the native fast path (see _fast_table)
    # of adapted records (parse_adapted): the index, in its batch, of each reject's record
    owners: list[int] | None = None


def raw_text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r")


# --- depth guard ----------------------------------------------------------------------
HEAD_BYTES = 200  # bytes of an oversize or cut record kept in quarantine


def json_depth(value: object) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion: one level
    of containers at a time, their children gathered by C-speed list operations."""
    depth = 0
    level = [value]
    while True:
        level = [v for v in level if type(v) is dict or type(v) is list]
        if not level:
            return depth
        depth += 1
        children: list = []
        for v in level:
            children.extend(v.values() if type(v) is dict else v)
        level = children


def depth_reason(depth: str, limit: int) -> str:
    return (f"nested {depth} levels deep, over the limit of {limit} (ingest.max_depth): "
            "objects and arrays may nest at most that deep")


def drop_too_deep(lines: list[bytes], source_file: str, first_line: int,
                  max_depth: int) -> tuple[list[bytes], list[Reject]]:
    """The lines with each one nested deeper than max_depth blanked (a blank line is not
    a record), and a reject for each. Only a line with more opening brackets ({ and [)
    than the limit can nest deeper: two C-speed counts a line, far cheaper than any
    vectorised pass; only those lines are parsed to measure."""
    counts = [ln.count(b"{") + ln.count(b"[") for ln in lines]
    if not counts or max(counts) <= max_depth:
        return lines, []
    lines = list(lines)
    rejects = []
    for i in [i for i, c in enumerate(counts) if c > max_depth]:
        try:
            depth = json_depth(orjson.loads(lines[i]))
        except orjson.JSONDecodeError:
            continue  # not JSON: parse_batch rejects it, and the guard says why
        if depth > max_depth:
            rejects.append(Reject(source_file, first_line + i, "<record>",
                                  depth_reason(str(depth), max_depth),
                                  raw_text(lines[i][:HEAD_BYTES * 5])))
            lines[i] = b""
    return lines, rejects


class _Columns:
    """Values at each dotted path, for every record; a missing parent gives None."""

    def __init__(self, records: list) -> None:
        self._cache: dict[tuple[str, ...], list] = {(): records}

    def __getitem__(self, path: tuple[str, ...]) -> list:
        values = self._cache.get(path)
        if values is None:
            parent = self[path[:-1]]
            key = path[-1]
            if set(map(type, parent)) <= {dict}:  # the common case, at C speed
                values = list(map(dict.get, parent, repeat(key)))
            else:
                values = [p.get(key) if type(p) is dict else None for p in parent]
            self._cache[path] = values
        return values


def _flag_broken(columns: _Columns, n: int) -> np.ndarray:
    flagged = np.zeros(n, dtype=bool)
    for rule in RULES:
        values = columns[rule.path]
        if not rule.column_ok(values):
            flagged |= ~np.fromiter(map(rule.ok, values), dtype=bool, count=n)
    return flagged


_MARK = "\x00tracerl:value\x00"  # a JSON string between values (see dumps_each)
_MARK_SEP = b"," + orjson.dumps(_MARK) + b","


def dumps_each(values: list, option: int = 0) -> list[bytes]:
    """`[orjson.dumps(v, option=option) for v in values]`, the same bytes, in one orjson
    call (a call per value costs several times as much): the values are written as one
    array with a marker string between them, which is then split at each marker with its
    commas. A value holding the marker's text itself makes the count wrong, and the values
    are then written one by one."""
    if len(values) < 2:
        return [orjson.dumps(v, option=option) for v in values]
    interleaved: list = [_MARK] * (2 * len(values) - 1)
    interleaved[::2] = values
    texts = orjson.dumps(interleaved, option=option)[1:-1].split(_MARK_SEP)
    if len(texts) != len(values):
        return list(map(orjson.dumps, values, repeat(None), repeat(option)))
    return texts


def _json_text(values: list) -> pa.Array:
    """Canonical JSON text (sorted keys) of each value; a JSON null stays null."""
    if set(map(type, values)) <= {int, type(None)}:  # plain integers: their decimal text
        try:
            return pa.array(values, type=pa.int64()).cast(pa.string())
        except OverflowError:  # beyond int64 (JSON allows it): the general path below
            pass
    # a JSON null inside a value is its text "null"; only a value that is null is null
    mask = np.fromiter(map(is_, values, repeat(None)), dtype=bool, count=len(values))
    if len(values) > 8 and values.count(None) * 4 > len(values) * 3:
        # mostly null (`extra`, on done rows only): the others written, then spread out
        dense = _json_text(list(compress(values, ~mask)))
        return dense.take(pa.array(np.cumsum(~mask, dtype=np.int64) - 1, mask=mask))
    try:
        texts = dumps_each(values, orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: written exactly, row by row
        texts = [dumps_exact(v, orjson.OPT_SORT_KEYS) for v in values]
    return pa.array(texts, type=pa.binary(), mask=mask if mask.any() else None
                    ).cast(pa.string())


_EVENTS_TYPE = pa.list_(EVENT_TYPE)


def _events(values: list) -> pa.Array:
    if values.count(None) == len(values):  # logs without events (every v1 log)
        return pa.nulls(len(values), _EVENTS_TYPE)
    if not any(values):
        return pa.array([None if v is None else [] for v in values], type=_EVENTS_TYPE)
    return pa.array(list(map(canonical_events, values)), type=_EVENTS_TYPE)


def canonical_map(array: pa.MapArray) -> pa.MapArray:
    """The map with each row's entries in key order (the same data, the same bytes,
    whatever order the source wrote them in); sorted in Arrow, not per row in Python."""
    n = len(array)
    keys = array.keys
    if n == 0 or len(keys) == 0:
        return array
    offsets = array.offsets.to_numpy()
    lengths = np.diff(offsets)
    if (lengths <= 1).all():
        return array
    row = np.repeat(np.arange(n, dtype=np.int64), lengths)
    order = pc.sort_indices(pa.table({"row": row, "key": keys.slice(offsets[0], len(row))}),
                            sort_keys=[("row", "ascending"), ("key", "ascending")])
    if np.array_equal(order.to_numpy(), np.arange(len(row))):
        return array
    start = int(offsets[0])
    return pa.MapArray.from_arrays(pa.array(offsets - start, type=pa.int32()),
                                   keys.slice(start, len(row)).take(order),
                                   array.items.slice(start, len(row)).take(order),
                                   type=array.type, mask=array.is_null()
                                   if array.null_count else None)


def _array(columns: _Columns, path: tuple[str, ...], arrow_type: pa.DataType) -> pa.Array:
    values = columns[path]
    dotted = ".".join(path)
    if dotted in JSON_TEXT_FIELDS:
        return _json_text(values)
    if dotted == "observation.events":
        return _events(values)
    if dotted == "reward_components":
        return canonical_map(pa.array(values, type=arrow_type))
    if not pa.types.is_struct(arrow_type):
        try:
            return pa.array(values, type=arrow_type)
        except pa.ArrowInvalid:
            if not pa.types.is_floating(arrow_type):
                raise
            # an integer beyond 64 bits where a number belongs (read exactly): its float
            return pa.array([float(v) if type(v) is int else v for v in values], arrow_type)
    children = [_array(columns, (*path, f.name), f.type) for f in arrow_type]
    mask = pa.array([v is None for v in values], type=pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask)


def _lineage(source_file: str | list[str], numbers: list[int],
             pointers: list[str | None] | None) -> list[pa.Array]:
    n = len(numbers)
    files = [source_file] * n if isinstance(source_file, str) else source_file
    return [pa.array(files, type=pa.string()), pa.array(numbers, type=pa.int64()),
            pa.nulls(n, pa.string()) if pointers is None else pa.array(pointers, pa.string()),
            pa.array(np.full(n, SCHEMA_VERSION, dtype=np.int16))]


def records_to_table(records: list, source_file: str | list[str], numbers: list[int],
                     pointers: list[str | None] | None = None) -> pa.Table:
    """Build the step table from records already known to pass every rule."""
    columns = _Columns(records)
    arrays = [_array(columns, (f.name,), f.type) for f in LOGGED_FIELDS]
    arrays += _lineage(source_file, numbers, pointers)
    return pa.Table.from_arrays(arrays, schema=STEP_SCHEMA)


def absorb_unknown(record: Any) -> Any:
    """The record with every field the schema does not name moved into `extra` (keyed by
    its dotted path), so it is kept, not rejected. A record whose `extra` is not an object
    is returned unchanged (the rules then reject it for that)."""
    if type(record) is not dict or type(record.get("extra", {})) not in (dict, type(None)):
        return record
    kept, extra = {}, dict(record.get("extra") or {})
    for key, value in record.items():
        if key not in LOGGED_NAMES:
            extra[key] = value
        elif (key in _STRUCT_NAMES and type(value) is dict
              and not value.keys() <= _STRUCT_NAMES[key]):
            known = _STRUCT_NAMES[key]
            kept[key] = {k: v for k, v in value.items() if k in known}
            extra.update({f"{key}.{k}": v for k, v in value.items() if k not in known})
        else:
            kept[key] = value
    if extra:
        kept["extra"] = extra
    return kept


# --- Fast path ------------------------------------------------------------------------
# pyarrow's C++ JSON reader types every fixed field (it is at least as strict as the rules
# on types); Python adds only what it cannot do: canonical JSON text of tool arguments and
# results, the reward-component map, and unknown-field checks. Any doubt (a parse error,
# a value rule broken) sends the whole batch to the rule-by-rule path, which then decides.

_NOT_NATIVE = JSON_TEXT_FIELDS | {"reward_components", "observation.events"}


def _native_type(field: pa.Field) -> pa.Field | None:
    if field.name in _NOT_NATIVE:
        return None
    if not pa.types.is_struct(field.type):
        return field
    kept = [f for f in field.type if f"{field.name}.{f.name}" not in _NOT_NATIVE]
    return pa.field(field.name, pa.struct(kept))


_NATIVE_SCHEMA = pa.schema([f for f in map(_native_type, LOGGED_FIELDS) if f is not None])
_STRUCT_NAMES = {f.name: frozenset(c.name for c in f.type)
                 for f in LOGGED_FIELDS if pa.types.is_struct(f.type)}


def _keys_known(columns: _Columns) -> bool:
    if not set().union(*columns[()]) <= LOGGED_NAMES:
        return False
    for name, allowed in _STRUCT_NAMES.items():
        values = columns[(name,)]
        if not set(map(type, values)) <= {dict, type(None)}:
            return False
        if not set().union(*filter(None, values)) <= allowed:  # union of all their keys
            return False
    return True


def _values_ok(table: pa.Table) -> bool:
    """The value rules of tracerl.data.schema, vectorised over a natively typed table."""
    action = table.column("action")
    action_type = pc.struct_field(action, "type")
    tool = pc.struct_field(action, "tool")
    logprob = table.column("action_logprobs")
    indexes = [table.column(name) for name in ("turn", "call_index")]
    checks = [
        *(pc.all(pc.greater_equal(c, 0)).as_py() is not False for c in indexes),
        table.column("episode_id").null_count == 0,
        table.column("t").null_count == 0,
        table.column("done").null_count == 0,
        action.null_count == 0,
        action_type.null_count == 0,
        pc.all(pc.is_in(action_type, value_set=pa.array(ACTION_TYPES))).as_py(),
        pc.all(pc.greater_equal(table.column("t"), 0)).as_py() is not False,
        pc.all(pc.not_equal(table.column("episode_id"), "")).as_py() is not False,
        pc.all(pc.or_(pc.is_in(table.column("split"), value_set=pa.array(SPLITS)),
                      pc.is_null(table.column("split")))).as_py() is not False,
        logprob.null_count == len(logprob) or pc.max(logprob).as_py() <= 0,
        pc.all(pc.or_(pc.not_equal(action_type, "tool_call"),
                      pc.fill_null(pc.not_equal(tool, ""), False))).as_py() is not False,
    ]
    for path in (("state", "available_tools"), ("metadata", "safety_flags")):
        lists = pc.struct_field(table.column(path[0]), path[1])
        checks.append(pc.list_flatten(lists).null_count == 0)
    return all(checks)


def _with_children(native: pa.ChunkedArray, struct_type: pa.StructType,
                   extra: dict[str, pa.Array]) -> pa.Array:
    native = native.combine_chunks()
    children = [extra[f.name] if f.name in extra else native.field(f.name)
                for f in struct_type]
    return pa.StructArray.from_arrays(children, fields=list(struct_type),
                                      mask=native.is_null())


_BOM = b"\xef\xbb\xbf"


def _read_native(data: bytes, unexpected: str) -> pa.Table | None:
    """The typed fields of a batch of records, read by pyarrow's C++ reader in one block
    (one chunk per column, on one core: a worker process per core parses its own batch).
    unexpected="infer": fields the schema does not type are inferred too, and so show in
    the table's schema (an unknown field is found at C speed); that fails when free-form
    JSON changes type between rows."""
    try:
        return pajson.read_json(
            io.BytesIO(data),
            read_options=pajson.ReadOptions(block_size=len(data) + 1, use_threads=False),
            parse_options=pajson.ParseOptions(explicit_schema=_NATIVE_SCHEMA,
                                              unexpected_field_behavior=unexpected))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _only_known_fields(schema: pa.Schema) -> bool:
    """Fields pyarrow inferred beyond the native schema are unknown ones, except where the
    step schema keeps free-form JSON (tool arguments and results, reward components)."""
    for f in schema:
        known = _NATIVE_NAMES.get(f.name, False)
        if known is False:
            if f.name not in _NOT_NATIVE:
                return False
        elif known is not None:
            extra = {c.name for c in f.type} - known
            if {f"{f.name}.{c}" for c in extra} - _NOT_NATIVE:
                return False
    return True


_NATIVE_NAMES = {f.name: (frozenset(c.name for c in f.type) if pa.types.is_struct(f.type)
                          else None) for f in _NATIVE_SCHEMA}


class _Inference:
    """Whether pyarrow's inference of free-form fields has worked in this process: once
    it fails (free-form JSON that changes type between rows), unknown fields are looked
    for by msgspec instead, which always works but costs more."""

    works = True


# The layout of a record for msgspec: every field the step schema names, at every level
# (an unknown field fails the decode: forbid_unknown_fields), each leaf as the raw JSON
# text of its value, which is never decoded (pyarrow types the fixed leaves; only the
# free-form ones are read, once per distinct text). gc=False: no reference cycles.
_UNSEEN = msgspec.Raw(b"")  # a field the record does not have


def _layout(name: str, fields: list[pa.Field], only: frozenset[str] | None = None) -> type:
    """A msgspec Struct of `fields` (each struct field a Struct too, each leaf raw text);
    only: the dotted paths to keep (and unknown fields are then skipped, not refused)."""
    spec = []
    for f in fields:
        if only is not None and not any(p == f.name or p.startswith(f.name + ".")
                                        for p in only):
            continue
        if pa.types.is_struct(f.type):
            inner = None if only is None else frozenset(
                p.partition(".")[2] for p in only if p.startswith(f.name + "."))
            spec.append((f.name, _layout(f"{name}_{f.name}", list(f.type), inner) | None,
                         None))
        else:
            spec.append((f.name, msgspec.Raw, _UNSEEN))
    return msgspec.defstruct(name, spec, forbid_unknown_fields=only is None, gc=False)


# The free-form values, with the depth of the container they sit in (the record is 1):
# a record nests as deep as that plus the value's own depth.
_FREE_FORM = {"action.arguments": 2, "observation.tool_result": 2, "observation.events": 2,
              "extra": 1, "reward_components": 1}
_FREE_RULES = {r.field: r for r in RULES if r.field in _FREE_FORM}
_FIXED_DEPTH = 3  # what the typed fields nest to at most (a list inside a struct)
_RECORD_DECODER = msgspec.json.Decoder(_layout("StepRecord", LOGGED_FIELDS))
_FREE_DECODER = msgspec.json.Decoder(_layout("FreeForm", LOGGED_FIELDS, frozenset(_FREE_FORM)))


def _raw_values(records: list, path: str, parents: dict[str, list]) -> pa.Array:
    """The raw JSON text of one field of every record (empty where it is missing), as one
    binary array built from the texts' lengths and their concatenation (no Python bytes
    object per value). `parents`: each struct field's values, shared between calls."""
    parent, _, child = path.partition(".")
    values = parents.get(parent)
    if values is None:
        values = parents[parent] = list(map(attrgetter(parent), records))
    if child:
        get = attrgetter(child)
        try:
            values = list(map(get, values))
        except AttributeError:  # a null parent
            values = [_UNSEEN if v is None else get(v) for v in values]
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)),
              out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(values), [None, pa.py_buffer(offsets),
                                         pa.py_buffer(b"".join(values))])


def _free_form(raws: pa.Array, path: str, max_depth: int | None
               ) -> tuple[pa.Array, list] | None:
    """(each row's index into the distinct values, the distinct values parsed) of one
    free-form field; None when a value is not valid JSON for the rules, nests too deep,
    or breaks its field's rule (the rule-by-rule path then decides)."""
    encoded = raws.dictionary_encode()
    values = []
    base = _FREE_FORM[path]
    rule = _FREE_RULES.get(path)
    for text in encoded.dictionary.to_pylist():
        if text == b"" or text == b"null":
            value = None
        else:
            try:
                value = loads_exact(text)
            except orjson.JSONDecodeError:
                return None
            if (max_depth is not None
                    and text.count(b"{") + text.count(b"[") + base > max_depth
                    and json_depth(value) + base > max_depth):
                return None
        if rule is not None and not rule.ok(value):
            return None
        values.append(value)
    return encoded.indices, values


def _json_texts(values: list) -> pa.Array:
    """Canonical JSON text of distinct values (see _json_text)."""
    texts = [None if v is None else dumps_exact(v, orjson.OPT_SORT_KEYS) for v in values]
    return pa.array(texts, type=pa.binary()).cast(pa.string())


def _valid_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _fast_table(data: bytes, count: int, source_file: str, first_line: int,
                max_depth: int | None) -> pa.Table | None:
    """The step table of `count` lines of JSON text, every one a valid record, parsed
    without building a Python object per value; None at any doubt (a line that is not a
    record, a blank line, an unknown field, a value rule broken, a free-form value too
    deep), and the rule-by-rule path then decides.

    pyarrow's C++ JSON reader types every fixed field (it is at least as strict as the
    rules on types) and, inferring the rest, shows any field the schema does not name;
    msgspec checks that each line is one JSON object and hands the raw text of its
    free-form values (tool arguments and results, events, reward components, `extra`),
    which are parsed, checked and written as canonical JSON once per distinct text.
    Where inference fails (free-form JSON that changes type), msgspec checks every
    field's name instead. What orjson alone refuses besides (invalid UTF-8 in a string)
    is checked over the whole batch."""
    if max_depth is not None and max_depth < _FIXED_DEPTH:
        return None
    inferring = _Inference.works
    # without inference, one decode checks every field's name and hands the free-form
    # values' text too (the layouts differ only in the fields they name)
    decoder = _FREE_DECODER if inferring else _RECORD_DECODER
    try:
        records = decoder.decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(records) != count or not _valid_utf8(data):  # a blank line, or two records
        return None
    native = _read_native(data, "infer") if inferring else None
    if native is not None and not _only_known_fields(native.schema):
        return None
    if native is None:
        if inferring:
            try:  # every field known, at every level (the Structs are dropped at once)
                _RECORD_DECODER.decode_lines(data)
            except (msgspec.DecodeError, RecursionError):
                return None
        native = _read_native(data, "ignore")
        if native is not None and inferring:
            _Inference.works = False
    if native is None or native.num_rows != count or not _values_ok(native):
        return None
    free: dict[str, pa.Array] = {}
    parents: dict[str, list] = {}
    for path in _FREE_FORM:
        found = _free_form(_raw_values(records, path, parents), path, max_depth)
        if found is None:
            return None
        indices, values = found
        if path == "reward_components":
            distinct = canonical_map(pa.array(values, type=REWARD_COMPONENTS_TYPE))
        elif path == "observation.events":
            distinct = _events(values)
        else:
            distinct = _json_texts(values)
        free[path] = distinct.take(indices)
    del records, parents
    arrays = []
    for f in LOGGED_FIELDS:
        if f.name in free:
            arrays.append(free[f.name])
        elif pa.types.is_struct(f.type):
            extra = {c.name: free[f"{f.name}.{c.name}"] for c in f.type
                     if f"{f.name}.{c.name}" in free}
            arrays.append(_with_children(native.column(f.name), f.type, extra)
                          if extra else native.column(f.name))
        else:
            arrays.append(native.column(f.name))
    arrays += _lineage(source_file, list(range(first_line, first_line + count)), None)
    return pa.Table.from_arrays(arrays, schema=STEP_SCHEMA)


def parse_batch(lines: list[bytes], source_file: str, first_line: int,
                raw: bytes | None = None, *, strict: bool = True,
                max_depth: int | None = None) -> ParsedBatch:
    """Parse lines numbered first_line, first_line+1, ...; blank lines are skipped.

    `raw`, when given, is the text the lines were split from (spares joining them again).
    strict: a field the schema does not name rejects its record; otherwise it is kept
    under `extra`. max_depth: a record nested deeper is rejected before it is parsed
    (ingest.max_depth; None: no limit).
    """
    if first_line == 1 and lines and lines[0].startswith(_BOM):
        lines = [lines[0][len(_BOM):], *lines[1:]]  # a UTF-8 byte order mark is not data
        raw = None
    if lines:
        data = raw if raw is not None else b"\n".join(lines)
        fast = _fast_table(data, len(lines), source_file, first_line, max_depth)
        if fast is not None:
            return ParsedBatch(fast, [], len(lines), fast=True)
    deep: list[Reject] = []
    if max_depth is not None:
        lines, deep = drop_too_deep(lines, source_file, first_line, max_depth)
        if deep:
            raw = None
    parsed = _parse_lines(lines, source_file, first_line, raw, strict)
    if not deep:
        return parsed
    return ParsedBatch(parsed.table, sorted(parsed.rejects + deep,
                                            key=lambda r: r.source_record),
                       parsed.read + len(deep))


def _parse_lines(lines: list[bytes], source_file: str, first_line: int, raw: bytes | None,
                 strict: bool) -> ParsedBatch:
    """The rule-by-rule path: every line read by orjson, each rule checked over whole
    columns, and only the records a column check flags looked at one by one."""
    rejects: list[Reject] = []
    loads = orjson.loads
    try:  # the common case: every line is a JSON record
        records: list = list(map(loads, lines))
        numbers: list[int] = list(range(first_line, first_line + len(lines)))
        raws: list[bytes] = lines
    except orjson.JSONDecodeError:
        records, numbers, raws = [], [], []
        for offset, line in enumerate(lines):
            try:
                records.append(loads(line))
            except orjson.JSONDecodeError as exc:
                if not line.strip():
                    continue  # a blank line is not a record
                rejects.append(Reject(source_file, first_line + offset, "<record>",
                                      f"not valid JSON: {exc}", raw_text(line)))
                continue
            numbers.append(first_line + offset)
            raws.append(line)
    read = len(records) + len(rejects)
    if set(map(type, records)) - {dict}:  # a value that is no object (a line `1,` of a
        # pretty-printed document): rejected as such, never an internal error
        records, numbers, raws = _objects_only(records, numbers, raws, rejects, source_file)
    if may_hold_big_int(raw if raw is not None else b"\n".join(raws)):
        # integers beyond 64 bits: read those records again, keeping them exact
        records = [loads_exact(line) if may_hold_big_int(line) else record
                   for line, record in zip(raws, records, strict=True)]

    columns = _Columns(records)
    if not strict and records and not _keys_known(columns):
        records = list(map(absorb_unknown, records))
        columns = _Columns(records)
    flagged = _flag_broken(columns, len(records))
    if not flagged.any():
        return ParsedBatch(records_to_table(records, source_file, numbers), rejects, read)

    for i in np.flatnonzero(flagged):
        try:
            check_record(records[i])
        except RecordError as exc:
            rejects.append(Reject(source_file, numbers[i], exc.field, exc.reason,
                                  raw_text(raws[i])))
            continue
        raise AssertionError(f"rules disagree on record {numbers[i]} of {source_file}")
    keep = np.flatnonzero(~flagged)
    rejects.sort(key=lambda r: r.source_record)
    table = records_to_table([records[i] for i in keep], source_file,
                             [numbers[i] for i in keep])
    return ParsedBatch(table, rejects, read)


def _objects_only(records: list, numbers: list[int], raws: list[bytes], rejects: list[Reject],
                  source_file: str) -> tuple[list, list[int], list[bytes]]:
    """The records that are JSON objects; each other one rejected as the rules say."""
    keep = [i for i, r in enumerate(records) if type(r) is dict]
    for i in sorted(set(range(len(records))) - set(keep)):
        try:
            check_record(records[i])
        except RecordError as exc:
            rejects.append(Reject(source_file, numbers[i], exc.field, exc.reason,
                                  raw_text(raws[i])))
    rejects.sort(key=lambda r: r.source_record)
    return [records[i] for i in keep], [numbers[i] for i in keep], [raws[i] for i in keep]


def parse_adapted(records: list, source_file: str, *, strict: bool = False) -> ParsedBatch:
    """Rows adapted from another format (``tracerl.data.formats.AdaptedRecord``s), checked by the
    same rules as native lines. A record is the unit: one bad row, or an error the adapter
    met, quarantines the whole record, naming the field and where the row came from. A
    record may name its own source file (a tau2 simulation file of a results folder); one
    that is no record (`is_record` false: notes only) is not counted."""
    rejects: list[Reject] = []
    rows: list = []
    numbers: list[int] = []
    pointers: list[str] = []
    owner: list[int] = []
    files: list[str] = []
    owners_of: list[int] = []  # the record of each reject
    for k, record in enumerate(records):
        own = record.source_file or source_file
        if record.error is not None:
            rejects.append(Reject(own, record.number, record.error.where or "<record>",
                                  record.error.reason, record.raw))
            owners_of.append(k)
            continue
        n = len(record.rows)
        rows += record.rows
        numbers += [record.number] * n
        pointers += record.row_pointers
        owner += [k] * n
        files += [own] * n
    fast = _direct_table(rows, files, numbers, pointers) if rows else None
    if fast is not None:
        rejects, owners_of = _by_record(rejects, owners_of)
        return ParsedBatch(fast, rejects, sum(1 for r in records if r.is_record), fast=True,
                           owners=owners_of)
    columns = _Columns(rows)
    if not strict and rows and not _keys_known(columns):
        rows = list(map(absorb_unknown, rows))
        columns = _Columns(rows)
    flagged = np.flatnonzero(_flag_broken(columns, len(rows)))
    bad: set[int] = set()
    for i in flagged:  # the first bad row of each record explains it
        if owner[i] in bad:
            continue
        bad.add(owner[i])
        try:
            check_record(rows[i])
        except RecordError as exc:
            rejects.append(Reject(files[i], numbers[i], exc.field,
                                  f"{exc.reason} (row t={rows[i].get('t')} from {pointers[i]})",
                                  records[owner[i]].raw))
            owners_of.append(owner[i])
            continue
        raise AssertionError(f"rules disagree on {pointers[i]} of {files[i]}")
    keep = [i for i in range(len(rows)) if owner[i] not in bad] if bad else range(len(rows))
    table = records_to_table([rows[i] for i in keep], [files[i] for i in keep],
                             [numbers[i] for i in keep], [pointers[i] for i in keep])
    rejects, owners_of = _by_record(rejects, owners_of)
    return ParsedBatch(table, rejects, sum(1 for r in records if r.is_record),
                       owners=owners_of)


def _by_record(rejects: list[Reject], owners: list[int]) -> tuple[list[Reject], list[int]]:
    """Rejects sorted (stably) by their record number, with their owners."""
    order = sorted(range(len(rejects)), key=lambda i: rejects[i].source_record)
    return [rejects[i] for i in order], [owners[i] for i in order]


# --- Adapted rows, straight to Arrow ----------------------------------------------------
# An adapter's rows are Python values already: they are checked and built into Arrow as
# they are, not written to JSON text and parsed back. msgspec checks every rule over the
# whole batch in C (each rule below as a type: the Python types and bounds it allows, and
# every field name at every level, forbid_unknown_fields); pyarrow then builds every typed
# column in one call. The check comes first because pyarrow coerces what the rules refuse
# (a float for an integer, true for a number, a string or a set for a list, unknown keys
# of a struct dropped). Only the free-form values are written one by one, as the canonical
# JSON text the rule-by-rule path writes.

_INDEX = Annotated[int, msgspec.Meta(ge=0, lt=INT32_LIMIT)]
_EVENT_LAYOUT = msgspec.defstruct(
    "AdaptedEvent",
    [("actor", Literal[ACTORS]), ("kind", Literal[EVENT_KINDS]), ("arguments", Any, None),
     *((n, str | None, None) for n in EVENT_TYPE.names if n not in ("actor", "kind",
                                                                     "arguments"))],
    forbid_unknown_fields=True, kw_only=True, gc=False)
# the rules of tracerl.data.schema that are more than a field's Arrow type says
_RULE_TYPES: dict[str, Any] = {
    "episode_id": Annotated[str, msgspec.Meta(min_length=1)],
    "t": _INDEX, "turn": _INDEX, "call_index": _INDEX,
    "split": Literal[SPLITS], "action.type": Literal[ACTION_TYPES],
    "action_logprobs": Annotated[float, msgspec.Meta(le=0)],
    # any JSON; `extra` (an object) has its type checked apart: Any hands back the value
    # itself, not a copy, to be written as text
    "action.arguments": Any, "observation.tool_result": Any, "extra": Any,
}
# Lists are checked apart too: msgspec takes a tuple or a set for a list, the rules do
# not. Each list's type is checked exactly, then its items by msgspec (lists of them).
_LIST_RULES = {"state.available_tools": list[list[str]],
               "metadata.safety_flags": list[list[str]],
               "observation.events": list[list[_EVENT_LAYOUT]]}
_RULE_TYPES.update(dict.fromkeys(_LIST_RULES, Any))
_REQUIRED = frozenset(r.field for r in RULES if r.required)


def _rule_type(path: str, arrow_type: pa.DataType) -> Any:
    """What the rules allow at `path`, as a type msgspec checks (see _scalar_rule)."""
    if path in _RULE_TYPES:
        return _RULE_TYPES[path]
    if pa.types.is_struct(arrow_type):
        return msgspec.defstruct(
            "Adapted_" + path.replace(".", "_"),
            [(f.name, *_field_spec(f"{path}.{f.name}", f.type)) for f in arrow_type],
            forbid_unknown_fields=True, kw_only=True, gc=False)
    if pa.types.is_string(arrow_type):
        return str
    if pa.types.is_floating(arrow_type):
        return float  # an int too (not a bool)
    if pa.types.is_boolean(arrow_type):
        return bool
    if pa.types.is_integer(arrow_type):
        return Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]  # not a bool
    if pa.types.is_list(arrow_type):
        return list[str]
    if pa.types.is_map(arrow_type):
        return dict[str, float]
    raise TypeError(f"no rule type for {arrow_type}")


def _field_spec(path: str, arrow_type: pa.DataType) -> tuple:
    kind = _rule_type(path, arrow_type)
    return (kind,) if path in _REQUIRED else (kind | None, None)


_ADAPTED_ROWS = list[msgspec.defstruct(
    "AdaptedRow", [(f.name, *_field_spec(f.name, f.type)) for f in LOGGED_FIELDS],
    forbid_unknown_fields=True, kw_only=True, gc=False)]


def _direct_field(field: pa.Field, path: str) -> pa.Field | None:
    """The field as pyarrow builds it from the rows: without the canonical JSON text
    leaves (written apart), events without their arguments."""
    if path in JSON_TEXT_FIELDS:
        return None
    if path == "observation.events":
        return pa.field(field.name, pa.list_(pa.struct(
            [e for e in EVENT_TYPE if e.name != "arguments"])))
    if not pa.types.is_struct(field.type):
        return field
    kept = [_direct_field(c, f"{path}.{c.name}") for c in field.type]
    return pa.field(field.name, pa.struct([c for c in kept if c is not None]),
                    nullable=field.nullable)


_DIRECT_TYPE = pa.struct([f for f in (_direct_field(f, f.name) for f in LOGGED_FIELDS)
                          if f is not None])
_DIRECT_NAMES = frozenset(_DIRECT_TYPE.names)
_ROW_TYPES: dict[frozenset, pa.StructType] = {}  # the fields some row has -> what to build
_LISTS = frozenset({list, type(None)})
_OBJECTS = frozenset({dict, type(None)})


def _get(parents: list, key: str) -> list:
    """Each parent's value at key; a null parent gives None."""
    try:
        return list(map(dict.get, parents, repeat(key)))
    except TypeError:  # a null parent
        if not any(parents):  # every parent null (or empty)
            return [None] * len(parents)
        return [None if p is None else p.get(key) for p in parents]


def _attr(structs: list, path: str) -> list:
    """Each msgspec Struct's value at a dotted path; a null parent gives None."""
    try:
        return list(map(attrgetter(path), structs))
    except AttributeError:  # a null parent
        parent, _, child = path.partition(".")
        return [None if p is None else getattr(p, child)
                for p in map(attrgetter(parent), structs)]


def _rebuilt(struct: pa.StructArray, arrow_type: pa.StructType,
             texts: dict[str, pa.Array]) -> pa.Array:
    """The struct column of arrow_type: its built children (null under a null parent, as
    the rule-by-rule path writes them) and the free-form ones written apart."""
    children = dict(zip((f.name for f in struct.type), struct.flatten(), strict=True))
    children.update(texts)
    if not struct.null_count and not texts:
        return struct
    return pa.StructArray.from_arrays([children[f.name] for f in arrow_type],
                                      fields=list(arrow_type),
                                      mask=struct.is_null() if struct.null_count else None)


def _with_arguments(built: pa.ListArray, events: list) -> pa.Array | None:
    """The events column: built events (in their rows' order) with their arguments as
    canonical JSON text; None if the built lists do not line up with the rows' events."""
    flat = [e for v in events if v for e in v]
    offsets = built.offsets
    values = built.values
    if len(values) != len(flat) or (len(offsets) and offsets[0].as_py() != 0):
        return None
    children = dict(zip((f.name for f in values.type), values.flatten(), strict=True))
    children["arguments"] = _json_text(_get(flat, "arguments"))
    struct = pa.StructArray.from_arrays([children[f.name] for f in EVENT_TYPE],
                                        fields=list(EVENT_TYPE))
    return pa.ListArray.from_arrays(offsets, struct, type=_EVENTS_TYPE,
                                    mask=built.is_null() if built.null_count else None)


def _built_type(present: set) -> pa.StructType:
    """_DIRECT_TYPE without the nullable fields no row has (pyarrow looks each field up in
    every row: an adapter's rows leave out most of the optional ones)."""
    key = frozenset(present & _DIRECT_NAMES)
    built = _ROW_TYPES.get(key)
    if built is None:
        built = _ROW_TYPES[key] = pa.struct([f for f in _DIRECT_TYPE
                                             if f.name in key or not f.nullable])
    return built


def _direct_table(rows: list[dict], files: list[str], numbers: list[int],
                  pointers: list[str]) -> pa.Table | None:
    """The step table of adapted rows, built from the rows as they are (never changed):
    the same table the rule-by-rule path builds, or None at any doubt (a rule broken, a
    value pyarrow cannot hold as the rules mean it: an integer beyond 64 bits where a
    number belongs, a lone surrogate, a free-form value orjson cannot write), and the
    rule-by-rule path then decides, naming each bad record.

    A subclass of str, int, float or dict (an Enum among them) is taken as its value, as
    the JSON text it would be written as."""
    try:
        checked = msgspec.convert(rows, _ADAPTED_ROWS)
        lists = {path: _attr(checked, path) for path in _LIST_RULES}
        for path, values in lists.items():
            if not set(map(type, values)) <= _LISTS:
                return None
            msgspec.convert([v for v in values if v], _LIST_RULES[path])
        extras = _attr(checked, "extra")
        if not set(map(type, extras)) <= _OBJECTS:
            return None
        events = lists["observation.events"]
        built_type = _built_type(set().union(*rows))
        built = pa.array(rows, type=built_type)
        columns = dict(zip(built_type.names, built.flatten(), strict=True))
        for f in _DIRECT_TYPE:  # a field no row has: all null, not looked up row by row
            if f.name not in columns:
                columns[f.name] = pa.nulls(len(rows), f.type)
        observation = columns["observation"]
        built_events = observation.flatten()[observation.type.get_field_index("events")]
        with_arguments = _with_arguments(built_events, events)
        if with_arguments is None:
            return None
        texts = {"action": {"arguments": _json_text(_attr(checked, "action.arguments"))},
                 "observation": {"tool_result": _json_text(
                     _attr(checked, "observation.tool_result")), "events": with_arguments}}
        arrays = []
        for f in LOGGED_FIELDS:
            if f.name == "extra":
                arrays.append(_json_text(extras))
            elif f.name == "reward_components":
                arrays.append(canonical_map(columns[f.name]))
            elif pa.types.is_struct(f.type):
                arrays.append(_rebuilt(columns[f.name], f.type, texts.get(f.name, {})))
            else:
                arrays.append(columns[f.name])
        arrays += _lineage(files, numbers, pointers)
        table = pa.Table.from_arrays(arrays, schema=STEP_SCHEMA)
    except msgspec.ValidationError:
        return None  # a rule broken
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None  # pyarrow or orjson cannot hold a value as the rules mean it
    return table if _values_ok(table) else None
