"""`tracerl ingest`: native JSONL or an adapter's format in, a Parquet step dataset plus
quarantine out.

Batches are parsed and written as they are read (memory stays bounded by the batch
size); whole-episode rules are checked at the end over a compact index. Every output is
staged in a hidden folder and moved into place only when complete.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import multiprocessing
import os
import pickle
import shutil
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracerl.config.formats import AUTO, get_format
from tracerl.config.registry import UnknownName
from tracerl.data.formats import ReadOptions, reader
from tracerl.data.ingest import guard, suspicious
from tracerl.data.ingest.episodes import EpisodeProblem, find_inconsistent_episodes
from tracerl.data.ingest.limits import Limits, pack_batches, parse_packed, plan_guarded
from tracerl.data.ingest.parse import ParsedBatch, Reject, parse_adapted, raw_text
from tracerl.data.ingest.reader import Batch, InputError, scan_inputs, source_names
from tracerl.data.ingest.spool import spool
from tracerl.data.redact import Redactor
from tracerl.data.schema import STEP_SCHEMA
from tracerl.io.fileio import publish_together, write_json

ProgressFn = Callable[[int, int], None]  # (records read so far, bytes read so far)


@dataclass
class IngestSummary:
    read: int = 0  # input records: lines of native JSONL, the adapter's unit otherwise
    accepted: int = 0
    quarantined: int = 0
    episodes: int = 0
    rows: int = 0  # step rows written (= accepted for native JSONL)
    files: list[str] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)  # file -> format read
    record_units: dict[str, str] = field(default_factory=dict)  # format -> what `read` counts
    quarantined_by_field: dict[str, int] = field(default_factory=dict)
    max_bad_fraction: float = 0.01
    redacted: dict[str, int] = field(default_factory=dict)  # placeholders written, per type
    internal_errors: int = 0  # records quarantined because parsing them raised
    # tool calls whose id an earlier call of the same episode had (kept: ids are unique
    # within an assistant turn, not a conversation)
    reused_call_ids: int = 0
    # what adapters met that is not a record (lines of a kind that are not turns, traces
    # with no GenAI span, sub-agent episodes, ...), per kind
    notes: dict[str, int] = field(default_factory=dict)
    sidecar_files: list[str] = field(default_factory=list)  # read with another input
    # files no format reads (auto), each one quarantined record: file -> why
    refused_files: dict[str, str] = field(default_factory=dict)
    # what looks wrong though the records passed (tracerl.data.ingest.suspicious)
    warnings: list[str] = field(default_factory=list)
    # files met in the input folders and not read: file -> why (a dangling symlink, a
    # compressed or archived file of another kind, a file of another kind)
    skipped_files: dict[str, str] = field(default_factory=dict)
    # inputs read otherwise than as they are: file -> how (a pipe, read once; UTF-16/32
    # decoded to UTF-8)
    read_as: dict[str, str] = field(default_factory=dict)

    @property
    def bad_fraction(self) -> float:
        return self.quarantined / self.read if self.read else 0.0

    @property
    def passed(self) -> bool:
        return self.bad_fraction <= self.max_bad_fraction

    def to_dict(self) -> dict:
        found = asdict(self)
        for key in ("refused_files", "warnings", "skipped_files", "read_as"):
            if not found[key]:
                del found[key]  # (summaries of reads without them stay as they were)
        return {**found, "bad_fraction": round(self.bad_fraction, 6), "passed": self.passed}

    def line(self) -> str:
        verdict = "ok" if self.passed else (
            f"FAILED: quarantined/read = {self.bad_fraction:.4f} > max_bad_fraction "
            f"{self.max_bad_fraction}")
        units = ", ".join(sorted(set(self.record_units.values()))) or "line"
        return (f"ingest: read {self.read}, accepted {self.accepted}, quarantined "
                f"{self.quarantined}, episodes {self.episodes}, rows {self.rows} "
                f"(a record is a {units}) — {verdict}")


def _episode_of(raw: str) -> str | None:
    """The episode_id a rejected line names, if it parses that far."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    episode = record.get("episode_id") if isinstance(record, dict) else None
    return episode if isinstance(episode, str) else None


@contextmanager
def _gc_paused() -> Iterator[None]:
    # Parsed records hold no reference cycles; the cyclic GC only rescans the millions of
    # live dicts and triples the parse time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Quarantine:
    def __init__(self, path: Path, redactor: Redactor | None = None,
                 aliases: dict[str, str] | None = None) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.aliases = aliases or {}  # a copy of an input (spool) -> the input as given
        self.redactor = redactor or Redactor()
        self.redacted: Counter[str] = Counter()
        self.by_field: Counter[str] = Counter()
        self.count = 0
        # episode_id -> the first of its records rejected on its own (file, line, field),
        # so the rest of that episode can be told why it goes too.
        self.first_reject: dict[str, tuple[str, int, str]] = {}

    def add(self, rejects: Sequence[Reject]) -> None:
        for r in rejects:
            if self.aliases:
                r = _as_given(r, self.aliases)
            r = guard.redact_reject(r, self.redactor, self.redacted)
            episode = _episode_of(r.raw)  # redacted as the step table's ids are
            self._file.write(orjson.dumps(r.to_dict()) + b"\n")
            self.by_field[r.field] += 1
            if episode is not None and episode not in self.first_reject:
                self.first_reject[episode] = (r.source_file, r.source_record, r.field)
        self.count += len(rejects)

    def close(self) -> None:
        self._file.close()


def _as_given(r: Reject, aliases: dict[str, str]) -> Reject:
    """A reject naming the inputs as given where it names a copy of one (spool)."""
    def given(text: str) -> str:
        for copy, name in aliases.items():
            text = text.replace(copy, name)
        return text

    return Reject(aliases.get(r.source_file, r.source_file), r.source_record, r.field,
                  given(r.reason), given(r.raw))


def _name_inputs_as_given(steps_dir: Path, aliases: dict[str, str]) -> None:
    """The lineage of rows read from a copy of an input (spool) names the input."""
    for part in sorted(steps_dir.glob("*.parquet")):
        table = pq.read_table(part)
        column = table.column("source_file")
        if not pc.any(pc.is_in(column, pa.array(list(aliases)))).as_py():
            continue
        renamed = pa.array([aliases.get(v, v) if v is not None else None
                            for v in column.to_pylist()], type=column.type)
        at = table.schema.get_field_index("source_file")
        pq.write_table(table.set_column(at, table.schema.field(at), renamed), part)


