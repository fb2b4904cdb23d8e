"""Find log files (native JSONL, or JSON/JSONL for an adapter) and read them in bounded
batches of lines."""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# log files: JSON or JSON Lines, plain or compressed (tracerl.data.ingest.limits.COMPRESSIONS)
SUFFIXES = tuple(f"{kind}{packed}" for kind in (".jsonl", ".json")
                 for packed in ("", ".gz", ".zst", ".bz2", ".xz"))
_CHUNK_BYTES = 8 << 20


class InputError(ValueError):
    """An input path that cannot be read (missing, unreadable, or not its format at all)."""


# what a file of another kind found in a folder is, by the end of its name
_PACKED = (".zip", ".tar", ".tgz", ".tbz2", ".txz", ".7z", ".rar", ".lz4", ".lz", ".lzma",
           ".br", ".Z", ".zstd", ".gz", ".zst", ".bz2", ".xz")


@dataclass
class Found:
    """The log files of some inputs, and every other file met in their folders with why it
    is not read (path -> reason: a dangling symlink, a compressed or archived file of
    another kind, a file of another kind, a symlink to a folder)."""

    files: list[Path]
    skipped: dict[str, str]


def is_fifo(path: Path) -> bool:
    """A named pipe (`mkfifo`, or `<(command)` of the shell: /dev/fd/N): read once."""
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _check_name(path: Path) -> None:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{str(path)!r}: the file name is not valid UTF-8 (rename it)"
                         ) from None


def _why_skipped(path: Path) -> str:
    """Why a file met in a folder is not read."""
    if path.is_symlink() and not path.exists():
        return f"a dangling symlink (to {os.readlink(path)}, which does not exist)"
    if path.is_symlink() and path.is_dir():
        return "a symlink to a folder: not followed (give the folder as an input)"
    name = path.name
    packed = next((k for k in _PACKED if name.endswith(k)), None)
    if packed is not None:
        return (f"compressed or archived ({packed}) and not a .json/.jsonl inside: not read "
                "(tracerl reads .json and .jsonl files, plain or .gz/.zst/.bz2/.xz)")
    if not path.is_file() and not is_fifo(path):
        return "not a regular file (a socket or a device): not read"
    return "not a .json or .jsonl file: not read"


def _walk(folder: Path, skipped: dict[str, str]) -> list[Path]:
    """The log files under a folder (recursively, symlinked folders not followed); every
    other entry into `skipped`; a sub-folder that cannot be listed is InputError."""
    def refuse(exc: OSError) -> None:
        where = exc.filename or folder
        raise InputError(f"{where}: a folder under {folder} that cannot be read "
                         f"({exc.strerror or exc}); fix its permissions or give the "
                         "readable folders one by one") from None

    files: list[Path] = []
    for root, dirs, names in os.walk(folder, onerror=refuse, followlinks=False):
        here = Path(root)
        for d in sorted(dirs):
            if (here / d).is_symlink():
                skipped[str(here / d)] = _why_skipped(here / d)
        for name in sorted(names):
            p = here / name
            _check_name(p)
            if name.endswith(SUFFIXES) and (p.is_file() or is_fifo(p)):
                if not os.access(p, os.R_OK):
                    raise InputError(f"{p}: not readable (permission denied)")
                files.append(p)
            else:
                skipped[str(p)] = _why_skipped(p)
    return sorted(files)


