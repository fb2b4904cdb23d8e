"""Coverage of the OPE intervals: how often the truth lies inside the nominal 95% interval.

    .venv/bin/python benchmarks/ope_coverage.py [--seeds 100] [--episodes 3000]
                                                [--seed-base 0] [--n-boot N] [--check]

For each of `--seeds` seeds, FRESH good_coverage logs are drawn (`--episodes` episodes,
the params.yaml test fraction), relabelled with the params.yaml verifiers, and the three
learners of the train stage (BC, naive FQI, constrained FQI, params.yaml `train:`) are
fitted on the train split. The same 10 candidates as the ope stage (tasks/ope.py) are
built and evaluated with the stage's settings (params.yaml `ope:`, replays per episode by
the stage's rule) restricted to the layers replay + importance and the IS estimators
wis, wdr (the FQE critic is still fitted inside, for WDR; its own record is skipped).
Each interval is compared with the exact value of the candidate
(`calculator.exact_value(policy)["return"]`), with 1e-9 slack for the zero-width
intervals of deterministic candidates.

Seeds: seed i draws its logs from `log_seed(i)` and its estimators (replay draws,
bootstrap) from `est_seed(i)`, two distinct integers from SeedSequence([seed_base, i]).

Deterministic candidates are replayed once and their IS weights are 0/1: their intervals
are (close to) zero-width and cover the truth by construction. The stochastic candidates
are the informative part of the test. Target: coverage >= 0.90 for each estimator, on all
intervals and on each group. The exit status is 0 (it is a report) unless --check is
given; then it is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.learning import LEARNERS
from tasks.ope import settings_from
from tracerl.envs import calculator
from tracerl.envs.calculator_replay import CalculatorReplay
from tracerl.features import get_featurizer
from tracerl.ingest.parse import records_to_table
from tracerl.ope.candidates import UniformValidPolicy, build_candidates
from tracerl.ope.layers import LoggedData, evaluate_policy
from tracerl.params import load_params
from tracerl.relabel import relabel, select_training_data

DATASET = "good_coverage"
ESTIMATORS = ("replay", "wis", "wdr")
LAYERS = ["replay", "importance"]
IS_ESTIMATORS = ["wis", "wdr"]
GROUPS = ("all", "deterministic", "stochastic")
TARGET = 0.90
SLACK = 1e-9  # zero-width intervals of deterministic candidates: rounding only
ROOT = Path(__file__).resolve().parent.parent


def seeds_of(seed_base: int, i: int) -> tuple[int, int]:
    """(log seed, estimator seed) of seed i: distinct, both derived from seed_base."""
    log_seed, est_seed = np.random.SeedSequence([seed_base, i]).generate_state(2)
    return int(log_seed), int(est_seed)


def logged_steps(params: dict, episodes: int, seed: int) -> pa.Table:
    """Labelled step table of `episodes` fresh good_coverage episodes (as the pipeline)."""
    records = list(calculator.log_records(DATASET, episodes, seed,
                                          float(params["calculator"]["test_fraction"])))
    table = records_to_table(records, "bench.jsonl", list(range(1, len(records) + 1)))
    return relabel(table, list(params["relabel"]["verifiers"]),
                   dict(params["relabel"]["weights"]))


def train_base(params: dict, steps: pa.Table, featurizer) -> dict:
    """behavior + the three learners, trained as tasks/learning.py::train_policies does."""
    from tracerl.policies import Transitions

    train = params["train"]
    data = steps
    if train.get("split"):
        data = data.filter(pc.equal(data.column("split"), train["split"]))
    data = select_training_data(data, train["data_filter"])
    tr = Transitions.from_steps(data, featurizer)
    return {"behavior": calculator.BehaviorPolicy(DATASET),
            **{name: make(train, float(params["gamma"])).fit(tr)
               for name, make in LEARNERS.items()}}


def is_deterministic(policy, state_keys: list[str]) -> bool:
    """Probability 1 on one action in every logged state (so replay draws once)."""
    probs = np.asarray(policy.action_probs(state_keys), dtype=float)
    return bool(np.all(probs.max(axis=1) >= 1.0 - 1e-12))


def one_seed(params: dict, i: int, args: argparse.Namespace) -> list[dict]:
    """One row per (candidate, estimator): interval, truth, covered."""
    log_seed, est_seed = seeds_of(args.seed_base, i)
    steps = logged_steps(params, args.episodes, log_seed)
    featurizer = get_featurizer(params["coverage"]["featurizer"])
    base = train_base(params, steps, featurizer)
    if params["ope"]["split"] != "all":
        steps = steps.filter(pc.equal(steps.column("split"), params["ope"]["split"]))
    adapter = CalculatorReplay()  # as the stage does: one adapter, responses coded once
    data = LoggedData.prepare(steps, featurizer,
                              get_featurizer(params["ope"]["critic_featurizer"]), adapter)
    uniform = UniformValidPolicy(featurizer.valid_actions, len(featurizer.actions))
    candidates = build_candidates(base, params["ope"]["candidates"], uniform)
    settings = dataclasses.replace(settings_from(params, int(data.initial_critic_states.size)),
                                   layers=LAYERS, is_estimators=IS_ESTIMATORS,
                                   n_boot=args.n_boot)
    keys = [str(k) for k in data.policy_tr.state_keys]
    rows = []
    for k, (name, policy) in enumerate(candidates.items()):
        truth = calculator.exact_value(policy, settings.gamma)["return"]
        deterministic = is_deterministic(policy, keys)
        estimates = {e.estimator: e for e in evaluate_policy(
            data, policy, adapter, settings, seed=est_seed + 1000 * k)}
        for estimator in ESTIMATORS:
            e = estimates.get(estimator)
            ok = e is not None and e.ci_low is not None and e.ci_high is not None
            rows.append({
                "seed": i, "policy": name, "estimator": estimator, "truth": truth,
                "group": "deterministic" if deterministic else "stochastic",
                "interval": ok, "value": e.value if ok else None,
                "width": (e.ci_high - e.ci_low) if ok else None,
                "covered": ok and e.ci_low - SLACK <= truth <= e.ci_high + SLACK,
            })
    return rows


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson 95% interval of a binomial proportion k / n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def summarise(rows: list[dict]) -> tuple[list[str], bool]:
    """The coverage table (estimator x group) and whether every row meets the target."""
    head = (f"{'estimator':<9} {'candidates':<13} {'intervals':>9} {'covered':>8} "
            f"{'coverage':>8}  {'(Wilson 95%)':<15} {'target':>7} {'verdict':<7} "
            f"{'mean width':>10} {'mean |err|':>10}")
    lines, all_ok = [head, "-" * len(head)], True
    for estimator in ESTIMATORS:
        for group in GROUPS:
            sel = [r for r in rows if r["estimator"] == estimator
                   and (group == "all" or r["group"] == group)]
            n = len(sel)
            made = [r for r in sel if r["interval"]]
            covered = sum(r["covered"] for r in sel)
            coverage = covered / n if n else math.nan
            lo, hi = wilson(covered, n)
            ok = n > 0 and coverage >= TARGET
            all_ok &= ok
            width = float(np.mean([r["width"] for r in made])) if made else math.nan
            err = float(np.mean([abs(r["value"] - r["truth"]) for r in made])) if made \
                else math.nan
            note = "" if len(made) == n else f"  ({n - len(made)} without an interval)"
            lines.append(f"{estimator:<9} {group:<13} {n:>9} {covered:>8} {coverage:>8.3f}  "
                         f"[{lo:.3f}, {hi:.3f}]  {'>= ' + f'{TARGET:.2f}':>7} "
                         f"{'PASS' if ok else 'FAIL':<7} {width:>10.4f} {err:>10.4f}{note}")
        lines.append("")
    return lines, all_ok


def per_candidate(rows: list[dict]) -> list[str]:
    """Coverage of each candidate (over seeds) for each estimator."""
    names = list(dict.fromkeys(r["policy"] for r in rows))
    head = f"{'candidate':<30} {'group':<13} {'truth':>8} " + " ".join(
        f"{e + ' cov':>9} {e + ' width':>11}" for e in ESTIMATORS)
    lines = [head, "-" * len(head)]
    for name in names:
        sel = [r for r in rows if r["policy"] == name]
        groups = sorted({r["group"] for r in sel})
        truth = float(np.mean([r["truth"] for r in sel]))
        cells = []
        for estimator in ESTIMATORS:
            es = [r for r in sel if r["estimator"] == estimator]
            widths = [r["width"] for r in es if r["interval"]]
            cells.append(f"{sum(r['covered'] for r in es) / len(es):>9.3f} "
                         f"{float(np.mean(widths)) if widths else math.nan:>11.4f}")
        lines.append(f"{name:<30} {'/'.join(groups):<13} {truth:>8.4f} " + " ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    params = load_params(ROOT / "params.yaml")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=100, help="independent log draws [100]")
    ap.add_argument("--episodes", type=int, default=3000,
                    help="good_coverage episodes logged per seed [3000]")
    ap.add_argument("--seed-base", type=int, default=0,
                    help="every log and estimator seed derives from this [0]")
    ap.add_argument("--n-boot", type=int, default=int(params["ope"]["n_boot"]),
                    help="bootstrap resamples per interval [params.yaml ope.n_boot]")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)

    settings = settings_from(params, args.episodes)
    print(f"python      {sys.version.split()[0]}; numpy {np.__version__}; "
          f"cpus {os.cpu_count()}")
    print(f"data        {args.seeds} seeds x {args.episodes:,} fresh {DATASET} episodes "
          f"(test fraction {params['calculator']['test_fraction']}; learners fit on split "
          f"{params['train']['split']!r}, OPE reads split {params['ope']['split']!r})")
    print(f"settings    layers {LAYERS}, is_estimators {IS_ESTIMATORS}; level "
          f"{settings.level}, n_boot {args.n_boot}"
          f"{'' if args.n_boot == settings.n_boot else f' (params.yaml: {settings.n_boot})'}"
          f", replays per episode {settings.replay_samples} (stochastic targets), "
          f"fqe_iterations {settings.fqe_iterations}, gamma {settings.gamma}")
    print(f"seeds       seed i: logs and estimators from SeedSequence([{args.seed_base}, i]); "
          f"seed 0 -> logs {seeds_of(args.seed_base, 0)[0]}, "
          f"estimators {seeds_of(args.seed_base, 0)[1]}\n")

    rows: list[dict] = []
    start = time.perf_counter()
    for i in range(args.seeds):
        t0 = time.perf_counter()
        rows += one_seed(params, i, args)
        if i == 0:
            first = time.perf_counter() - t0
            print(f"first seed  {first:.1f} s -> about {first * args.seeds / 60:.1f} min "
                  f"for {args.seeds} seeds\n", flush=True)
        if (i + 1) % 10 == 0 or i + 1 == args.seeds:
            elapsed = time.perf_counter() - start
            print(f"  {i + 1:>4}/{args.seeds} seeds, {elapsed:6.0f} s", file=sys.stderr,
                  flush=True)
    elapsed = time.perf_counter() - start

    n_cands = len({r["policy"] for r in rows})
    groups = {g: len({r["policy"] for r in rows if r["group"] == g}) for g in GROUPS[1:]}
    mixed = defaultdict(set)
    for r in rows:
        mixed[r["policy"]].add(r["group"])
    print(f"ran         {args.seeds} seeds x {n_cands} candidates in {elapsed:.0f} s "
          f"({elapsed / max(args.seeds, 1):.1f} s per seed)")
    print(f"candidates  per seed, deterministic ones are replayed once with zero-width "
          f"intervals;\n            over all seeds {groups['deterministic']} names were "
          f"deterministic at least once, {groups['stochastic']} stochastic at least once")
    print("            THE STOCHASTIC ROWS ARE THE INFORMATIVE PART: deterministic intervals "
          "cover by construction.\n")
    lines, ok = summarise(rows)
    print("\n".join(lines))
    print("per candidate over all seeds (coverage, mean interval width):")
    print("\n".join(per_candidate(rows)))
    print(f"\ntarget      coverage >= {TARGET:.2f} for replay, wis, wdr on every row: "
          f"{'met' if ok else 'MISSED'}")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
