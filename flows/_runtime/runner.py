"""The task runner a stage's shard-level tasks run on, from params (`runtime`).

- `runtime.task_runner: sequential` — one task at a time, in the flow's process.
- `runtime.task_runner: dask` — a Dask cluster through prefect-dask: a local cluster of
  `runtime.dask.n_workers` processes by default, or the scheduler at `runtime.dask.address`
  (`tcp://host:8786`) of an existing, possibly multi-machine, cluster. Workers must see the
  project's files at the same paths (a shared filesystem), as tasks read and write there.

Tasks are deterministic given their inputs and flows gather their results in shard order,
so both runners write the same bytes (tests/test_runner_dask.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracerl.config.schema import Params


def task_runner(params: Params):
    """The task runner `runtime` asks for (its defaults: tracerl.config.pipeline.Runtime)."""
    runtime = params.runtime
    kind = runtime.task_runner
    if kind == "sequential":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=1)
    if kind != "dask":
        raise ValueError(f"runtime.task_runner: {kind!r} is not sequential or dask")
    import dask
    from prefect_dask import DaskTaskRunner

    # Tasks may start processes of their own (ingest's parsers): Dask's default daemonic
    # worker processes could not.
    dask.config.set({"distributed.worker.daemon": False})
    address = runtime.dask.address
    if address:
        return DaskTaskRunner(address=str(address))
    return DaskTaskRunner(cluster_kwargs={
        "n_workers": runtime.dask.n_workers,
        "threads_per_worker": runtime.dask.threads_per_worker,
        "processes": True, "dashboard_address": None})


def with_runner(flow: Any, params: Params) -> Any:
    """The flow, its shard-level tasks on the runner params ask for."""
    return flow.with_options(task_runner=task_runner(params))
