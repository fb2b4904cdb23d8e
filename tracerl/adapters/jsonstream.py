"""Stream one large JSON object without parsing it whole: its top-level members, and the
elements of one array member one at a time (a tau2 results file's `simulations`).

Structure is found with numpy over 1 MB chunks (its int64 temporaries are ~40 times the
chunk): unescaped quotes give the string mask, a cumulative sum of brackets outside
strings gives the depth, and only the few structural characters at depth <= 2 reach
Python. Each element is then parsed alone by orjson, so
memory holds one element (plus a chunk), not the whole document.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracerl.ingest.reader import InputError

CHUNK_BYTES = 1 << 20
_OPEN = (ord("{"), ord("["))
_CLOSE = (ord("}"), ord("]"))
_COMMA, _COLON, _QUOTE, _BACKSLASH = ord(","), ord(":"), ord('"'), ord("\\")


def _chunks(path: Path, chunk_bytes: int) -> Iterator[bytes]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            yield chunk


class _Scanner:
    """Structural characters outside strings, with the depth after each, chunk by chunk."""

    def __init__(self) -> None:
        self.in_string = False
        self.backslashes = 0  # backslashes ending the previous chunk
        self.depth = 0
        self.offset = 0

    def scan(self, chunk: bytes, max_depth: int) -> list[tuple[int, int, int]]:
        """(global position, byte, depth after it) of structural bytes at depth <= max_depth
        (an opening bracket counts when it opens depth <= max_depth + 1)."""
        b = np.frombuffer(chunk, dtype=np.uint8)
        n = len(b)
        idx = np.arange(n)
        bs = b == _BACKSLASH
        # Backslashes right before each byte: an odd run escapes it.
        last_other = np.maximum.accumulate(np.where(bs, -1, idx))
        before = np.empty(n, dtype=np.int64)
        before[0] = self.backslashes
        prev_last = last_other[:-1]
        before[1:] = np.where(prev_last >= 0, idx[:-1] - prev_last, idx[1:] + self.backslashes)
        quote = (b == _QUOTE) & (before % 2 == 0)
        inside = (np.cumsum(quote) + self.in_string) % 2 == 1  # a closing quote reads even
        structural = ~inside & ~quote & np.isin(b, [*_OPEN, *_CLOSE, _COMMA, _COLON])
        pos = np.flatnonzero(structural)
        kind = b[pos]
        step = np.where(np.isin(kind, _OPEN), 1, np.where(np.isin(kind, _CLOSE), -1, 0))
        depth_after = self.depth + np.cumsum(step)
        depth_at = np.where(step > 0, depth_after - 1, depth_after)
        keep = depth_at <= max_depth
        events = list(zip((pos[keep] + self.offset).tolist(), kind[keep].tolist(),
                          depth_after[keep].tolist(), strict=True))
        if len(depth_after):
            if depth_after.min() < 0:
                raise ValueError("a closing bracket with no opening one")
            self.depth = int(depth_after[-1])
        self.in_string = bool((np.count_nonzero(quote) + self.in_string) % 2)
        trailing = n - 1 - int(last_other[-1])
        self.backslashes = trailing + (self.backslashes if trailing == n else 0)
        self.offset += n
        return events


def stream_object(path: Path, array_key: str, chunk_bytes: int = CHUNK_BYTES
                  ) -> tuple[dict[str, Any], Iterator[Any]]:
    """(every top-level member but `array_key`, an iterator over the elements of the
    `array_key` array). The first is read in a first pass that skips the array; the
    iterator makes a second pass. InputError when the file is not such an object."""
    header: dict[str, Any] = {}
    for _, key, value in _walk(path, array_key, chunk_bytes, items=False):
        header[key] = value
    if array_key not in header.pop("__seen__", ()):
        raise InputError(f"{path}: no top-level `{array_key}` array")
    return header, (value for _, _, value in _walk(path, array_key, chunk_bytes, items=True))


def _walk(path: Path, array_key: str, chunk_bytes: int, items: bool
          ) -> Iterator[tuple[str, Any, Any]]:
    """Pass 1 (items=False): ("member", key, value) for members other than array_key, then
    ("member", "__seen__", keys seen). Pass 2: ("item", index, value) per array element."""
    scanner = _Scanner()
    buf, buf_start = b"", 0
    started = False
    key: str | None = None
    member_start = value_start = item_start = -1
    in_array = False
    index = 0
    seen: list[str] = []

    def piece(start: int, end: int) -> bytes:
        return buf[start - buf_start:end - buf_start]

    def parse(start: int, end: int, what: str) -> Any:
        try:
            return orjson.loads(piece(start, end))
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}: {what} at byte {start} is not valid JSON: {exc}") \
                from None

    try:
        for chunk in _chunks(path, chunk_bytes):
            buf += chunk
            for pos, byte, depth in scanner.scan(chunk, max_depth=2):
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
                    if items:
                        yield "item", index, parse(item_start, pos, f"element {index}")
                    index, item_start = index + 1, pos + 1
                elif in_array and depth == 1 and byte == _CLOSE[1]:
                    if items and piece(item_start, pos).strip():  # not an empty array
                        yield "item", index, parse(item_start, pos, f"element {index}")
                    in_array = False
                elif (depth == 1 and byte == _COMMA) or (depth == 0 and byte == _CLOSE[0]):
                    if key is None:
                        raise InputError(f"{path}: a member without a key at byte {pos}")
                    if key != array_key and not items:
                        yield "member", key, parse(value_start, pos, f"member {key!r}")
                    key, member_start = None, pos + 1
            # Keep only the bytes a pending key, member value or element still needs.
            if in_array:
                keep = item_start if items else scanner.offset
            elif key is None:
                keep = member_start
            elif key == array_key or not items:
                keep = value_start
            else:
                keep = scanner.offset
            keep = max(min(keep, scanner.offset), buf_start)
            buf, buf_start = buf[keep - buf_start:], keep
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{path}: not a JSON object: {exc}") from None
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    if not started or scanner.depth != 0 or scanner.in_string:
        raise InputError(f"{path}: the file ends before its top-level object is closed")
    if not items:
        yield "member", "__seen__", seen
