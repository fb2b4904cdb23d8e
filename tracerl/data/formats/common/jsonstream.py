"""Stream one large JSON object without parsing it whole: its top-level members, and the
elements of one array member one at a time (a tau2 results file's `simulations`); or the
elements of a top-level array (an openai-chat list of conversations).

Structure is found with numpy over 1 MB chunks: the positions of quotes, backslashes and
structural bytes are found in three passes; unescaped quotes (an even run of backslashes
before them) tell which structural bytes are outside strings, a cumulative sum of their
brackets gives the depth, and only the few at depth <= 2 reach Python. Each element is a
record under the native reader's guards (tracerl.data.ingest.limits.load_record), parsed alone:
memory holds one element (plus a chunk), and an element over max_record_bytes is dropped
as it passes the limit, so not even that one is held whole.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracerl.data.ingest.limits import (
    HEAD_BYTES,
    GzipCut,
    Limits,
    RecordRejected,
    compressed,
    decompressed_pieces,
    head_text,
    load_record,
    oversize_reason,
)
from tracerl.data.ingest.parse import _BOM, raw_text
from tracerl.data.ingest.reader import InputError

CHUNK_BYTES = 1 << 20
_QUARANTINED = 1000  # bytes of a rejected element's text kept in quarantine
_ARRAY = "array"  # the key a top-level array is read under (stream_array)
_OPEN = (ord("{"), ord("["))
_CLOSE = (ord("}"), ord("]"))
_COMMA, _COLON, _QUOTE, _BACKSLASH = ord(","), ord(":"), ord('"'), ord("\\")


def _chunks(path: Path, chunk_bytes: int, wrap: bytes | None = None) -> Iterator[bytes]:
    """The file's bytes (.gz decompressed) in pieces of at most chunk_bytes; a cut or
    corrupt .gz raises GzipCut after its last intact piece (gzip.GzipFile.read would drop
    the piece the cut is in). `wrap`: the file is read as the value of that key of an
    object (a top-level array is then streamed as an object's member). A byte-order mark
    at the start of the file is dropped."""
    if wrap is not None:
        yield b'{"' + wrap + b'":'
    with open(path, "rb") as f:
        pieces = decompressed_pieces(f, path.name) if compressed(path) else iter(
            lambda: f.read(chunk_bytes), b"")
        first = True
        for piece in pieces:
            if first:  # a UTF-8 byte-order mark at the start of the file is not data
                first = False
                if piece.startswith(_BOM):
                    piece = piece[len(_BOM):]
            for at in range(0, len(piece), chunk_bytes):
                yield piece[at:at + chunk_bytes]
    if wrap is not None:
        yield b"}"


def first_byte(path: Path) -> bytes:
    """The first byte of the file's JSON text (after a byte-order mark and whitespace);
    b"" for a file with none. A .gz that cannot be read gives b"" only when empty."""
    try:
        for chunk in _chunks(path, CHUNK_BYTES):
            text = chunk[len(_BOM):] if chunk.startswith(_BOM) else chunk
            text = text.lstrip(b" \t\r\n")
            if text:
                return text[:1]
    except GzipCut as exc:
        raise InputError(f"{path}: not a readable gzip file: {exc}") from None
    return b""


def read_capped(path: Path, limit: int) -> tuple[bytes | None, int, bytes, str | None]:
    """(the file's text when it is at most `limit` bytes else None, its size, its first
    bytes, why it ends early: a cut .gz) without holding more than limit + a chunk."""
    data: list[bytes] = []
    size = 0
    head = b""
    try:
        for chunk in _chunks(path, CHUNK_BYTES):
            if len(head) < HEAD_BYTES:
                head += chunk[:HEAD_BYTES]
            size += len(chunk)
            if size <= limit:
                data.append(chunk)
            else:
                data = []
    except GzipCut as exc:
        return None, size, head, f"{exc.kind} stream cut ({exc})"
    return (b"".join(data) if size <= limit else None), size, head, None


def stream_array(path: Path, limits: Limits | None = None,
                 chunk_bytes: int = CHUNK_BYTES) -> Iterator[Element]:
    """The elements of a file whose top level is a JSON array, each a record under the
    same guards as stream_object's (over the limit, not JSON, too deep, cut)."""
    for _, _, value in _walk(path, _ARRAY, chunk_bytes, limits or Limits(), items=True,
                             wrap=True):
        yield value


_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[*_OPEN, *_CLOSE, _COMMA, _COLON]] = True
_DEPTH_STEP = np.zeros(256, dtype=np.int64)
_DEPTH_STEP[list(_OPEN)] = 1
_DEPTH_STEP[list(_CLOSE)] = -1


