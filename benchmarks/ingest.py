"""Benchmark `tracerl ingest` against pyarrow.json and pandas on the same native JSONL file.

    .venv/bin/python benchmarks/ingest.py [--steps 1000000] [--seed 0] [--check]

One run, one file, three contenders, each in its own fresh interpreter, one after the other
(never concurrently). Wall time is taken in this process around the whole child (interpreter
start-up included, the same for all). Memory is measured over the child's whole process
tree, because `tracerl ingest` parses in worker processes (one worker per
core): a thread here samples every process of the tree every 50 ms (psutil) and keeps the
peak of the tree's summed PSS (shared pages split between the processes that share them,
so nothing is counted twice) and of its summed RSS (shared pages counted in every
process: an upper bound). The largest single process's ru_maxrss (os.wait4) is shown
beside them: it is what one process alone reached, never the tree. This process imports
nothing heavy and makes the data file in a child too, so its own size stays out of the
figures.

The data file is made once with the project's own logger and cached under benchmarks/.out/
(git-ignored); it is reused when the same --steps and --seed are asked again.

Targets (issue 19): tracerl rate >= 0.5 x pyarrow.json.read_json (the parse-speed limit),
>= 5 x pandas.read_json(lines=True) + to_parquet, and tracerl's whole-tree peak PSS < 1 GB
(1e9 bytes).
The exit status is 0 (it is a report) unless --check is given; then it is 1 when a target
or the check of tracerl's output fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / ".out"
STEPS_PER_EPISODE = 4  # the calculator logger's good_coverage policy: 4 steps per episode
DATASET = "good_coverage"
TEST_FRACTION = 0.2

TARGET_VS_PYARROW = 0.5
TARGET_VS_PANDAS = 5.0
TARGET_PEAK_BYTES = 1e9
MB = 1e6  # figures in MB (10^6 bytes), to match the 1 GB (10^9 bytes) target

_MAKE_DATA = """
import sys
from tracerl.envs.calculator.logs import log_records, write_jsonl
path, dataset, episodes, seed, test_fraction = sys.argv[1:6]
n = write_jsonl(path, log_records(dataset, int(episodes), int(seed), float(test_fraction)))
print(n)
"""

_PYARROW = """
import json, sys
import pyarrow.json as j
t = j.read_json(sys.argv[1])
print(json.dumps({"rows": t.num_rows}))
"""

_PANDAS = """
import json, os, sys
import pandas as pd
df = pd.read_json(sys.argv[1], lines=True)
df.to_parquet(sys.argv[2])
print(json.dumps({"rows": len(df), "parquet_bytes": os.path.getsize(sys.argv[2])}))
"""

_IMPORTS = {
    "python (no imports)": "pass",
    "import tracerl.cli + tracerl.data.ingest": "import tracerl.cli, tracerl.data.ingest",
    "import pyarrow.json": "import pyarrow.json",
    "import pandas + pyarrow.parquet": "import pandas, pyarrow.parquet",
}


@dataclass
class Run:
    name: str
    seconds: float
    peak_bytes: int  # the tree's summed PSS at its sampled peak
    peak_rss_sum: int  # the tree's summed RSS at its sampled peak (shared pages repeated)
    max_single_rss: int  # ru_maxrss: the largest one process of the tree reached
    processes: int  # the most processes the tree had at once
    cpu_seconds: float  # user + system CPU of the child and every descendant it reaped
    returncode: int | None  # None: killed at the time limit
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def last_json(self) -> dict:
        for line in reversed(self.stdout.strip().splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
        return {}


class TreeSampler(threading.Thread):
    """Samples the memory of a process and all its descendants until stopped."""

    INTERVAL = 0.05  # a sample reads smaps_rollup of each process: ~1 ms per GB resident

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_pss = self.peak_rss = self.processes = 0
        self._stop_event = threading.Event()

    def sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        pss = rss = alive = 0
        for proc in tree:
            try:
                mem = proc.memory_full_info()  # smaps_rollup: PSS as well as RSS
            except psutil.Error:  # exited between listing and reading
                continue
            pss, rss, alive = pss + mem.pss, rss + mem.rss, alive + 1
        self.peak_pss = max(self.peak_pss, pss)
        self.peak_rss = max(self.peak_rss, rss)
        self.processes = max(self.processes, alive)

    def run(self) -> None:
        while not self._stop_event.wait(self.INTERVAL):
            self.sample()

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def run_child(name: str, argv: list[str], timeout: float | None = None,
              cwd: Path = ROOT) -> Run:
    """Run argv (in `cwd`) to completion; wall time from just before spawn to reaping, memory of its
    process tree sampled meanwhile, and the largest single process's ru_maxrss from the
    rusage os.wait4 returns (KiB on Linux; the maximum over the child and the descendants
    it reaped, not their sum)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        timed_out = threading.Event()
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err)
        sampler = TreeSampler(proc.pid)
        sampler.start()

        def kill() -> None:
            timed_out.set()
            os.kill(proc.pid, signal.SIGKILL)  # our own child, by its pid

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.start()
        try:
            # WNOWAIT: the child stays a zombie (its pid cannot be reused) until the sampler
            # has stopped; then it is reaped for its rusage.
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            sampler.stop()
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer:
                timer.cancel()
            if sampler.is_alive():
                sampler.stop()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Run(name, seconds, sampler.peak_pss, sampler.peak_rss, usage.ru_maxrss * 1024,
                   sampler.processes, usage.ru_utime + usage.ru_stime,
                   None if timed_out.is_set() else proc.returncode,
                   out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
    return n


def make_data(steps: int, seed: int) -> tuple[Path, bool]:
    """The cached data file for (steps, seed); made in a child process when missing."""
    episodes = steps // STEPS_PER_EPISODE
    path = OUT / f"calculator_{DATASET}_{episodes * STEPS_PER_EPISODE}steps_seed{seed}.jsonl"
    meta_path = path.with_suffix(".meta.json")
    want = {"dataset": DATASET, "episodes": episodes, "seed": seed,
            "test_fraction": TEST_FRACTION}
    if path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if {k: meta.get(k) for k in want} == want and meta.get("bytes") == path.stat().st_size:
            return path, True
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"making {path.relative_to(ROOT)} ({episodes:,} episodes) ...", flush=True)
    run = run_child("make data", [sys.executable, "-c", _MAKE_DATA, str(path), DATASET,
                                  str(episodes), str(seed), str(TEST_FRACTION)])
    if not run.ok:
        sys.exit(f"making the data file failed:\n{run.stderr[-4000:]}")
    print(f"  made in {run.seconds:.1f} s", flush=True)
    meta_path.write_text(json.dumps({**want, "lines": int(run.stdout.split()[-1]),
                                     "bytes": path.stat().st_size}, indent=2) + "\n")
    return path, False


