"""Guards that keep hostile input from crashing ingest or eating memory.

- A line longer than `max_record_bytes` is never loaded: the planner sees only newline
  positions, and the record is quarantined with its size and a short head.
- Nesting deeper than `max_depth` (objects and arrays, default 64) is quarantined before
  anything recurses on it (orjson refuses to write beyond 254 levels).
- Text that is not JSON is told apart: invalid UTF-8 (with the byte and column), NaN /
  Infinity (not JSON), nesting beyond the parser's limit.
- A truncated or corrupt .gz: every intact line is read, and the cut is one quarantine
  record on the line where it happened. A .gz that is not gzip at all is unreadable
  input (InputError).
- A batch that still raises is parsed line by line, and a line that raises is
  quarantined as an internal error: one record never costs the others.
Every record lands in the step table or quarantine: `read == accepted + quarantined`.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracerl.data.ingest.parse import (
    _BOM,
    HEAD_BYTES,
    ParsedBatch,
    Reject,
    depth_reason,
    json_depth,
    parse_batch,
    raw_text,
)
from tracerl.data.ingest.reader import Batch, InputError
from tracerl.data.schema import loads_exact

_CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class Limits:
    max_record_bytes: int = 16 << 20
    max_depth: int = 64
    batch_bytes: int = 8 << 20  # a batch ends at batch_lines lines or this many bytes

    @classmethod
    def from_params(cls, ingest: dict | None) -> Limits:
        ingest = ingest or {}
        return cls(int(ingest.get("max_record_bytes", 16 << 20)),
                   int(ingest.get("max_depth", 64)), int(ingest.get("batch_bytes", 8 << 20)))


@dataclass
class GuardedBatch(Batch):
    """A batch plus records that were not read into it: (line, reason, raw head)."""

    skipped: list[tuple[int, str, str]] = field(default_factory=list)


def head_text(data: bytes, size: int) -> str:
    """What quarantine keeps of a record too large to read: its first bytes and size."""
    return raw_text(data[:HEAD_BYTES]) + f"… ({size:,} bytes in all, not read)"


def oversize_reason(size: int, limit: int) -> str:
    """The quarantine reason of a record over max_record_bytes (read only to count it)."""
    return (f"record is {size:,} bytes, over ingest.max_record_bytes ({limit:,}): "
            "rejected without reading it")


def plan_guarded(path: Path, batch_lines: int, limits: Limits) -> Iterator[GuardedBatch]:
    """Batches of at most batch_lines lines; an oversize line is left out of every range
    and reported in `skipped` of the batch after it (memory: one chunk)."""
    if compressed(path):
        yield from _gz_batches(path, batch_lines, limits)
        return
    size = path.stat().st_size
    limit = limits.max_record_bytes
    start, first_line, count, prev_nl = 0, 1, 0, -1
    skipped: list[tuple[int, str, str]] = []

    def oversize(at: int, length: int, line: int) -> tuple[int, str, str]:
        with open(path, "rb") as f:
            f.seek(at)
            return line, oversize_reason(length, limit), head_text(f.read(HEAD_BYTES), length)

    with open(path, "rb") as f:
        offset = 0
        while chunk := f.read(_CHUNK_BYTES):
            nls = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + offset
            offset += len(chunk)
            if not len(nls):
                continue
            lengths = np.diff(nls, prepend=prev_nl) - 1
            if (lengths > limit).any():  # rare: walk this chunk's lines one by one
                for p, length in zip(nls.tolist(), lengths.tolist(), strict=True):
                    if length > limit:
                        if count:
                            yield GuardedBatch(str(path), first_line, prev_nl + 1,
                                               start=start, end=prev_nl + 1, skipped=skipped)
                            first_line, count, skipped = first_line + count, 0, []
                        skipped.append(oversize(prev_nl + 1, length, first_line))
                        first_line += 1
                        start = p + 1
                    else:
                        count += 1
                        if count == batch_lines or p + 1 - start >= limits.batch_bytes:
                            yield GuardedBatch(str(path), first_line, p + 1, start=start,
                                               end=p + 1, skipped=skipped)
                            first_line, count, skipped, start = first_line + count, 0, [], p + 1
                    prev_nl = p
                continue
            prev_nl = int(nls[-1])
            while len(nls):  # cut at batch_lines lines or batch_bytes bytes, what comes first
                by_bytes = int(np.searchsorted(nls, start + limits.batch_bytes - 1))
                k = min(batch_lines - count - 1, by_bytes)
                if k >= len(nls):
                    break
                cut = int(nls[k]) + 1
                yield GuardedBatch(str(path), first_line, cut, start=start, end=cut,
                                   skipped=skipped)
                nls = nls[k + 1:]
                start, first_line, count, skipped = cut, first_line + count + k + 1, 0, []
            count += len(nls)
    last = size - prev_nl - 1  # a final line without a newline
    if last > limit:
        if count:
            yield GuardedBatch(str(path), first_line, prev_nl + 1, start=start,
                               end=prev_nl + 1, skipped=skipped)
            first_line, skipped = first_line + count, []
        skipped.append(oversize(prev_nl + 1, last, first_line))
        yield GuardedBatch(str(path), first_line + 1, size, start=size, end=size,
                           skipped=skipped)
    elif start < size or skipped:
        yield GuardedBatch(str(path), first_line, size, start=start, end=size, skipped=skipped)


def _gz_batches(path: Path, batch_lines: int, limits: Limits) -> Iterator[GuardedBatch]:
    """Lines of a .gz stream; a line over the limit is counted, not kept; a cut stream
    ends with one quarantine record on the line it cut."""
    limit = limits.max_record_bytes
    pending: list[bytes] = []
    skipped: list[tuple[int, str, str]] = []
    tail: list[bytes] = []  # the current line's pieces (while under the limit)
    tail_len = 0
    skipping: tuple[int, bytes] | None = None  # (line number, head) of an oversize line
    next_line = 1  # number of pending[0]
    pending_bytes = 0
    decoded_any = False
    with open(path, "rb") as raw:
        chunks = decompressed_pieces(raw, path.name)
        while True:
            try:
                chunk = next(chunks, b"")
            except GzipCut as exc:
                if not decoded_any and not pending and not tail_len and skipping is None:
                    raise InputError(f"{path}: not a readable {exc.kind} file: {exc}") from None
                line = next_line + len(pending)
                if skipping is not None:
                    skipped.append((skipping[0], f"{exc.kind} stream cut inside this record ({exc})"
                                    f" after {tail_len:,} bytes; nothing after it is readable",
                                    head_text(skipping[1], tail_len)))
                else:
                    partial = b"".join(tail)
                    what = ("inside this record" if partial else "at the start of this line")
                    skipped.append((line, f"{exc.kind} stream cut {what} ({exc}); the lines before "
                                    "it were read, nothing after it is readable",
                                    raw_text(partial[:HEAD_BYTES])))
                yield GuardedBatch(str(path), next_line, raw.tell(), lines=pending,
                                   skipped=skipped)
                return
            if not chunk:
                break
            decoded_any = True
            parts = chunk.split(b"\n")
            for k, piece in enumerate(parts):
                last = k == len(parts) - 1
                if skipping is not None:
                    tail_len += len(piece)
                else:
                    tail.append(piece)
                    tail_len += len(piece)
                    if tail_len > limit:
                        skipping = (next_line + len(pending), b"".join(tail)[:HEAD_BYTES])
                        tail = []
                if last:
                    break
                # a newline ends the current line
                if skipping is not None:
                    skipped.append((skipping[0], oversize_reason(tail_len, limit),
                                    head_text(skipping[1], tail_len)))
                    if pending:
                        yield GuardedBatch(str(path), next_line, raw.tell(), lines=pending,
                                           skipped=skipped[:-1])
                        next_line += len(pending)
                        pending, skipped, pending_bytes = [], skipped[-1:], 0
                    next_line += 1
                    skipping = None
                else:
                    pending.append(b"".join(tail))
                    pending_bytes += tail_len
                tail, tail_len = [], 0
                if len(pending) >= batch_lines or pending_bytes >= limits.batch_bytes:
                    yield GuardedBatch(str(path), next_line, raw.tell(), lines=pending,
                                       skipped=skipped)
                    next_line += len(pending)
                    pending, skipped, pending_bytes = [], [], 0
        if skipping is not None:
            skipped.append((skipping[0], oversize_reason(tail_len, limit),
                            head_text(skipping[1], tail_len)))
        elif tail_len:
            pending.append(b"".join(tail))
        if pending or skipped:
            yield GuardedBatch(str(path), next_line, raw.tell(), lines=pending, skipped=skipped)


class GzipCut(Exception):
    """The compressed stream (gzip, zstd, bzip2, xz: `kind`) ends before its end marker,
    or is corrupt."""

    def __init__(self, message: str, kind: str = "gzip") -> None:
        super().__init__(message)
        self.kind = kind


# Compressed files, by name: read through as they are decompressed (bounded pieces).
COMPRESSIONS = (".gz", ".zst", ".bz2", ".xz")


def compressed(path: Path | str) -> bool:
    """Whether a file is read decompressed (its name ends with a compression's suffix)."""
    return str(path).endswith(COMPRESSIONS)


# A decompression bomb: more than MAX_EXPANSION decompressed bytes per compressed byte
# read, once past EXPANSION_FLOOR (gzip's own limit is about 1,030; JSON logs compress 5-50
# times, zstd's long mode on repetitive ones a few hundred)
MAX_EXPANSION = 2000
EXPANSION_FLOOR = 1 << 20


class DecompressionBomb(InputError):
    """A compressed input that expands past MAX_EXPANSION times its size: refused."""


def decompressed_pieces(raw, name: str) -> Iterator[bytes]:
    """The decompressed pieces (at most _CHUNK_BYTES each) of the file `raw` named `name`
    (gzip, zstd, bzip2 or xz, by its suffix); raises GzipCut after the last intact piece,
    DecompressionBomb (naming the file and the limit) when it expands past MAX_EXPANSION
    times the compressed bytes read (beyond EXPANSION_FLOOR)."""
    if name.endswith(".gz"):
        pieces = gunzip_pieces(raw)
    elif name.endswith(".zst"):
        import zstandard

        # zstd takes no output bound: 1 KiB of input at a time is at most 32 MiB out
        # (a 4-byte RLE block is 128 KiB)
        pieces = _bounded_pieces(raw, _Zstd, "zstd", (zstandard.ZstdError,), 1 << 10)
    else:
        import bz2
        import lzma

        pieces = (_bounded_pieces(raw, bz2.BZ2Decompressor, "bzip2") if name.endswith(".bz2")
                  else _bounded_pieces(raw, lzma.LZMADecompressor, "xz"))
    return _refuse_bombs(pieces, raw, name)


def _refuse_bombs(pieces: Iterator[bytes], raw, name: str) -> Iterator[bytes]:
    start = raw.tell()
    out = 0
    for piece in pieces:
        out += len(piece)
        if out > EXPANSION_FLOOR and out > MAX_EXPANSION * max(1, raw.tell() - start):
            read = raw.tell() - start
            raise DecompressionBomb(
                f"{getattr(raw, 'name', name)}: a decompression bomb: {read:,} compressed bytes "
                f"expand to more than {out:,} (over the limit of {MAX_EXPANSION:,} times, "
                f"tracerl.data.ingest.limits.MAX_EXPANSION): refused")
        yield piece


def _bounded_pieces(raw, make, kind: str, errors: tuple = (), read_bytes: int = 1 << 20
                    ) -> Iterator[bytes]:
    """Streams (frames) one after another, as `cat a.bz2 b.bz2` writes them, each through a
    fresh `make()` (`decompress(data, max_length)`, `needs_input`, `eof`, `unused_data`);
    pieces of at most _CHUNK_BYTES; a stream cut short or corrupt raises GzipCut."""
    import lzma

    decompressor, in_stream = make(), False
    while True:
        data = raw.read(read_bytes)
        if not data:
            if in_stream:
                raise GzipCut("the compressed stream ends before its end marker: truncated",
                              kind)
            return
        while data or (in_stream and not decompressor.needs_input):
            if not in_stream:
                if not data.strip(b"\0"):
                    break  # zero padding after the last stream
                decompressor, in_stream = make(), True
            try:
                out = decompressor.decompress(data, _CHUNK_BYTES)
            except (OSError, EOFError, ValueError, lzma.LZMAError, *errors) as exc:
                raise GzipCut(f"corrupt compressed data: {exc}", kind) from None
            data = b""
            for at in range(0, len(out), _CHUNK_BYTES):
                yield out[at:at + _CHUNK_BYTES]
            if decompressor.eof:
                data, in_stream = decompressor.unused_data, False


class _Zstd:
    """zstandard's decompressor in the shape `_bounded_pieces` drives: it takes no output
    bound, so its input is fed 64 KiB at a time instead."""

    needs_input = True

    def __init__(self) -> None:
        import zstandard

        self._d = zstandard.ZstdDecompressor().decompressobj()

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return self._d.decompress(data)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data


def gunzip_pieces(raw) -> Iterator[bytes]:
    """Decompressed pieces of at most _CHUNK_BYTES (a zip bomb stays bounded), every
    member of a multi-member file; raises GzipCut after the last intact piece."""
    d = zlib.decompressobj(wbits=31)
    in_member = False
    while True:
        data = raw.read(1 << 20)
        if not data:
            if in_member:
                raise GzipCut("the compressed stream ends before its end marker: truncated")
            return
        while data:
            if not in_member and not data.strip(b"\0"):
                break  # zero padding after the last member
            in_member = True
            try:
                out = d.decompress(data, _CHUNK_BYTES)
            except zlib.error as exc:
                raise GzipCut(f"corrupt compressed data: {exc}") from None
            if out:
                yield out
            if d.eof:
                data = d.unused_data
                d = zlib.decompressobj(wbits=31)
                in_member = False
            else:
                data = d.unconsumed_tail


# --- parsing with guards ----------------------------------------------------------------

def _explain_not_json(line: bytes, reason: str, max_depth: int) -> tuple[str, str]:
    """A more precise (field, reason) for a line orjson refused."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "<encoding>", (f"not valid UTF-8: byte 0x{line[exc.start]:02x} at byte "
                              f"{exc.start + 1} of the record ({exc.reason})")
    if "recursion" in reason.lower() or "depth limit" in reason.lower():
        return "<record>", depth_reason("more than 1024", max_depth)
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except _Constant as exc:
        return "<record>", (f"{exc.args[0]} is not a JSON number (NaN and Infinity are not "
                            "JSON; write null or a string)")
    except (ValueError, RecursionError):
        pass
    return "<record>", reason


class RecordRejected(ValueError):
    """A record refused by a guard: the quarantine field and the precise reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def load_record(data: bytes, limits: Limits) -> Any:
    """One record's JSON text (under max_record_bytes), parsed with the native reader's
    guards: RecordRejected names invalid UTF-8, NaN/Infinity, nesting beyond max_depth or
    beyond the parser; an integer beyond 64 bits stays exact (tracerl.data.schema.loads_exact).
    The depth is measured only when the bracket count could exceed the limit."""
    try:
        value = loads_exact(data)
    except orjson.JSONDecodeError as exc:
        raise RecordRejected(*_explain_not_json(data, f"not valid JSON: {exc}",
                                                limits.max_depth)) from None
    if data.count(b"{") + data.count(b"[") > limits.max_depth:
        depth = text_depth(data) if len(data) > 1 << 20 else json_depth(value)
        if depth > limits.max_depth:
            raise RecordRejected("<record>", depth_reason(str(depth), limits.max_depth))
    return value


def text_depth(data: bytes) -> int:
    """Nesting depth of valid JSON text, from its bytes (vectorised); the same number
    json_depth gives for the parsed value, without walking it."""
    return int(np.cumsum(bracket_steps(data), dtype=np.int64).max(initial=0))


def bracket_steps(data: bytes) -> np.ndarray:
    """Per byte of JSON text: +1 for an opening bracket, -1 for a closing one, 0 for
    any other byte and for every byte inside a string (a quote after an odd run of
    backslashes being inside one). Vectorised; int8."""
    b = np.frombuffer(data, dtype=np.uint8)
    marks = (b == 34).view(np.int8).copy()  # quotes
    slashes = np.flatnonzero(b == 92)
    if len(slashes):
        starts = np.concatenate(([True], np.diff(slashes) != 1))
        ends = np.concatenate((starts[1:], [True]))
        run_len = slashes[ends] - slashes[starts] + 1
        escaped = slashes[ends][run_len % 2 == 1] + 1  # the byte an odd run escapes
        marks[escaped[escaped < len(b)]] = 0
    inside = (np.cumsum(marks, dtype=np.int64) & 1).astype(bool)
    step = ((b == 123) | (b == 91)).astype(np.int8) - ((b == 125) | (b == 93))
    step[inside] = 0
    return step


def skipped_field(reason: str) -> str:
    """The quarantine field of a record a batch left out: over the size limit (<record>)
    or cut off by the end of a truncated file (<file>)."""
    return "<record>" if "max_record_bytes" in reason else "<file>"


class _Constant(ValueError):
    pass


def _refuse_constant(name: str) -> object:
    raise _Constant(name)


def parse_guarded(batch: Batch, limits: Limits, *, strict: bool = True) -> ParsedBatch:
    """Read and parse one batch with every guard; never raises for what the input holds."""
    lines, raw = batch.read()
    rejects: list[Reject] = []
    extra_read = 0
    for line, reason, head in getattr(batch, "skipped", ()):
        rejects.append(Reject(batch.path, line, skipped_field(reason), reason, head))
        extra_read += 1
    try:
        parsed = parse_batch(lines, batch.path, batch.first_line, raw, strict=strict,
                             max_depth=limits.max_depth)
    except Exception:  # noqa: BLE001 - one record must not cost the others
        parsed = _line_by_line(lines, batch, limits.max_depth, strict)
    refined = []
    for r in parsed.rejects:
        if r.field == "<record>" and r.reason.startswith("not valid JSON"):
            line = lines[r.source_record - batch.first_line]
            field_name, reason = _explain_not_json(line, r.reason, limits.max_depth)
            r = Reject(r.source_file, r.source_record, field_name, reason, r.raw)
        refined.append(r)
    if rejects:
        refined = sorted(refined + rejects, key=lambda r: r.source_record)
    return ParsedBatch(parsed.table, refined, parsed.read + extra_read, parsed.fast)


def _line_by_line(lines: list[bytes], batch: Batch, max_depth: int,
                  strict: bool = True) -> ParsedBatch:
    import pyarrow as pa

    tables, rejects, read = [], [], 0
    for i, line in enumerate(lines):
        number = batch.first_line + i
        try:
            one = parse_batch([line], batch.path, number, strict=strict, max_depth=max_depth)
        except Exception as exc:  # noqa: BLE001
            rejects.append(Reject(batch.path, number, "<internal>",
                                  f"internal error while parsing: {type(exc).__name__}: {exc}",
                                  raw_text(line[:HEAD_BYTES * 5])))
            read += 1
            continue
        read += one.read
        rejects += one.rejects
        if one.table.num_rows:
            tables.append(one.table)
    from tracerl.data.schema import STEP_SCHEMA

    table = pa.concat_tables(tables) if tables else STEP_SCHEMA.empty_table()
    return ParsedBatch(table, rejects, read)


# --- many small inputs ------------------------------------------------------------------

def _batch_bytes(batch: Batch) -> int:
    return batch.end - batch.start if batch.lines is None else sum(map(len, batch.lines))


def pack_batches(batches: Iterator[Batch], target_bytes: int) -> Iterator[list[Batch]]:
    """Consecutive batches grouped until a group holds target_bytes: the batches of many
    small files become one parse job and one Parquet part, not one each."""
    group: list[Batch] = []
    size = 0
    for batch in batches:
        group.append(batch)
        size += _batch_bytes(batch)
        if size >= target_bytes:
            yield group
            group, size = [], 0
    if group:
        yield group


def parse_packed(batches: list[Batch], limits: Limits, *, strict: bool = True) -> ParsedBatch:
    """parse_guarded over a group of batches as one parse (one Arrow read, not one per
    small file); lineage (file, line) is put back per row and per rejected record."""
    import pyarrow as pa

    if len(batches) == 1:
        return parse_guarded(batches[0], limits, strict=strict)
    lines: list[bytes] = []
    files: list[str] = []
    numbers: list[int] = []
    rejects: list[Reject] = []
    skipped = 0
    for b in batches:
        own, _ = b.read()
        if b.first_line == 1 and own and own[0].startswith(_BOM):
            own = [own[0][len(_BOM):], *own[1:]]
        lines += own
        files += [b.path] * len(own)
        numbers += range(b.first_line, b.first_line + len(own))
        for line, reason, head in getattr(b, "skipped", ()):
            rejects.append(Reject(b.path, line, skipped_field(reason), reason, head))
            skipped += 1
    parsed = parse_guarded(Batch("<packed>", 2, 0, lines=lines), limits,  # numbered from 2:
                           strict=strict)
    # no byte-order-mark handling again (done per file above)
    table = parsed.table
    if table.num_rows:
        at = np.asarray(table.column("source_record").to_numpy()) - 2
        file_arr = pa.array(np.asarray(files, dtype=object)[at], type=pa.string())
        line_arr = pa.array(np.asarray(numbers, dtype=np.int64)[at])
        table = table.set_column(table.schema.get_field_index("source_file"),
                                 table.schema.field("source_file"), file_arr)
        table = table.set_column(table.schema.get_field_index("source_record"),
                                 table.schema.field("source_record"), line_arr)
    for r in parsed.rejects:
        i = r.source_record - 2
        rejects.append(Reject(files[i], numbers[i], r.field, r.reason, r.raw))
    order = {f: k for k, f in enumerate(dict.fromkeys(b.path for b in batches))}
    rejects.sort(key=lambda r: (order[r.source_file], r.source_record))
    return ParsedBatch(table, rejects, parsed.read + skipped, parsed.fast)
