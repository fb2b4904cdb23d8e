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

from typing import Any

from tracerl.config.params import get


def task_runner(params: dict[str, Any]):
    kind = str(get(params, "runtime.task_runner", "sequential"))
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
    address = get(params, "runtime.dask.address")
    if address:
        return DaskTaskRunner(address=str(address))
    return DaskTaskRunner(cluster_kwargs={
        "n_workers": int(get(params, "runtime.dask.n_workers", 2)),
        "threads_per_worker": int(get(params, "runtime.dask.threads_per_worker", 1)),
        "processes": True, "dashboard_address": None})


def with_runner(flow: Any, params: dict[str, Any]) -> Any:
    """The flow, its shard-level tasks on the runner params ask for."""
    return flow.with_options(task_runner=task_runner(params))
