"""Side by side: two checkouts' `tracerl ingest` (and pyarrow.json.read_json on native JSONL),
alternating, each in a fresh interpreter; best wall and CPU seconds (children included);
their outputs (Parquet, summaries) compared by md5.

    .venv/bin/python benchmarks/ingest_side_by_side.py FILE FORMAT REPEATS

The two checkouts (python:root) are TRACERL_BASE and TRACERL_NEW, by default /work/main
and this worktree. The machine is shared: compare the ratios and CPU seconds of one run.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
OUT = HERE / "benchmarks" / ".out" / "side_by_side"
CODE = {
    "base": tuple(os.environ.get("TRACERL_BASE", "/work/main/.venv/bin/python:/work/main")
                  .split(":")),
    "new": tuple(os.environ.get("TRACERL_NEW", f"{HERE}/.venv/bin/python:{HERE}").split(":")),
}


def timed(argv: list[str], cwd: str) -> tuple[float, float, int, str]:
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    return (time.perf_counter() - t0, ru.ru_utime + ru.ru_stime,
            os.waitstatus_to_exitcode(status), err)


def digest(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.md5(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*"))
            if f.is_file() and f.suffix in (".parquet", ".jsonl", ".json")}


def main() -> None:
    path, fmt, reps = Path(sys.argv[1]).resolve(), sys.argv[2], int(sys.argv[3])
    contenders = ["base", "new"] + (["pyarrow"] if fmt == "jsonl" else [])
    runs: dict[str, list[tuple[float, float]]] = {c: [] for c in contenders}
    outs: dict[str, tuple[int, int, int, Path]] = {}
    for _ in range(reps):
        for c in contenders:
            if c == "pyarrow":
                argv = [CODE["new"][0], "-c",
                        "import sys, pyarrow.json as j; j.read_json(sys.argv[1])", str(path)]
                cwd = "/tmp"
            else:
                out = OUT / f"{c}_{fmt}_{path.stem}"
                argv = [CODE[c][0], "-m", "tracerl", "ingest", str(path), "--out", str(out),
                        "--format", fmt]
                cwd = CODE[c][1]
            wall, cpu, rc, err = timed(argv, cwd)
            if rc not in (0, 1):
                sys.exit(f"{c} failed ({rc}): {err[-2000:]}")
            runs[c].append((wall, cpu))
            if c != "pyarrow":
                s = json.loads((out / "ingest_summary.json").read_text())
                outs[c] = (s["read"], s["rows"], s["quarantined"], out)
    best = {c: min(w for w, _ in runs[c]) for c in contenders}
    print(f"{path.name} --format {fmt}, {reps} run(s) each, load {os.getloadavg()[0]:.1f}")
    for c in contenders:
        cpu = min(x[1] for x in runs[c])
        line = f"  {c:8s} best wall {best[c]:7.2f} s  best cpu {cpu:7.2f} s"
        if c in outs:
            read, rows, quarantined, _ = outs[c]
            line += (f"  read {read:,} rows {rows:,} quarantined {quarantined:,}"
                     f"  rows/s {rows / best[c]:,.0f}  rows/cpu-s {rows / cpu:,.0f}")
        print(line)
    if "pyarrow" in best:
        print(f"  rate vs pyarrow (wall): new {best['pyarrow'] / best['new']:.3f}, "
              f"base {best['pyarrow'] / best['base']:.3f}")
    print(f"  new vs base (wall): {best['base'] / best['new']:.2f}x")
    a, b = digest(outs["base"][3]), digest(outs["new"][3])
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(f"  outputs identical: {not differ} {differ[:5]}")


if __name__ == "__main__":
    main()