@dataclass
class _Index:
    """Per accepted row: what the episode rules need, and where the row lives."""

    episode_id: list[pa.ChunkedArray] = field(default_factory=list)
    t: list[np.ndarray] = field(default_factory=list)
    done: list[np.ndarray] = field(default_factory=list)
    part: list[np.ndarray] = field(default_factory=list)

    def add(self, done: _Done, part: int) -> None:
        self.episode_id.append(done.episode_id)
        self.t.append(done.t)
        self.done.append(done.done)
        self.part.append(np.full(done.rows, part, dtype=np.int32))


def ingest(
    inputs: Sequence[Path | str],
    out_dir: Path | str,
    *,
    batch_lines: int = 25_000,
    max_bad_fraction: float = 0.01,
    workers: int = 0,
    progress: ProgressFn | None = None,
    fmt: str = "auto",
    strict: bool = False,
    limits: Limits | None = None,
    redactor: Redactor | None = None,
    read_options: ReadOptions | None = None,
) -> IngestSummary:
    """Ingest files/folders into out_dir/{steps/, quarantine.jsonl, ingest_summary.json}.

    fmt: a format (tracerl.config.formats: a name, or `module:attribute` of a plugin's
    Format), or "auto" (each file detected; a file no format reads is refused: one
    quarantined record naming it, why and the nearest formats). strict: a field the step
    schema does not name rejects its record instead of being kept under `extra`. Never
    raises for bad records; the caller checks summary.passed.

    Every format goes through the same guards: steps and quarantine lines are redacted,
    the three outputs are published together (tracerl.io.fileio.publish_together: a kill at
    any point leaves the previous set or the new one), and a second ingest into the same
    out_dir while one runs is refused (InputError)."""
    if fmt != AUTO:
        try:
            get_format(fmt)
        except (UnknownName, ImportError, AttributeError, TypeError) as exc:
            raise InputError(str(exc)) from None
    found = scan_inputs(inputs)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, no permission, read-only file system
        raise InputError(f"{out_dir}: cannot use as the output folder: {exc.strerror}") from None
    guard_ = guard.Options(limits or Limits(), redactor or Redactor(), strict,
                           read_options or ReadOptions())
    with guard.exclusive(out_dir):
        staging = out_dir / f".ingest-staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "steps").mkdir(parents=True)
        aliases: dict[str, str] = {}
        try:
            spooled = spool(found.files, staging / "inputs")
            given = dict(zip(spooled.files, found.files, strict=True))
            files = spooled.files
            formats, refused = _formats_of(files, fmt)
            sidecars = _sidecars(formats, files)
            files = [f for f in files if f not in sidecars and f in formats]
            formats = {f: formats[f] for f in files}
            refused = {f: why for f, why in refused.items() if f not in sidecars}
            aliases = spooled.aliases
            if fmt != AUTO:
                _check_named_format(files, fmt)
            native = [f for f in files if get_format(formats[f]).native]
            adapted = [(f, formats[f]) for f in files if not get_format(formats[f]).native]
            names = source_names(inputs, [given[f] for f in files])
            places = input_of(inputs, [given[f] for f in files])
            summary = IngestSummary(
                files=[str(given[f]) for f in files], max_bad_fraction=max_bad_fraction,
                formats={str(given[f]): v for f, v in formats.items()},
                record_units={v: get_format(v).counts for v in formats.values()},
                sidecar_files=sorted(str(given[f]) for f in sidecars),
                skipped_files=dict(sorted(found.skipped.items())),
                read_as=spooled.read_as)
            with _gc_paused():
                quarantine = _Quarantine(staging / "quarantine.jsonl", guard_.redactor,
                                         aliases)
                _refuse(refused, quarantine, summary)
                summary.refused_files = {aliases.get(k, k): v
                                         for k, v in summary.refused_files.items()}
                index = _Index()
                parts = _read_all(native, batch_lines,
                                  _worker_count(native, batch_lines, workers),
                                  staging / "steps", quarantine, index, summary, progress,
                                  guard_)
                parts += _read_adapted(adapted, batch_lines, workers, staging / "steps",
                                       len(parts), quarantine, index, summary, progress,
                                       guard_, {f: names[given[f]] for f in files},
                                       {f: places[given[f]] for f in files
                                        if given[f] in places})
                summary.episodes, dropped_rows, unwritten = _drop_inconsistent_episodes(
                    index, parts, quarantine, {str(f) for f in native}, guard_,
                    {str(f) for f, v in adapted if joins_files(v)})
                summary.rows = sum(map(len, index.t)) - dropped_rows
                quarantine.close()
            if aliases:
                _name_inputs_as_given(staging / "steps", aliases)
            summary.accepted = summary.read - quarantine.count
            summary.quarantined = quarantine.count
            summary.quarantined_by_field = dict(sorted(quarantine.by_field.items()))
            summary.internal_errors = quarantine.by_field.get("<internal>", 0)
            summary.redacted = dict(sorted((Counter(summary.redacted) - unwritten
                                            + quarantine.redacted).items()))
            summary.reused_call_ids = summary.notes.pop("reused_call_ids", 0)
            summary.notes = dict(sorted(summary.notes.items()))
            if not any((staging / "steps").glob("*.parquet")):
                # nothing accepted (every file skipped, refused or quarantined): an empty
                # table with the schema, so that readers of the dataset find one
                pq.write_table(STEP_SCHEMA.empty_table(),
                               staging / "steps" / "part-00000.parquet")
            summary.warnings = suspicious.warnings(staging / "steps", summary.rows,
                                                   summary.notes)
            write_json(staging / "ingest_summary.json", summary.to_dict())
            publish_together(staging, out_dir, ["steps", "quarantine.jsonl",
                                                "ingest_summary.json"])
        except InputError as exc:  # naming a copy of an input (spool): the input
            message = str(exc)
            for copy, name in aliases.items():
                message = message.replace(copy, name)
            if message == str(exc):
                raise
            raise InputError(message) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return summary


@dataclass
class _Done:
    """What a parsed batch leaves for the coordinator (the rows went to their part)."""

    read: int
    rejects: list[Reject]
    rows: int
    episode_id: pa.Array
    t: np.ndarray
    done: np.ndarray
    bytes_done: int
    redacted: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)