class _Scanner:
    """Structural characters outside strings, with the depth after each, chunk by chunk.

    Three passes over each chunk (quotes, backslashes, structural bytes); everything after
    works on those positions only, so a long string costs little."""

    def __init__(self) -> None:
        self.in_string = False
        self.backslashes = 0  # backslashes ending the previous chunk
        self.depth = 0
        self.offset = 0

    def _backslashes_before(self, at: np.ndarray, slashes: np.ndarray) -> np.ndarray:
        """The run of backslashes right before each position in `at` (0 when none); a run
        reaching the chunk's start continues the previous chunk's."""
        if not len(slashes):
            return np.where(at == 0, self.backslashes, 0)
        starts = np.concatenate(([0], np.flatnonzero(np.diff(slashes) != 1) + 1))
        # where the run of consecutive backslashes each backslash belongs to starts
        run_start = np.repeat(slashes[starts], np.diff(np.append(starts, len(slashes))))
        last = np.searchsorted(slashes, at) - 1  # the last backslash before each position
        safe = np.maximum(last, 0)
        adjacent = (last >= 0) & (slashes[safe] == at - 1)
        runs = np.where(adjacent, at - run_start[safe], 0)
        carried = (adjacent & (run_start[safe] == 0)) | (at == 0)
        return runs + np.where(carried, self.backslashes, 0)

    def scan(self, chunk: bytes, max_depth: int) -> list[tuple[int, int, int]]:
        """(global position, byte, depth after it) of structural bytes at depth <= max_depth
        (an opening bracket counts when it opens depth <= max_depth + 1); a closing bracket
        with no opening one comes with depth -1, and what follows it means nothing."""
        b = np.frombuffer(chunk, dtype=np.uint8)
        n = len(b)
        quotes = np.flatnonzero(b == _QUOTE)
        slashes = np.flatnonzero(b == _BACKSLASH)
        # a quote after an odd run of backslashes is escaped; only the quotes right after a
        # backslash (or at the chunk's start after one) need their run counted
        after_slash = b[np.maximum(quotes - 1, 0)] == _BACKSLASH
        if len(quotes) and quotes[0] == 0:
            after_slash[0] = self.backslashes > 0
        if after_slash.any():
            maybe = np.flatnonzero(after_slash)
            escaped = maybe[self._backslashes_before(quotes[maybe], slashes) % 2 == 1]
            quotes = np.delete(quotes, escaped)
        structural = np.flatnonzero(_STRUCTURAL[b])
        # inside a string: an odd number of quotes before it (a closing quote reads even)
        inside = (np.searchsorted(quotes, structural) + self.in_string) % 2 == 1
        pos = structural[~inside]
        kind = b[pos]
        step = _DEPTH_STEP[kind]
        depth_after = self.depth + np.cumsum(step)
        depth_at = np.where(step > 0, depth_after - 1, depth_after)
        keep = depth_at <= max_depth
        events = list(zip((pos[keep] + self.offset).tolist(), kind[keep].tolist(),
                          depth_after[keep].tolist(), strict=True))
        if len(depth_after):  # a closer with no opener comes as depth -1: the caller stops
            self.depth = int(depth_after[-1])
        self.in_string = bool((len(quotes) + self.in_string) % 2)
        if n:
            self.backslashes = int(self._backslashes_before(np.array([n]), slashes)[0])
        self.offset += n
        return events


@dataclass
class Element:
    """One element of the streamed array: its value, or why it was rejected (and the
    head of its text: an element over the size limit is never held whole)."""

    index: int
    value: Any = None
    rejected: RecordRejected | None = None
    text: str | None = None
    skipped: bool = False  # outside the span asked for: neither parsed nor checked


