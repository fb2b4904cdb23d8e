"""Time and peak memory of the export stage's library call (`export_dataset`, every format)
on a labelled step table copied m times (each copy with its own episode ids).

    .venv/bin/python benchmarks/export.py [--steps data/support_desk/labelled/scripted/steps]
        [--multipliers 1 10]

Each size runs in its own process (peak RSS of that process: `ru_maxrss`, which includes
the table itself, read and copied m times); outputs go to benchmarks/.out/export/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / ".out" / "export"

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import pyarrow as pa, pyarrow.compute as pc
from tracerl.config.export import Export
from tracerl.export.run import export_dataset
from tracerl.io.fileio import read_table

steps_dir, m, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
base = read_table(steps_dir)
copies = []
for k in range(m):
    ids = pc.binary_join_element_wise(base.column("episode_id"), pa.scalar(f"~{k}"), "")
    copies.append(base.set_column(base.schema.get_field_index("episode_id"),
                                  base.schema.field("episode_id"), ids))
steps = pa.concat_tables(copies)
filters = json.loads(sys.argv[4])
t0 = time.perf_counter()
manifest = export_dataset(steps, out, Export(out=str(out)), process=filters.get("process"),
                          outcome=filters.get("outcome"))
seconds = time.perf_counter() - t0
size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
print(json.dumps({"multiplier": m, "rows": steps.num_rows,
                  "episodes": manifest["source"]["episodes"], "seconds": round(seconds, 2),
                  "rows_per_s": round(steps.num_rows / seconds),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "output_mb": round(size / 1e6, 1)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=Path,
                        default=ROOT / "data/support_desk/labelled/scripted/steps")
    parser.add_argument("--multipliers", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--filters", default='{"process": {"tool_error": 0.0}, '
                                             '"outcome": "task_success"}',
                        help="relabel.filters of the table's pipeline, as JSON")
    args = parser.parse_args()
    for m in args.multipliers:
        out = OUT / f"x{m}"
        shutil.rmtree(out, ignore_errors=True)
        run = subprocess.run([sys.executable, "-c", CHILD, str(args.steps), str(m), str(out),
                              args.filters], cwd=ROOT, capture_output=True, text=True)
        if run.returncode:
            sys.exit(run.stderr)
        print(json.dumps(json.loads(run.stdout.strip().splitlines()[-1])), flush=True)
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
