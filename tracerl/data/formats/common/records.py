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
- JSON values one after another, each an object or array that may span lines (Python
  OpenTelemetry's ConsoleSpanExporter writes each span as an indented object, then a
  newline): one record per value, numbered by the line it starts on (`json_values`). Read
  so only when the file does not parse as one document and its first two values are
  objects or arrays. A value that is cut (the writer stopped mid-value and a later one
  went on) is a record of its own, quarantined, and the reading goes on at the next value
  that starts a line; so is text between the values that is not a value.
A UTF-8 byte-order mark at the start of the file is not data, in every case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracerl.data.formats import AdapterError
from tracerl.data.formats.common.jsonstream import (
    CHUNK_BYTES,
    _chunks,
    first_byte,
    read_capped,
    stream_array,
)
from tracerl.data.ingest.limits import (
    COMPRESSIONS,
    HEAD_BYTES,
    GzipCut,
    Limits,
    RecordRejected,
    bracket_steps,
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
    """Whether the file is JSON Lines: its name says so (unless its first line is a lone
    `{` or `[`: a pretty-printed document, whatever its name), or its first line is a
    whole JSON value and something follows it."""
    from tracerl.data.formats import _head

    named = _named_json_lines(path)
    try:
        head = _head(path, 4096 if named else 1 << 20)
    except OSError:
        return named
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    head = head.lstrip(b" \t\r\n")
    first, sep, rest = head.partition(b"\n")
    if named:
        return first.strip() not in (b"{", b"[")
    if not sep or not rest.strip() or first[:1] not in (b"{", b"["):
        return False
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return True


def _named_json_lines(path: Path) -> bool:
    return path.name.endswith(tuple(f"{kind}{packed}" for kind in (".jsonl", ".ndjson")
                                    for packed in ("", *COMPRESSIONS)))


def _lines_after_a_broken_first(path: Path, limits: Limits) -> bool:
    """Whether a file named JSON Lines whose first line is a lone `{` or `[` is lines after
    all: it is no JSON document (nor values one after another) and a later line is a
    whole JSON object, so that first line is a broken record, not the start of a
    pretty-printed document, and the records after it are read, not lost in one
    rejected "document". A document over the record size limit stays one rejected
    record, as before."""
    if not _named_json_lines(path):
        return False
    if not any(r.error is None and isinstance(r.value, dict)
               for r in islice(_lines(path, limits), 1, None)):
        return False
    data, _, _, cut = read_capped(path, limits.max_record_bytes)
    if data is None or cut is not None:
        return False
    try:
        orjson.loads(data[len(_BOM):] if data.startswith(_BOM) else data)
    except orjson.JSONDecodeError:
        return not _concatenated(path, limits)
    return False


def json_records(path: Path, limits: Limits, whole: Callable[[Any], bool] | None = None,
                 batch: Any = None) -> Iterator[RawRecord]:
    """Every record of the file (see the module's docstring); of JSON Lines, only those of
    `batch` (a GuardedBatch of the file's lines) when one is given."""
    if batch is not None:
        yield from _batch_lines(batch, limits)
        return
    if is_json_lines(path) or _lines_after_a_broken_first(path, limits):
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
    record = document(path, limits)
    if record.error is not None and _concatenated(path, limits):
        yield from json_values(path, limits)
        return
    yield record


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


# --- JSON values one after another ------------------------------------------------------

_WHITESPACE = b" \t\r\n"
_OPENERS = (b"{", b"[")
_AFTER_ELEMENT = (b",", b"]", b"}", b":")  # what follows a value nested in another
_LINE_START = re.compile(rb"\n[{\[]")  # a value that starts a line


def json_values(path: Path, limits: Limits) -> Iterator[RawRecord]:
    """The records of a file of JSON values one after another (see the module's
    docstring): each numbered by the line its value starts on, pointer "" (as a line of
    JSON Lines)."""
    for record, _ in _values(_chunks(path, CHUNK_BYTES), limits):
        yield record


def first_of_values(head: bytes, limits: Limits | None = None) -> Any:
    """The first readable value of a file's first bytes when they are JSON values one
    after another (its first two values objects or arrays), else None: what `--format
    auto` judges such a file by."""
    found = list(islice(_values([head], limits or Limits()), 16))
    if len(found) < 2 or not (found[0][1] and found[1][1]):
        return None
    return next((r.value for r, _ in found if r.error is None), None)


def _concatenated(path: Path, limits: Limits) -> bool:
    """Whether a file that is not one JSON document holds values one after another: its
    first value is whole and, as its second, an object or array, and no two of its
    records start on one line (a record is numbered by its line). Else — text after a
    document that is no object or array, a document cut short or over the size limit (an
    unindented one's nested values start lines too), two values on one line — the file
    stays one document with its error. Reads the file once more, only for a file that is
    no JSON document."""
    try:
        values = _values(_chunks(path, CHUNK_BYTES), limits)
        first = list(islice(values, 2))
        if not (len(first) == 2 and first[0][1] and first[1][1]
                and first[0][0].error is None and first[0][0].number < first[1][0].number):
            return False
        last = first[1][0].number
        for record, _ in values:
            if record.number <= last:
                return False
            last = record.number
    except (OSError, ValueError):
        return False
    return True


def _scan(data: bytes, depth: int = 0) -> tuple[int | None, int]:
    """(the index just after the bracket that brings the depth, `depth` before data and
    outside a string, back to 0 — None when none does —, the depth at the end). Brackets
    inside strings do not count (a quote after an odd run of backslashes is escaped)."""
    step = bracket_steps(data)
    level = depth + np.cumsum(step, dtype=np.int64)
    closed = np.flatnonzero((level == 0) & (step == -1))
    return (int(closed[0]) + 1 if len(closed) else None), int(level[-1]) if len(step) else depth


def _standalone(text: bytes) -> bool:
    """Whether text (starting with a bracket) opens a value that closes in it and is not
    an element of a value around it (what follows it is no comma or closing bracket)."""
    end, _ = _scan(text)
    return end is not None and text[end:].lstrip(_WHITESPACE)[:1] not in _AFTER_ELEMENT


@dataclass
class _Segment:
    """The text from one line that starts with a bracket to the next (the first: from
    the start of the file): a value, several, or a piece of one. Over max_record_bytes
    only its head is kept (data None)."""

    line: int
    data: bytes | None
    size: int
    head: bytes


@dataclass
class _Cut:
    """The text ends early (a cut .gz): why, and on which line."""

    reason: str
    line: int


def _segments(chunks: Iterable[bytes], limit: int) -> Iterator[_Segment | _Cut]:
    """The segments of the text, then why it ends early, if it does."""
    parts: list[bytes] | None = []
    size, head, line, newlines = 0, b"", 1, 0
    after_newline = False

    def add(piece: bytes) -> None:
        nonlocal parts, size, head, newlines
        newlines += piece.count(b"\n")
        size += len(piece)
        if parts is not None:
            parts.append(piece)
            if size > limit:
                head, parts = b"".join(parts)[:HEAD_BYTES], None
        elif len(head) < HEAD_BYTES:
            head = (head + piece)[:HEAD_BYTES]

    def segment() -> _Segment:
        data = b"".join(parts) if parts is not None else None
        return _Segment(line, data, size, head if data is None else data[:HEAD_BYTES])

    try:
        for chunk in chunks:
            starts = [m.start() + 1 for m in _LINE_START.finditer(chunk)]
            if after_newline and chunk[:1] in _OPENERS:
                starts.insert(0, 0)
            at = 0
            for start in starts:
                add(chunk[at:start])
                if size:
                    yield segment()
                parts, size, head, line = [], 0, b"", newlines + 1
                at = start
            add(chunk[at:])
            if chunk:
                after_newline = chunk.endswith(b"\n")
    except GzipCut as exc:
        if size:
            yield segment()
        yield _Cut(f"{exc.kind} stream cut ({exc})", newlines + 1)
        return
    if size:
        yield segment()


@dataclass
class _Open:
    """A value begun and not yet closed: its text so far (None past the size limit)."""

    line: int
    parts: list[bytes] | None
    size: int
    head: bytes
    depth: int | None  # None: not known (a piece of it was over the limit)

    def add(self, data: bytes | None, size: int, depth: int | None, limit: int) -> None:
        self.size += size
        self.depth = depth
        if self.parts is not None and data is not None and self.size <= limit:
            self.parts.append(data)
        elif self.parts is not None:
            self.head, self.parts = b"".join(self.parts)[:HEAD_BYTES], None


def _values(chunks: Iterable[bytes], limits: Limits) -> Iterator[tuple[RawRecord, bool]]:
    """(record, whether its text starts with a bracket) of each value (see json_values)."""
    limit = limits.max_record_bytes
    pending: _Open | None = None

    def cut(why: str, field: str = "<record>") -> RawRecord:
        if pending.parts is None:
            return RawRecord(pending.line, "", error=AdapterError(
                "<record>", oversize_reason(pending.size, limit)),
                text=head_text(pending.head, pending.size), jsonl=True)
        data = b"".join(pending.parts)
        return RawRecord(pending.line, "", error=AdapterError(
            field, f"not valid JSON: the value that starts on this line is cut ({why}, "
                   f"after {pending.size:,} bytes of it)"),
            text=raw_text(data[:QUARANTINED_BYTES]), jsonl=True)

    def value(data: bytes, line: int) -> RawRecord:
        try:
            return RawRecord(line, "", load_record(data, limits), jsonl=True)
        except RecordRejected as exc:
            return RawRecord(line, "", error=AdapterError(exc.field, exc.reason),
                             text=raw_text(data[:QUARANTINED_BYTES]), jsonl=True)

    def fresh(text: bytes, line: int) -> Iterator[tuple[RawRecord, bool]]:
        """The values of text that starts outside any value."""
        nonlocal pending
        if text[:1] in _OPENERS:  # most often the text is one value: parsed as it is
            try:
                yield RawRecord(line, "", load_record(text, limits), jsonl=True), True
                return
            except RecordRejected:
                pass  # several values, a cut one, or one the guards refuse: found below
        while True:
            stripped = text.lstrip(_WHITESPACE)
            line += text[:len(text) - len(stripped)].count(b"\n")
            text = stripped
            if not text:
                return
            if text[:1] not in _OPENERS:
                yield RawRecord(line, "", error=AdapterError(
                    "<record>", "not valid JSON: text between the values that is not an "
                                "object or array"), text=raw_text(text[:QUARANTINED_BYTES]),
                    jsonl=True), False
                return
            end, depth = _scan(text)
            if end is None:
                pending = _Open(line, [text], len(text), b"", depth)
                return
            yield value(text[:end], line), True
            line += text[:end].count(b"\n")
            text = text[end:]

    for segment in _segments(chunks, limit):
        if isinstance(segment, _Cut):  # a cut .gz: what was intact is read
            if pending is not None:
                yield cut(segment.reason, "<file>"), True
            else:
                yield RawRecord(segment.line, "", error=AdapterError(
                    "<file>", f"{segment.reason} on this line; the records before it were "
                              "read"), text="", jsonl=True), False
            return
        if segment.data is None:  # over the limit: taken as a value of its own (a value
            # nested in another starts a line only when it is written without indentation)
            if pending is not None:
                yield cut(f"a value starts on line {segment.line} before it closes"), True
            pending = _Open(segment.line, None, segment.size, segment.head, None)
            continue
        data = segment.data
        if pending is not None:
            if data[:1] in _OPENERS and _standalone(data):
                yield cut(f"a value starts on line {segment.line} before it closes"), True
                pending = None
            else:  # a piece of it (an element that starts a line)
                end, depth = _scan(data, pending.depth) if pending.depth is not None \
                    else (None, None)
                if end is None:
                    pending.add(data, len(data), depth, limit)
                    continue
                pending.add(data[:end], end, 0, limit)
                done, pending = pending, None
                yield (value(b"".join(done.parts), done.line) if done.parts is not None
                       else _oversize(done, limit)), True
                yield from fresh(data[end:], segment.line + data[:end].count(b"\n"))
                continue
        yield from fresh(data, segment.line)
    if pending is not None:
        yield cut("the file ends", "<file>"), True


def _oversize(value: _Open, limit: int) -> RawRecord:
    return RawRecord(value.line, "", error=AdapterError(
        "<record>", oversize_reason(value.size, limit)),
        text=head_text(value.head, value.size), jsonl=True)
