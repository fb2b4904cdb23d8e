"""The SWiRL learners against the logger, in the support desk's Monte Carlo truth (issue 31).

    .venv/bin/python benchmarks/support_desk_swirl.py [--episodes 1000 3000]
        [--seeds 71001 71002 71003] [--truth-episodes 200000] [--truth-seed 71999]
        [--params pipelines/support_desk/params.yaml] [--out benchmarks/results/...]

Per size and seed (seeds not in params): a fresh log of the scripted logger the pipeline's
way (chat JSONL -> ingest -> relabel: `support_desk_exports.labelled_steps`), then the
train stage's learners on it, `train.learners` of the params with both SWiRL learners,
their inputs from `tracerl.rl.learners.swirl_inputs` exactly as the train task computes
them (export.sft, export.weighting unless train overrides them, relabel.filters, the ope
section's critic). Each policy's truth: `mc_truth`, `--truth-episodes` rollouts from
`--truth-seed` (SE = sd / sqrt(n)). The bar: filtered_bc above the logger by 0.2 in
every log.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from support_desk_exports import labelled_steps, truth  # noqa: E402

from tracerl.config.schema import load_config  # noqa: E402
from tracerl.envs.support_desk.fixture import fixture_params  # noqa: E402
from tracerl.feature_maps import critic_features, train_features  # noqa: E402
from tracerl.rl.encoding import encoder_for  # noqa: E402
from tracerl.rl.learners import fit_learners, swirl_inputs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=ROOT / "pipelines/support_desk/params.yaml")
    parser.add_argument("--episodes", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[71001, 71002, 71003])
    parser.add_argument("--truth-episodes", type=int, default=200_000)
    parser.add_argument("--truth-seed", type=int, default=71999)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    params = load_config(args.params)
    train = params.train.model_copy(update={"learners": list(dict.fromkeys(
        [*params.train.learners, "filtered_bc", "advantage_weighted_bc"]))})
    filters = params.relabel.filters
    logger = truth(fixture_params(params).behavior, params, args.truth_episodes,
                   args.truth_seed)
    print(f"logger {logger['value']:+.4f} ± {logger['se']:.4f}")
    rows, ok = [], True
    for episodes in args.episodes:
        for seed in args.seeds:
            t0 = time.perf_counter()
            tmp = Path(tempfile.mkdtemp(prefix="support_desk_swirl-"))
            try:
                steps = labelled_steps(params, episodes, seed, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            encoder = encoder_for([steps], train.encoder, **train.encoder_params)
            tr = encoder.transitions(steps)
            swirl = swirl_inputs(steps, tr, train, sft=params.export.sft,
                                 weighting=params.export.weighting, process=filters.process,
                                 outcome=filters.outcome,
                                 critic_features=critic_features(params.ope, train, encoder),
                                 ope=params.ope, gamma=params.gamma)
            policies = fit_learners(tr, train_features(train, encoder), train, params.gamma,
                                    **swirl)
            values = {name: truth(p, params, args.truth_episodes, args.truth_seed)
                      for name, p in policies.items()}
            gap = values["filtered_bc"]["value"] - logger["value"]
            ok &= gap >= 0.2
            rows.append({"episodes": episodes, "seed": seed, "truth": values,
                         "filtered_bc_minus_logger": gap,
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(f"{episodes:6d} seed {seed}: " + "  ".join(
                f"{n} {v['value']:+.4f}" for n, v in values.items())
                + f"   filtered_bc - logger {gap:+.4f}")
    print("filtered_bc beats the logger by >= 0.2 in every log:", "yes" if ok else "NO")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"logger": logger, "runs": rows,
                                        "truth_episodes": args.truth_episodes,
                                        "truth_seed": args.truth_seed}, indent=2,
                                       sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
