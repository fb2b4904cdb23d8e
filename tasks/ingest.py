"""Prefect task of the ingest stage: native JSONL to the Parquet step table."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.ingest import IngestSummary, ingest


@task(name="ingest-jsonl", task_run_name="ingest {out_dir.name}")
def ingest_jsonl(inputs: list[Path], out_dir: Path, batch_lines: int,
                 max_bad_fraction: float, workers: int, fmt: str = "auto",
                 strict: bool = False) -> IngestSummary:
    return ingest(inputs, out_dir, batch_lines=batch_lines, max_bad_fraction=max_bad_fraction,
                  workers=workers, fmt=fmt, strict=strict)
