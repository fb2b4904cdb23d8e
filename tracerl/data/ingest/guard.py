"""Ingest's safety around the parse: one ingest per output folder, outputs published as
one unit, leftovers of a killed run cleaned, workers that die with their parent, and
redaction of everything quarantined."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tracerl.data.formats import ReadOptions
from tracerl.data.ingest.limits import Limits
from tracerl.data.ingest.parse import Reject
from tracerl.data.ingest.reader import InputError
from tracerl.data.redact import Redactor
from tracerl.io.fileio import recover_published

LOCK_NAME = ".ingest.lock"


@dataclass(frozen=True)
class Options:
    """What every parse job needs besides its batch (pickled to worker processes)."""

    limits: Limits
    redactor: Redactor
    strict: bool = False  # an unknown field rejects its record (else kept in `extra`)
    read: ReadOptions = field(default_factory=ReadOptions)  # adapter knobs


# A value a reason quotes cut short (tracerl.data.schema.describe: 57 characters and
# "..."): a secret cut there no longer matches its pattern (an e-mail without its domain)
_CUT_QUOTE = re.compile(r"""(?<= )(['"{\[0-9-].{56})\.\.\.(?!\.)""")
CUT_VALUE = "<a value cut short; its redacted text is in raw>"
_CUT_HEAD = "… ("  # tracerl.data.ingest.limits.head_text: the head, then its size
_WORD_ENDS = " \t\r\n\"',;{}[]<>"


def redact_reject(r: Reject, redactor: Redactor, counts: Counter) -> Reject:
    """A quarantine record with its raw text, reason and field redacted. Text with NUL
    bytes between its characters (UTF-16/32 read as bytes) is matched without them; a value
    the reason quotes cut short is kept only when the redacted raw text still holds it
    (a secret cut in the middle would match no pattern)."""
    raw_in = r.raw.replace("\x00", "") if "\x00" in r.raw else r.raw
    raw, c1 = redactor.text(raw_in)
    if redactor.enabled and _CUT_HEAD in raw:  # a record's first bytes only: its last
        head, _, rest = raw.partition(_CUT_HEAD)  # word may be a secret cut in two
        cut = max(head.rfind(c) for c in _WORD_ENDS)
        raw = head[:cut + 1] + "[cut]" + _CUT_HEAD + rest
    reason, c2 = redactor.text(r.reason)
    if redactor.enabled and "..." in reason:
        reason = _CUT_QUOTE.sub(lambda m: m.group(0) if m.group(1).strip("'\"") in raw
                                else CUT_VALUE, reason)
    field, c3 = redactor.text(r.field)
    counts.update(c1)
    counts.update(c2)
    counts.update(c3)
    return Reject(r.source_file, r.source_record, field, reason, raw)


@contextmanager
def exclusive(out_dir: Path) -> Iterator[None]:
    """Hold out_dir for this run: a second ingest into it fails with a clear error. The
    lock dies with the process (kill -9 included). Once held, a publish a killed run left
    half done is completed, and any staging folder left by a killed run is removed."""
    out_dir = Path(out_dir)
    lock_path = out_dir / LOCK_NAME
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            raise InputError(f"{out_dir}: another ingest (pid {holder}) is writing to this "
                             "folder; wait for it to finish or choose another --out") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        try:
            recover_published(out_dir)
            for leftover in out_dir.glob(".ingest-staging-*"):
                shutil.rmtree(leftover, ignore_errors=True)
            yield
        finally:
            lock.seek(0)
            lock.truncate()
            fcntl.flock(lock, fcntl.LOCK_UN)


def exit_with_parent(parent_pid: int, every: float = 0.25) -> None:
    """Worker initializer: exit as soon as the process that started the pool is gone (a
    SIGKILLed ingest must not leave parsers behind)."""
    def watch() -> None:
        while True:
            time.sleep(every)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # the pid was reused by another user's process
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    import pyarrow as pa

    # give freed Arrow memory back to the system at once (a worker's peak stays small)
    with contextlib.suppress(NotImplementedError, pa.ArrowNotImplementedError):
        pa.jemalloc_set_decay_ms(0)
