"""The ingest stage's side of incremental ingestion: the partitions the nightly run landed
from the inbox (tracerl.inbox) join each dataset's step table, after its own parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger

from flows.common import path
from tracerl.inbox import add_partitions
from tracerl.params import get
from tracerl.staging import visible


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
