"""The sections every stage of a pipeline shares: `paths`, `runtime` (the task runner) and
`nightly`. Every key has its default here."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from tracerl.config.base import PathStr, PositiveInt, Section


class Paths(Section):
    """Where a pipeline reads and writes, relative to the repository root."""

    raw: PathStr = Path("data/raw")            # a fixture's generated logs, one file per dataset
    ingested: PathStr = Path("data/ingested")  # <dataset>/steps/, quarantine.jsonl, summary
    labelled: PathStr = Path("data/labelled")  # <dataset>/steps/ with relabelled rewards
    models: PathStr = Path("models")           # trained policies
    reports: PathStr = Path("reports")
    metrics: PathStr = Path("metrics")         # small scalar metrics, committed to git
    plots: PathStr = Path("plots")             # plot data for `dvc plots`, committed to git
    gx: PathStr = Path("gx")                   # the kept Great Expectations suite, checkpoints
    inbox: PathStr | None = None               # nightly: new raw log files are dropped here
    landed: PathStr | None = None              # nightly: one partition per ingested inbox file
    manifest: PathStr | None = None            # nightly: content hashes of the files seen


class Dask(Section):
    address: str | None = None       # an existing cluster's scheduler; None: a local one
    n_workers: PositiveInt = 2
    threads_per_worker: PositiveInt = 1


class Runtime(Section):
    task_runner: Literal["sequential", "dask"] = "sequential"  # shard-level tasks on Dask
    dask: Dask = Dask()


class Nightly(Section):
    dataset: str | None = None  # a file dropped at the top of the inbox (None: the first dataset)
