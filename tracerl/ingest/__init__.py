"""Native JSONL → validated Parquet step dataset, with quarantine."""

from tracerl.ingest.reader import InputError
from tracerl.ingest.run import IngestSummary, ingest

__all__ = ["IngestSummary", "InputError", "ingest"]
