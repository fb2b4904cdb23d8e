"""Benchmark the compare stage's library work on many tasks and trials.

    .venv/bin/python benchmarks/compare.py [--tasks 1000 10000 100000] [--trials 4]
                                           [--agents 3] [--steps 3] [--seed 0]

For each size: `--agents` agents, each with `--trials` episodes on every one of `--tasks`
tasks (each episode `--steps` rows, the last one done, reward 0/1 there and null before,
as an ingested tau2 log; task success probabilities drawn per task and agent), built as
pyarrow step tables (not timed). Timed, side by side in one run: reducing each table to its
episodes (`agent_episodes`), and every pair plus the leaderboard (`compare_datasets` with
the params model's defaults: 10,000 bootstrap resamples, the exact test, pass^k for
k <= min(8, trials)), and writing compare.json's dict (`to_dict`). Also the peak RSS of the
process (resource.getrusage). It is a report: exit status 0.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracerl.config.schema import Compare  # noqa: E402
from tracerl.data.compare import agent_episodes, compare_datasets  # noqa: E402


def step_table(name: str, n_tasks: int, trials: int, steps: int,
               rng: np.random.Generator) -> pa.Table:
    p = rng.beta(2, 2, n_tasks)
    episodes = n_tasks * trials
    task = np.repeat(np.arange(n_tasks), trials)
    success = (rng.random(episodes) < p[task]).astype(np.float64)
    rows = episodes * steps
    episode = np.repeat(np.arange(episodes), steps)
    done = np.tile(np.arange(steps) == steps - 1, episodes)
    reward = np.where(done, success[episode], np.nan)
    return pa.table({
        "episode_id": pa.array([f"{name}-{e}" for e in range(episodes)]).take(
            pa.array(episode)),
        "task": pa.array([str(t) for t in range(n_tasks)]).take(pa.array(task[episode])),
        "done": pa.array(done),
        "reward": pa.array(reward, mask=~done),
        "episode": pa.StructArray.from_arrays(
            [pa.repeat("user_stop", rows).cast(pa.string())], ["termination_reason"]),
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    settings = Compare().model_dump()
    value, excluded = settings.pop("value"), settings.pop("exclude_terminations")
    pairs = settings.pop("pairs")
    print(f"{args.agents} agents, {args.trials} trials per task, {args.steps} rows per "
          f"episode; n_boot {settings['n_boot']}, max_k {settings['max_k']}")
    print(f"{'tasks':>8} {'rows/agent':>11} {'episodes s':>11} {'compare s':>10} "
          f"{'to_dict s':>10} {'pairs':>6} {'peak RSS MB':>12}")
    for n_tasks in args.tasks:
        rng = np.random.default_rng(args.seed)
        tables = {f"agent{i}": step_table(f"agent{i}", n_tasks, args.trials, args.steps, rng)
                  for i in range(args.agents)}
        start = time.perf_counter()
        agents = [agent_episodes(t, name, value=value, exclude_terminations=excluded)
                  for name, t in tables.items()]
        reduced = time.perf_counter()
        result = compare_datasets(agents, pairs, **settings)
        compared = time.perf_counter()
        size = len(orjson.dumps(result.to_dict()))
        dumped = time.perf_counter()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n_tasks:>8} {next(iter(tables.values())).num_rows:>11} "
              f"{reduced - start:>11.2f} {compared - reduced:>10.2f} {dumped - compared:>10.2f} "
              f"{len(result.pairs):>6} {peak:>12.0f}   (compare.json {size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