def scan_inputs(inputs: Sequence[Path | str]) -> Found:
    """Files, folders (recursively) and named pipes into a sorted list of log files
    (SUFFIXES; a pipe or a file given itself whatever its name) and the files of folders
    that are not read, each with why."""
    found: list[Path] = []
    skipped: dict[str, str] = {}
    for item in inputs:
        path = Path(item)
        _check_name(path)
        if path.is_dir():
            files = _walk(path, skipped)
            if not files:
                others = [p for p in skipped if Path(p).is_relative_to(path)]
                raise InputError(f"{path}: folder holds no {' or '.join(SUFFIXES)} files"
                                 + (f" ({len(others)} other files: "
                                    f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''})"
                                    if others else ""))
            found.extend(files)
        elif path.is_file() or is_fifo(path):
            if not os.access(path, os.R_OK):
                raise InputError(f"{path}: not readable (permission denied)")
            found.append(path)
        elif path.is_symlink():
            raise InputError(f"{path}: a dangling symlink (to {os.readlink(path)}, which does "
                             "not exist)")
        else:
            raise InputError(f"{path}: no such file or folder")
    # The same file reached by two spellings (x, ./x, /abs/x, a symlink) is read once.
    files = list({os.path.realpath(p): p for p in reversed(found)}.values())[::-1]
    return Found(files, skipped)


def find_inputs(inputs: Sequence[Path | str]) -> list[Path]:
    """The log files of files and folders (`scan_inputs`)."""
    return scan_inputs(inputs).files


def source_names(inputs: Sequence[Path | str], files: Sequence[Path]) -> dict[Path, str]:
    """The name of each file of `find_inputs(inputs)` that stands for it where a record has no
    id of its own (`<name>:<record>`): its path under the folder input it was found in, or
    its file name when given as a file. Names that two files would share (two
    `*/trajectory.json` given one by one) become their paths under the files' common
    folder, so no two files share one."""
    folders = [Path(os.path.realpath(p)) for p in map(Path, inputs) if p.is_dir()]
    names: dict[Path, str] = {}
    for f in files:
        real = Path(os.path.realpath(f))
        under = [d for d in folders if real.is_relative_to(d)]
        names[f] = (real.relative_to(max(under, key=lambda d: len(d.parts))).as_posix()
                    if under else f.name)
    by_name: dict[str, list[Path]] = {}
    for f, name in names.items():
        by_name.setdefault(name, []).append(f)
    for same in (fs for fs in by_name.values() if len(fs) > 1):
        root = os.path.commonpath([os.path.realpath(f) for f in same])
        for f in same:
            names[f] = Path(os.path.realpath(f)).relative_to(root).as_posix()
    return names

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


@dataclass
class Batch:
    """One unit of parsing work: a byte range of a plain file (read by whoever parses
    it), or lines already read (a .gz stream cannot be entered in the middle)."""

    path: str
    first_line: int  # 1-based line number of the batch's first line
    bytes_done: int  # bytes of the file (compressed, for .gz) consumed after this batch
    start: int = 0
    end: int = 0
    lines: list[bytes] | None = None

    def read(self) -> tuple[list[bytes], bytes | None]:
        """(the lines, the text they were split from when it was read here)."""
        if self.lines is not None:
            return self.lines, None
        with open(self.path, "rb") as f:
            f.seek(self.start)
            data = f.read(self.end - self.start)
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":  # the range ends with a newline
            lines.pop()
        return lines, data


def plan_batches(path: Path, batch_lines: int) -> Iterator[Batch]:
    """Batches of batch_lines lines. For a plain file only the newline positions are read
    here (a vectorised scan), so the parsing processes read their own ranges."""
    if path.name.endswith(".gz"):
        for b in read_batches(path, batch_lines):
            yield Batch(str(path), b.first_line, b.bytes_done, lines=b.lines)
        return
    size = path.stat().st_size
    start, first_line, seen = 0, 1, 0  # seen: newlines since `start`
    with open(path, "rb") as f:
        offset = 0
        while chunk := f.read(_CHUNK_BYTES):
            newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + offset
            while seen + len(newlines) >= batch_lines:
                cut = int(newlines[batch_lines - seen - 1]) + 1
                yield Batch(str(path), first_line, cut, start=start, end=cut)
                newlines = newlines[batch_lines - seen:]
                start, first_line, seen = cut, first_line + batch_lines, 0
            seen += len(newlines)
            offset += len(chunk)
    if start < size:
        yield Batch(str(path), first_line, size, start=start, end=size)


def read_bytes(path: Path) -> bytes:
    """A whole file's bytes (.gz decompressed); InputError when it cannot be read."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
