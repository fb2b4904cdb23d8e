"""OPE that needs no repetition, timed on 1,000 / 10,000 / 100,000 support-desk episodes.

    .venv/bin/python benchmarks/ope_scale.py [--sizes 1000 10000 100000] [--n-boot 500]
                                             [--train-episodes 10000] [--seed N] [--check]

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

"seconds" is the child's wall time for all three (the whole process, imports excluded);
the phases are printed, with (log + ope) per 1,000 episodes, the part that scales with N
(training is on the same --train-episodes log at every size). "peak_rss_bytes" is the
child's ru_maxrss from os.wait4 when it is reaped: the child starts no processes of its
own, so this is the peak over the process tree. Figures go to
benchmarks/results/ope_scale.json as a list of {"episodes", "actions", "seconds",
"peak_rss_bytes"}, one per size.

Targets (issue): 100,000 episodes under 120 s and 4 GB; time per 1,000 episodes roughly
flat from 10k to 100k. The exit status is 0 (a report) unless --check: then 1 on a miss.
Timings on a shared machine are noisy: run it when the machine is quiet for real figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "ope_scale.json"
TARGET_SECONDS = 120.0
TARGET_BYTES = 4 * 2**30


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


def run_size(size: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", str(size), "--n-boot", str(args.n_boot),
           "--train-episodes", str(args.train_episodes), "--seed", str(args.seed)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=ROOT)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"size {size}: child failed with status {proc.returncode}")
    figures = json.loads(out)
    figures["peak_rss_bytes"] = int(usage.ru_maxrss) * 1024  # Linux: KiB
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--n-boot", type=int, default=500)
    ap.add_argument("--train-episodes", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.n_boot, args.train_episodes, args.seed)))
        return 0

    rows, missed = [], []
    for size in args.sizes:  # one fresh process per size, one after the other
        f = run_size(size, args)
        ph = f["phases"]
        per_k = (ph["log"] + ph["ope"]) / size * 1000  # what scales with the log's size
        print(f"{size:>7} episodes {f['actions']:>9} actions  {f['seconds']:7.1f} s "
              f"(log + ope {per_k:.3f} s per 1k episodes; log {ph['log']:.1f}, train "
              f"{f['phases']['train']:.1f}, ope {f['phases']['ope']:.1f})  peak "
              f"{f['peak_rss_bytes'] / 2**30:.2f} GiB  {f['estimates_with_intervals']} "
              f"estimates with intervals; selected {f['selected']}")
        rows.append({k: f[k] for k in ("episodes", "actions", "seconds", "peak_rss_bytes")})
        if size >= 100_000 and (f["seconds"] > TARGET_SECONDS
                                or f["peak_rss_bytes"] > TARGET_BYTES):
            missed.append(size)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if missed:
        print(f"MISSED the 100k targets ({TARGET_SECONDS:.0f} s, 4 GiB) at {missed}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