@dataclass
class ObjectPlan:
    """What stream_object's first pass finds in a file: its top-level members but the
    array (`header`), the keys it has, and where each element of the array is
    (`elements`: (index, start, end) byte offsets, after a byte-order mark of
    `bom` bytes) so that the elements are read by seeking, not by scanning the file again;
    None when they cannot be (a .gz, or a file that ends inside the array: the second pass
    scans, and says where it ends). Small: a slice of the file read in another process is
    handed one (tracerl.data.formats.tau2.read.plan_slices)."""

    header: dict[str, Any]
    seen: list[str] | None  # None: an empty file
    elements: tuple[array, array, array] | None
    bom: int = 0


def plan_object(path: Path, array_key: str, limits: Limits | None = None,
                chunk_bytes: int = CHUNK_BYTES) -> ObjectPlan:
    """stream_object's first pass (see there): the members, and where the elements are."""
    limits = limits or Limits()
    header: dict[str, Any] = {}
    gz = compressed(path)
    elements = None if gz else (array("q"), array("q"), array("q"))
    for kind, key, value in _walk(path, array_key, chunk_bytes, limits, items=False,
                                  noted=elements):
        if kind == "member":
            header[key] = value
        else:  # "unindexed": the file ends inside the array
            elements = None
    seen = header.pop("__seen__", None)
    bom = 0
    if elements is not None:
        with open(path, "rb") as f:
            bom = len(_BOM) if f.read(len(_BOM)) == _BOM else 0
    return ObjectPlan(header, seen, elements, bom)


def stream_object(path: Path, array_key: str, limits: Limits | None = None,
                  chunk_bytes: int = CHUNK_BYTES, required: bool = True,
                  span: tuple[int, int | None] | None = None,
                  plan: ObjectPlan | None = None
                  ) -> tuple[dict[str, Any], Iterator[Element]]:
    """(every top-level member but `array_key`, an iterator over the elements of the
    `array_key` array). The first is read in a first pass that skips the array and notes
    where each element is (plan_object; `plan`: that pass made already, for this file);
    the iterator reads the elements from there (or, when the first pass could not note
    them, makes a second pass). InputError when the file is not such an object, or a
    member other than the array is over max_record_bytes.

    Each element is a record under the native reader's guards (tracerl.data.ingest.limits): one
    over max_record_bytes is rejected once it passes the limit and its bytes are dropped
    (memory: the limit plus a chunk); one that is not JSON, too deep, or cut by the end of
    the file (or of a truncated .gz: the elements before it are read) is rejected with its
    reason. An empty file (whitespace, a byte-order mark) has no members and no elements.
    required=False: a file without the array has no elements (not an error).
    span=(start, end): only the elements that start at a byte offset in [start, end) (end
    None: to the end) are read; the others come as `skipped` Elements (a file split among
    workers by byte ranges reads each element once, in one of them)."""
    limits = limits or Limits()
    if plan is None:
        plan = plan_object(path, array_key, limits, chunk_bytes)
    header, seen = dict(plan.header), plan.seen
    if seen is None:  # an empty file
        return {}, iter(())
    if array_key not in seen:
        if not required:
            return header, iter(())
        raise InputError(f"{path}: no top-level `{array_key}` array")
    if plan.elements is not None:
        return header, _indexed(path, plan, limits, span)
    return header, (value for _, _, value in _walk(path, array_key, chunk_bytes, limits,
                                                   items=True, span=span))


def _indexed(path: Path, plan: ObjectPlan, limits: Limits,
             span: tuple[int, int | None] | None) -> Iterator[Element]:
    """The elements a plan found, read where they are: the Elements _walk's second pass
    gives (the same skipped ones, rejections and texts)."""
    limit = limits.max_record_bytes
    first, last = (0, None) if span is None else span
    indices, starts, ends = plan.elements
    with open(path, "rb") as f:
        for index, start, end in zip(indices, starts, ends, strict=True):
            if last is not None and start >= last:
                return  # the rest is another span's
            if start < first:
                yield Element(index, skipped=True)
                continue
            size = end - start
            f.seek(plan.bom + start)
            if size > limit:
                head = f.read(HEAD_BYTES)
                yield Element(index, rejected=RecordRejected("<record>",
                                                             oversize_reason(size, limit)),
                              text=head_text(head.lstrip(), size))
                continue
            data = f.read(size)
            try:
                yield Element(index, load_record(data, limits))
            except RecordRejected as exc:
                yield Element(index, rejected=exc, text=raw_text(data.strip()[:_QUARANTINED]))


