"""ingest: native JSONL → Parquet step table + quarantine, per dataset."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, unmapped

from flows import _publish as publish
from flows._stage import identify, namer, record_provenance, stage_params, write_metrics
from tasks.ingest import ingest_jsonl
from tracerl.config.schema import Params
from tracerl.data.inbox import add_partitions
from tracerl.io.fileio import write_json
from tracerl.io.staging import staged, visible


class IngestFailed(RuntimeError):
    outputs_complete = True  # published anyway: the quarantine says what went wrong


def include_landed(config: Params, names: list[str], out: Path) -> dict[str, dict]:
    landed = config.paths.landed
    if landed is None:  # a pipeline without an inbox (e.g. tau2)
        return {name: {"files": 0, "rows": 0} for name in names}
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
    config = stage_params()
    names = config.dataset_names()
    identify("ingest", config, names)
    out = config.paths.ingested
    # A dataset names its input files and format in params; else the generated JSONL.
    inputs = [[Path(p) for p in config.dataset(name).inputs]
              or [config.paths.raw / f"{name}.jsonl"] for name in names]
    # Staged paths, not the final ones: a task on a Dask worker (another process) does not
    # see this process's stage, yet what it writes must publish, and come back, with it.
    futures = ingest_jsonl.map(inputs, [staged(out / name) for name in names],
                               unmapped(config.ingest),
                               [config.dataset(name).format for name in names])
    summaries = {name: f.result() for name, f in zip(names, futures, strict=True)}
    landed = include_landed(config, list(summaries), out)
    write_json(config.paths.reports / "ingest" / "summary.json",
               {k: v.to_dict() for k, v in summaries.items()})
    write_metrics(config, "ingest", {
        k: {"read": s.read, "accepted": s.accepted, "quarantined": s.quarantined,
            "episodes": s.episodes, "landed_files": landed[k]["files"],
            "landed_rows": landed[k]["rows"]} for k, s in summaries.items()})
    record_provenance(config, "ingest")
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
