"""Inputs that cannot be read where they are, made readable once before ingest: a named
pipe (`mkfifo`, the shell's `<(command)`) can be read only once, and a UTF-16 or UTF-32
log (with a byte-order mark, or without one when its first character is ASCII, as JSON's
is) is not the UTF-8 every reader expects. Each is copied (decoded to UTF-8) into a
folder of the run; the copy keeps the file's name, and the outputs name the input as
given (`aliases`)."""

from __future__ import annotations

import codecs
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracerl.data.ingest.limits import GzipCut, compressed, decompressed_pieces
from tracerl.data.ingest.reader import InputError, is_fifo

_PIECE = 1 << 20
# magic numbers of the compressions ingest reads, for a pipe (its name says nothing)
_MAGIC = ((b"\x1f\x8b", ".gz"), (b"\x28\xb5\x2f\xfd", ".zst"), (b"BZh", ".bz2"),
          (b"\xfd7zXZ\x00", ".xz"))
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_INVALID = "tracerl-invalid-text"


def _invalid(exc: UnicodeDecodeError) -> tuple[str, int]:
    # bytes that are no character of the encoding (a lone surrogate, a cut last unit):
    # a lone surrogate, written as bytes that are not UTF-8, so the line holding them is
    # quarantined as invalid UTF-8 naming the byte
    return "\udcff", exc.end


codecs.register_error(_INVALID, _invalid)


def text_encoding(head: bytes) -> tuple[str, int] | None:
    """(encoding, length of its byte-order mark) of a UTF-16 or UTF-32 text, None for
    anything else (UTF-8, binary): by its byte-order mark, else by the zero bytes around
    an ASCII first character (RFC 4627, section 3)."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    if len(head) < 4 or b"\x00" not in head[:4]:
        return None
    a, b, c, d = (x == 0 for x in head[:4])
    if a and b and c and not d:
        return "utf-32-be", 0
    if not a and b and c and d:
        return "utf-32-le", 0
    if a and not b and c and not d:
        return "utf-16-be", 0
    if not a and b and not c and d:
        return "utf-16-le", 0
    return None


@dataclass
class Spooled:
    """The inputs to read (copies in place of pipes and UTF-16/32 files) and, per copy,
    the input it stands for (its path as given) and how it was read."""

    files: list[Path]
    aliases: dict[str, str] = field(default_factory=dict)  # copy -> input as given
    read_as: dict[str, str] = field(default_factory=dict)  # input as given -> how read


def _pieces(f, name: str):
    if compressed(name):
        return decompressed_pieces(f, name)
    return iter(lambda: f.read(_PIECE), b"")


def _head(path: Path, n: int = 4) -> bytes:
    with open(path, "rb") as f:
        try:
            return next(_pieces(f, path.name), b"")[:n]
        except GzipCut:
            return b""


def _transcode(source: Path, target: Path, encoding: str, skip: int) -> None:
    decoder = codecs.getincrementaldecoder(encoding)(errors=_INVALID)
    with open(source, "rb") as f, open(target, "wb") as out:
        first = True
        try:
            for piece in _pieces(f, source.name):
                if first:
                    piece, first = piece[skip:], False
                out.write(decoder.decode(piece).encode("utf-8", "surrogatepass"))
        except GzipCut as exc:
            raise InputError(f"{source}: not a readable {exc.kind} stream: {exc}") from None
        out.write(decoder.decode(b"", final=True).encode("utf-8", "surrogatepass"))


def spool(files: Sequence[Path], folder: Path) -> Spooled:
    """Copy each pipe into `folder` (named by the compression its bytes start with when
    its name has none) and decode each UTF-16/32 file (plain or compressed) into a UTF-8
    copy; other files are read where they are."""
    result = Spooled([])
    for k, path in enumerate(files):
        source, how = path, []
        if is_fifo(path):
            (folder / str(k)).mkdir(parents=True, exist_ok=True)
            copy = folder / str(k) / (path.name or "pipe")
            with open(path, "rb") as f, open(copy, "wb") as out:
                shutil.copyfileobj(f, out, _PIECE)
            if not compressed(copy.name):
                with open(copy, "rb") as f:
                    magic = f.read(6)
                suffix = next((s for m, s in _MAGIC if magic.startswith(m)), "")
                if suffix:
                    copy = copy.rename(copy.with_name(copy.name + suffix))
            source = copy
            how.append("a pipe, read once")
        found = text_encoding(_head(source))
        if found is not None:
            encoding, skip = found
            (folder / f"{k}t").mkdir(parents=True, exist_ok=True)
            name = source.name
            for suffix in (".gz", ".zst", ".bz2", ".xz"):
                name = name.removesuffix(suffix)
            target = folder / f"{k}t" / name
            _transcode(source, target, encoding, skip)
            if source != path:
                os.remove(source)
            source = target
            how.append(f"{encoding.upper()} ({'byte-order mark' if skip else 'no byte-order mark'})"
                       ", decoded to UTF-8")
        result.files.append(source)
        if source != path:
            result.aliases[str(source)] = str(path)
            result.read_as[str(path)] = "; ".join(how)
    return result
