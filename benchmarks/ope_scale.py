"""OPE that needs no repetition, timed on 1,000 / 10,000 / 100,000 support-desk episodes.

    .venv/bin/python benchmarks/ope_scale.py [--sizes 1000 10000 100000] [--n-boot 500]
                                             [--train-episodes 10000] [--seed N] [--check]
                                             [--baseline REV ...]

Each size runs in its own fresh child process, which

1. logs N episodes of the support desk's behaviour policy (its logs never repeat: every
   conversation carries its own customer, order id, amounts), as flat transitions;
2. fits the ten candidates (`tracerl.envs.support_desk.candidates`: scripted variants, logistic
   BC = the estimated behaviour model, ridge FQI naive and support-constrained) on a separate
   training log of --train-episodes episodes (the same for every size);
3. evaluates all ten with every layer but replay and its interval (`tracerl.ope.evaluate`,
   the ope stage's code: the LSTD-Q critic over hashed features with delta-method
   contributions, IS, PDIS, WIS, PDWIS, DR, WDR with cross-fitted critics, the support from
   the estimated behaviour model; --n-boot bootstrap resamples over episodes).

"seconds" is the child's wall time for all three (imports excluded); "cpu_seconds" its
whole-process CPU time (user + system, imports included) and "peak_rss_bytes" its
ru_maxrss, both from os.wait4 when it is reaped: the child starts no processes of its own,
so these are the process tree's. The phases are printed, with (log + ope) per 1,000
episodes, the part that scales with N (training is on the same --train-episodes log at
every size).

Each size runs also at every --baseline revision (default e9b42f0, main before issue 32;
72f2887 is the older fast one), right after this tree's run: the revision's own
benchmarks/ope_scale.py child from a temporary `git worktree`, with this venv
(`benchmarks/baseline.py`). Figures go to benchmarks/results/ope_scale.json as a list of
{"episodes", "actions", "seconds", "cpu_seconds", "peak_rss_bytes", "baselines": {rev:
{"seconds", "cpu_seconds", "peak_rss_bytes"}}}, one per size.

Targets (issue 32): 100,000 episodes in at most 25 CPU seconds and under 2 GB (2e9 bytes)
of peak RSS. The exit status is 0 (a report) unless --check: then 1 on a miss. Timings on
a shared machine are noisy: compare with the baselines of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from baseline import checkout, measured  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "ope_scale.json"
TARGET_CPU_SECONDS = 25.0
TARGET_BYTES = 2e9
BASELINES = ["e9b42f0"]  # main before issue 32 (72f2887: the older fast one)


def child(size: int, n_boot: int, train_episodes: int, seed: int) -> dict:
    """Everything one size does; returns its figures (printed as JSON by main)."""
    t_start = time.perf_counter()
    from tracerl.config.learning import Ope
    from tracerl.envs import support_desk as sd
    from tracerl.envs.support_desk.candidates import behavior_model, make_candidates
    from tracerl.envs.support_desk.features import critic_features, to_transitions
    from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates
    from tracerl.ope.records import record
    from tracerl.ope.select import pick_of, select

    t0 = time.perf_counter()
    p = sd.FixtureParams()
    tr = to_transitions(sd.generate(p, size, seed=seed))
    t1 = time.perf_counter()
    train = to_transitions(sd.generate(p, train_episodes, seed=seed + 1))
    pi_hat_b = behavior_model(train, seed=seed)
    candidates = make_candidates(train, p.behavior, pi_hat_b, gamma=0.99, seed=seed)
    t2 = time.perf_counter()
    settings = Settings.of(Ope(n_boot=n_boot, seed=seed, layers=["critic", "importance"]),
                           gamma=0.99, verifiers=[], weights={}, n_episodes=tr.n_episodes)
    data = LoggedData.prepare(tr, critic_features(), pi_hat_b, settings, seed)
    estimates = evaluate_candidates(data, candidates, settings, seed)
    t3 = time.perf_counter()
    n_estimates = sum(e.applicable and e.ci_low is not None
                      for records in estimates.values() for e in records)
    records = [record("logs", n, e, None) for n, es in estimates.items() for e in es]
    return {"episodes": size, "actions": int(tr.n), "seconds": t3 - t0,
            "phases": {"imports": t0 - t_start, "log": t1 - t0, "train": t2 - t1,
                       "ope": t3 - t2},
            "estimates_with_intervals": int(n_estimates),
            "selected": pick_of(select(records, settings.min_support), "logs",
                                "critic/fqe")[0],
            "headline": {name: round(next(e.value for e in es if e.estimator == "fqe"), 4)
                         for name, es in estimates.items()}}


def run_size(size: int, args: argparse.Namespace, tree: Path = ROOT) -> dict:
    """One size in a fresh child of `tree`'s own script (this one, or a baseline's)."""
    cmd = [sys.executable, str(tree / "benchmarks" / "ope_scale.py"), "--child", str(size),
           "--n-boot", str(args.n_boot), "--train-episodes", str(args.train_episodes),
           "--seed", str(args.seed)]
    run = measured(cmd, tree)
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    figures["cpu_seconds"], figures["peak_rss_bytes"] = run.cpu, run.peak_rss_bytes
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--n-boot", type=int, default=500)
    ap.add_argument("--train-episodes", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--baseline", nargs="*", default=BASELINES, metavar="REV",
                    help="revisions measured beside this tree, same run (none: --baseline)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.n_boot, args.train_episodes, args.seed)))
        return 0

    rows, missed = [], []
    with ExitStack() as stack:
        trees = {rev: stack.enter_context(checkout(rev)) for rev in args.baseline}
        for size in args.sizes:  # one fresh process per size and tree, one after the other
            f = run_size(size, args)
            ph = f["phases"]
            per_k = (ph["log"] + ph["ope"]) / size * 1000  # what scales with the log's size
            print(f"{size:>7} episodes {f['actions']:>9} actions  {f['seconds']:7.1f} s "
                  f"(log + ope {per_k:.3f} s per 1k episodes; log {ph['log']:.1f}, train "
                  f"{ph['train']:.1f}, ope {ph['ope']:.1f})  {f['estimates_with_intervals']} "
                  f"estimates with intervals; selected {f['selected']}")
            print(f"{'this tree':>16}: {f['cpu_seconds']:7.1f} CPU s  peak "
                  f"{f['peak_rss_bytes'] / 2**30:.2f} GiB  (load average "
                  f"{os.getloadavg()[0]:.2f} at its end)")
            row = {k: f[k] for k in ("episodes", "actions", "seconds", "cpu_seconds",
                                     "peak_rss_bytes")}
            row["load_average"] = os.getloadavg()[0]
            row["baselines"] = {}
            for rev, tree in trees.items():
                b = run_size(size, args, tree)
                row["baselines"][rev] = {k: b[k] for k in ("seconds", "cpu_seconds",
                                                           "peak_rss_bytes")}
                print(f"{rev:>16}: {b['cpu_seconds']:7.1f} CPU s  peak "
                      f"{b['peak_rss_bytes'] / 2**30:.2f} GiB  ({b['seconds']:.1f} s; ope "
                      f"{b['phases']['ope']:.1f}; load average {os.getloadavg()[0]:.2f} "
                      "at its end)")
            rows.append(row)
            if size >= 100_000 and (f["cpu_seconds"] > TARGET_CPU_SECONDS
                                    or f["peak_rss_bytes"] >= TARGET_BYTES):
                missed.append(size)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if missed:
        print(f"MISSED the 100k targets ({TARGET_CPU_SECONDS:.0f} CPU s, 2 GB) at {missed}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
