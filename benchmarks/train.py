"""Benchmark the tabular learners (BC, naive FQI, support-constrained FQI) and the featurizer.

    .venv/bin/python benchmarks/train.py [--episodes 300000] [--seed 0]
                                         [--table-episodes 25000] [--repeats 3] [--check]

1. Logged transitions: `--episodes` good_coverage episodes (4 steps each: 1.2M transitions)
   are simulated with `calculator.simulate` and coded straight from its arrays (the step
   keys of a rollout are the ones the featurizer derives from its logged records; the
   tests check that). Going through JSON records would take minutes at this size and
   measure the logger, not the learners.
2. The featurizer and `Transitions.from_steps` on a real step table: `--table-episodes`
   episodes logged with `calculator.log_records` and built with `records_to_table`.
3. Training at 1x, 10x, 100x of a base size (the first 1%, 10%, 100% of the episodes):
   building the transitions, then fitting BC, naive FQI and constrained FQI (gamma 0.99,
   50 iterations). The median of `--repeats` runs is reported, as seconds and
   transitions per second, so that a linear cost shows as a constant rate.

Target: the whole training (build + three fits) on 1.2M transitions under 5 s.
The exit status is 0 (it is a report) unless --check is given; then it is 1 when the
target is missed or a policy trained on the largest size does not reach success 1.00.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from tracerl.envs import calculator
from tracerl.envs.calculator_features import CalculatorFeaturizer
from tracerl.ingest.parse import records_to_table
from tracerl.policies import BehaviorCloning, FittedQIteration, Transitions

DATASET = "good_coverage"
TARGET_SECONDS = 5.0
LEARNERS: dict[str, Callable[[], object]] = {
    "BC": BehaviorCloning,
    "FQI naive": lambda: FittedQIteration(support="none"),
    "FQI constrained": lambda: FittedQIteration(support="logged"),
}


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median wall seconds of `repeats` calls, and the last result."""
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def rollout_transitions(ro: calculator.Rollouts, n_episodes: int) -> Transitions:
    """Transitions of the first `n_episodes` episodes (rows are in episode order)."""
    rows = slice(0, int(np.searchsorted(ro.episode, n_episodes)))
    return Transitions.from_arrays(
        s=ro.state[rows], a=ro.action[rows], r=ro.reward[rows], done=ro.done[rows],
        episode=ro.episode[rows], t=ro.t[rows], state_keys=calculator.STATE_KEYS,
        featurizer=CalculatorFeaturizer(), behavior_prob=ro.prob[rows],
        task=ro.task[rows], tasks=calculator.TASKS,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=300_000,
                    help="simulated good_coverage episodes (x4 transitions) [300000]")
    ap.add_argument("--seed", type=int, default=0, help="simulator seed [0]")
    ap.add_argument("--table-episodes", type=int, default=25_000,
                    help="episodes logged as a step table for the featurizer [25000]")
    ap.add_argument("--repeats", type=int, default=3, help="runs per timing (median) [3]")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)

    print(f"python      {sys.version.split()[0]}; numpy {np.__version__}; "
          f"cpus {os.cpu_count()}; median of {args.repeats} runs\n")

    start = time.perf_counter()
    ro = calculator.simulate(calculator.BehaviorPolicy(DATASET), args.episodes, args.seed)
    print(f"simulate    {ro.n_steps:,} transitions ({args.episodes:,} {DATASET} episodes) "
          f"in {time.perf_counter() - start:.2f} s")

    # --- featurizer on a real step table ----------------------------------------------
    start = time.perf_counter()
    records = list(calculator.log_records(DATASET, args.table_episodes, args.seed, 0.2))
    steps = records_to_table(records, "bench.jsonl", list(range(1, len(records) + 1)))
    del records
    print(f"step table  {steps.num_rows:,} rows logged and built in "
          f"{time.perf_counter() - start:.2f} s\n")
    featurizer = CalculatorFeaturizer()
    rows = steps.num_rows
    for label, fn in (
        ("state_codes", lambda: featurizer.state_codes(steps)),
        ("action_codes", lambda: featurizer.action_codes(steps)),
        ("state_keys (strings)", lambda: featurizer.state_keys(steps)),
        ("Transitions.from_steps", lambda: Transitions.from_steps(steps, featurizer)),
    ):
        seconds, _ = timed(fn, args.repeats)
        print(f"featurizer  {label:<24} {seconds:7.3f} s  {rows / seconds:13,.0f} rows/s")

    # --- training at 1x, 10x, 100x ---------------------------------------------------------
    sizes = [max(1, args.episodes // 100), max(1, args.episodes // 10), args.episodes]
    print()
    head = f"{'transitions':>12} {'stage':<16} {'seconds':>8} {'transitions/s':>15}"
    print(head)
    print("-" * len(head))
    total_at_largest = 0.0
    fitted: dict[str, object] = {}
    for n_episodes in sizes:
        seconds, tr = timed(lambda n=n_episodes: rollout_transitions(ro, n), args.repeats)
        total = seconds
        print(f"{tr.n:>12,} {'build':<16} {seconds:8.3f} {tr.n / seconds:15,.0f}")
        for name, make in LEARNERS.items():
            seconds, policy = timed(lambda make=make, tr=tr: make().fit(tr), args.repeats)
            total += seconds
            fitted[name] = policy
            print(f"{tr.n:>12,} {name:<16} {seconds:8.3f} {tr.n / seconds:15,.0f}")
        print(f"{tr.n:>12,} {'total':<16} {total:8.3f} {tr.n / total:15,.0f}")
        total_at_largest = total

    print("\nsuccess (calculator.exact_value) of the policies trained on the largest size:")
    ok = total_at_largest < TARGET_SECONDS
    for name, policy in fitted.items():
        success = calculator.exact_value(policy)["success"]
        ok &= success > 0.999
        print(f"  {name:<16} {success:.4f}")
    print(f"\ntarget      train on {ro.n_steps:,} transitions < {TARGET_SECONDS:.0f} s: "
          f"{total_at_largest:.2f} s -> {'met' if total_at_largest < TARGET_SECONDS else 'MISSED'}")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
