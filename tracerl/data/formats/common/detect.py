"""`--format auto`: which format reads a file, from the shape of its first record.

The file is first recognised as a container: a gzip file is read through (its first
bytes decompressed); a zip, zstd, bzip2 or xz file, or bytes that are not text, are
named as such and refused (`refusal`), but a zip that a format's `detect` claims
(`Sniffed.container`: Inspect AI's `.eval`) is that format's. Then the first record is
read the way its reader would read it (the first non-blank line of JSON Lines, the first
element of a top-level array, the whole of a small document, the first value of JSON
values one after another, a text file of server-sent events); a document too large to
parse for this is judged by the keys near its start. Each format's own `detect`
(tracerl.config.formats.Format) is then asked, in detection order (`Format.priority`);
the first that says yes reads the file. When none does, the file is refused once, by
name, with the formats whose shape is nearest and how to add one — never read as
native steps line by line. A format named (`--format`) is checked the same way
(`forced_mismatch`): a file whose first record is another format's is refused.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.ingest.parse import _BOM

_SMALL_DOCUMENT = 8 << 20

# Containers told by their first bytes (magic numbers), with what to do about them.
_CONTAINERS = (
    (b"PK\x03\x04", "a zip archive", "unzip it and ingest the folder"),
    (b"PK\x05\x06", "an empty zip archive", "unzip it and ingest the folder"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it (`zstd -d`) and ingest the file"),
    (b"BZh", "bzip2-compressed", "decompress it (`bunzip2`) and ingest the file"),
    (b"\xfd7zXZ\x00", "xz-compressed", "decompress it (`unxz`) and ingest the file"),
    (b"\x1f\x8b", "gzip-compressed without a .gz name", "name it <file>.gz"),
)


@dataclass
class Sniffed:
    """What detection knows of a file: a format's `detect` judges it.

    path: the file. head: its first bytes (decompressed, without a byte-order mark or
    leading blanks; for JSON Lines the first line's file head). record: its first record
    (a top-level array's first element; a bare list of messages as `{"messages": [...]}`),
    None when there is none that parses. jsonl: the file is JSON Lines. array: the file is
    a top-level JSON array (`record` None: it is empty). keys_only: the first record is too
    large (or too broken) to parse here: judge by the keys near the start (`has`).
    event_stream: a text file of server-sent events (`event:` / `data:` lines).
    container: "zip" for a zip archive (no record: a format whose files are zips says)."""

    path: Path
    head: bytes
    record: Any = None
    jsonl: bool = False
    array: bool = False
    keys_only: bool = False
    event_stream: bool = False
    container: str | None = None  # "zip": a zip archive, asked before it is refused
    _keys_head: bytes = field(default=b"", repr=False)

    def has(self, *keys: bytes) -> bool:
        """Whether one of `keys` appears as a JSON key near the start."""
        head = self._keys_head or self.head
        return any(b'"' + k + b'"' in head for k in keys)


class Refused(ValueError):
    """A file no format reads: str() says what it is, which formats are nearest and how
    to read it."""

    def __init__(self, path: Path, what: str, hint: str) -> None:
        self.path, self.what, self.hint = path, what, hint
        super().__init__(f"{path}: {what}; {hint}")


_EMPTY = "is empty\0there is nothing to read"


def detect(path: Path, head_bytes: int = 1 << 20) -> str:
    """The format of `path`; Refused when no format reads it. An empty file (blanks, a
    byte-order mark) holds no record: the native reader reads it (nothing)."""
    sniffed = _sniffed(path, head_bytes)
    if sniffed == _EMPTY:
        from tracerl.config.formats import detection_order

        return next(f.name for f in detection_order() if f.native)
    found = None if isinstance(sniffed, str) else _judged(sniffed)
    if found is None:
        raise refusal(path, head_bytes)
    return found


def sniff(path: Path, head_bytes: int = 1 << 20) -> str | None:
    """The format of `path`, or None when it is unreadable, empty, a container no format
    reads, or of no known shape (`refusal` says which)."""
    sniffed = _sniffed(path, head_bytes)
    return None if isinstance(sniffed, str) else _judged(sniffed)


def _judged(s: Sniffed) -> str | None:
    """`judge`, and for JSON Lines whose first line does not parse and says nothing by its
    keys, the first line of the head that parses (a broken first line is one bad record,
    its reader quarantines it, not a reason to refuse the file)."""
    found = judge(s)
    if found is not None or not (s.jsonl and s.keys_only):
        return found
    for line in s.head.split(b"\n")[1:50]:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        return judge(Sniffed(s.path, s.head, _record_of(value, jsonl=True), jsonl=True))
    return None


def judge(s: Sniffed) -> str | None:
    """The first format, in detection order, whose `detect` says yes."""
    from tracerl.config.formats import detection_order

    for fmt in detection_order():
        detector = fmt.detector()
        if detector is not None and detector(s):
            return fmt.name
    return None


def classify(value: Any, path: Path | None = None) -> str | None:
    """The format whose record `value` is, or None."""
    return judge(Sniffed(path or Path("record.json"), b"", _record_of(value, jsonl=True)))


def refusal(path: Path, head_bytes: int = 1 << 20) -> Refused:
    """Why no format reads `path`, in one line: what the file is, the nearest formats,
    how to add one."""
    sniffed = _sniffed(path, head_bytes)
    if isinstance(sniffed, str):
        return Refused(path, *sniffed.split("\0", 1))
    keys = sorted(sniffed.record.keys())[:12] if isinstance(sniffed.record, dict) else []
    what = ("its first record (keys: " + ", ".join(keys) + ")" if keys else
            "its first record") + " is of no known log format"
    return Refused(path, what, f"nearest formats: {', '.join(nearest(sniffed))}; pass "
                   "--format NAME if it is one of them, or add a format (README: "
                   "\"Your own format\")")


def forced_mismatch(path: Path, fmt: Any, head_bytes: int = 1 << 20) -> str | None:
    """Why `path` is not of the format `fmt` (a `Format`) it was named with (`--format`),
    in one line naming the file, the format, what it expects and what was found; None when
    it may be: `fmt` has no detector, its detector accepts the first record, the file is
    empty, or no format reads it either (a shape no detector knows: naming a format is how
    such a file is read). Never a green empty dataset from a file of another format."""
    detector = fmt.detector()
    if detector is None:
        return None
    sniffed = _sniffed(path, head_bytes)
    if sniffed == _EMPTY:
        return None
    if isinstance(sniffed, str):  # a container or bytes that are no text
        found = sniffed.split("\0", 1)[0]
        return f"{path}: --format {fmt.name} expects {_expects(fmt)}, but the file {found}"
    if detector(sniffed):
        return None
    other = _judged(sniffed)  # (of JSON Lines with a broken first line: a later line's)
    if other is None or other == fmt.name:
        return None
    return (f"{path}: --format {fmt.name} expects {_expects(fmt)}, but its first record is "
            f"of format {other}; pass --format {other} or auto")


def _expects(fmt: Any) -> str:
    """What a format's file is, briefly: its README row's first clause."""
    what = fmt.readme[0].split(" (", 1)[0].split(":", 1)[0].strip(" `") if fmt.readme[0] \
        else ""
    return f"{what or 'its files'}, a record per {fmt.counts}"


def nearest(s: Sniffed, n: int = 3) -> list[str]:
    """The formats whose names or documented shapes share most words with the record's
    keys (a hint for the refusal, not a detection)."""
    from tracerl.config.formats import detection_order

    keys = {str(k).lower() for k in s.record} if isinstance(s.record, dict) else set()
    scored = []
    for fmt in detection_order():
        words = {w.strip("`,.;:()'\"").lower() for w in fmt.doc.split()}
        score = len(keys & words) + sum(difflib.SequenceMatcher(None, k, fmt.name).ratio()
                                        > 0.6 for k in keys)
        scored.append((-score, fmt.priority, fmt.name))
    return [name for _, _, name in sorted(scored)[:n]]


def _sniffed(path: Path, head_bytes: int) -> Sniffed | str:
    """What detection knows of `path`, or why there is nothing to judge ("what\\0hint")."""
    from tracerl.data.formats import _head
    from tracerl.data.formats.common.records import first_of_values, is_json_lines

    try:
        head = _head(path, head_bytes)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})\0check the path and its permissions"
    for magic, what, hint in _CONTAINERS:
        if head.startswith(magic) and not (magic == b"\x1f\x8b" and path.name.endswith(".gz")):
            if magic == b"PK\x03\x04":  # a format whose files are zips (Inspect's .eval)
                zipped = Sniffed(path, head, container="zip")
                if judge(zipped) is not None:
                    return zipped
            return f"is {what}\0{hint}"
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    text = head.lstrip(b" \t\r\n")
    if not text:
        return _EMPTY
    if b"\0" in text[:4096]:
        return "is binary, not text\0a log format is JSON or JSON Lines text"
    if text.startswith((b"event:", b"data:")):  # a server-sent event stream saved as text
        return Sniffed(path, text, event_stream=True)
    if is_json_lines(path):
        line = text.split(b"\n", 1)[0]
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return Sniffed(path, text, jsonl=True, keys_only=True, _keys_head=line)
        return Sniffed(path, text, _record_of(value, jsonl=True), jsonl=True)
    value = _first_value(path, text)
    if value is _TOO_LARGE or value is None:
        # JSON values one after another (Python OpenTelemetry's console exporter writes
        # each span as an indented object): judged by the first of them
        first = first_of_values(text)
        if first is not None:
            return Sniffed(path, text, _record_of(first, jsonl=True))
        return Sniffed(path, text, keys_only=True)
    if isinstance(value, list):
        return Sniffed(path, text, _record_of(value, jsonl=False), array=True)
    return Sniffed(path, text, value)


def _record_of(value: Any, jsonl: bool) -> Any:
    """The record detection judges: a bare list of messages as `{"messages": [...]}`; of
    another top-level array (not a line), its first element."""
    if isinstance(value, list):
        first = value[0] if value else None
        if isinstance(first, dict) and "role" in first:
            return {"messages": value}
        return None if jsonl else first
    return value


_TOO_LARGE = object()


def _first_value(path: Path, text: bytes) -> Any:
    """The document (small enough), or for a top-level array its first element(s)."""
    from tracerl.data.formats.common.jsonstream import stream_array
    from tracerl.data.ingest.limits import Limits

    if text[:1] == b"[":
        try:
            first = next(stream_array(path, Limits(max_record_bytes=_SMALL_DOCUMENT)), None)
        except ValueError:
            return None
        if first is None:
            return []
        return [first.value] if first.rejected is None else None
    size = path.stat().st_size
    if size > _SMALL_DOCUMENT and not path.name.endswith(".gz"):
        return _TOO_LARGE
    from tracerl.data.formats.common.jsonstream import read_capped

    data, _, _, _ = read_capped(path, _SMALL_DOCUMENT)
    if data is None:
        return _TOO_LARGE
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
