"""Prefect task of the ingest stage: logs (native JSONL or an adapter's format) to the
Parquet step table, guarded and redacted."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.config.data import Ingest
from tracerl.config.options import ingest_options
from tracerl.data.ingest import IngestSummary, ingest


@task(name="ingest-jsonl", task_run_name="ingest {out_dir.name}")
def ingest_jsonl(inputs: list[Path], out_dir: Path, knobs: Ingest,
                 fmt: str = "auto") -> IngestSummary:
    """knobs: the `ingest` section (batches, workers, size and nesting limits, redaction)."""
    return ingest(inputs, out_dir, fmt=fmt, **ingest_options(knobs))
