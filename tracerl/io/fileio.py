"""Atomic file output: a crash never leaves a half-written file behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracerl.io.staging import active, staged, visible


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path beside `path`; on success rename it over `path`, else remove it.

    Inside a stage (tracerl.io.staging.stage_outputs) `path` is the stage's staged copy, so
    the stage's outputs are published together."""
    path = staged(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are ordinary files
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    """Write JSON (sorted keys, indented, trailing newline) atomically."""
    data = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def replace_dir(staged: Path, final: Path) -> None:
    """Move a fully written directory into place, replacing any previous one.

    Two renames: the old directory is moved aside first, so readers never see a mix of
    old and new files; the old copy is deleted only after the new one is in place.
    """
    final = Path(final)
    old = final.with_name(f".{final.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(staged, final)
    if old.exists():
        shutil.rmtree(old)


PUBLISH_JOURNAL = ".publish.json"


def publish_together(staging: Path, out_dir: Path, names: Sequence[str]) -> None:
    """Move staging/<name> to out_dir/<name> for every name as one unit.

    A journal written (atomically) before the first move names the set; a run killed
    during the moves leaves the journal, and `recover_published` (called by the next run
    and by `read_table` before it reads) completes them. So a reader sees the old set or
    the new one, never a mix.
    """
    out_dir = Path(out_dir)
    if active():  # part of a stage's outputs: published with the rest of them
        for name in names:
            os.replace(Path(staging) / name, staged(out_dir / name))
        return
    write_json(out_dir / PUBLISH_JOURNAL, {"staging": Path(staging).name, "names": list(names)})
    recover_published(out_dir)


def recover_published(out_dir: Path) -> bool:
    """Complete a publish that a killed run left half done; True when there was one."""
    out_dir = Path(out_dir)
    journal = out_dir / PUBLISH_JOURNAL
    if not journal.is_file():
        return False
    entry = orjson.loads(journal.read_bytes())
    staging = out_dir / entry["staging"]
    for name in entry["names"]:
        src, dst = staging / name, out_dir / name
        if not src.exists():
            continue  # moved already
        if src.is_dir():
            old = out_dir / f".{name}.old"
            if dst.exists():
                if old.exists():
                    shutil.rmtree(old)
                os.replace(dst, old)
            os.replace(src, dst)
        else:
            os.replace(src, dst)
    journal.unlink()
    for name in entry["names"]:
        shutil.rmtree(out_dir / f".{name}.old", ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    return True


def read_table(folder: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A Parquet dataset folder as one table (parts in name order, so row order is stable).

    `columns` may name nested fields ("state.memory"): only those leaves are read from
    disk, and they come back inside their struct, so a stage reads what it uses.
    """
    folder = visible(folder)  # this stage's own output, if it wrote it
    recover_published(Path(folder).parent)  # a publish a killed run left half done
    parts = sorted(Path(folder).glob("*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{folder}: no Parquet files (has the stage before run?)")
    if columns is None:
        return pa.concat_tables([pq.read_table(p) for p in parts])
    nested: dict[str, list[str]] = {}
    for name in columns:
        parent, _, child = name.partition(".")
        nested.setdefault(parent, [])
        if child:
            nested[parent].append(child)
    import pyarrow.dataset as ds  # here: it imports pandas (~0.3 s), which most stages never use

    projection = {parent: pc.make_struct(*[pc.field(parent, c) for c in children],
                                         field_names=children) if children else pc.field(parent)
                  for parent, children in nested.items()}
    return ds.dataset([str(p) for p in parts], format="parquet").to_table(columns=projection)


# Rows per row group of a written Parquet file: pyarrow's default, which write_table has
# always written (a table is cut into row groups of this many rows).
ROW_GROUP_ROWS = 1024 * 1024


def read_row_groups(folder: Path, rows: int = ROW_GROUP_ROWS) -> Iterator[tuple[int, pa.Table]]:
    """The table `read_table(folder)` reads, as (offset, rows offset .. offset + `rows`)
    in order: a part file at a time, with the same chunks, so no more than `rows` rows and
    one part are held. The last table may be shorter; an empty dataset gives one empty
    table."""
    folder = visible(folder)
    recover_published(Path(folder).parent)
    parts = sorted(Path(folder).glob("*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{folder}: no Parquet files (has the stage before run?)")
    pending: list[pa.Table] = []
    held = offset = 0
    for part in parts:
        table = pq.read_table(part)
        pending.append(table)
        held += table.num_rows
        while held >= rows:
            joined = pa.concat_tables(pending)
            yield offset, joined.slice(0, rows)
            pending, held, offset = [joined.slice(rows)], held - rows, offset + rows
    if held or offset == 0:
        yield offset, pa.concat_tables(pending)


def write_row_groups(tables: Iterable[pa.Table], folder: Path) -> None:
    """Replace `folder` with a Parquet dataset of the tables' rows, atomically, writing
    one table at a time (each cut into row groups of ROW_GROUP_ROWS rows). Tables of
    ROW_GROUP_ROWS rows each but the last (`read_row_groups`) give the very file
    `write_table` writes of their concatenation."""
    folder = staged(Path(folder))
    tmp = folder.with_name(f".{folder.name}.staging-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    writer = None
    try:
        for table in tables:
            if writer is None:
                writer = pq.ParquetWriter(tmp / "part-00000.parquet", table.schema)
            writer.write_table(table)
        if writer is None:
            raise ValueError(f"{folder}: no table to write")
        writer.close()
    except BaseException:
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, folder)


def write_table(table: pa.Table, folder: Path) -> None:
    """Replace `folder` with a Parquet dataset holding `table`, atomically."""
    write_row_groups([table], folder)
