"""ingest: native JSONL → Parquet step table + quarantine, per dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, unmapped

from flows import _publish as publish
from flows._stage import (
    dataset_param,
    datasets,
    identify,
    namer,
    path,
    record_provenance,
    stage_params,
    write_metrics,
)
from tasks.ingest import ingest_jsonl
from tracerl.config.params import get
from tracerl.data.inbox import add_partitions
from tracerl.io.fileio import write_json
from tracerl.io.staging import staged, visible


class IngestFailed(RuntimeError):
    outputs_complete = True  # published anyway: the quarantine says what went wrong


def include_landed(params: dict[str, Any], names: list[str], out: Path) -> dict[str, dict]:
    if get(params, "paths.landed") is None:  # a pipeline without an inbox (e.g. tau2)
        return {name: {"files": 0, "rows": 0} for name in names}
    landed = path(params, "landed")
    added = {}
    for name in names:
        # Into this stage's own (staged) step table, where the ingest task wrote it.
        added[name] = add_partitions(landed, name, visible(out / name / "steps"))
        if added[name]["files"]:
            get_run_logger().info("ingest %s: added %d landed partitions (%d rows) from %s",
                                  name, added[name]["files"], added[name]["rows"],
                                  landed / name)
    return added


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
    publish.wrote("ingest", [out / k for k in summaries])
    publish.summary("ingest", publish.FAIL if failed else publish.PASS,
                 ["dataset", "read", "accepted", "quarantined", "episodes", "landed files",
                  "landed rows", "status"], rows,
                 notes=failed, description="Records read, accepted and quarantined per dataset")
    if failed:
        raise IngestFailed("; ".join(failed))
    return {k: v.to_dict() for k, v in summaries.items()}
