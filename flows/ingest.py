"""ingest: native JSONL → Parquet step table + quarantine, per dataset."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, unmapped

from flows import desk
from flows.common import (
    dataset_param,
    datasets,
    path,
    record_provenance,
    stage_params,
    write_metrics,
)
from flows.identity import identify, namer
from flows.inbox import include_landed
from tasks.ingest import ingest_jsonl
from tracerl.fileio import write_json
from tracerl.params import get
from tracerl.staging import staged


class IngestFailed(RuntimeError):
    outputs_complete = True  # published anyway: the quarantine says what went wrong


@flow(name="ingest", flow_run_name=namer("ingest"))
def ingest_flow() -> dict[str, dict]:
    params = stage_params()
    identify("ingest", params, datasets(params))
    out = path(params, "ingested")
    names = datasets(params)
    # A dataset names its input files and format in params; else the generated JSONL.
    inputs = [[Path(p) for p in dataset_param(params, name, "inputs", [])]
              or [path(params, "raw") / f"{name}.jsonl"] for name in names]
    # Staged paths, not the final ones: a task on a Dask worker (another process) does not
    # see this process's stage, yet what it writes must publish, and come back, with it.
    futures = ingest_jsonl.map(inputs, [staged(out / name) for name in names],
                               unmapped(int(get(params, "ingest.batch_lines", 25_000))),
                               unmapped(float(get(params, "ingest.max_bad_fraction", 0.01))),
                               unmapped(int(get(params, "ingest.workers", 0))),
                               unmapped(get(params, "ingest", {})),
                               fmt=[dataset_param(params, name, "format", "auto")
                                    for name in names],
                               strict=unmapped(bool(get(params, "ingest.strict", False))))
    summaries = {name: f.result() for name, f in zip(names, futures, strict=True)}
    landed = include_landed(params, list(summaries), out)
    write_json(path(params, "reports") / "ingest" / "summary.json",
               {k: v.to_dict() for k, v in summaries.items()})
    write_metrics(params, "ingest", {
        k: {"read": s.read, "accepted": s.accepted, "quarantined": s.quarantined,
            "episodes": s.episodes, "landed_files": landed[k]["files"],
            "landed_rows": landed[k]["rows"]} for k, s in summaries.items()})
    record_provenance(params, "ingest")
    rows = [[k, s.read, s.accepted, s.quarantined, s.episodes, landed[k]["files"],
             landed[k]["rows"], "pass" if s.passed else "FAIL"] for k, s in summaries.items()]
    failed = [s.line() for s in summaries.values() if not s.passed]
    desk.wrote("ingest", [out / k for k in summaries])
    desk.summary("ingest", desk.FAIL if failed else desk.PASS,
                 ["dataset", "read", "accepted", "quarantined", "episodes", "landed files",
                  "landed rows", "status"], rows,
                 notes=failed, description="Records read, accepted and quarantined per dataset")
    if failed:
        raise IngestFailed("; ".join(failed))
    return {k: v.to_dict() for k, v in summaries.items()}