def _blank(data: bytes) -> bool:
    """Nothing but JSON whitespace: no element (an empty array, or `[a,,b]`)."""
    return not data.strip(b" \t\r\n")


def _walk(path: Path, array_key: str, chunk_bytes: int, limits: Limits, items: bool,
          wrap: bool = False, span: tuple[int, int | None] | None = None,
          noted: tuple[array, array, array] | None = None
          ) -> Iterator[tuple[str, Any, Any]]:
    """Pass 1 (items=False): ("member", key, value) for members other than array_key, then
    ("member", "__seen__", keys seen), unless the file is empty; with `noted`, the
    (index, start, end) of each element that is not blank appended to its three arrays,
    and ("unindexed", None, None) when the file ends inside the array (what the second
    pass says of that cannot be noted). Pass 2: ("item", index, Element) per array
    element."""
    indexing = noted is not None and not items
    scanner = _Scanner()
    limit = limits.max_record_bytes
    buf, buf_start = b"", 0
    started = False
    key: str | None = None
    member_start = value_start = item_start = -1
    in_array = False
    index = 0
    seen: list[str] = []
    oversize_head: bytes | None = None  # the first bytes of the element over the limit
    blank = True
    # the bracket open at depths 1..3 (the object, the array, an element): the scanner's
    # depth counts brackets of either kind, so a `]` closing an element's `{` would end it
    # there and split the rest of it at its commas into records of their own
    opened, opened_at = [0, 0, 0, 0], [0, 0, 0, 0]
    shift = len(array_key.encode()) + 4 if wrap else 0  # _chunks' `{"key":` before the file

    def piece(start: int, end: int) -> bytes:
        return buf[start - buf_start:end - buf_start]

    def parse(start: int, end: int, what: str) -> Any:
        try:
            return orjson.loads(piece(start, end))
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}: {what} at byte {start} is not valid JSON: {exc}") \
                from None

    def selected() -> bool:
        return span is None or (span[0] <= item_start
                                and (span[1] is None or item_start < span[1]))

    def element(end: int) -> Element:
        if not selected():
            return Element(index, skipped=True)
        if oversize_head is not None or end - item_start > limit:
            head = oversize_head if oversize_head is not None else piece(item_start,
                                                                         item_start + HEAD_BYTES)
            size = end - item_start
            return Element(index, rejected=RecordRejected("<record>",
                                                          oversize_reason(size, limit)),
                           text=head_text(head.lstrip(), size))
        data = piece(item_start, end)
        try:
            return Element(index, load_record(data, limits))
        except RecordRejected as exc:
            return Element(index, rejected=exc, text=raw_text(data.strip()[:_QUARANTINED]))

    def cut(what: str) -> Element:
        if not selected():
            return Element(index, skipped=True)
        size = scanner.offset - item_start
        head = oversize_head if oversize_head is not None else piece(item_start,
                                                                     item_start + HEAD_BYTES)
        return Element(index, rejected=RecordRejected("<file>", (
            f"{what} inside this record, after {size:,} bytes of it; the records before it "
            "were read, nothing after it is readable")), text=raw_text(head.strip()))

    def blank_at(end: int) -> bool:  # _blank(piece(item_start, end)), seldom copying it
        return not piece(item_start, min(end, item_start + 16)).strip(b" \t\r\n") \
            and _blank(piece(item_start, end))

    def note(end: int) -> None:
        noted[0].append(index)
        noted[1].append(item_start)
        noted[2].append(end)

    try:
        for chunk in _chunks(path, chunk_bytes, array_key.encode() if wrap else None):
            if blank:  # nothing but whitespace (and a leading byte-order mark) so far
                blank = not (chunk[len(_BOM):] if scanner.offset == 0 and chunk.startswith(_BOM)
                             else chunk).strip(b" \t\r\n")
            buf += chunk
            for pos, byte, depth in scanner.scan(chunk, max_depth=2):
                if depth < 0:
                    raise ValueError(f"the {chr(byte)} at byte {pos - shift} closes nothing")
                if byte in _OPEN:
                    opened[depth], opened_at[depth] = byte, pos
                elif byte in _CLOSE and _CLOSE.index(byte) != _OPEN.index(opened[depth + 1]):
                    mismatch = (f"the {chr(byte)} at byte {pos - shift} closes the "
                                f"{chr(opened[depth + 1])} at byte {opened_at[depth + 1] - shift}")
                    if not (in_array and depth == 2):
                        raise ValueError(mismatch)
                    # inside an element: where it (and each after it) ends is unknowable;
                    # the elements before it were read, as when the file ends there
                    if items:
                        yield "item", index, cut(mismatch)
                    else:
                        yield "unindexed", None, None
                        yield "member", "__seen__", seen
                    return
                if not started:
                    if byte != _OPEN[0] or depth != 1:
                        raise InputError(f"{path}: the top level is not a JSON object")
                    started, member_start = True, pos + 1
                elif depth == 1 and byte == _COLON and key is None:
                    key = parse(member_start, pos, "a key")
                    value_start = pos + 1
                    seen.append(key)
                elif depth == 2 and byte == _OPEN[1] and key == array_key and not in_array \
                        and not piece(value_start, pos).strip():
                    in_array, item_start = True, pos + 1
                elif in_array and depth == 2 and byte == _COMMA:
                    if items and (oversize_head is not None or not _blank(piece(item_start, pos))):
                        yield "item", index, element(pos)  # a blank one is not a record
                    elif indexing and (oversize_head is not None or not blank_at(pos)):
                        note(pos)
                    index, item_start, oversize_head = index + 1, pos + 1, None
                    if span is not None and span[1] is not None and item_start >= span[1]:
                        return  # the rest is another span's
                elif in_array and depth == 1 and byte == _CLOSE[1]:
                    if items and (oversize_head is not None or not _blank(piece(item_start, pos))):
                        yield "item", index, element(pos)
                    elif indexing and (oversize_head is not None or not blank_at(pos)):
                        note(pos)
                    in_array, oversize_head = False, None
                elif (depth == 1 and byte == _COMMA) or (depth == 0 and byte == _CLOSE[0]):
                    if key is None:
                        raise InputError(f"{path}: a member without a key at byte {pos}")
                    if key != array_key and not items:
                        yield "member", key, parse(value_start, pos, f"member {key!r}")
                    key, member_start = None, pos + 1
            # Keep only the bytes a pending key, member value or element still needs.
            if not started:
                keep = scanner.offset
            elif in_array:
                held = items or indexing  # the element's bytes (to parse, or to see blank)
                keep = item_start if held and oversize_head is None else scanner.offset
                if held and oversize_head is None and scanner.offset - item_start > limit:
                    oversize_head = piece(item_start, item_start + HEAD_BYTES)  # drop the rest
                    keep = scanner.offset
            elif key is None:
                keep = member_start
            elif key == array_key or not items:
                keep = value_start
                if key != array_key and scanner.offset - value_start > limit:
                    raise InputError(f"{path}: top-level member {key!r} is over "
                                     f"ingest.max_record_bytes ({limit:,} bytes)")
            else:
                keep = scanner.offset
            keep = max(min(keep, scanner.offset), buf_start)
            buf, buf_start = buf[keep - buf_start:], keep
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{path}: not a JSON {'array' if wrap else 'object'}: {exc}") \
            from None
    except (OSError, GzipCut) as exc:
        if not in_array:
            raise InputError(f"{path}: cannot read: {exc}") from exc
        if items:  # a truncated .gz inside the array: what was intact is read
            yield "item", index, cut(f"{exc.kind} stream cut ({exc})" if isinstance(exc, GzipCut)
                                     else f"cannot read past this point ({exc})")
        else:
            yield "unindexed", None, None
            yield "member", "__seen__", seen
        return
    if blank:
        return  # an empty file: nothing in it
    if in_array:  # the file ends inside the array: what was intact is read
        if items:
            yield "item", index, cut("the file ends")
        else:
            yield "unindexed", None, None
            yield "member", "__seen__", seen
        return
    if not started or scanner.depth != 0 or scanner.in_string:
        raise InputError(f"{path}: the file ends before its top-level object is closed")
    if not items:
        yield "member", "__seen__", seen
