"""Benchmark the train stage's work at 12k, 120k and 1.2M logged transitions.

    .venv/bin/python benchmarks/train.py [--episodes 3000 30000 300000] [--seed 0]
                                         [--repeats 3] [--check]

What is timed is the train stage's task itself, `tasks.train.train_policies` (its
function, without a Prefect server): read the labelled Parquet, keep the `train.split`
rows and the `train.data_filter` episodes, hash them, encode them into transitions
(`train.encoder`), fit behaviour cloning, naive FQI and support-constrained FQI over
`train.features`, save the three artifacts. The knobs (train.*, gamma) are the project's
params.yaml.

Its input is made the way the pipeline makes it, and is not timed: `--episodes`
good_coverage episodes of the calculator's behaviour policy (4 steps each) logged as
native JSONL, ingested (`tracerl.data.ingest`), relabelled with params.yaml's verifiers and
weights, and written as the labelled step table. Every episode is drawn afresh (no tiling),
so nothing profits from repeated rows. The tables are cached under benchmarks/.out/train/
(git-ignored) per (episodes, seed, relabel params).

Target: the whole task on 1.2M logged transitions under 5 s. The exit status is 0 (it is a
report) unless --check is given; then it is 1 when the target is missed or a policy trained
on the largest size does not reach success 1.00.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tasks/ is a top-level package of the checkout

from tasks.train import load_encoder, load_learners, train_policies  # noqa: E402
from tracerl.config.learning import Train  # noqa: E402
from tracerl.config.params import get, load_params  # noqa: E402
from tracerl.data import relabel as rl  # noqa: E402
from tracerl.data.ingest import ingest  # noqa: E402
from tracerl.envs.calculator.behavior import BehaviorSpec  # noqa: E402
from tracerl.envs.calculator.exact import exact_value  # noqa: E402
from tracerl.envs.calculator.logs import log_records, write_jsonl  # noqa: E402
from tracerl.io.fileio import read_table, write_json, write_table  # noqa: E402
from tracerl.rl.encoding import get_encoder  # noqa: E402

OUT = ROOT / "benchmarks" / ".out" / "train"
DATASET = "good_coverage"
TARGET_SECONDS = 5.0


def labelled_table(episodes: int, seed: int, params: dict) -> tuple[Path, float]:
    """The labelled steps/ folder for `episodes` episodes (made unless cached) and the
    seconds spent making it (0 when cached)."""
    verifiers = list(get(params, "relabel.verifiers"))
    weights = {k: float(v) for k, v in get(params, "relabel.weights").items()}
    test_fraction = float(get(params, "calculator.test_fraction"))
    behavior = get(params, f"calculator.behavior.{DATASET}", {})
    gamma = float(get(params, "gamma"))
    key = json.dumps([episodes, seed, test_fraction, behavior, gamma, verifiers, weights],
                     sort_keys=True)
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    folder = OUT / f"{DATASET}_{episodes}ep_seed{seed}_{digest}"
    steps_dir = folder / "labelled" / "steps"
    if steps_dir.is_dir():
        return steps_dir, 0.0
    start = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    raw = folder / "raw.jsonl"
    write_jsonl(raw, log_records(DATASET, episodes, seed, test_fraction,
                                 BehaviorSpec.from_params(behavior), gamma))
    summary = ingest([raw], folder / "ingested", batch_lines=int(get(params,
                                                                     "ingest.batch_lines")))
    if summary.quarantined:
        sys.exit(f"ingest quarantined {summary.quarantined} records of the benchmark log")
    raw.unlink()
    steps = read_table(folder / "ingested" / "steps")
    write_table(rl.relabel(steps, verifiers, weights), steps_dir)
    shutil.rmtree(folder / "ingested")
    return steps_dir, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, nargs="+", default=[3_000, 30_000, 300_000],
                    help="good_coverage episodes per size, 4 transitions each "
                         "[3000 30000 300000]")
    ap.add_argument("--seed", type=int, default=0, help="logger seed [0]")
    ap.add_argument("--repeats", type=int, default=3, help="runs per size (median) [3]")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)

    import numpy as np
    import pyarrow as pa

    params = load_params(ROOT / "params.yaml")
    train = Train.model_validate(get(params, "train"))
    gamma = float(get(params, "gamma"))
    spec = get_encoder(train.encoder, **train.encoder_params).spec()
    print(f"python      {sys.version.split()[0]}; numpy {np.__version__}; pyarrow "
          f"{pa.__version__}; cpus {os.cpu_count()}; median of {args.repeats} runs")
    print(f"task        tasks.train.train_policies(train={train.model_dump()}, "
          f"gamma={gamma})\n")

    head = (f"{'logged':>10} {'trained on':>11} {'make input':>11} {'seconds':>8} "
            f"{'min':>7} {'max':>7} {'logged transitions/s':>21}")
    print(head)
    print("-" * len(head))
    largest_seconds, largest_models, largest_logged = 0.0, None, 0
    for episodes in sorted(args.episodes):
        steps_dir, made = labelled_table(episodes, args.seed, params)
        logged = read_table(steps_dir, columns=["t"]).num_rows
        models = OUT / "models" / f"{episodes}ep"
        out_dir = models / DATASET
        seconds, summary = [], {}
        for _ in range(args.repeats):
            shutil.rmtree(models, ignore_errors=True)
            write_json(models / "encoder.json", spec)
            start = time.perf_counter()
            summary = train_policies.fn(DATASET, steps_dir, models, spec, train, gamma)
            seconds.append(time.perf_counter() - start)
        median = statistics.median(seconds)
        print(f"{logged:>10,} {summary['rows']:>11,} "
              f"{f'{made:.1f} s' if made else 'cached':>11} {median:8.3f} {min(seconds):7.3f} "
              f"{max(seconds):7.3f} {logged / median:21,.0f}")
        largest_seconds, largest_models, largest_logged = median, out_dir, logged

    print("\n'trained on': the rows left after the train split and the data filter; "
          "'make input' (log, ingest, relabel) is not part of the timing.")
    print("\nsuccess (the calculator's exact evaluator) of the policies trained on the "
          "largest size:")
    ok = largest_seconds < TARGET_SECONDS
    policies = load_learners(largest_models, train.learners,
                             load_encoder(largest_models.parent))
    for name, policy in policies.items():
        success = exact_value(policy, gamma)["success"]
        ok &= success > 0.999
        print(f"  {name:<16} {success:.4f}")
    verdict = "met" if largest_seconds < TARGET_SECONDS else "MISSED"
    print(f"\ntarget      train task on {largest_logged:,} logged transitions < "
          f"{TARGET_SECONDS:.0f} s: {largest_seconds:.2f} s -> {verdict}")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