def _formats_of(files: Sequence[Path], fmt: str) -> tuple[dict[Path, str], dict[Path, str]]:
    """(file -> its format, file -> why no format reads it): `fmt` for every file, or with
    auto each file's detected format (tracerl.data.formats.common.detect)."""
    from tracerl.data.formats.common.detect import Refused, detect

    if fmt != AUTO:
        return dict.fromkeys(files, fmt), {}
    formats, refused = {}, {}
    for path in files:
        try:
            formats[path] = detect(path)
        except Refused as exc:
            refused[path] = f"{exc.what}; {exc.hint}"
    return formats, refused


def _check_named_format(files: Sequence[Path], fmt: str) -> None:
    """A file of another format than the one named (`--format`) is refused before any is
    read (InputError, one line: tracerl.data.formats.common.detect.forced_mismatch)."""
    from tracerl.data.formats.common.detect import forced_mismatch

    declared = get_format(fmt)
    wrong = [why for path in files if (why := forced_mismatch(path, declared))]
    if wrong:
        more = f" (and {len(wrong) - 1} more files of {len(files)})" if len(wrong) > 1 else ""
        raise InputError(wrong[0] + more)


def _refuse(refused: dict[Path, str], quarantine: _Quarantine, summary: IngestSummary) -> None:
    """A file no format reads is one record, quarantined with why (field `<format>`),
    never its lines one by one."""
    if not refused:
        return
    quarantine.add([Reject(str(path), 1, "<format>", reason, f"the file {path}")
                    for path, reason in refused.items()])
    summary.read += len(refused)
    summary.refused_files = {str(path): reason for path, reason in refused.items()}
    summary.record_units.setdefault("<refused>", "file")


def sidecar_files(path: Path, fmt: str) -> list[Path]:
    """Files read with `path`, not inputs of their own (`Format.sidecars`: a tau2 directory
    layout's simulation files, a Harbor trial's result files, a Claude Code sub-agent's
    meta file)."""
    sidecars = get_format(fmt).sidecars_of()
    return sidecars(path) if sidecars is not None else []


def _sidecars(formats: dict[Path, str], files: Sequence[Path]) -> set[Path]:
    """The inputs (`files`) that are another input's sidecar files (`sidecar_files`)."""
    claimed = [p for path, fmt in formats.items() for p in sidecar_files(path, fmt)]
    real = {os.path.realpath(p) for p in claimed}
    return {p for p in files if os.path.realpath(p) in real}


def _parse_to_part(batches: list[Batch], part: Path, options: guard.Options) -> _Done:
    """Read, parse and write one batch (or a pack of small ones); runs in a worker
    process or inline."""
    gc.disable()  # see _gc_paused; a worker holds only its current batch
    parsed = parse_packed(batches, options.limits, strict=options.strict)
    done = _write_part(parsed, part, batches[-1].bytes_done, options.redactor)
    del parsed
    pa.default_memory_pool().release_unused()  # a worker's pool would keep every peak
    return done


def _write_part(parsed: ParsedBatch, part: Path, bytes_done: int,
                redactor: Redactor) -> _Done:
    """Redact a parsed batch's rows and write them to their part."""
    table, redacted = redactor.table(parsed.table)
    if table.num_rows:
        pq.write_table(table, part)
    return _Done(parsed.read, parsed.rejects, table.num_rows,
                 table.column("episode_id").combine_chunks(),
                 table.column("t").to_numpy(),
                 table.column("done").to_numpy(zero_copy_only=False), bytes_done,
                 redacted)


def _parsed(files: list[Path], batch_lines: int, workers: int, steps_dir: Path,
            options: guard.Options) -> Iterator[tuple[_Done, Path]]:
    """Parsed batches in input order. With workers > 1, worker processes (and this one,
    see _in_order) read, parse and write their batches; at most workers + 1 are in
    flight (bounded memory)."""
    def planned() -> Iterator[Batch]:
        bytes_before = 0
        for path in files:
            for batch in plan_guarded(path, batch_lines, options.limits):
                batch.bytes_done += bytes_before
                yield batch
            bytes_before += path.stat().st_size

    def jobs() -> Iterator[tuple[list[Batch], Path]]:
        # small files share a part: about batch_lines records of ~200 bytes each
        target = min(batch_lines * 200, options.limits.batch_bytes)
        for k, group in enumerate(pack_batches(planned(), target)):
            yield group, steps_dir / f"part-{k:05d}.parquet"

    tasks = ((_parse_to_part, (batch, part, options), part) for batch, part in jobs())
    yield from _in_order(tasks, workers)


class _Ready:
    """A result computed in this process, queued beside the pool's futures."""

    def __init__(self, value: object) -> None:
        self.value = value

    def result(self) -> object:
        return self.value

    def done(self) -> bool:
        return True


def _in_order(tasks: Iterator[tuple[Callable, tuple, object]], workers: int
              ) -> Iterator[tuple[object, object]]:
    """(fn(*args), tag) of each task, in task order. With workers > 1, workers - 1 worker
    processes take tasks while this process runs each task that finds their queue full,
    and the last one (one fewer interpreter to start, and every core busy). Each worker
    has one task queued behind the one it runs, so it never waits for this process to
    finish its own task before it gets the next. A task's result is small (its rows are
    in its part on disk); at most 2 * workers results are pending at once."""
    if workers <= 1:
        for fn, args, tag in tasks:
            yield fn(*args), tag
        return
    tasks = iter(tasks)
    pool_slots = 2 * (workers - 1)  # running and queued
    with _pool(workers - 1) as pool:
        pending: deque = deque()
        task = next(tasks, None)
        while task is not None:
            fn, args, tag = task
            task = next(tasks, None)
            # the last task runs here: this process would only wait (and a single task
            # then needs no worker, nor its start-up)
            in_pool = sum(not f.done() for f, _ in pending)
            pending.append((pool.submit(fn, *args) if in_pool < pool_slots and task is not None
                            else _Ready(fn(*args)), tag))
            while pending and (pending[0][0].done() or len(pending) > 2 * workers):
                future, then = pending.popleft()
                yield future.result(), then
        while pending:
            future, then = pending.popleft()
            yield future.result(), then