def prefix_file(path: Path, rows: int) -> Path:
    """The first `rows` lines of path, cached next to it."""
    prefix = path.with_name(f"{path.stem}.first{rows}.jsonl")
    if prefix.is_file() and count_lines(prefix) == rows:
        return prefix
    tmp = prefix.with_name(f".{prefix.name}.{os.getpid()}.tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        for i, line in enumerate(src):
            if i >= rows:
                break
            dst.write(line)
    os.replace(tmp, prefix)
    return prefix


def warm_cache(path: Path) -> None:
    # Every contender then reads the file from the page cache, none from disk.
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def fmt_mb(n: float) -> str:
    return f"{n / MB:,.0f}"


def tail(text: str, n: int = 15) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines()[-n:])


def verdict(ok: bool | None) -> str:
    return {True: "PASS", False: "FAIL", None: "N/A"}[ok]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000,
                    help="steps in the data file (episodes = steps // 4) [1000000]")
    ap.add_argument("--seed", type=int, default=0, help="logger seed [0]")
    ap.add_argument("--pandas-rows", type=int, default=None,
                    help="run pandas on only the first N lines and scale its rate "
                         "(default: the full file)")
    ap.add_argument("--pandas-timeout", type=float, default=900.0,
                    help="kill the pandas child after this many seconds [900]")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a target or the output check fails")
    args = ap.parse_args(argv)
    if args.steps < STEPS_PER_EPISODE:
        ap.error(f"--steps must be at least {STEPS_PER_EPISODE}")

    data, reused = make_data(args.steps, args.seed)
    steps = count_lines(data)
    size = data.stat().st_size
    warm_cache(data)

    print()
    print(f"python      {sys.version.split()[0]} ({sys.executable})")
    print(f"cpus        {os.cpu_count()}; contenders run one at a time, each in a fresh process")
    print(f"data        {data.relative_to(ROOT)} ({'reused' if reused else 'made now'})")
    print(f"            {steps:,} steps ({steps // STEPS_PER_EPISODE:,} episodes of "
          f"{STEPS_PER_EPISODE}), {size / MB:,.1f} MB, seed {args.seed}")
    if steps != (args.steps // STEPS_PER_EPISODE) * STEPS_PER_EPISODE:
        print(f"WARNING     the file has {steps:,} lines, not the {args.steps:,} asked")

    # Start-up cost: what each contender pays before it reads a byte.
    print("\nimport-only baselines (fresh process each):")
    baselines: dict[str, Run] = {}
    for label, code in _IMPORTS.items():
        r = run_child(label, [sys.executable, "-c", code])
        baselines[label] = r
        state = "" if r.ok else f"  (exit {r.returncode})"
        print(f"  {label:<38} {r.seconds:6.2f} s  {fmt_mb(r.peak_bytes):>6} MB peak PSS{state}")

    # a. the real CLI
    ingest_out = OUT / "ingest_run"
    shutil.rmtree(ingest_out, ignore_errors=True)
    print("\nrunning: tracerl ingest ...", flush=True)
    tr = run_child("tracerl ingest", [sys.executable, "-m", "tracerl", "ingest", str(data),
                                      "--out", str(ingest_out)], timeout=3600)
    # b. the parse-speed limit
    print("running: pyarrow.json.read_json ...", flush=True)
    pa_run = run_child("pyarrow.json.read_json", [sys.executable, "-c", _PYARROW, str(data)],
                       timeout=3600)
    # c. pandas
    pandas_input, pandas_rows = data, steps
    if args.pandas_rows is not None and 0 < args.pandas_rows < steps:
        pandas_input = prefix_file(data, args.pandas_rows)
        pandas_rows = args.pandas_rows
        warm_cache(pandas_input)
    pandas_parquet = OUT / "pandas_out.parquet"
    pandas_parquet.unlink(missing_ok=True)
    print(f"running: pandas.read_json(lines=True) + to_parquet on {pandas_rows:,} lines "
          f"(time limit {args.pandas_timeout:g} s) ...", flush=True)
    pd_run = run_child("pandas read_json+to_parquet",
                       [sys.executable, "-c", _PANDAS, str(pandas_input), str(pandas_parquet)],
                       timeout=args.pandas_timeout)
    pandas_parquet.unlink(missing_ok=True)

    # Table.
    rows_of = {tr.name: steps, pa_run.name: steps, pd_run.name: pandas_rows}
    base_of = {tr.name: "import tracerl.cli + tracerl.data.ingest",
               pa_run.name: "import pyarrow.json",
               pd_run.name: "import pandas + pyarrow.parquet"}
    print()
    head = (f"{'contender':<30} {'rows':>10} {'seconds':>9} {'CPU s':>7} {'steps/s':>11} "
            f"{'procs':>5} {'tree PSS MB':>12} {'tree RSS MB':>12} {'max 1 proc':>11} "
            f"{'s - import':>10}  status")
    print(head)
    print("-" * len(head))
    for r in (tr, pa_run, pd_run):
        if r.returncode is None:
            status = f"KILLED at the {args.pandas_timeout:g} s limit"
        elif r.ok:
            status = "ok"
        else:
            status = f"FAILED (exit {r.returncode})"
        rate = rows_of[r.name] / r.seconds
        # A killed run's time and peak are lower bounds, so its rate is an upper bound.
        mark = ("<" if r.returncode is None else " ", ">=" if r.returncode is None else "  ")
        net = r.seconds - baselines[base_of[r.name]].seconds
        print(f"{r.name:<30} {rows_of[r.name]:>10,} {mark[1]}{r.seconds:7.2f} "
              f"{r.cpu_seconds:7.2f} {mark[0]}{rate:>10,.0f} {r.processes:>5} "
              f"{mark[1]}{fmt_mb(r.peak_bytes):>10} "
              f"{mark[1]}{fmt_mb(r.peak_rss_sum):>10} {mark[1]}{fmt_mb(r.max_single_rss):>9} "
              f"{net:>10.2f}  {status}")
    if pandas_rows != steps:
        print(f"NOTE: pandas ran on the first {pandas_rows:,} of {steps:,} lines only "
              "(--pandas-rows); its steps/s is that prefix's rate, assumed to hold for the "
              "whole file. Its fixed start-up cost weighs more on a short run.")
    print("seconds: wall time of the whole child process, interpreter start-up included; "
          "'s - import' subtracts that contender's import-only baseline (information only). "
          "CPU s: user + system CPU seconds of the child and the descendants it reaped "
          "(os.wait4), every thread and worker process included.")
    print("procs: the most processes the child's tree had at once. tree PSS / tree RSS: "
          "peak of the tree's summed PSS / RSS, sampled every 50 ms (RSS repeats shared "
          "pages in every process). max 1 proc: the largest single process's ru_maxrss "
          "(os.wait4). MB = 10^6 bytes.")

    for r in (tr, pa_run, pd_run):
        if not r.ok:
            print(f"\n{r.name}: " + ("killed at the time limit" if r.returncode is None
                                     else f"exit status {r.returncode}") + "; stderr tail:")
            print(tail(r.stderr) or "    (empty)")

    # Check what tracerl produced.
    print("\ntracerl ingest stdout:")
    print(tail(tr.stdout) or "    (empty)")
    summary_path = ingest_out / "ingest_summary.json"
    output_ok = False
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        print(f"{summary_path.relative_to(ROOT)}:")
        print("\n".join("    " + line for line in json.dumps(summary, indent=2).splitlines()))
        output_ok = summary.get("accepted") == steps and summary.get("quarantined") == 0
        steps_dir = ingest_out / "steps"
        if steps_dir.is_dir():
            print(f"    (steps/ on disk: {dir_bytes(steps_dir) / MB:,.1f} MB of Parquet)")
    else:
        print(f"{summary_path.relative_to(ROOT)}: MISSING")
    print(f"output check: accepted == {steps:,} and quarantined == 0 ... {verdict(output_ok)}")
    pa_rows = pa_run.last_json().get("rows")
    if pa_run.ok:
        print(f"pyarrow read {pa_rows:,} rows"
              + ("" if pa_rows == steps else f" (expected {steps:,})"))
    if pd_run.ok:
        pd_info = pd_run.last_json()
        print(f"pandas read {pd_info.get('rows', 0):,} rows; its Parquet was "
              f"{pd_info.get('parquet_bytes', 0) / MB:,.1f} MB")

    # Targets.
    tr_rate = steps / tr.seconds if tr.ok else None
    pa_rate = steps / pa_run.seconds if pa_run.ok else None
    print("\ntargets:")
    checks: list[bool | None] = [output_ok]

    if tr_rate is not None and pa_rate is not None:
        ratio = tr_rate / pa_rate
        ok = ratio >= TARGET_VS_PYARROW
        print(f"  tracerl / pyarrow parse rate  {ratio:6.2f}   (target >= {TARGET_VS_PYARROW})"
              f"   {verdict(ok)}")
        print(f"  (per CPU second: tracerl / pyarrow {pa_run.cpu_seconds / tr.cpu_seconds:.2f};"
              " information only: the target is on wall time)")
    else:
        ok = False if not tr.ok else None
        print(f"  tracerl / pyarrow parse rate     n/a   (a run failed)   {verdict(ok)}")
    checks.append(ok)

    pd_rate = pandas_rows / pd_run.seconds
    if tr_rate is None:
        ok = False
        print(f"  tracerl / pandas rate            n/a   (tracerl failed)   {verdict(ok)}")
    elif pd_run.ok or pd_run.returncode is None:
        # A killed pandas run gives an upper bound on its rate, so a lower bound on the ratio.
        ratio = tr_rate / pd_rate
        ok = ratio >= TARGET_VS_PANDAS
        bound = ">=" if pd_run.returncode is None else "  "
        note = ""
        if pd_run.returncode is None:
            note = "   (pandas was killed: the ratio is a lower bound)"
            ok = ok or None  # a lower bound under the target decides nothing
        print(f"  tracerl / pandas rate       {bound}{ratio:6.2f}   (target >= {TARGET_VS_PANDAS})"
              f"   {verdict(ok)}{note}")
    else:
        ok = None
        print(f"  tracerl / pandas rate            n/a   (pandas failed; see above)   "
              f"{verdict(ok)}")
    checks.append(ok)

    ok = tr.ok and tr.peak_bytes < TARGET_PEAK_BYTES
    print(f"  tracerl whole-tree peak PSS {tr.peak_bytes / 1e9:5.2f} GB (target < "
          f"{TARGET_PEAK_BYTES / 1e9} GB)   {verdict(ok)}")
    checks.append(ok)

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"\n(this benchmark process itself peaked at {fmt_mb(own)} MB, outside the "
          "figures above)")

    failed = any(c is False for c in checks)
    print("overall: " + ("some target FAILED" if failed else "all evaluated targets PASS"))
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
