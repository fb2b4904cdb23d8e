"""Does the ope stage's selection hold on the support desk, at small logs, on fresh seeds?

    .venv/bin/python benchmarks/support_desk_selection.py [--sizes 300 1000 3000]
        [--seeds 8] [--base-seed 770001] [--truth-episodes 20000] [--json PATH]

For each log size and each of --seeds fresh seeds (--base-seed + 1000 x size index + k, not
a seed of the repo), one log of the support desk's scripted logger is simulated and the
pipeline's ope stage is run on it as `pipelines/support_desk/params.yaml` configures it
(the train stage's learners fitted on the log, the fixture's behaviour policy, the derived
candidates; critic and importance layers: replay needs the ingested step table, it is left
out here), each candidate's Monte Carlo truth beside it. Printed per size, the rates of the
issue-17 acceptance:

- the pick of the headline estimator (if any) worse than the logged policy in truth by more
  than 0.05 (must be 0);
- a value or interval outside the params' return range (must be 0);
- an unflagged estimate (no blocking flag, support >= min_support) whose interval misses its
  truth by more than 2 truth SEs (must be 0);
and the share of runs with a pick, the verdicts' counts. Writes
benchmarks/results/support_desk_selection.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from tracerl.config.schema import load_config
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk.features import to_transitions
from tracerl.envs.support_desk.truth import mc_truth
from tracerl.feature_maps import critic_features, train_features
from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates
from tracerl.ope.records import record
from tracerl.ope.select import blocking_flags, pick_of, select
from tracerl.report.answer import verdicts
from tracerl.rl.learners import behavior_model, fit_learners
from tracerl.rl.policy import UniformValidPolicy, with_derived

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "support_desk_selection.json"
PARAMS = ROOT / "pipelines" / "support_desk" / "params.yaml"
DATASET = "scripted"


def run_one(params, n: int, seed: int, truth_episodes: int, logged_truth: float) -> dict:
    """One fresh log: the stage's records, selection and the acceptance checks."""
    train, ope, gamma = params.train, params.ope, params.gamma
    p = sd.FixtureParams()
    tr = to_transitions(sd.generate(p, n, seed=seed))
    encoder = tr.encoder
    features = train_features(train, encoder)
    critic = critic_features(ope, train, encoder)
    learners = fit_learners(tr, features, train, gamma)
    base = {"behavior": p.behavior, **learners}
    candidates = with_derived(base, ope.candidates.model_dump(),
                              UniformValidPolicy(encoder.valid_actions))
    ope_run = ope.model_copy(update={"layers": ["critic", "importance"]})
    settings = Settings.of(ope_run, gamma=gamma, verifiers=[], weights={},
                           n_episodes=tr.n_episodes)
    behavior = behavior_model(tr, critic, C=train.bc.C, max_iter=train.bc.max_iter,
                              seed=train.seed)
    data = LoggedData.prepare(tr, critic, behavior, settings, ope.seed)
    estimates = evaluate_candidates(data, candidates, settings, ope.seed)
    truth = {}
    for k, (name, policy) in enumerate(candidates.items()):  # a handful of candidates
        t = mc_truth(policy, gamma=gamma, n=truth_episodes, seed=seed + 31 * (k + 1))
        truth[name] = {"return": t["value"], "return_se": t["se"], "success": t["success"]}
    records = [record(DATASET, name, e, truth[name]) for name, es in estimates.items()
               for e in es]
    selection = select(records, ope.min_support)
    pick, _ = pick_of(selection, DATASET, ope.headline)
    low, high = ope.return_range
    outside, misses = [], []
    for r in records:
        if r["metric"] != "return":
            continue
        for key in ("value", "ci_low", "ci_high"):
            if r[key] is not None and not low - 1e-12 <= r[key] <= high + 1e-12:
                outside.append((r["policy"], f"{r['layer']}/{r['estimator']}", key, r[key]))
        if r["value"] is None or r["ci_low"] is None or blocking_flags(r["flags"]) \
                or r["support"] < ope.min_support:
            continue
        slack = 2.0 * r["truth_se"]
        if not r["ci_low"] - slack <= r["truth"] <= r["ci_high"] + slack:
            misses.append((r["policy"], f"{r['layer']}/{r['estimator']}", r["value"],
                           [r["ci_low"], r["ci_high"]], r["truth"]))
    picked_truth = None if pick is None else truth[pick]["return"]
    return {"n": n, "seed": seed, "pick": pick, "pick_truth": picked_truth,
            "logged_truth": logged_truth,
            "pick_worse": picked_truth is not None and picked_truth < logged_truth - 0.05,
            "outside": outside, "misses": misses,
            "verdicts": {v.candidate: v.status
                         for v in verdicts(records, DATASET, ope.headline, ope.min_support)},
            "truth": {k: v["return"] for k, v in truth.items()},
            "headline": {r["policy"]: [r["value"], r["ci_low"], r["ci_high"],
                                       [f.split(":")[0] for f in r["flags"]]]
                         for r in records if f"{r['layer']}/{r['estimator']}" == ope.headline}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3000])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--base-seed", type=int, default=770001)
    ap.add_argument("--truth-episodes", type=int, default=20_000)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    params = load_config(PARAMS)
    p = sd.FixtureParams()
    logged_truth = mc_truth(p.behavior, gamma=params.gamma, n=200_000,
                            seed=args.base_seed - 1)["value"]
    runs, summary = [], {}
    for i, n in enumerate(args.sizes):
        mine = []
        for k in range(args.seeds):
            start = time.perf_counter()
            run = run_one(params, n, args.base_seed + 1000 * i + k, args.truth_episodes,
                          logged_truth)
            run["seconds"] = time.perf_counter() - start
            mine.append(run)
            print(f"n={n} seed={run['seed']}: pick {run['pick']} (truth "
                  f"{run['pick_truth']}, logged {logged_truth:.3f}) outside "
                  f"{len(run['outside'])} misses {len(run['misses'])} "
                  f"({run['seconds']:.0f} s)", flush=True)
            for miss in run["misses"]:
                print("   miss", miss, flush=True)
            for out in run["outside"]:
                print("   outside", out, flush=True)
        runs += mine
        counts = Counter(s for r in mine for s in r["verdicts"].values())
        summary[n] = {"runs": len(mine),
                      "pick_rate": sum(r["pick"] is not None for r in mine) / len(mine),
                      "pick_worse_rate": sum(r["pick_worse"] for r in mine) / len(mine),
                      "outside_range_rate": sum(bool(r["outside"]) for r in mine) / len(mine),
                      "unflagged_miss_rate": sum(bool(r["misses"]) for r in mine) / len(mine),
                      "picks": dict(Counter(str(r["pick"]) for r in mine)),
                      "verdicts": dict(counts)}
        s = summary[n]
        print(f"== n={n}: runs {s['runs']}, pick rate {s['pick_rate']:.2f}, pick worse than "
              f"logged by > 0.05: {s['pick_worse_rate']:.2f}, any value/interval outside "
              f"the range: {s['outside_range_rate']:.2f}, any unflagged miss: "
              f"{s['unflagged_miss_rate']:.2f}; picks {s['picks']}; verdicts "
              f"{s['verdicts']}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"args": vars(args), "logged_truth": logged_truth,
                                   "summary": {str(k): v for k, v in summary.items()},
                                   "runs": runs}, indent=2, sort_keys=True, default=str)
                       + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
