"""N raw OpenAI-chat support-desk conversations through every stage to the OPE's answer.

    .venv/bin/python benchmarks/end_to_end.py [--episodes 100000] [--baseline REV]
                                              [--baseline-episodes N] [--check] [--keep]

The support-desk pipeline (pipelines/support_desk) with its own params except
`support_desk.episodes` (N) and its paths (a scratch folder under benchmarks/scratch/,
git-ignored): its generate stage writes N conversations of the scripted logger as
OpenAI-chat JSONL (set-up, reported apart), then ingest → validate → relabel → train → ope
run one after the other, each as the command a user (and `dvc repro`) runs:
`python -m tracerl run <stage> --params <file>`, a child of this process, on the
checkout's Prefect server (started before the first stage and stopped at the end, so no
stage pays for it; its own memory is not a stage's).

Per stage: wall seconds (spawn to reaping), CPU seconds (user + system of the stage and
every process it started, os.wait4), the peak of its process tree's summed PSS (sampled
every 50 ms, `benchmarks.ingest.TreeSampler`) and the start-up: spawn to the flow run's
"Beginning flow run" log line (imports, params check, server handshake). The whole row is
the sum of the stages' wall and CPU and the largest stage peak (the stages run one at a
time, so that is the pipeline's peak).

--baseline REV runs the same at REV (e.g. e9b42f0, main before issue 32) in a temporary
git worktree with the same venv (`python -m` finds the worktree's packages first), in the
same run, and prints its figures beside these; --baseline-episodes N runs it at a smaller
N (the baseline took ~26 min at 100,000), then both are run at that N as well, so the two
columns always compare the same size.

Targets (issue 32): at 100,000 conversations < 180 s wall and < 2 GB tree peak (2e9 bytes,
the largest stage's). Exit status 0 (a report) unless --check: then 1 on a miss or a
failed stage. Figures go to benchmarks/results/end_to_end.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.ingest import Run, run_child  # noqa: E402

# Git-ignored scratch (a hidden folder would do as well: staging stages outputs there too).
OUT = ROOT / "benchmarks" / "scratch" / "end_to_end"
RESULTS = ROOT / "benchmarks" / "results" / "end_to_end.json"
PIPELINE = Path("pipelines") / "support_desk"
STAGES = ("ingest", "validate", "relabel", "train", "ope")
TARGET_SECONDS = 180.0
TARGET_BYTES = 2e9
# Prefect's console line: "13:05:21.734 | INFO    | Flow run 'x' - Beginning flow run 'x' ..."
_BEGIN = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) \| \w+ +\| Flow run .* - Beginning flow run",
                    re.MULTILINE)


@dataclass
class Stage:
    name: str
    run: Run
    startup: float | None  # spawn to "Beginning flow run"; None when the line is missing


def _params(checkout: Path, work: Path, episodes: int) -> Path:
    """The support-desk params with N episodes and every path under `work`; the stage
    reads the `params:` of its stage from the dvc.yaml beside the file, so it is copied."""
    import yaml

    params = yaml.safe_load((checkout / PIPELINE / "params.yaml").read_text())
    params["support_desk"]["episodes"] = episodes
    for key in params["paths"]:
        if key != "gx":  # the kept suite stays (a copy would be the same bytes)
            params["paths"][key] = (work / key).relative_to(checkout).as_posix()
    shutil.copy(checkout / PIPELINE / "dvc.yaml", work / "dvc.yaml")
    out = work / "params.yaml"
    out.write_text(yaml.safe_dump(params, sort_keys=False))
    return out.relative_to(checkout)  # run from the checkout, like dvc.yaml's stages


def _startup(run: Run, spawned: float) -> float | None:
    """Seconds from spawn to the flow run's first line (the log's clock is local time)."""
    found = _BEGIN.search(run.stdout + "\n" + run.stderr)
    if not found:
        return None
    day = datetime.fromtimestamp(spawned)
    clock = datetime.strptime(found.group(1), "%H:%M:%S.%f").time()
    return datetime.combine(day.date(), clock).timestamp() - spawned


def _stage(checkout: Path, params: Path, name: str) -> Stage:
    argv = [sys.executable, "-m", "tracerl", "run", name, "--params", str(params)]
    spawned = time.time()
    run = run_child(name, argv, cwd=checkout)
    if not run.ok:
        print(f"  stage {name} failed (exit {run.returncode}):\n{run.stderr[-3000:]}",
              file=sys.stderr)
    return Stage(name, run, _startup(run, spawned))


def pipeline(checkout: Path, label: str, episodes: int, keep: bool) -> list[Stage]:
    """generate (set-up), then every stage in turn; stops at the first failed stage."""
    work = checkout / OUT.relative_to(ROOT) / f"{label}-{episodes}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    params = _params(checkout, work, episodes)
    server = [sys.executable, "-m", "tracerl", "server"]
    subprocess.run([*server, "start"], cwd=checkout, check=True, capture_output=True)
    try:
        print(f"[{label}] generate {episodes} conversations (set-up) ...", flush=True)
        stages = [_stage(checkout, params, "generate")]
        for name in STAGES:
            if not stages[-1].run.ok:
                break
            print(f"[{label}] {name} ...", flush=True)
            stages.append(_stage(checkout, params, name))
            _print_stage(stages[-1])
    finally:
        subprocess.run([*server, "stop"], cwd=checkout, capture_output=True)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return stages


def _print_stage(s: Stage) -> None:
    startup = "?" if s.startup is None else f"{s.startup:.1f}"
    print(f"    {s.name:<9} {s.run.seconds:8.1f} s wall {s.run.cpu_seconds:8.1f} s CPU "
          f"{s.run.peak_bytes / 1e9:6.2f} GB peak  start-up {startup} s", flush=True)


def summary(stages: list[Stage]) -> dict:
    timed = [s for s in stages if s.name != "generate"]
    return {
        "ok": len(timed) == len(STAGES) and all(s.run.ok for s in timed),
        "seconds": sum(s.run.seconds for s in timed),
        "cpu_seconds": sum(s.run.cpu_seconds for s in timed),
        "peak_bytes": max((s.run.peak_bytes for s in timed), default=0),
        "stages": {s.name: {"seconds": round(s.run.seconds, 2),
                            "cpu_seconds": round(s.run.cpu_seconds, 2),
                            "peak_bytes": s.run.peak_bytes,
                            "startup_seconds": None if s.startup is None
                            else round(s.startup, 2),
                            "ok": s.run.ok} for s in stages},
    }


def _cell(fig: dict | None, key: str) -> str:
    if fig is None or key not in fig["stages"]:
        return "—"
    s = fig["stages"][key]
    start = "?" if s["startup_seconds"] is None else f"{s['startup_seconds']:.1f}"
    return (f"{s['seconds']:7.1f} s {s['cpu_seconds']:7.1f} cpu {s['peak_bytes'] / 1e9:5.2f} GB"
            f" ({start} s up){'' if s['ok'] else ' FAILED'}")


def print_table(episodes: int, columns: dict[str, dict | None]) -> None:
    print(f"\n{episodes:,} conversations: wall, CPU, tree peak PSS (start-up)")
    print(f"{'stage':<10}" + "".join(f"{label:<48}" for label in columns))
    for name in ("generate", *STAGES):
        print(f"{name:<10}" + "".join(f"{_cell(fig, name):<48}" for fig in columns.values()))
    row = ""
    for fig in columns.values():
        row += (f"{fig['seconds']:7.1f} s {fig['cpu_seconds']:7.1f} cpu "
                f"{fig['peak_bytes'] / 1e9:5.2f} GB{'' if fig['ok'] else ' INCOMPLETE'}"
                if fig else "—").ljust(48)
    print(f"{'pipeline':<10}" + row + "   (generate excluded; peak = largest stage's)")


def _baseline_worktree(rev: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="tracerl-e2e-baseline-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT,
                   check=True, capture_output=True)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--baseline", metavar="REV", help="also run at this git revision")
    ap.add_argument("--baseline-episodes", type=int,
                    help="N for the side-by-side with the baseline (default --episodes)")
    ap.add_argument("--check", action="store_true", help="exit 1 on a missed target")
    ap.add_argument("--keep", action="store_true", help="keep the scratch data")
    args = ap.parse_args()

    results: dict[str, dict] = {}
    here = summary(pipeline(ROOT, "this", args.episodes, args.keep))
    results[f"this@{args.episodes}"] = here
    print_table(args.episodes, {"this checkout": here})
    if args.baseline:
        n = args.baseline_episodes or args.episodes
        ours = here if n == args.episodes else summary(pipeline(ROOT, "this", n, args.keep))
        tree = _baseline_worktree(args.baseline)
        try:
            base = summary(pipeline(tree, "baseline", n, args.keep))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                           capture_output=True)
        results[f"this@{n}"] = ours
        results[f"{args.baseline}@{n}"] = base
        print_table(n, {"this checkout": ours, args.baseline: base})
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    met = here["ok"] and here["seconds"] < TARGET_SECONDS and here["peak_bytes"] < TARGET_BYTES
    print(f"\ntarget at {args.episodes:,}: < {TARGET_SECONDS:.0f} s and < "
          f"{TARGET_BYTES / 1e9:.0f} GB tree peak: {'met' if met else 'MISSED'} "
          f"({here['seconds']:.1f} s, {here['peak_bytes'] / 1e9:.2f} GB)")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
