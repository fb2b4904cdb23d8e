"""Prefect task of the ingest stage: logs (native JSONL or an adapter's format) to the
Parquet step table, guarded and redacted."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tracerl.data.adapters import ReadOptions
from tracerl.data.ingest import IngestSummary, ingest
from tracerl.data.ingest.limits import Limits
from tracerl.data.redact import Redactor


@task(name="ingest-jsonl", task_run_name="ingest {out_dir.name}")
def ingest_jsonl(inputs: list[Path], out_dir: Path, batch_lines: int,
                 max_bad_fraction: float, workers: int,
                 knobs: dict | None = None, fmt: str = "auto",
                 strict: bool = False) -> IngestSummary:
    """knobs: the `ingest` section of params (size and nesting limits, redaction)."""
    knobs = knobs or {}
    return ingest(inputs, out_dir, batch_lines=batch_lines, max_bad_fraction=max_bad_fraction,
                  workers=workers, fmt=fmt, strict=strict, limits=Limits.from_params(knobs),
                  redactor=Redactor.from_params(knobs.get("redact")),
                  read_options=ReadOptions.from_params(knobs))
