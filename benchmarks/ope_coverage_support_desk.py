"""Empirical coverage of the OPE intervals (nominal 95%) on the support desk.

    .venv/bin/python benchmarks/ope_coverage_support_desk.py [--reps 40] [--episodes 2000]

The stochastic candidates whose truth does not depend on a training run (the logger, its
variants and mixtures with the script) are evaluated on --reps independent logs of
--episodes episodes each, with the behaviour model fitted once on a separate log; the truth
is a 200,000-episode Monte Carlo mean (SE ~0.001). Prints, per estimator, the share of
intervals that contain the truth (the issue's rule: >= 0.90) and the mean width, with and
without the widening rules of `tracerl.ope.intervals`, and writes
benchmarks/results/ope_coverage_support_desk.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tracerl.config.learning import Ope
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk.candidates import behavior_model
from tracerl.envs.support_desk.features import critic_features, to_transitions
from tracerl.envs.support_desk.sim import SCRIPT, ScriptedPolicy
from tracerl.envs.support_desk.truth import mc_truth
from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates
from tracerl.rl.policy import MixturePolicy

RESULTS = Path(__file__).resolve().parent / "results" / "ope_coverage_support_desk.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    p = sd.FixtureParams()
    b = p.behavior
    candidates = {
        "behavior": b,
        "no_skip_check": ScriptedPolicy(p_script=b.p_script, p_skip_check=0.0),
        "more_scripted": ScriptedPolicy(p_script=0.6, p_skip_check=b.p_skip_check),
        "mix_script_25": MixturePolicy((b, SCRIPT), (0.75, 0.25)),
        "mix_script_50": MixturePolicy((b, SCRIPT), (0.5, 0.5)),
    }
    truth = {k: mc_truth(pol, gamma=0.99, n=200_000, seed=args.seed)["value"]
             for k, pol in candidates.items()}
    pi_hat_b = behavior_model(to_transitions(sd.generate(p, 5000, seed=args.seed + 1)))
    hits: dict[str, list[bool]] = {}
    widths: dict[str, list[float]] = {}
    raw: dict[str, list[bool]] = {}  # before the widening rules
    raw_w: dict[str, list[float]] = {}
    for r in range(args.reps):  # independent logs
        tr = to_transitions(sd.generate(p, args.episodes, seed=args.seed + 100 + r))
        settings = Settings.of(Ope(n_boot=args.n_boot, seed=r, layers=["critic", "importance"],
                                   return_range=(-1.2, 1.0)), gamma=0.99, verifiers=[],
                               weights={}, n_episodes=tr.n_episodes)
        est = evaluate_candidates(LoggedData.prepare(tr, critic_features(), pi_hat_b, settings,
                                                     r), candidates, settings, r)
        for name, records in est.items():
            for e in records:
                if e.ci_low is None:
                    continue
                hits.setdefault(e.estimator, []).append(e.ci_low <= truth[name] <= e.ci_high)
                widths.setdefault(e.estimator, []).append(e.ci_high - e.ci_low)
                lo, hi = e.details.get("interval_unwidened", [e.ci_low, e.ci_high])
                raw.setdefault(e.estimator, []).append(lo <= truth[name] <= hi)
                raw_w.setdefault(e.estimator, []).append(hi - lo)
    rows = {k: {"coverage": float(np.mean(v)), "mean_width": float(np.mean(widths[k])),
                "coverage_unwidened": float(np.mean(raw[k])),
                "mean_width_unwidened": float(np.mean(raw_w[k])),
                "intervals": len(v)} for k, v in hits.items()}
    for k, v in rows.items():
        print(f"{k:6s} coverage {v['coverage']:.3f} (unwidened {v['coverage_unwidened']:.3f})"
              f" over {v['intervals']} intervals, mean width {v['mean_width']:.4f} "
              f"(unwidened {v['mean_width_unwidened']:.4f})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"reps": args.reps, "episodes": args.episodes,
                                   "candidates": sorted(candidates), "truth": truth,
                                   "estimators": rows}, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
