"""Which OpenTelemetry files of one input must be read together (bounded memory).

The OTel reader joins spans across files (a trace cut across the collector's rotated
files). Reading every file of a folder as one would hold the whole folder's spans in one
process; only files that share a link need it. A file's link keys are found by a cheap
scan of its raw text (a bytes regex, no JSON parse; a .gz decompressed in pieces):

- trace ids: OTLP `traceId`, Jaeger `traceID`, the console exporter's `context.trace_id`
  (and the `trace_id` of log records), spelled as the reader spells a span's trace
  (`otel._hex`);
- conversation ids: the string value of every attribute the reader joins spans into a
  conversation by (`otel.CONVERSATION_KEYS`), as a plain key (`"key": "value"`), an OTLP
  attribute (`{"key": ..., "value": {"stringValue": ...}}`, either order) or a Jaeger tag
  (`{"key": ..., "type": "string", "value": ...}`).

Trace ids and conversation ids are one name space (a conversation without an id is named
by its trace). Files sharing any key are joined (union-find); each connected group of
two or more is read as one, every other file alone. The scan errs only one way that
matters: a missed link reads two parts of one episode apart, and the runner quarantines
the duplicate episode id with its hint (never a silent loss); a key seen where the reader
would not use it only joins files that did not need it (memory, not output).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

from tracerl.data.adapters.otel import CONVERSATION_KEYS, _hex

_CHUNK = 8 << 20  # bytes of text scanned at a time
_OVERLAP = 4096  # carried to the next piece: a key cut by a piece's end is seen whole
_VALUE = rb'"((?:[^"\\]|\\.){1,1024})"'
_TRACE = re.compile(rb'"(?:traceId|traceID|trace_id)"\s*:\s*' + _VALUE)


def _conversation_pattern(keys: Sequence[str]) -> re.Pattern[bytes]:
    key = rb"(?:" + rb"|".join(re.escape(json.dumps(k).encode()) for k in keys) + rb")"
    kind = rb'(?:"type"\s*:\s*"[^"]{0,16}"\s*,\s*)?'
    return re.compile(
        key + rb"\s*(?::\s*" + _VALUE  # "key": "value"
        + rb"|,\s*" + kind + rb'"value"\s*:\s*(?:\{\s*"stringValue"\s*:\s*)?' + _VALUE
        + rb")"  # OTLP {"key", "value": {"stringValue"}} / Jaeger {"key", "type", "value"}
        + rb'|"(?:stringValue|value)"\s*:\s*' + _VALUE  # the same with the key after
        + rb'\s*\}?\s*,\s*' + kind + rb'"key"\s*:\s*' + key)


_CONVERSATION = _conversation_pattern(CONVERSATION_KEYS)


def _text(raw: bytes) -> str | None:
    try:
        return json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode()
    except (ValueError, UnicodeDecodeError):
        return None


def _pieces(path: Path):
    """The file's text in pieces (a .gz decompressed as it goes; a cut or corrupt .gz
    up to where it can be read; a file that cannot be opened: nothing, the reader says
    why)."""
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as f:
            while piece := f.read(_CHUNK):
                yield piece
    except (OSError, EOFError, zlib.error):
        return


def link_keys(path: Path | str) -> set[str]:
    """The trace and conversation ids a file's raw text names (see the module)."""
    raw: set[bytes] = set()
    traces: set[bytes] = set()
    tail = b""
    for piece in _pieces(Path(path)):
        text = tail + piece
        traces.update(m.group(1) for m in _TRACE.finditer(text))
        for m in _CONVERSATION.finditer(text):
            raw.update(g for g in m.groups() if g is not None)
        tail = text[-_OVERLAP:]
    keys = {k for k in map(_text, raw) if k}
    keys.update(filter(None, (_hex(t) for t in map(_text, traces) if t)))
    return keys


def linked_groups(paths: Sequence[Path | str]) -> list[list[int]]:
    """The files (their places in `paths`) in connected groups of shared link keys: each
    group in order of its first file, its files in their order; a file that shares no
    key with another is a group of its own."""
    parent = list(range(len(paths)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}  # a key -> the first file that names it
    for i, path in enumerate(paths):
        for key in link_keys(path):
            j = first.setdefault(key, i)
            if j != i:
                a, b = root(i), root(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(paths)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())
