"""The OpenTelemetry GenAI adapter alone, and split in shards: what one process costs.

    .venv/bin/python benchmarks/ingest_otel.py [FILE] [--shards 2] [--runs 3]
        [--base PYTHON:ROOT] [--ingest]

FILE: an OTel file (default: benchmarks/.out/adapters_10000/otel.jsonl, the 10,000
support-desk conversations of benchmarks/ingest_adapters.py, made when missing). Each
measurement runs in a fresh interpreter (imports not timed): `read_otel` over the whole
file (redaction and limits are ingest's, not the reader's: the record guards are on),
once unsharded and once as shard (0, n) of --shards, giving CPU and wall seconds of the
read, its actions (rows), actions per CPU second and the child's peak RSS. Unsharded vs
shard (0, n) says what splitting the file between n processes saves each one (every shard
loads the whole file: spans join across it; it adapts only its slice).

--base PYTHON:ROOT runs the same (unsharded: it may have no shard hook) with another
checkout's code (e.g. /work/main/.venv/bin/python:/work/main), in turn with this one's (A B
A B ...), and prints the ratios run by run: the machine is shared, compare only side by
side. --ingest also times `tracerl ingest` of the file (fresh interpreter, default
workers) and samples the whole process tree's peak PSS (proportional set size, summed
over the tree) every 50 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / ".out"
DEFAULT = OUT / "adapters_10000" / "otel.jsonl"

_READ = """
import gc, json, resource, sys, time
from pathlib import Path
from tracerl.data.formats.otel_genai.read import read_otel
from tracerl.data.ingest.limits import Limits
import tracerl.data.ingest.run  # what an ingest worker has imported
shard = json.loads(sys.argv[2])
gc.disable()  # as an ingest worker reads (tracerl.data.ingest.run)
wall, cpu = time.perf_counter(), time.process_time()
records = rows = 0
kw = {} if shard is None else {"shard": tuple(shard)}
for r in read_otel(Path(sys.argv[1]), Limits(), **kw):
    records += 1
    rows += len(r.rows)
print(json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                  "records": records, "actions": rows,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def read_once(python: str, root: str, path: Path, shard: tuple[int, int] | None) -> dict:
    proc = subprocess.run([python, "-c", _READ, str(path), json.dumps(shard)], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{python} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ingest_once(python: str, root: str, path: Path) -> dict:
    out = OUT / f"ingest_otel_run_{abs(hash(root))}"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "tracerl", "ingest", str(path), "--out", str(out),
                             "--format", "otel-genai"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    tree_root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            pss = 0
            for p in [tree_root, *tree_root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    pss += p.memory_full_info().pss
            peak = max(peak, pss)
        time.sleep(0.05)
    proc.communicate()
    seconds = time.perf_counter() - start
    summary = json.loads((out / "ingest_summary.json").read_text())
    return {"wall_s": seconds, "actions": summary["rows"],
            "actions_per_s": summary["rows"] / seconds, "peak_tree_pss_mb": peak / 2**20}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base", help="PYTHON:ROOT of the checkout to compare with")
    ap.add_argument("--ingest", action="store_true")
    args = ap.parse_args(argv)
    if not args.file.is_file() and args.file == DEFAULT:
        sys.path.insert(0, str(ROOT))
        from benchmarks.ingest_adapters import make_inputs

        make_inputs(10_000, DEFAULT.parent)
    codes = {"this": (sys.executable, str(ROOT))}
    if args.base:
        python, root = args.base.split(":", 1)
        codes["base"] = (python, root)
    cases: list[tuple[str, tuple[int, int] | None]] = [("unsharded", None),
                                                       (f"shard 0/{args.shards}",
                                                        (0, args.shards))]
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.runs):
        for case, shard in cases:
            for code, (python, root) in codes.items():
                if shard is not None and code == "base":
                    continue  # the base may have no shard hook: compared unsharded
                results.setdefault((code, case), []).append(
                    read_once(python, root, args.file, shard))
        if args.ingest:
            for code, (python, root) in codes.items():
                results.setdefault((code, "ingest"), []).append(
                    ingest_once(python, root, args.file))
    print(f"{args.file} ({args.file.stat().st_size:,} bytes), {args.runs} runs each, medians")
    for (code, case), runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        if case == "ingest":
            print(f"  {code:5} tracerl ingest: {med['wall_s']:.2f} s wall, "
                  f"{med['actions']:,.0f} actions, {med['actions_per_s']:,.0f} actions/s, "
                  f"tree peak PSS {med['peak_tree_pss_mb']:,.0f} MiB")
        else:
            print(f"  {code:5} read_otel {case:11}: {med['cpu_s']:.2f} CPU s, "
                  f"{med['wall_s']:.2f} wall s, {med['records']:,.0f} records, "
                  f"{med['actions']:,.0f} actions ({med['actions'] / med['cpu_s']:,.0f} per "
                  f"CPU s), peak RSS {med['peak_rss_mb']:,.0f} MiB")
    for case in ["unsharded"] + (["ingest"] if args.ingest else []):
        key = "wall_s" if case == "ingest" else "cpu_s"
        if "base" in codes:
            ratios = [a[key] / b[key] for a, b in zip(results[("this", case)],
                                                      results[("base", case)], strict=True)]
            print(f"  this/base {case} {key}: median {statistics.median(ratios):.3f} "
                  f"(runs {', '.join(f'{r:.3f}' for r in ratios)})")
    whole = results[("this", "unsharded")]
    part = results[("this", f"shard 0/{args.shards}")]
    ratios = [b["cpu_s"] / a["cpu_s"] for a, b in zip(whole, part, strict=True)]
    print(f"  this: shard 0/{args.shards} / unsharded CPU s: median "
          f"{statistics.median(ratios):.3f} (runs {', '.join(f'{r:.3f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
