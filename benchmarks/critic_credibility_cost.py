"""What the linear critic's credibility checks cost beside the plain fit, on the support desk.

    .venv/bin/python benchmarks/critic_credibility_cost.py [--episodes 3000] [--repeats 3]
        [--seed 8600001] [--json PATH]

One fresh log of the support desk's scripted logger (--seed, not a seed of the repo), the
ope stage's critic and candidates as `pipelines/support_desk/params.yaml` configures them
(tracerl.ope.evaluate). Timed side by side in one process, interleaved over --repeats
rounds (the median of each is printed, and its ratio to the plain fit):

- ``plain``: every candidate's critic on the whole log (`Target.fit_critic`, the log's
  design made once and shared, as the stage does);
- ``jackknife designs``: the designs of the 20 delete-a-group replicates (once per log,
  shared by every candidate);
- ``calibration``: the behaviour model's critic on 5 held-out folds (once per log);
- ``credibility``: per candidate the ridge probe, the 20 jackknife refits and the DR
  correction's bias bound (`_critic_credibility`), given the cross-fitted critics;
- ``cross-fitted``: the DR folds' critics (which DR and WDR need anyway; the bias check
  reuses them, so they are not an extra cost of the checks).

Writes benchmarks/results/critic_credibility_cost.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from tracerl.config.schema import load_config
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk.features import to_transitions
from tracerl.feature_maps import critic_features, train_features
from tracerl.ope import evaluate as ev
from tracerl.rl.learners import behavior_model, fit_learners
from tracerl.rl.policy import UniformValidPolicy, with_derived

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "critic_credibility_cost.json"
PARAMS = ROOT / "pipelines" / "support_desk" / "params.yaml"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=8_600_001)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    params = load_config(PARAMS)
    train, ope, gamma = params.train, params.ope, params.gamma
    p = sd.FixtureParams()
    tr = to_transitions(sd.generate(p, args.episodes, seed=args.seed))
    encoder = tr.encoder
    features = critic_features(ope, train, encoder)
    learners = fit_learners(tr, train_features(train, encoder), train, gamma)
    candidates = with_derived({"behavior": p.behavior, **learners},
                              ope.candidates.model_dump(),
                              UniformValidPolicy(encoder.valid_actions))
    s = ev.Settings.of(ope.model_copy(update={"layers": ["critic", "importance"]}),
                       gamma=gamma, verifiers=[], weights={}, n_episodes=tr.n_episodes)
    behavior = behavior_model(tr, features, C=train.bc.C, max_iter=train.bc.max_iter,
                              seed=train.seed)
    data = ev.LoggedData.prepare(tr, features, behavior, s, ope.seed)
    design = data.linear_design()
    targets = [ev.target_of(data, c) for c in candidates.values()]
    if data.groups is not None:
        raise SystemExit("this log takes the one-hot refit path: no linear credibility checks")

    def plain() -> None:
        for tgt in targets:
            tgt.fit_critic(features, tr, s.gamma, s.critic_alpha, design=design,
                           iterations=s.critic_iterations)

    def jackknife_designs() -> None:
        data.jackknife = None
        data.jackknife_groups()

    def calibration() -> None:
        ev.critic_calibration(tr, features, data.behavior_probs, s, ope.seed)

    fitted = [tgt.fit_critic(features, tr, s.gamma, s.critic_alpha, design=design)
              for tgt in targets]
    folds = [ev.cross_fitted_steps(data, tgt, s) for tgt in targets]
    supports = [ev.support_of(data, tgt, s) for tgt in targets]

    def credibility() -> None:
        for tgt, sup, critic, fold in zip(targets, supports, fitted, folds, strict=True):
            ev._critic_credibility(data, tgt, sup, critic, fold, s)

    def cross_fitted() -> None:
        for tgt in targets:
            ev.cross_fitted_steps(data, tgt, s)

    parts = {"plain": plain, "jackknife designs": jackknife_designs,
             "calibration": calibration, "credibility": credibility,
             "cross-fitted": cross_fitted}
    times: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(args.repeats):  # interleaved: the machine's noise hits every part alike
        for name, fn in parts.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    median = {k: statistics.median(v) for k, v in times.items()}
    extra = median["jackknife designs"] + median["calibration"] + median["credibility"]
    print(f"support desk, {tr.n_episodes} conversations ({tr.n} steps), "
          f"{len(targets)} candidates ({', '.join(candidates)}), {design.d} features used, "
          f"median of {args.repeats} interleaved rounds:")
    for k, v in median.items():
        print(f"  {k:18s} {v:8.3f} s  ({v / median['plain']:.1f}x plain)")
    print(f"  credibility checks in all (designs + calibration + per-candidate checks): "
          f"{extra:.3f} s = {extra / median['plain']:.1f}x the plain fits")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "episodes": tr.n_episodes, "steps": tr.n, "seed": args.seed,
        "candidates": list(candidates), "repeats": args.repeats, "times": times,
        "median": median, "extra_over_plain": extra / median["plain"]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
