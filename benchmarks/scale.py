"""Scale-out: ingest + validate + ope on 4,000,000 steps in 16 files, sequential vs Dask.

    .venv/bin/python benchmarks/scale.py [--steps 4000000] [--files 16] [--workers 2]
                                         [--runners sequential dask]

The files (half per dataset, made once with the calculator logger, episode ids of their
own, cached under benchmarks/.out/) are dropped in the inbox of a fresh copy of the project
per runner, which then runs as the nightly deployment would: the files land, one task per
file, then `dvc repro` runs every stage, with `runtime.task_runner` set to the runner (Dask:
a local cluster of --workers processes). Each copy talks to a Prefect server of its own on
a free port (never the user's 4200).

Reported per runner, from the Prefect flow runs' start and end times: ingest (the land
subflow + the ingest stage), validate, ope, their sum, and sequential / Dask. Shards are the
16 files for landing and the datasets for validate and ope (two here), so on a machine of
`nproc` cores the best ratio is about min(nproc, shards) for each part.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / ".out" / "scale"
STEPS_PER_EPISODE = 4
DATASETS = ("good_coverage", "no_mul_support")
sys.path.insert(0, str(ROOT))

_MAKE = """
import sys
from tracerl.envs.calculator.logs import log_records, write_jsonl
path, dataset, prefix, episodes, seed = sys.argv[1:6]
records = ({**r, "episode_id": f"{prefix}-{r['episode_id']}"}
           for r in log_records(dataset, int(episodes), int(seed), 0.2))
print(write_jsonl(path, records))
"""


def make_files(steps: int, files: int) -> list[tuple[Path, str]]:
    """`files` JSONL files of steps/files steps each (cached), half per dataset."""
    episodes = max(1, steps // files // STEPS_PER_EPISODE)
    folder = OUT / f"{steps}-{files}"
    folder.mkdir(parents=True, exist_ok=True)
    made, procs = [], []
    for k in range(files):
        dataset = DATASETS[k % len(DATASETS)]
        path = folder / f"part-{k:02d}-{dataset}.jsonl"
        made.append((path, dataset))
        if not path.is_file():
            procs.append(subprocess.Popen([sys.executable, "-c", _MAKE, str(path), dataset,
                                           f"scale{k:02d}", str(episodes), str(1000 + k)],
                                          stdout=subprocess.DEVNULL))
        if len(procs) >= (os.cpu_count() or 1):
            procs.pop(0).wait()
    for p in procs:
        p.wait()
    return made


def _stage_times(env: dict[str, str], run_id: str) -> dict[str, float]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
            get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run_id])))
    out = {}
    for r in runs:
        stage = next((t[6:] for t in r.tags if t.startswith("stage:")), r.name.split(" ")[0])
        if r.start_time and r.end_time:
            out[stage] = (r.end_time - r.start_time).total_seconds()
    return out


def run_once(runner: str, files: list[tuple[Path, str]], workers: int) -> dict[str, float]:
    from tests.conftest import copy_project
    from tests.own_prefect import own_server

    with tempfile.TemporaryDirectory(prefix=f"tracerl-scale-{runner}-") as tmp:
        tmp = Path(tmp)
        (tmp / "project").mkdir()
        project = copy_project(tmp / "project", calculator={"episodes": 50},
                               runtime={"task_runner": runner,
                                        "dask": {"address": None, "n_workers": workers,
                                                 "threads_per_worker": 1}})
        for path, dataset in files:
            target = project / "data" / "inbox" / dataset / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:  # another filesystem
                target.write_bytes(path.read_bytes())
        with own_server(tmp / "prefect-home") as env:
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", "from flows.nightly import nightly_flow; "
                 "from prefect import get_client; s = nightly_flow(return_state=True); "
                 "print('RUN', s.state_details.flow_run_id); assert s.is_completed()"],
                cwd=project, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - started
            if done.returncode != 0:
                raise RuntimeError(f"{runner}: nightly failed:\n{done.stdout[-3000:]}\n"
                                   f"{done.stderr[-3000:]}")
            run_id = next(line.split()[1] for line in done.stdout.splitlines()
                          if line.startswith("RUN "))
            times = _stage_times(env, run_id)
    return {"ingest": times.get("land", 0.0) + times.get("ingest", 0.0),
            "validate": times.get("validate", 0.0), "ope": times.get("ope", 0.0),
            "nightly wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runners", nargs="+", default=["sequential", "dask"])
    args = parser.parse_args()
    t0 = time.perf_counter()
    files = make_files(args.steps, args.files)
    print(f"{len(files)} files, {args.steps:,} steps ({time.perf_counter() - t0:.0f} s to "
          f"make or find them under {files[0][0].parent}); {os.cpu_count()} cores",
          flush=True)
    results = {}
    for runner in args.runners:
        results[runner] = run_once(runner, files, args.workers)
        r = results[runner]
        print(f"{runner:>10}: ingest {r['ingest']:7.1f} s  validate {r['validate']:7.1f} s  "
              f"ope {r['ope']:7.1f} s  sum {r['ingest'] + r['validate'] + r['ope']:7.1f} s  "
              f"(whole nightly {r['nightly wall']:.0f} s)", flush=True)
    if {"sequential", "dask"} <= set(results):
        s, d = results["sequential"], results["dask"]
        parts = {k: s[k] / d[k] for k in ("ingest", "validate", "ope") if d[k]}
        total = sum(s[k] for k in parts) / sum(d[k] for k in parts)
        print("sequential / dask: " + "  ".join(f"{k} {v:.2f}x" for k, v in parts.items())
              + f"  sum {total:.2f}x")


if __name__ == "__main__":
    main()
