"""Native JSONL → validated Parquet step dataset, with quarantine."""

from tracerl.data.ingest.reader import InputError
from tracerl.data.ingest.run import IngestSummary, ingest

__all__ = ["IngestSummary", "InputError", "ingest"]
