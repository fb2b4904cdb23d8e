"""Parse a batch of native JSONL lines into a typed Arrow table plus rejected records.

Column-wise: each rule of tracerl.data.schema is checked over a whole column at once, and
Arrow arrays are built once per column. Only records in a column that fails its fast
check are looked at one by one, and only rejected records go through the per-record
validator, which names the field and the reason. Both paths evaluate the same rules.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from tracerl.data.schema import (
    ACTION_TYPES,
    EVENT_TYPE,
    JSON_TEXT_FIELDS,
    LOGGED_FIELDS,
    LOGGED_NAMES,
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


def raw_text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r")


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


def _json_text(values: list) -> pa.Array:
    """Canonical JSON text (sorted keys) of each value; a JSON null stays null."""
    if set(map(type, values)) <= {int, type(None)}:  # plain integers: their decimal text
        try:
            return pa.array(values, type=pa.int64()).cast(pa.string())
        except OverflowError:  # beyond int64 (JSON allows it): the general path below
            pass
    try:
        texts = list(map(orjson.dumps, values, repeat(None), repeat(orjson.OPT_SORT_KEYS)))
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: written exactly, row by row
        texts = [dumps_exact(v, orjson.OPT_SORT_KEYS) for v in values]
    if None not in values:  # nothing to null out (a JSON null inside is text "null")
        return pa.array(texts, type=pa.binary()).cast(pa.string())
    mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    return pa.array(texts, type=pa.binary(), mask=mask).cast(pa.string())


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
# Rules on fields pyarrow does not type here (its reader cannot hold them): checked in Python.
_NOT_NATIVE_RULES = [r for r in RULES if r.field in _NOT_NATIVE]
_NATIVE_NAMES = {f.name: (frozenset(c.name for c in f.type) if pa.types.is_struct(f.type)
                          else None) for f in _NATIVE_SCHEMA}


def _read_native(data: bytes, longest: int, unexpected: str) -> pa.Table | None:
    try:
        return pajson.read_json(
            io.BytesIO(data),
            # Several blocks let pyarrow parse on all cores; a block must hold the longest line.
            read_options=pajson.ReadOptions(block_size=max(1 << 20, 2 * longest)),
            parse_options=pajson.ParseOptions(explicit_schema=_NATIVE_SCHEMA,
                                              unexpected_field_behavior=unexpected))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _only_known_fields(schema: pa.Schema) -> bool:
    """Fields pyarrow inferred beyond the native schema are unknown ones, except where the
    step schema keeps free-form JSON (tool arguments and results, reward components)."""
    for f in schema:
        if f.name not in _NATIVE_NAMES:
            if f.name not in _NOT_NATIVE:
                return False
        elif _NATIVE_NAMES[f.name] is not None:
            extra = {c.name for c in f.type} - _NATIVE_NAMES[f.name]
            if {f"{f.name}.{c}" for c in extra} - _NOT_NATIVE:
                return False
    return True


def _fast_table(lines: list[bytes], records: list, source_file: str, numbers: list[int],
                raw: bytes | None) -> pa.Table | None:
    if not set(map(type, records)) <= {dict}:
        return None
    columns = _Columns(records)
    if not all(rule.column_ok(columns[rule.path]) for rule in _NOT_NATIVE_RULES):
        return None
    rewards = columns[("reward_components",)]
    data = raw if raw is not None else b"\n".join(lines)
    longest = max(map(len, lines))
    # Letting pyarrow infer what the schema does not name finds unknown fields at C speed;
    # free-form JSON that changes type between rows makes inference fail, and then the
    # field names are checked here instead.
    native = _read_native(data, longest, "infer")
    if native is not None and not _only_known_fields(native.schema):
        return None
    if native is None:
        if not _keys_known(columns):
            return None
        native = _read_native(data, longest, "ignore")
    if native is None or native.num_rows != len(records) or not _values_ok(native):
        return None
    arrays = []
    for f in LOGGED_FIELDS:
        if f.name == "reward_components":
            arrays.append(canonical_map(pa.array(rewards, type=f.type)))
        elif f.name in _NOT_NATIVE:
            arrays.append(_array(columns, (f.name,), f.type))
        elif pa.types.is_struct(f.type):
            extra = {c.name: _array(columns, (f.name, c.name), c.type) for c in f.type
                     if f"{f.name}.{c.name}" in _NOT_NATIVE}
            arrays.append(_with_children(native.column(f.name), f.type, extra))
        else:
            arrays.append(native.column(f.name))
    arrays += _lineage(source_file, numbers, None)
    return pa.Table.from_arrays(arrays, schema=STEP_SCHEMA)


def parse_batch(lines: list[bytes], source_file: str, first_line: int,
                raw: bytes | None = None, *, strict: bool = True) -> ParsedBatch:
    """Parse lines numbered first_line, first_line+1, ...; blank lines are skipped.

    `raw`, when given, is the text the lines were split from (spares joining them again).
    strict: a field the schema does not name rejects its record; otherwise it is kept
    under `extra`.
    """
    if first_line == 1 and lines and lines[0].startswith(_BOM):
        lines = [lines[0][len(_BOM):], *lines[1:]]  # a UTF-8 byte order mark is not data
        raw = None
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
    if may_hold_big_int(raw if raw is not None else b"\n".join(raws)):
        # integers beyond 64 bits: read those records again, keeping them exact
        records = [loads_exact(line) if may_hold_big_int(line) else record
                   for line, record in zip(raws, records, strict=True)]

    whole = raw if raw is not None and len(records) == len(lines) else None
    fast = _fast_table(raws, records, source_file, numbers, whole) if records else None
    if fast is not None:
        return ParsedBatch(fast, rejects, read, fast=True)
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


def parse_adapted(records: list, source_file: str, *, strict: bool = False) -> ParsedBatch:
    """Rows adapted from another format (``tracerl.data.adapters.AdaptedRecord``s), checked by the
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
    for k, record in enumerate(records):
        own = record.source_file or source_file
        if record.error is not None:
            rejects.append(Reject(own, record.number, record.error.where or "<record>",
                                  record.error.reason, record.raw))
            continue
        n = len(record.rows)
        rows += record.rows
        numbers += [record.number] * n
        pointers += record.row_pointers
        owner += [k] * n
        files += [own] * n
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
            continue
        raise AssertionError(f"rules disagree on {pointers[i]} of {files[i]}")
    keep = [i for i in range(len(rows)) if owner[i] not in bad] if bad else range(len(rows))
    table = records_to_table([rows[i] for i in keep], [files[i] for i in keep],
                             [numbers[i] for i in keep], [pointers[i] for i in keep])
    rejects.sort(key=lambda r: r.source_record)
    return ParsedBatch(table, rejects, sum(1 for r in records if r.is_record))