@contextmanager
def _pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """Worker processes that die with this one. Started by `spawn`: forkserver's socket
    lives in a folder of the system temp folder that only a clean exit removes, so a
    killed ingest would leave it behind; spawn leaves nothing (its semaphores are
    unlinked by multiprocessing's resource tracker, which outlives a kill). Each is
    started at once (a no-op task), so its start-up (~0.3 s of imports) runs while this
    process plans the first job, not after."""
    from tracerl.io.lean import ingest_worker_start

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=ingest_worker_start,
                             initargs=(os.getpid(),)) as pool:
        for _ in range(workers):
            pool.submit(int)
        yield pool


def _read_all(files: list[Path], batch_lines: int, workers: int, steps_dir: Path,
              quarantine: _Quarantine, index: _Index, summary: IngestSummary,
              progress: ProgressFn | None, options: guard.Options) -> list[Path]:
    parts: list[Path] = []
    for done, part in _parsed(files, batch_lines, workers, steps_dir, options):
        _account(done, part, parts, quarantine, index, summary, progress)
    return parts


def _account(done: _Done, part: Path, parts: list[Path], quarantine: _Quarantine,
             index: _Index, summary: IngestSummary, progress: ProgressFn | None,
             first_part: int = 0) -> None:
    """Count a written batch; `parts` numbers from first_part (the index of its first part
    among every part of the run)."""
    summary.read += done.read
    if done.redacted:
        summary.redacted = dict(Counter(summary.redacted) + done.redacted)
    quarantine.add(done.rejects)
    if done.notes:
        summary.notes = dict(Counter(summary.notes) + done.notes)
    if done.rows:
        index.add(done, first_part + len(parts))
        parts.append(part)
    if progress is not None:
        progress(summary.read, done.bytes_done)


def _parse_adapted_guarded(batch: list, source_file: str, strict: bool) -> ParsedBatch:
    """parse_adapted; if it raises, record by record, so one record's internal error
    quarantines that record only."""
    try:
        return parse_adapted(batch, source_file, strict=strict)
    except Exception:  # noqa: BLE001 - one record must not cost the others
        pass
    from tracerl.data.schema import STEP_SCHEMA

    tables, rejects, owners, read = [], [], [], 0
    for k, record in enumerate(batch):
        try:
            one = parse_adapted([record], source_file, strict=strict)
        except Exception as exc:  # noqa: BLE001
            rejects.append(Reject(record.source_file or source_file, record.number,
                                  "<internal>", f"internal error while parsing: "
                                  f"{type(exc).__name__}: {exc}", record.raw))
            owners.append(k)
            read += record.is_record
            continue
        read += one.read
        rejects += one.rejects
        owners += [k] * len(one.rejects)
        if one.table.num_rows:
            tables.append(one.table)
    table = pa.concat_tables(tables) if tables else STEP_SCHEMA.empty_table()
    order = sorted(range(len(rejects)), key=lambda i: rejects[i].source_record)
    return ParsedBatch(table, [rejects[i] for i in order], read,
                       owners=[owners[i] for i in order])


@dataclass
class AdaptJob:
    """One unit of adapter work: a file, a batch of lines of a JSON Lines file whose
    records are lines, the batches of lines of a JSON Lines file that a reader reads
    apart from the file's other lines (`read_lines`), a slice of a file, or the files of
    one input that a reader joins (`joins_files`) (pickled to a worker)."""

    path: str  # (of joined files: the first)
    fmt: str
    number: int  # the job's place in the input order (names its Parquet parts)
    bytes_done: int  # of all inputs, once this job is done
    batch: object | None = None  # a GuardedBatch of the file's lines
    shard: tuple[int, int] | None = None  # (k, n): the k-th of n slices of a whole file
    source_name: str | None = None  # the file under its input (reader.source_names)
    joined: tuple[tuple[str, str], ...] | None = None  # (path, source name) of each file
    # (k, n): the k-th of n jobs of one file's lines (`batch`: its GuardedBatches, lines
    # that share no link key with another job's), whose records the coordinator orders
    # and numbers as one read of the file (_Ordered)
    lines: tuple[int, int] | None = None

    def read_options(self, options: ReadOptions) -> ReadOptions:
        """The adapter knobs with this file's source name (ids of records with none)."""
        return dataclasses.replace(options, source_name=self.source_name)


def shardable(fmt: str) -> bool:
    """Whether the reader of a format reads a whole file in slices (`Format.shardable`):
    called with `shard=(k, n)` it yields the k-th of n contiguous slices (in its own
    record order) of what it yields without, so that slices 0..n-1 one after the other are
    exactly the unsharded records (records about the whole file go in the first slice, or
    in the last when they follow the others)."""
    return get_format(fmt).shardable


def joins_files(fmt: str) -> bool:
    """Whether the reader of a format reads several files as one (`Format.unit` "folder":
    called with a list of paths and `names=` their source names; each record names its
    file by `source_file`): the runner then gives it all the files of that format of one
    input (OpenTelemetry: a trace's spans may be in two rotated files)."""
    return get_format(fmt).joins_files


