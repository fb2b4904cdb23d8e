"""Find native JSONL inputs and read them in bounded batches of lines."""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".jsonl", ".jsonl.gz")
_CHUNK_BYTES = 8 << 20


class InputError(ValueError):
    """An input path that cannot be read as native JSONL."""


def find_inputs(inputs: Sequence[Path | str]) -> list[Path]:
    """Expand files and folders (recursively) into a sorted list of .jsonl/.jsonl.gz files."""
    found: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
            if not files:
                raise InputError(f"{path}: folder holds no {' or '.join(SUFFIXES)} files")
            found.extend(files)
        elif path.is_file():
            found.append(path)
        else:
            raise InputError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))  # drop repeats, keep order


@dataclass
class LineBatch:
    lines: list[bytes]
    first_line: int  # 1-based line number of lines[0] in its file
    bytes_done: int  # bytes of the file (compressed, for .gz) consumed so far


def read_batches(path: Path, batch_lines: int) -> Iterator[LineBatch]:
    """Yield the file's lines (without newlines) in batches of at most batch_lines."""
    with open(path, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.name.endswith(".gz") else raw
        pending: list[bytes] = []
        tail = b""
        next_line = 1
        while True:
            try:
                chunk = stream.read(_CHUNK_BYTES)
            except (OSError, EOFError) as exc:  # corrupt or truncated gzip
                raise InputError(f"{path}: cannot read past line {next_line + len(pending)}: "
                                 f"{exc}") from exc
            if not chunk:
                break
            parts = (tail + chunk).split(b"\n")
            tail = parts.pop()
            pending.extend(parts)
            while len(pending) >= batch_lines:
                batch, pending = pending[:batch_lines], pending[batch_lines:]
                yield LineBatch(batch, next_line, raw.tell())
                next_line += len(batch)
        if tail:
            pending.append(tail)
        if pending:
            yield LineBatch(pending, next_line, raw.tell())
