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
by its trace). Files sharing any key are joined (a union-find: the runner's
`linked_groups`); each connected group of two or more is read as one, every other file
alone. The scan errs only one way that matters: a missed link reads two parts of one
episode apart, and the runner quarantines the duplicate episode id with its hint (never a
silent loss); a key seen where the reader would not use it only joins files that did not
need it (memory, not output).

The same scan of a batch of a large JSON Lines file's lines (`batch_keys`) tells the
runner which batches must be read together: every other batch is a job of its own.

A file or batch holding a span without a trace id also names `UNTRACED`: one read joins
every such span into one trace `""` (its conversation when no conversation id names one,
and the name space its parent ids are looked up in), so all those files (batches) are
read together. The scan cannot see which object a key belongs to; it counts, and errs
towards joining: more span id keys (or span start time keys) than trace id keys, or a
trace id that is empty or null, marks it (a Jaeger trace's own `traceID` beside its
`spans` is not counted as a span's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats.otel_genai.read import CONVERSATION_KEYS
from tracerl.data.formats.otel_genai.spans import _hex

_CHUNK = 8 << 20  # bytes of text scanned at a time
_OVERLAP = 4096  # carried to the next piece: a key cut by a piece's end is seen whole
_VALUE = rb'"([^"\\]{1,1024}|(?:[^"\\]|\\.){1,1024})"'  # a JSON string's text
_TRACE = re.compile(rb'"trace(?:Id|ID|_id)"\s*:\s*' + _VALUE)
_KIND = rb'(?:"type"\s*:\s*"[^"]{0,16}"\s*,\s*)?'
# after a conversation key: `"key": "value"`, or (the key as an attribute's "key") OTLP's
# `, "value": {"stringValue": ...}` / Jaeger's `, "type": "string", "value": ...`
_AFTER_KEY = re.compile(rb'\s*(?::\s*' + _VALUE + rb'|,\s*' + _KIND
                        + rb'"value"\s*:\s*(?:\{\s*"stringValue"\s*:\s*)?' + _VALUE + rb')')
# before it, when the attribute's value is written first: `"value": ..., "key": `
_BEFORE_KEY = re.compile(rb'"(?:stringValue|value)"\s*:\s*' + _VALUE + rb'\s*\}?\s*,\s*'
                         + _KIND + rb'"key"\s*:\s*\Z')
_WINDOW = 1200  # bytes before a key searched for a value written first
_CONVERSATION_KEYS = tuple(json.dumps(k).encode() for k in CONVERSATION_KEYS)
UNTRACED = ""  # the link key of the spans without a trace id (the reader's trace "")
_TRACE_KEY = re.compile(rb'"trace(?:Id|ID|_id)"\s*:')
_NO_TRACE = re.compile(rb'"trace(?:Id|ID|_id)"\s*:\s*(?:""|"0x"|null\b)')
_SPAN_KEY = re.compile(rb'"span(?:Id|ID|_id)"\s*:')
_START_KEY = re.compile(rb'"(?:startTimeUnixNano|start_time_unix_nano|start_time|startTime)"\s*:')
_JAEGER_TRACE = re.compile(rb'"spans"\s*:\s*\[')  # a trace's spans (its own traceID beside)


def _conversation_ids(text: bytes) -> Iterator[bytes]:
    """The raw values of the conversation keys in text (a key is found by a plain byte
    search, so a text without one costs one pass per key)."""
    for key in _CONVERSATION_KEYS:
        at = text.find(key)
        while at >= 0:
            end = at + len(key)
            m = _AFTER_KEY.match(text, end)
            if m is None:
                m = _BEFORE_KEY.search(text, max(0, at - _WINDOW), at)
            if m is not None:
                yield from (g for g in m.groups() if g is not None)
            at = text.find(key, end)


def _text(raw: bytes) -> str | None:
    try:
        return json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode()
    except (ValueError, UnicodeDecodeError):
        return None


def file_pieces(path: Path) -> Iterator[bytes]:
    """The file's bytes in pieces (a .gz decompressed as it goes; a cut or corrupt .gz
    up to where it can be read; a file that cannot be opened: nothing, the reader says
    why)."""
    from tracerl.data.ingest.limits import GzipCut, compressed, decompressed_pieces

    try:
        with open(path, "rb") as f:
            yield from (decompressed_pieces(f, path.name) if compressed(path)
                        else iter(lambda: f.read(_CHUNK), b""))
    except (OSError, GzipCut):
        return


def link_keys(path: Path | str) -> set[str]:
    """The trace and conversation ids a file's raw text names, and UNTRACED when it may
    hold a span without a trace id (see the module)."""
    raw: set[bytes] = set()
    traces: set[bytes] = set()
    counts = [0] * 5
    tail = b""
    for piece in file_pieces(Path(path)):
        text = tail + piece
        _scan(text, traces, raw)
        counts = [a + b for a, b in zip(counts, _counts(text, len(tail)), strict=True)]
        tail = text[-_OVERLAP:]
    keys = _keys(traces, raw)
    if _says_untraced(counts):
        keys.add(UNTRACED)
    return keys


def batch_keys(batch: Any) -> set[str]:
    """The link keys of a batch of a JSON Lines file's lines (a GuardedBatch: its byte
    range, or its lines of a .gz): the runner cuts a large file into jobs of batches that
    share none (a line is whole in one batch, so no key is cut by a batch's end)."""
    lines, text = batch.read()
    if text is None:
        text = b"\n".join(lines)
    traces: set[bytes] = set()
    raw: set[bytes] = set()
    _scan(text, traces, raw)
    keys = _keys(traces, raw)
    if _says_untraced(_counts(text)):
        keys.add(UNTRACED)
    return keys


def _counts(text: bytes, since: int = 0) -> list[int]:
    """[empty or null trace ids, trace id keys, Jaeger traces' spans, span id keys, span
    start keys] in text, of the matches that end after `since` (a piece's carried tail:
    what ends in it was counted with the piece before)."""
    def count(pattern: re.Pattern) -> int:  # (the tail's own matches taken off)
        n = len(pattern.findall(text))
        return n - len(pattern.findall(text[:since])) if since else n

    jaeger = text.find(b'"spanID"', since) >= 0  # Jaeger's traces counted only in its files
    return [count(_NO_TRACE), count(_TRACE_KEY), count(_JAEGER_TRACE) if jaeger else 0,
            count(_SPAN_KEY), count(_START_KEY)]


def _says_untraced(counts: list[int]) -> bool:
    """More span ids or span start times than trace ids (a link, log record or Jaeger
    reference carries both ids, a Jaeger trace its own trace id beside its spans), or a
    trace id that is empty or null."""
    no_trace, traced, jaeger_traces, span_ids, starts = counts
    traced -= jaeger_traces
    return no_trace > 0 or span_ids > traced or starts > traced


def _scan(text: bytes, traces: set[bytes], raw: set[bytes]) -> None:
    traces.update(_TRACE.findall(text))
    raw.update(_conversation_ids(text))


def _keys(traces: set[bytes], raw: set[bytes]) -> set[str]:
    keys = {k for k in map(_text, raw) if k}
    keys.update(filter(None, (_hex(t) for t in map(_text, traces) if t)))
    return keys