def linked_groups(paths: Sequence[Path], keys_of: Callable[[Path], set[str]] | None
                  ) -> list[list[int]]:
    """The files (their places in `paths`) in connected groups of shared keys (`keys_of`:
    a file's link keys; None: every file is linked): each group in order of its first
    file, its files in their order; a file that shares no key is a group of its own."""
    if keys_of is None:
        return [list(range(len(paths)))]
    parent = list(range(len(paths)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}  # a key -> the first file that names it
    for i, path in enumerate(paths):
        for key in keys_of(path):
            j = first.setdefault(key, i)
            if j != i:
                a, b = root(i), root(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(paths)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def input_of(inputs: Sequence[Path | str], files: Sequence[Path]) -> dict[Path, int]:
    """The input (its place in `inputs`) each file of `find_inputs(inputs)` comes from:
    the first that is the file or a folder it was found under (as find_inputs spells it)."""
    items = [Path(item) for item in inputs]
    folder = [item.is_dir() for item in items]
    found: dict[Path, int] = {}
    for f in files:
        at = next((k for k, item in enumerate(items)
                   if item == f or (folder[k] and f.is_relative_to(item))), None)
        if at is not None:
            found[f] = at
    return found


JOBS_PER_FILE = 16  # a large file is cut into about this many jobs, each taken by whichever
# process is free (_in_order): a worker that starts late or a slow job then leaves the others
# waiting for at most one small job at the end, not for a worker's share of the file
JOB_BYTES_MIN = 1 << 20  # a smaller job costs more in its own overhead than it balances


def _job_bytes(size: int, limits: Limits) -> int:
    """The bytes of each job a large file of `size` bytes is cut into: about
    size / JOBS_PER_FILE, at least JOB_BYTES_MIN, at most limits.batch_bytes (memory). From
    the file alone, never the worker count: a line-record file's jobs are its parts."""
    return min(limits.batch_bytes, max(JOB_BYTES_MIN, size // JOBS_PER_FILE))


def _adapt_jobs(files: list[tuple[Path, str]], batch_lines: int,
                limits: Limits, workers: int = 1,
                names: dict[Path, str] | None = None,
                inputs: dict[Path, int] | None = None) -> Iterator[AdaptJob]:
    """A job per file, per batch of lines of a large JSON Lines file of line records, per
    slice of a large file of a shardable reader (one slice per worker: each may read the
    whole file to find its slice), and one for each connected group of files of one input
    (`inputs`: the input of each file) of a format whose reader joins them that share a
    link key (the reader's `link_keys`, e.g. OTel trace and conversation ids; at the
    group's first file's place): a file that shares none is read alone, as any file.
    A large JSON Lines file read alone by a reader that reads some of its lines
    (`read_lines`, OTel) is cut the same way: its batches of lines that share a link key
    (`batch_link_keys`) are one job, at the first one's place, every other batch a job of
    its own."""
    from tracerl.data.formats.common.records import is_json_lines

    groups: dict[tuple, list[Path]] = {}  # (input, format) -> its files, of joined formats
    for path, fmt in files:
        if joins_files(fmt):
            groups.setdefault(((inputs or {}).get(path, path), fmt), []).append(path)
    group_of = {}  # a file -> the files it is read with (those it shares a link with)
    for (_, fmt), group in groups.items():
        if len(group) > 1:
            for linked in linked_groups(group, getattr(reader(fmt)[0], "link_keys", None)):
                if len(linked) > 1:
                    group_of.update(dict.fromkeys((group[k] for k in linked),
                                                  [group[k] for k in linked]))
    number, bytes_before = 0, 0
    for path, fmt in files:
        name = (names or {}).get(path)
        group = group_of.get(path)
        if group is not None:
            if path != group[0]:
                continue  # read with the group's first file
            bytes_before += sum(p.stat().st_size for p in group)
            yield AdaptJob(str(path), fmt, number, bytes_before, joined=tuple(
                (str(p), (names or {}).get(p) or p.name) for p in group))
            number += 1
            continue
        size = path.stat().st_size
        job_limits = dataclasses.replace(limits, batch_bytes=_job_bytes(size, limits))
        if _read_in_lines(path, fmt, limits):
            batches = list(plan_guarded(path, batch_lines, job_limits))
            linked = linked_groups(batches, _lines_link_keys(fmt))
            done = 0
            for k, group in enumerate(linked):
                done = max(done, *(batches[i].bytes_done for i in group))
                yield AdaptJob(str(path), fmt, number, bytes_before + done,
                               tuple(batches[i] for i in group), source_name=name,
                               lines=(k, len(linked)))
                number += 1
        elif get_format(fmt).line_records and is_json_lines(path) and size > limits.batch_bytes:
            for batch in plan_guarded(path, batch_lines, job_limits):
                yield AdaptJob(str(path), fmt, number, bytes_before + batch.bytes_done, batch,
                               source_name=name)
                number += 1
        elif workers > 1 and size > limits.batch_bytes and shardable(fmt):
            slices = max(workers, -(-size // _job_bytes(size, limits)))
            for k in range(slices):
                yield AdaptJob(str(path), fmt, number, bytes_before + size * (k + 1) // slices,
                               shard=(k, slices), source_name=name)
                number += 1
        else:
            yield AdaptJob(str(path), fmt, number, bytes_before + size, source_name=name)
            number += 1
        bytes_before += size


def _read_in_lines(path: Path, fmt: str, limits: Limits) -> bool:
    """Whether a file read alone is read in jobs of its lines (_adapt_jobs)."""
    from tracerl.data.formats.common.records import is_json_lines

    return (path.stat().st_size > limits.batch_bytes and _lines_link_keys(fmt) is not None
            and is_json_lines(path))


def _lines_link_keys(fmt: str) -> Callable | None:
    """The link keys of a batch of lines, of a reader that reads some lines of a file
    apart (`read_lines`; the batches that share one are read together), else None."""
    read = reader(fmt)[0]
    if getattr(read, "read_lines", None) is None:
        return None
    return getattr(read, "batch_link_keys", None)


def _adapt_to_parts(job: AdaptJob, steps_dir: Path, batch_rows: int,
                    options: guard.Options) -> list[_Done]:
    """Read one job's records with its adapter, parse them in batches of whole records
    (about batch_rows rows each) by the same rules as native lines, redact and write each
    batch to its part; runs in a worker process or inline."""
    gc.disable()  # see _gc_paused
    if job.shard is not None:
        return _adapt_shard(job, steps_dir.parent / "shards", batch_rows, options)
    if job.lines is not None:
        return _adapt_lines(job, steps_dir.parent / "shards", batch_rows, options)
    read_records, _ = reader(job.fmt)
    path = Path(job.path)
    done: list[_Done] = []
    batch: list = []
    rows = 0
    kwargs: dict = {"batch": job.batch} if job.batch is not None else {}
    if job.joined is not None:  # the files of one input, read as one
        path = [Path(p) for p, _ in job.joined]
        kwargs["names"] = [name for _, name in job.joined]

    def flush() -> None:
        part = steps_dir / f"part-a{job.number:05d}-{len(done):04d}.parquet"
        parsed = _parse_adapted_guarded(batch, job.path, options.strict)
        one = _write_part(parsed, part, job.bytes_done, options.redactor)
        one.notes = Counter()
        for record in batch:
            if record.notes:
                one.notes.update(record.notes)
        done.append(one)

    for record in read_records(path, options.limits, job.read_options(options.read), **kwargs):
        batch.append(record)
        rows += len(record.rows)
        if rows >= batch_rows:
            flush()
            batch, rows = [], 0
    if batch or not done:
        flush()
    pa.default_memory_pool().release_unused()
    return done


@dataclass
class _Piece:
    """A parsed and redacted batch of a slice's records (tracerl.data.ingest.run.shardable),
    its rows left in an Arrow IPC file: the coordinator cuts the slices' pieces into the
    parts an unsharded read writes (a slice does not know where the batches of the
    records before it end). Per record: the rows the adapter gave (batches are cut by
    them), the rows kept, its rejects, notes, and whether it is a record."""

    ipc: str | None  # None: no row kept
    adapted_rows: list[int]
    kept_rows: list[int]
    rejects: list[list[Reject]]
    notes: list[Counter | None]
    is_record: list[bool]
    redacted: Counter
    places: list[tuple] | None = None  # of a job of lines: each record's (read_lines)


def _slice_plan_file(shards_dir: Path, path: str) -> Path:
    """Where the plan of a file read in slices is left for the slices (_with_slice_plans)."""
    return shards_dir / f"plan-{hashlib.sha1(path.encode()).hexdigest()[:20]}.pickle"


def _with_slice_plans(jobs: Iterator[AdaptJob], shards_dir: Path,
                      limits: Limits) -> Iterator[AdaptJob]:
    """The jobs; before the first slice of a file whose reader plans its slices
    (`plan_slices`: what every slice would otherwise read for itself, e.g. tau2's header
    and where each simulation is), that plan, made once here and left in shards_dir for
    the slices' processes (_adapt_shard)."""
    for job in jobs:
        if job.shard is not None and job.shard[0] == 0:
            plan_slices = getattr(reader(job.fmt)[0], "plan_slices", None)
            if plan_slices is not None:
                shards_dir.mkdir(exist_ok=True)
                _slice_plan_file(shards_dir, job.path).write_bytes(
                    pickle.dumps(plan_slices(Path(job.path), limits)))
        yield job


def _adapt_shard(job: AdaptJob, shards_dir: Path, batch_rows: int,
                 options: guard.Options) -> list[_Piece]:
    """_adapt_to_parts of one slice of a file: the same batches, parsed and redacted the
    same way, left as _Pieces (with the file's slice plan when _with_slice_plans made
    one)."""
    read_records, _ = reader(job.fmt)
    shards_dir.mkdir(exist_ok=True)
    kwargs = {}
    plan = _slice_plan_file(shards_dir, job.path)
    if getattr(read_records, "plan_slices", None) is not None and plan.is_file():
        kwargs["plan"] = pickle.loads(plan.read_bytes())
    records = read_records(Path(job.path), options.limits, job.read_options(options.read),
                           shard=job.shard, **kwargs)
    return _pieces(records, job, shards_dir, batch_rows, options)


def _adapt_lines(job: AdaptJob, shards_dir: Path, batch_rows: int,
                 options: guard.Options) -> list[_Piece]:
    """The records of a job of a file's lines (the reader's `read_lines`), parsed and
    redacted in batches as _adapt_to_parts does, left as _Pieces with each record's place
    in the file (the coordinator orders and numbers them, _Ordered)."""
    read_lines = reader(job.fmt)[0].read_lines
    shards_dir.mkdir(exist_ok=True)
    places: list[tuple] = []

    def records() -> Iterator:
        for place, record in read_lines(Path(job.path), job.batch, options.limits,
                                        job.read_options(options.read)):
            places.append(place)
            yield record

    pieces = _pieces(records(), job, shards_dir, batch_rows, options)
    at = 0
    for piece in pieces:
        piece.places = places[at:at + len(piece.adapted_rows)]
        at += len(piece.adapted_rows)
    return pieces


def _pieces(records: Iterator, job: AdaptJob, shards_dir: Path, batch_rows: int,
            options: guard.Options) -> list[_Piece]:
    """The records parsed and redacted in batches of about batch_rows adapted rows (as
    _adapt_to_parts cuts them), each batch left as a _Piece."""
    pieces: list[_Piece] = []
    batch: list = []
    rows = 0

    def flush() -> None:
        parsed = _parse_adapted_guarded(batch, job.path, options.strict)
        table, redacted = options.redactor.table(parsed.table)
        rejects: list[list[Reject]] = [[] for _ in batch]
        for reject, owner in zip(parsed.rejects, parsed.owners or [], strict=True):
            rejects[owner].append(reject)
        kept = [0 if rejects[k] else len(r.rows) for k, r in enumerate(batch)]
        if sum(kept) != table.num_rows:
            raise AssertionError(f"{job.path}: {table.num_rows} rows parsed from records "
                                 f"that kept {sum(kept)}")
        ipc = None
        if table.num_rows:
            ipc = str(shards_dir / f"{job.number:05d}-{len(pieces):04d}.arrow")
            with pa.OSFile(ipc, "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                out.write_table(table)
        pieces.append(_Piece(ipc, [len(r.rows) for r in batch], kept, rejects,
                             [r.notes for r in batch], [r.is_record for r in batch],
                             redacted))

    for record in records:
        batch.append(record)
        rows += len(record.rows)
        if rows >= batch_rows:
            flush()
            batch, rows = [], 0
    if batch:
        flush()
    pa.default_memory_pool().release_unused()
    return pieces


class _Assembler:
    """The parts of a file read in slices, cut where an unsharded read cuts its batches
    (a batch ends at the record that brings it to batch_rows adapted rows), from the
    slices' pieces in slice order: the same rows, rejects and notes in each part, so the
    same bytes."""

    def __init__(self, job: AdaptJob, steps_dir: Path, batch_rows: int) -> None:
        self.name = f"part-a{job.number:05d}"
        self.steps_dir = steps_dir
        self.batch_rows = batch_rows
        self.parts = 0
        self._reset()

    def _reset(self) -> None:
        self.tables: list[pa.Table] = []
        self.rejects: list[Reject] = []
        self.notes: Counter = Counter()
        self.redacted: Counter = Counter()
        self.records = 0
        self.read = 0
        self.rows = 0

    def add(self, pieces: list[_Piece], bytes_done: int) -> Iterator[tuple[_Done, Path]]:
        for piece in pieces:
            table = _take_table(piece.ipc)
            self.redacted += piece.redacted
            firsts = np.cumsum([0, *piece.kept_rows]).tolist()
            yield from self.feed(((piece, k, table, firsts[k], piece.rejects[k])
                                  for k in range(len(piece.adapted_rows))), bytes_done)

    def feed(self, records: Iterable[tuple[_Piece, int, pa.Table | None, int, list[Reject]]],
             bytes_done: int) -> Iterator[tuple[_Done, Path]]:
        """Records into parts in the order given, each (its piece, its index there, the
        piece's table, the record's first row in it, its rejects): a part ends at the
        record that brings it to batch_rows adapted rows; rows go in as one slice per run
        of a piece's consecutive rows (a chunk per record is slow)."""
        run: list | None = None  # [piece, table, first row, end] not yet in self.tables

        def take() -> None:
            if run is not None:
                self.tables.append(run[1].slice(run[2], run[3] - run[2]))

        for piece, k, table, first, rejects in records:
            kept = piece.kept_rows[k]
            if kept:
                if run is not None and run[0] is piece and run[3] == first:
                    run[3] += kept
                else:
                    take()
                    run = [piece, table, first, first + kept]
            self.rejects += rejects
            if piece.notes[k]:
                self.notes.update(piece.notes[k])
            self.read += piece.is_record[k]
            self.records += 1
            self.rows += piece.adapted_rows[k]
            if self.rows >= self.batch_rows:
                take()
                run = None
                yield self._part(bytes_done)
        take()

    def finish(self, bytes_done: int) -> Iterator[tuple[_Done, Path]]:
        if self.records or not self.parts:
            yield self._part(bytes_done)

    def _part(self, bytes_done: int) -> tuple[_Done, Path]:
        from tracerl.data.schema import STEP_SCHEMA

        part = self.steps_dir / f"{self.name}-{self.parts:04d}.parquet"
        if len(self.tables) > 1:  # one chunk per column, as one parse of the batch gives:
            table = pa.concat_tables(self.tables).combine_chunks()  # the pages of a column
        else:  # (and so the file's bytes) depend on where its chunks end
            table = self.tables[0] if self.tables else STEP_SCHEMA.empty_table()
        if table.num_rows:
            pq.write_table(table, part)
        rejects = sorted(self.rejects, key=lambda r: r.source_record)  # as parse_adapted
        done = _Done(self.read, rejects, table.num_rows,
                     table.column("episode_id").combine_chunks(), table.column("t").to_numpy(),
                     table.column("done").to_numpy(zero_copy_only=False), bytes_done,
                     self.redacted, self.notes)
        self.parts += 1
        self._reset()
        return done, part


class _Ordered:
    """The parts of a file read in jobs of its lines (AdaptJob.lines), from the jobs'
    pieces: their records in the order one read of the file gives (by their places,
    read_lines), the conversations numbered in the file (a job numbers its own from 1:
    the numbers in its rows and rejects are renumbered), cut into parts where one read
    cuts its batches (_Assembler): the same parts, so the same bytes. Written when the
    file's last job is in (a later line may hold an earlier conversation)."""

    def __init__(self, job: AdaptJob, steps_dir: Path, batch_rows: int) -> None:
        self.assembler = _Assembler(job, steps_dir, batch_rows)
        self.pieces: list[tuple[int, _Piece]] = []  # (its job, the piece)
        self.jobs = 0

    def add(self, pieces: list[_Piece]) -> None:
        self.pieces += [(self.jobs, piece) for piece in pieces]
        self.jobs += 1

    def finish(self, bytes_done: int) -> Iterator[tuple[_Done, Path]]:
        refs = sorted(((place, p, i) for p, (_, piece) in enumerate(self.pieces)
                       for i, place in enumerate(piece.places or ())),
                      key=lambda ref: ref[0])  # stable: each job's notes in job order
        numbers: list[dict[int, int]] = [{} for _ in range(self.jobs)]  # local -> file's
        conversations = (ref for ref in refs if ref[0][0] == 2)
        for number, (place, p, _) in enumerate(conversations, 1):
            numbers[self.pieces[p][0]][place[-1]] = number
        tables, starts = [], []  # per piece: its table (renumbered), each record's first row
        for job, piece in self.pieces:
            tables.append(_renumbered(_take_table(piece.ipc), numbers[job]))
            starts.append(np.cumsum([0, *piece.kept_rows]).tolist())
        out = self.assembler
        for _, piece in self.pieces:
            out.redacted += piece.redacted

        def records() -> Iterator[tuple]:
            for place, p, i in refs:
                job, piece = self.pieces[p]
                renumber = numbers[job] if place[0] == 2 else {}
                yield (piece, i, tables[p], starts[p][i],
                       [_renumbered_reject(r, renumber) for r in piece.rejects[i]])

        yield from out.feed(records(), bytes_done)
        yield from out.finish(bytes_done)


def _take_table(ipc: str | None) -> pa.Table | None:
    """A piece's rows, its IPC file removed (the mapping stays readable)."""
    if ipc is None:
        return None
    with pa.memory_map(ipc) as source:
        table = pa.ipc.open_file(source).read_all()
    os.unlink(ipc)
    return table


def _renumbered(table: pa.Table | None, numbers: dict[int, int]) -> pa.Table | None:
    """The table with its rows' record numbers (a job's own) made the file's."""
    if table is None or not numbers:
        return table
    at = table.schema.get_field_index("source_record")
    old = table.column(at).to_numpy()
    mapping = np.arange(max(int(old.max()), max(numbers)) + 1, dtype=np.int64)
    mapping[list(numbers)] = list(numbers.values())
    return table.set_column(at, table.schema.field(at), pa.array(mapping[old]))


def _renumbered_reject(reject: Reject, numbers: dict[int, int]) -> Reject:
    """A conversation's reject with the file's number (its text says the number when the
    reader kept none: AdaptedRecord.raw)."""
    new = numbers.get(reject.source_record)
    if new is None:
        return reject
    said = f"record {reject.source_record} at "
    raw = f"record {new} at " + reject.raw[len(said):] if reject.raw.startswith(said) \
        else reject.raw
    return dataclasses.replace(reject, source_record=new, raw=raw)


def _read_adapted(files: list[tuple[Path, str]], batch_rows: int, workers: int,
                  steps_dir: Path, first_part: int, quarantine: _Quarantine, index: _Index,
                  summary: IngestSummary, progress: ProgressFn | None,
                  options: guard.Options, names: dict[Path, str] | None = None,
                  inputs: dict[Path, int] | None = None) -> list[Path]:
    """Files read by an adapter, in jobs (a file, a batch of its lines, the files of one
    input a reader joins) parsed by the same rules as native lines and redacted as native
    rows are; with workers > 1, in worker processes, at most workers + 1 jobs in flight
    (bounded memory)."""
    parts: list[Path] = []
    workers = _worker_count([p for p, _ in files], batch_rows, workers)
    jobs = _with_slice_plans(
        _adapt_jobs(files, batch_rows, options.limits, workers, names, inputs),
        steps_dir.parent / "shards", options.limits)

    def account(dones: list[_Done], job: AdaptJob) -> None:
        for j, done in enumerate(dones):
            part = steps_dir / f"part-a{job.number:05d}-{j:04d}.parquet"
            _account(done, part, parts, quarantine, index, summary, progress, first_part)

    tasks = ((_adapt_to_parts, (job, steps_dir, batch_rows, options), job) for job in jobs)
    assembler: _Assembler | None = None
    ordered: _Ordered | None = None
    for result, job in _in_order(tasks, workers):
        if job.lines is not None:
            k, n = job.lines
            if k == 0:
                ordered = _Ordered(job, steps_dir, batch_rows)
            ordered.add(result)
            if k == n - 1:
                for done, part in ordered.finish(job.bytes_done):
                    _account(done, part, parts, quarantine, index, summary, progress,
                             first_part)
                ordered = None
            continue
        if job.shard is None:
            account(result, job)
            continue
        k, n = job.shard
        if k == 0:
            assembler = _Assembler(job, steps_dir, batch_rows)
        written = list(assembler.add(result, job.bytes_done))
        if k == n - 1:
            written += assembler.finish(job.bytes_done)
        for done, part in written:
            _account(done, part, parts, quarantine, index, summary, progress, first_part)
    # parts are numbered after the native ones in the order they were accounted
    renamed = []
    for k, part in enumerate(parts):
        target = steps_dir / f"part-{first_part + k:05d}.parquet"
        part.rename(target)
        renamed.append(target)
    return renamed


def _worker_count(files: list[Path], batch_lines: int, workers: int) -> int:
    """0 means auto: one process per core, but only when there is more than a batch or two
    of input (starting workers costs about a second)."""
    if workers > 0:
        return workers
    approx_lines = sum(p.stat().st_size for p in files) / 200  # >= 200 bytes a step
    return min(os.cpu_count() or 1, 4) if approx_lines > 2 * batch_lines else 1


def _drop_inconsistent_episodes(index: _Index, parts: list[Path], quarantine: _Quarantine,
                                native: set[str], options: guard.Options,
                                joined: set[str] | None = None) -> tuple[int, int, Counter]:
    """Move every row of an inconsistent episode to quarantine; return (episodes kept, rows
    dropped, the placeholders of the dropped rows: counted when their part was written, no
    longer in it). A row of an adapted file is part of a larger record: that record is
    quarantined once (and its text redacted, and counted, again)."""
    unwritten: Counter = Counter()
    if not parts:
        return 0, 0, unwritten
    episode_id = pa.chunked_array(index.episode_id, type=pa.string())
    problems = find_inconsistent_episodes(episode_id, np.concatenate(index.t),
                                          np.concatenate(index.done))
    kept = len(pc.unique(episode_id)) - len(problems)
    if not problems:
        return kept, 0, unwritten
    bad_ids = pa.array(sorted(problems), type=pa.string())
    in_bad = pc.is_in(episode_id, value_set=bad_ids).to_numpy(zero_copy_only=False)
    rejected: list[tuple[str, int, str]] = []  # (file, record, episode_id)
    for p in np.unique(np.concatenate(index.part)[in_bad]):
        table = pq.read_table(parts[p])
        mask = pc.is_in(table.column("episode_id"), value_set=bad_ids)
        dropped = table.filter(mask)
        unwritten += options.redactor.placeholders(dropped)
        rejected += zip(dropped.column("source_file").to_pylist(),
                        dropped.column("source_record").to_pylist(),
                        dropped.column("episode_id").to_pylist(), strict=True)
        pq.write_table(table.filter(pc.invert(mask)), parts[p])
    dropped_rows = len(rejected)
    records = {(f, r): e for f, r, e in rejected}  # one reject per input record
    sources: dict[str, set[str]] = {}  # episode -> the files its rows came from
    for (f, _), e in records.items():
        sources.setdefault(e, set()).add(f)
    raws = _raw_lines({key for key in records if key[0] in native}, options.limits)
    quarantine.add([Reject(f, r, problems[e].field,
                           _episode_reason(problems[e], e, quarantine, sources[e], joined),
                           raws.get((f, r), f"record {r} (episode {e})"))
                    for (f, r), e in sorted(records.items())])
    return kept, dropped_rows, unwritten


def _episode_reason(problem: EpisodeProblem, episode: str, quarantine: _Quarantine,
                    files: set[str] | None = None, joined: set[str] | None = None) -> str:
    """The episode rule broken, and the record whose rejection broke it, if one did, or
    the inputs the episode's rows came from when there are several (one episode id in two
    files of a dataset: every side of it goes, so no file's copy wins by input order);
    when those are files of a format read as one within an input (`joined`: OTel), how to
    have them joined."""
    cause = quarantine.first_reject.get(episode)
    if cause is None:
        if files and len(files) > 1:
            names = ", ".join(sorted(Path(f).name for f in files))
            hint = ("; files of one trace (a collector's rotated files) are read as one "
                    "when given as one input, their folder, and their spans name the same "
                    "trace or conversation id") if joined and files <= joined else ""
            return (f"{problem.reason}; the episode's rows come from {len(files)} input "
                    f"files ({names}): every copy is quarantined{hint}")
        return problem.reason
    source, line, field = cause
    return (f"{problem.reason}; its step at {source}:{line} was rejected ({field}), and the "
            "rest of the episode cannot stand without it")


def _raw_lines(wanted: set[tuple[str, int]], limits: Limits) -> dict[tuple[str, int], str]:
    """Re-read the original text of records rejected after parsing (whole-episode rules)."""
    found: dict[tuple[str, int], str] = {}
    for name in sorted({f for f, _ in wanted}):
        numbers = {r for f, r in wanted if f == name}
        for batch in plan_guarded(Path(name), 50_000, limits):
            lines, _ = batch.read()
            last = batch.first_line + len(lines)
            for number in [n for n in numbers if batch.first_line <= n < last]:
                found[(name, number)] = raw_text(lines[number - batch.first_line])
    return found
