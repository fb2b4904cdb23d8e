"""The records of a JSON or JSONL file, under the native reader's guards, for any adapter.

- JSON Lines (a `.jsonl` name, or a `.json` file whose first line is a whole JSON value
  with more after it, as OpenTelemetry's file exporter writes): one record per non-blank
  line. A line over max_record_bytes is rejected from newline positions alone, never
  loaded; nesting, encoding and NaN/Infinity are named; a cut .gz is read up to the cut.
- A JSON document whose top level is an array: one record per element, streamed (each
  element under the guards, memory one element), unless `whole(first element)` says the
  array is itself one record (a bare list of chat messages).
- Any other JSON document: one record, the whole document (over max_record_bytes it is
  rejected without being loaded).
A UTF-8 byte-order mark at the start of the file is not data, in every case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.adapters import AdapterError
from tracerl.data.adapters.jsonstream import first_byte, read_capped, stream_array
from tracerl.data.ingest.limits import (
    HEAD_BYTES,
    Limits,
    RecordRejected,
    head_text,
    load_record,
    oversize_reason,
    plan_guarded,
    skipped_field,
)
from tracerl.data.ingest.parse import _BOM, raw_text

QUARANTINED_BYTES = 1000  # of a rejected line's text (the native reader keeps the same)


@dataclass
class RawRecord:
    """One record of a file: its value, or why it cannot be read."""

    number: int  # 1-based: the line of JSONL, the element of an array, 1 for a document
    pointer: str  # JSON pointer of the record in its file ("" for a line or a document)
    value: Any = None
    error: AdapterError | None = None
    text: str | None = None  # what quarantine shows of a rejected record
    jsonl: bool = False


def is_json_lines(path: Path) -> bool:
    """Whether the file is JSON Lines: its name says so, or its first line is a whole
    JSON value and something follows it."""
    name = path.name
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")):
        return True
    from tracerl.data.adapters import _head

    try:
        head = _head(path, 1 << 20)
    except OSError:
        return False
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    head = head.lstrip(b" \t\r\n")
    first, sep, rest = head.partition(b"\n")
    if not sep or not rest.strip() or first[:1] not in (b"{", b"["):
        return False
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return True


def json_records(path: Path, limits: Limits, whole: Callable[[Any], bool] | None = None,
                 batch: Any = None) -> Iterator[RawRecord]:
    """Every record of the file (see the module's docstring); of JSON Lines, only those of
    `batch` (a GuardedBatch of the file's lines) when one is given."""
    if batch is not None:
        yield from _batch_lines(batch, limits)
        return
    if is_json_lines(path):
        yield from _lines(path, limits)
        return
    first = first_byte(path)
    if not first:
        return  # an empty file holds no record
    if first == b"[":
        elements = stream_array(path, limits)
        head = next(elements, None)
        if head is None:
            return
        if not (whole is not None and head.rejected is None and whole(head.value)):
            for element in chain([head], elements):
                number = element.index + 1
                if element.rejected is not None:
                    yield RawRecord(number, f"/{element.index}", error=AdapterError(
                        element.rejected.field, element.rejected.reason), text=element.text)
                else:
                    yield RawRecord(number, f"/{element.index}", element.value)
            return
    yield document(path, limits)


def document(path: Path, limits: Limits) -> RawRecord:
    """The whole file as one record, under the guards."""
    data, size, head_bytes, cut = read_capped(path, limits.max_record_bytes)
    if cut is not None:
        return RawRecord(1, "", error=AdapterError("<file>", f"{cut} inside this record, "
                                                   f"after {size:,} bytes of it"),
                         text=head_text(head_bytes, size))
    if data is None:
        return RawRecord(1, "", error=AdapterError(
            "<record>", oversize_reason(size, limits.max_record_bytes)),
            text=head_text(head_bytes, size))
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        return RawRecord(1, "", load_record(data, limits))
    except RecordRejected as exc:
        return RawRecord(1, "", error=AdapterError(exc.field, exc.reason),
                         text=raw_text(data[:QUARANTINED_BYTES]))


def _lines(path: Path, limits: Limits) -> Iterator[RawRecord]:
    for batch in plan_guarded(path, 1000, limits):
        yield from _batch_lines(batch, limits)


def _batch_lines(batch: Any, limits: Limits) -> Iterator[RawRecord]:
    """The records of one batch of a JSON Lines file (tracerl.data.ingest.limits)."""
    lines, _ = batch.read()
    skipped = {line: (reason, head) for line, reason, head in batch.skipped}
    for number in sorted({*range(batch.first_line, batch.first_line + len(lines)),
                          *skipped}):
        if number in skipped:
            reason, head = skipped[number]
            yield RawRecord(number, "", error=AdapterError(skipped_field(reason), reason),
                            text=head, jsonl=True)
            continue
        line = lines[number - batch.first_line]
        if number == 1 and line.startswith(_BOM):
            line = line[len(_BOM):]
        if not line.strip():
            continue
        try:
            value = load_record(line, limits)
        except RecordRejected as exc:
            yield RawRecord(number, "", error=AdapterError(exc.field, exc.reason),
                            text=raw_text(line[:QUARANTINED_BYTES]), jsonl=True)
            continue
        yield RawRecord(number, "", value, jsonl=True)


def head_of(value: Any) -> str:
    """A short text of a record for quarantine, when the adapter has no raw text."""
    try:
        return raw_text(orjson.dumps(value)[:HEAD_BYTES * 5])
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)[:HEAD_BYTES * 5]
