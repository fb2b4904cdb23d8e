"""Incremental ingestion: raw log files dropped in an inbox, each ingested once.

- The inbox (`paths.inbox`) takes files of any format `tracerl.data.ingest` reads; a file in a
  sub-folder named after a dataset goes to that dataset, a file at the top to the default.
- The manifest (`paths.manifest`, JSON) is keyed by the sha256 of a file's bytes: a file
  seen before — re-dropped, renamed, or the same night re-run — is never ingested twice.
- Each new file is ingested on its own into a partition of its own,
  `paths.landed/<dataset>/<sha256[:16]>/` (steps/, quarantine.jsonl, ingest_summary.json),
  written once and never rewritten; the ingest stage adds the partitions to the dataset.

An episode must lie within one file (each file is ingested, and checked, on its own).
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from tracerl.io.fileio import write_json

CHUNK = 1 << 20


@dataclass(frozen=True)
class InboxFile:
    path: str
    dataset: str
    sha256: str
    bytes: int

    @property
    def partition(self) -> str:
        return self.sha256[:16]


def supported_suffixes() -> tuple[str, ...]:
    from tracerl.data.ingest.reader import SUFFIXES

    return tuple(SUFFIXES)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def scan(inbox: Path, datasets: list[str], default: str) -> tuple[list[InboxFile], list[str]]:
    """Files waiting in the inbox (sorted by path), and those it cannot take, with why."""
    inbox = Path(inbox)
    found, skipped = [], []
    if not inbox.is_dir():
        return found, skipped
    suffixes = supported_suffixes()
    for p in sorted(inbox.rglob("*")):
        if not p.is_file() or p.name.startswith("."):
            continue
        rel = p.relative_to(inbox)
        dataset = rel.parts[0] if len(rel.parts) > 1 else default
        if not p.name.endswith(suffixes):
            skipped.append(f"{rel}: not a supported format ({', '.join(suffixes)})")
        elif dataset not in datasets:
            skipped.append(f"{rel}: unknown dataset {dataset!r} (datasets: {datasets})")
        else:
            found.append(InboxFile(str(p), dataset, sha256_of(p), p.stat().st_size))
    return found, skipped


def load_manifest(path: Path) -> dict[str, dict[str, Any]]:
    path = Path(path)
    return orjson.loads(path.read_bytes()) if path.is_file() else {}


def save_manifest(path: Path, manifest: dict[str, dict[str, Any]]) -> None:
    write_json(Path(path), manifest)


def new_files(found: list[InboxFile], manifest: dict[str, dict[str, Any]]
              ) -> tuple[list[InboxFile], list[InboxFile]]:
    """(new, already seen): a content seen in the manifest, or twice tonight, is seen."""
    new, seen, hashes = [], [], set(manifest)
    for f in found:
        (seen if f.sha256 in hashes else new).append(f)
        hashes.add(f.sha256)
    return new, seen


def land(file: InboxFile, landed: Path, *, batch_lines: int, max_bad_fraction: float,
         workers: int = 1) -> dict[str, Any]:
    """Ingest one inbox file into its own partition; the manifest entry it earns.

    A file with too many bad records is not landed (status "rejected", with the reason);
    its content is still recorded, so the same bytes are not retried every night.
    """
    from tracerl.data.ingest import ingest

    final = Path(landed) / file.dataset / file.partition
    staged = final.with_name(f".{final.name}.staging")
    shutil.rmtree(staged, ignore_errors=True)
    summary = ingest([file.path], staged, batch_lines=batch_lines,
                     max_bad_fraction=max_bad_fraction, workers=workers)
    entry = {**asdict(file), "read": summary.read, "accepted": summary.accepted,
             "quarantined": summary.quarantined, "episodes": summary.episodes}
    if not summary.passed:
        shutil.rmtree(staged, ignore_errors=True)
        return {**entry, "status": "rejected", "reason": summary.line(), "partition": None}
    if final.exists():  # landed by a run that died before saving the manifest
        shutil.rmtree(final)
    staged.rename(final)
    return {**entry, "status": "landed", "partition": str(final)}


def landed_partitions(landed: Path, dataset: str) -> list[Path]:
    """The dataset's landed partitions holding steps, in name (content hash) order."""
    root = Path(landed) / dataset
    if not root.is_dir():
        return []
    return [p for p in sorted(root.iterdir())
            if p.is_dir() and not p.name.startswith(".") and (p / "steps").is_dir()]


def add_partitions(landed: Path, dataset: str, steps_dir: Path) -> dict[str, int]:
    """Copy the dataset's landed partitions into its step table folder, after the parts
    already there (`part-landed-<hash>-<k>.parquet` sorts after `part-<k>`)."""
    import pyarrow.parquet as pq

    files = rows = 0
    for part_dir in landed_partitions(landed, dataset):
        files += 1
        for part in sorted((part_dir / "steps").glob("*.parquet")):
            target = Path(steps_dir) / f"part-landed-{part_dir.name}-{part.stem.split('-')[-1]}"
            shutil.copyfile(part, target.with_suffix(".parquet"))
            rows += pq.ParquetFile(part).metadata.num_rows
    return {"files": files, "rows": rows}
