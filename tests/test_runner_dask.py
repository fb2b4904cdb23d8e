"""Sequential and Dask task runners write byte-identical outputs (calculator data, a local
Dask cluster of 2 workers), through `dvc repro` on the suite's Prefect server; ope's
critic bootstrap runs as one task per chunk of resamples."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.conftest import copy_project, project_env

pytestmark = pytest.mark.integration

SMALL = {"calculator": {"episodes": 120}, "table": {"mc_episodes": 500},
         "ope": {"n_boot": 100, "boot_chunk": 40, "critic": {"iterations": 100}}}
CHUNKS = 3  # ceil(n_boot / boot_chunk): the critic's bootstrap tasks per candidate
DATASETS = ("good_coverage", "no_mul_support")
# params.yaml's ope.candidates: the four base policies, four softened, two mixtures.
CANDIDATES = ("behavior", "bc", "naive_fqi", "constrained_fqi", "bc~0.1", "bc~0.3",
              "naive_fqi~0.1", "constrained_fqi~0.2", "behavior+constrained_fqi@0.5",
              "bc+naive_fqi@0.5")
OUTPUTS = ("data/raw", "data/ingested", "data/labelled", "models", "metrics", "plots",
           "reports", "dvc.lock")


def _files(project: Path) -> dict[str, bytes]:
    out = {}
    for top in OUTPUTS:
        root = project / top
        for p in ([root] if root.is_file() else sorted(root.rglob("*"))):
            rel = p.relative_to(project).as_posix()
            # Not outputs: the provenance sidecar and GX Data Docs hold run times and ids.
            if p.is_file() and not rel.startswith(("reports/provenance/",
                                                   "reports/validate/data_docs/")):
                out[rel] = p.read_bytes()
    return out


def _ope_task_runs(prefect_server: str, since: datetime) -> list[str]:
    """Names of the task runs of the one ope flow run started after `since`."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterStartTime,
        TaskRunFilter,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_server}), \
            get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["ope"])),
            flow_run_filter=FlowRunFilter(start_time=FlowRunFilterStartTime(after_=since)))
        assert len(runs) == 1, [r.name for r in runs]
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[runs[0].id])), task_run_filter=TaskRunFilter())
    return sorted(t.name for t in tasks)


def test_dask_runner_writes_the_same_bytes_as_the_sequential_one(tmp_path, prefect_server):
    projects = {}
    env = project_env()
    for runner in ("sequential", "dask"):
        (tmp_path / runner).mkdir()
        project = copy_project(tmp_path / runner, **SMALL,
                               runtime={"task_runner": runner,
                                        "dask": {"address": None, "n_workers": 2,
                                                 "threads_per_worker": 1}})
        started = datetime.now(UTC)
        done = subprocess.run(["dvc", "repro"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        used_dask = "Creating a new Dask cluster" in done.stdout + done.stderr
        assert used_dask == (runner == "dask")
        projects[runner] = project
        # The ope stage: one task per candidate and dataset, after one preparation each;
        # then one per chunk of its critic's bootstrap, and one joining them.
        names = _ope_task_runs(prefect_server, started)
        for verb, suffixes in (("evaluate", [""]), ("combine", [""]),
                               ("bootstrap", [f": chunk {i}" for i in range(CHUNKS)])):
            assert [n for n in names if n.startswith(f"{verb} ")] == sorted(
                f"{verb} {c} on {d}{x}" for d in DATASETS for c in CANDIDATES
                for x in suffixes)
    sequential, dask = _files(projects["sequential"]), _files(projects["dask"])
    assert sorted(sequential) == sorted(dask)
    assert any(k.startswith("data/ingested/") for k in sequential)
    assert "reports/report/index.html" in sequential
    # dvc.lock: the same stages with the same hashes; DVC writes independent stages
    # (coverage, train, table) in an order that differed between two runs of one code.
    assert yaml.safe_load(sequential.pop("dvc.lock")) == yaml.safe_load(dask.pop("dvc.lock"))
    differ = [k for k in sequential if sequential[k] != dask[k]]
    assert not differ, f"outputs differ between runners: {differ}"
