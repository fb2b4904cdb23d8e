"""ingest: native JSONL → Parquet step table + quarantine, per dataset."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.common import (
    dataset_param,
    datasets,
    md_table,
    path,
    publish,
    record_provenance,
    stage_params,
    write_metrics,
)
from tasks.ingest import ingest_jsonl
from tracerl.fileio import write_json
from tracerl.params import get


class IngestFailed(RuntimeError):
    outputs_complete = True  # published anyway: the quarantine says what went wrong


@flow(name="ingest")
def ingest_flow() -> dict[str, dict]:
    params = stage_params()
    out = path(params, "ingested")
    summaries = {}
    for name in datasets(params):
        # A dataset names its input files and format in params; else the generated JSONL.
        inputs = [Path(p) for p in dataset_param(params, name, "inputs", [])] or [
            path(params, "raw") / f"{name}.jsonl"]
        summary = ingest_jsonl(inputs, out / name,
                               int(get(params, "ingest.batch_lines", 25_000)),
                               float(get(params, "ingest.max_bad_fraction", 0.01)),
                               int(get(params, "ingest.workers", 0)),
                               get(params, "ingest", {}),
                               fmt=dataset_param(params, name, "format", "auto"),
                               strict=bool(get(params, "ingest.strict", False)))
        summaries[name] = summary
    write_json(path(params, "reports") / "ingest" / "summary.json",
               {k: v.to_dict() for k, v in summaries.items()})
    write_metrics(params, "ingest", {
        k: {"read": s.read, "accepted": s.accepted, "quarantined": s.quarantined,
            "episodes": s.episodes} for k, s in summaries.items()})
    record_provenance(params, "ingest")
    rows = [[k, s.read, s.accepted, s.quarantined, s.episodes, s.rows,
             "pass" if s.passed else "FAIL"] for k, s in summaries.items()]
    publish("ingest-summary", md_table(["dataset", "read", "accepted", "quarantined",
                                        "episodes", "rows", "status"], rows),
            "Records read, accepted and quarantined per dataset")
    failed = [s.line() for s in summaries.values() if not s.passed]
    if failed:
        raise IngestFailed("; ".join(failed))
    return {k: v.to_dict() for k, v in summaries.items()}
