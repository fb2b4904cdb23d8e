"""Time redaction (`Redactor.table`, what ingest runs on every batch) on five step tables,
in CPU seconds, and compare code versions side by side.

    .venv/bin/python benchmarks/redact.py [--episodes 50000] [--repeat 5] [--root DIR ...]

Tables, made once under benchmarks/.out/redact/ (git-ignored) by ingesting with redaction
off:
- calculator: the calculator logger's good_coverage steps (`--episodes` episodes, 4 steps
  each): short strings, no secret (the common case: the pre-filter's cost);
- tau2: the real tau2-bench logs of ../shared/realdata (skipped when absent), repeated to
  about the calculator table's rows: long dialogue text, e-mail addresses;
- secrets: the calculator table with a secret of every class in each step's user goal
  (every row goes through the rules in Python: the worst case);
- chat, tau2-desk: 3,000 support-desk conversations (~45k steps) as OpenAI-chat JSONL and
  as a tau2-bench results file, the inputs of `benchmarks/ingest_adapters.py`: repeated
  system prompts and histories, an e-mail address in every conversation, episode ids and
  metadata that look like secrets to a cheap test (`support_desk-…`, `success@1`).

Each `--root` is a checkout (or an exported tree) whose `tracerl` is timed; the roots are
timed in turns, each in a fresh interpreter, `--repeat` rounds, and the best time of each is
shown with its ratio to the first root, and as CPU seconds per 45,000 rows. Without
`--root`, this checkout alone. Figures from one run only compare with each other (the
machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / ".out" / "redact"
TAU2 = ROOT.parent / "shared" / "realdata" / "tau2-bench"

SECRETS = (" password=Zq-1 | https://h.example/cb?access_token=Zq-2 | "
           "Server=db;User Id=sa;Password=Zq-3; | Authorization: Basic WnEtNA== | "
           "https://hooks.slack.com/services/T0/B0/Zq5abcdefghijklmnop | "
           "cache_ghp_Zq60123456789abcdefghijklmnopqrstuvwxyz | ann@example.com")

_MAKE = """
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from tracerl.data.ingest import ingest
from tracerl.data.redact import Redactor
from tracerl.envs.calculator.logs import log_records, write_jsonl
out, episodes, tau2, secrets = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
sys.path.insert(0, sys.argv[5])
from benchmarks.ingest_adapters import make_inputs
off = Redactor(enabled=False)
def steps(inputs, name, fmt):
    ingest(inputs, out / name, fmt=fmt, redactor=off, max_bad_fraction=1.0, workers=1)
    return pq.read_table(out / name / "steps")
write_jsonl(out / "calculator.jsonl", log_records("good_coverage", episodes, 0, 0.2))
calc = steps([out / "calculator.jsonl"], "calculator-ingested", "jsonl")
pq.write_table(calc, out / "calculator.parquet")
goal = pc.binary_join_element_wise(calc.column("state").combine_chunks().field("user_goal"),
                                   pa.scalar(secrets), "")
state = calc.column("state").combine_chunks()
fields = [state.field(i) if f.name != "user_goal" else goal for i, f in enumerate(state.type)]
with_secrets = calc.set_column(calc.schema.get_field_index("state"), "state",
                               pa.StructArray.from_arrays(fields, fields=list(state.type)))
pq.write_table(with_secrets, out / "secrets.parquet")
files = sorted(tau2.glob("*.json")) if tau2.is_dir() else []
if files:
    t = steps(files, "tau2-ingested", "tau2")
    pq.write_table(pa.concat_tables([t] * max(1, calc.num_rows // t.num_rows)),
                   out / "tau2.parquet")
make_inputs(3000, out / "desk")
pq.write_table(steps([out / "desk" / "chat.jsonl"], "chat-ingested", "openai-chat"),
               out / "chat.parquet")
pq.write_table(steps([out / "desk" / "tau2.json"], "tau2-desk-ingested", "tau2"),
               out / "tau2-desk.parquet")
"""

_TIME = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import pyarrow.parquet as pq
import tracerl
from tracerl.data.redact import Redactor
assert tracerl.__file__.startswith(sys.argv[1]), tracerl.__file__
r = Redactor()
table = pq.read_table(sys.argv[2])
r.table(table.slice(0, 100))  # compile and warm up
t0 = time.process_time()
_, counts = r.table(table)
print(json.dumps({"seconds": time.process_time() - t0, "rows": table.num_rows,
                  "redacted": sum(counts.values())}))
"""


def _child(code: str, *args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--root", type=Path, action="append", default=None,
                    help="a checkout whose tracerl is timed (repeatable; default: this one)")
    args = ap.parse_args(argv)
    roots = [r.resolve() for r in (args.root or [ROOT])]
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = OUT / f"made-{args.episodes}-desk.json"
    if not stamp.is_file():
        _child(_MAKE, str(OUT), str(args.episodes), str(TAU2), SECRETS, str(ROOT), cwd=ROOT)
        stamp.write_text("{}")
    tables = [n for n in ("calculator", "tau2", "secrets", "chat", "tau2-desk")
              if (OUT / f"{n}.parquet").is_file()]
    best: dict[tuple[str, Path], dict] = {}
    for _ in range(args.repeat):
        for name in tables:
            for root in roots:  # in turns: load changes hit every root alike
                run = json.loads(_child(_TIME, str(root), str(OUT / f"{name}.parquet"),
                                        cwd=root))
                key = (name, root)
                if key not in best or run["seconds"] < best[key]["seconds"]:
                    best[key] = run
    print(f"{'table':<11} {'rows':>9} {'root':<32} {'best CPU s':>10} {'per 45k':>8} "
          f"{'rows/s':>11} {'vs first':>8} {'redacted':>9}")
    for name in tables:
        first = best[(name, roots[0])]["seconds"]
        for root in roots:
            run = best[(name, root)]
            print(f"{name:<11} {run['rows']:>9,} {str(root)[-32:]:<32} {run['seconds']:>10.3f} "
                  f"{run['seconds'] * 45_000 / run['rows']:>8.3f} "
                  f"{run['rows'] / run['seconds']:>11,.0f} {run['seconds'] / first:>8.2f} "
                  f"{run['redacted']:>9,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
