"""Candidates from outside on the support desk (truth known): scored tables and the same
policies by import path, through the params path (`ope.candidates.external`).

    .venv/bin/python benchmarks/support_desk_candidates.py [--reps 20] [--episodes 2000]
        [--seed-base 8_100_000] [--n-boot 500]

Per rep (a fresh log from seed --seed-base + rep, none of them in the repo), as a team
would: the simulator's logger writes its conversations as OpenAI-chat JSONL, which the
`openai-chat` adapter ingests and the fixture's verifiers relabel (the pipeline's path to
the step table). A "scoring job" then writes, for each candidate, a JSONL scored table
keyed by (episode_id, t) of the logged steps, in shuffled order, with the candidate's
log-prob of every logged action and its distribution over the 12 actions (one candidate,
`more_scripted.logprobs`, gives the log-probs only), with a header naming the dataset and
the scoring settings. The tables are declared in params, loaded by
`tracerl.ope.external.load_external`, and evaluated by the engine beside the same policies
declared by import path (`tracerl.envs.support_desk.candidates:fixed_candidate`).

Prints, per estimator, the rate at which the intervals of the supported candidates (by
construction: every candidate but `escalate_on_error`, which escalates after tool errors,
an action the logger never takes) contain the 200,000-episode Monte Carlo truth (target
>= 0.90), how `escalate_on_error` is flagged, and the largest difference between a scored
table's estimates and its Python policy's. Writes benchmarks/results/
support_desk_candidates.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson

from tracerl.config.learning import Ope
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk import chat
from tracerl.envs.support_desk.candidates import behavior_model, fixed_candidate
from tracerl.envs.support_desk.features import critic_features, to_transitions
from tracerl.envs.support_desk.sim import ACTIONS
from tracerl.envs.support_desk.truth import mc_truth
from tracerl.io.fileio import read_table
from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates
from tracerl.ope.external import load_external
from tracerl.rl.encoding import get_encoder

RESULTS = Path(__file__).resolve().parent / "results" / "support_desk_candidates.json"
DATASET = "scripted"
CANDIDATES = ("behavior", "no_skip_check", "more_scripted", "mix_script_25", "mix_script_50",
              "escalate_on_error")
UNSUPPORTED = {"escalate_on_error"}
LOGPROBS_ONLY = {"more_scripted.logprobs": "more_scripted"}
VERIFIERS = ["support_desk_success@1", "support_desk_tool_error@1",
             "support_desk_step_cost@1", "support_desk_escalate@1"]
SUPPORT_FLAGS = ("low_support", "unsupported_actions")


def logged_steps(ep: sd.Episodes, folder: Path):
    """The pipeline's step table of simulated conversations: chat JSONL -> openai-chat
    adapter -> the fixture's verifiers."""
    path = chat.write_jsonl(ep, folder / "logs.jsonl", behavior_policy="scripted", gamma=0.99)
    summary = ingest([path], folder / "ingested", fmt="openai-chat")
    assert summary.quarantined == 0, summary
    env = ep.params
    return relabel(read_table(folder / "ingested" / "steps"), VERIFIERS, {
        "task_success": 1.0, "tool_error": env.error_cost, "step_cost": env.step_cost,
        "escalate": env.escalate_reward})


def score(ep: sd.Episodes, policy, path: Path, model: str, rng: np.random.Generator, *,
          distribution: bool) -> None:
    """A scoring job's output: per logged step (any order) the candidate's log-prob of the
    logged action at the logged dialogue state, and its distribution over the actions."""
    probs = np.asarray(policy.action_probs(ep.states), dtype=np.float64)
    with np.errstate(divide="ignore"):
        logp = np.log(probs[np.arange(len(ep.action)), ep.action])
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"dataset": DATASET, "scoring": {
        "model": model, "temperature": 1.0, "top_p": 1.0,
        "how": "exact action probabilities of the simulator's policy at the logged state"}}
    with open(path, "wb") as f:
        f.write(orjson.dumps(header) + b"\n")
        for k in rng.permutation(len(ep.action)):  # one line per step, by nature
            row = {"episode_id": f"support_desk-{int(ep.episode[k]):08d}", "t": int(ep.t[k]),
                   "action": ACTIONS[int(ep.action[k])],
                   # JSON has no -inf: a very negative log-prob stands for probability 0
                   "target_logprob": float(max(logp[k], -1e300))}
            if distribution:
                row["target_probs"] = {ACTIONS[j]: float(p) for j, p in enumerate(probs[k])
                                       if p > 0}
            f.write(orjson.dumps(row) + b"\n")


def external_spec(folder: Path) -> dict:
    """The params of the scored tables and of the same policies by import path."""
    spec: dict = {}
    for name in CANDIDATES:
        spec[f"{name}.scored"] = {"scored": str(folder / name / "{dataset}.jsonl"),
                                  "datasets": [DATASET],
                                  "scoring": {"model": f"support_desk/{name}"}}
    for name in LOGPROBS_ONLY:
        spec[name] = {"scored": str(folder / name / "{dataset}.jsonl"), "datasets": [DATASET]}
    for name in CANDIDATES:
        spec[f"{name}.py"] = {"policy": "tracerl.envs.support_desk.candidates:fixed_candidate",
                              "kwargs": {"name": name}}
    return spec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=500)
    ap.add_argument("--seed-base", type=int, default=8_100_000)
    ap.add_argument("--truth-episodes", type=int, default=200_000)
    ap.add_argument("--json", type=Path, default=RESULTS, help="where the figures go")
    ap.add_argument("--records", type=Path, default=None,
                    help="also write every supported candidate's interval here (JSON)")
    args = ap.parse_args()
    p = sd.FixtureParams()
    policies = {name: fixed_candidate(name) for name in CANDIDATES}
    started = time.perf_counter()
    truth = {name: mc_truth(pol, gamma=0.99, n=args.truth_episodes,
                            seed=args.seed_base + 999)["value"]
             for name, pol in policies.items()}
    truth.update({name: truth[base] for name, base in LOGPROBS_ONLY.items()})
    print(f"truth ({args.truth_episodes} episodes each, {time.perf_counter() - started:.0f} s):"
          f" " + ", ".join(f"{k} {v:.4f}" for k, v in truth.items()))
    pi_hat_b = behavior_model(to_transitions(sd.generate(p, 5000, seed=args.seed_base - 1)))
    encoder = get_encoder("support_desk")
    hits: dict[str, list[bool]] = defaultdict(list)
    hits_unflagged: dict[str, list[bool]] = defaultdict(list)
    widths: dict[str, list[float]] = defaultdict(list)
    unsupported: dict[str, list[str]] = defaultdict(list)
    not_applicable: dict[str, set[str]] = defaultdict(set)
    max_gap = 0.0
    compared = 0
    dump: list[dict] = []  # every interval (--records): what a rule is judged on
    for r in range(args.reps):
        seed = args.seed_base + r
        ep = sd.generate(p, args.episodes, seed=seed)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            steps = logged_steps(ep, folder)
            tr = encoder.transitions(steps)
            rng = np.random.default_rng(seed)
            for name in CANDIDATES:
                score(ep, policies[name], folder / "scored" / name / f"{DATASET}.jsonl",
                      f"support_desk/{name}", rng, distribution=True)
            for name, base in LOGPROBS_ONLY.items():
                score(ep, policies[base], folder / "scored" / name / f"{DATASET}.jsonl",
                      f"support_desk/{base}", rng, distribution=False)
            ope = Ope.model_validate({
                "n_boot": args.n_boot, "seed": seed, "layers": ["critic", "importance"],
                "return_range": [-1.2, 1.0],
                "candidates": {"external": external_spec(folder / "scored")}})
            candidates = load_external(ope.candidates.external, DATASET, steps, tr)
        settings = Settings.of(ope, gamma=0.99, verifiers=[], weights={},
                               n_episodes=tr.n_episodes)
        data = LoggedData.prepare(tr, critic_features(), pi_hat_b, settings, seed)
        # The same positions, so the same seeds: the two forms must agree exactly.
        est = evaluate_candidates(data, {k: candidates[f"{k}.scored"] for k in CANDIDATES},
                                  settings, seed)
        est_py = evaluate_candidates(data, {k: candidates[f"{k}.py"] for k in CANDIDATES},
                                     settings, seed)
        est.update(evaluate_candidates(data, {k: candidates[k] for k in LOGPROBS_ONLY},
                                       settings, seed + 77))
        for name in CANDIDATES:
            for a, b in zip(est[name], est_py[name], strict=True):
                assert (a.layer, a.estimator) == (b.layer, b.estimator)
                for x, y in ((a.value, b.value), (a.ci_low, b.ci_low), (a.ci_high, b.ci_high)):
                    if x is None or y is None:
                        assert x is None and y is None, (name, a.estimator, x, y)
                    else:
                        max_gap = max(max_gap, abs(x - y))
                        compared += 1
        for name, records in est.items():
            for e in records:
                key = f"{e.layer}/{e.estimator}"
                if not e.applicable or e.ci_low is None:
                    not_applicable[name].add(key)
                    continue
                if name in UNSUPPORTED:
                    flagged = [f.split(":")[0] for f in e.flags
                               if f.split(":")[0] in SUPPORT_FLAGS]
                    unsupported[key].append(",".join(flagged) or "UNFLAGGED")
                    continue
                inside = e.ci_low <= truth[name] <= e.ci_high
                check = (e.details.get("credibility") or {}).get("dr_correction") or {}
                dump.append({"seed": seed, "candidate": name, "estimator": key,
                                "value": e.value, "ci": [e.ci_low, e.ci_high],
                                "truth": truth[name], "flags": list(e.flags),
                                "unwidened": e.details.get("interval_unwidened"),
                                "dr_correction": check})
                hits[key].append(inside)
                widths[key].append(e.ci_high - e.ci_low)
                if not e.flags:
                    hits_unflagged[key].append(inside)
        print(f"rep {r + 1}/{args.reps} (seed {seed}): {tr.n_episodes} episodes, {tr.n} steps,"
              f" {time.perf_counter() - started:.0f} s", flush=True)
    rows = {k: {"coverage": float(np.mean(v)), "intervals": len(v),
                "mean_width": float(np.mean(widths[k])),
                "coverage_unflagged": float(np.mean(hits_unflagged[k]))
                if hits_unflagged[k] else None, "unflagged": len(hits_unflagged[k]),
                "flagged": len(v) - len(hits_unflagged[k])}
            for k, v in sorted(hits.items())}
    supported = [c for c in [*CANDIDATES, *LOGPROBS_ONLY] if c not in UNSUPPORTED]
    print(f"\nsupported candidates ({', '.join(supported)}), {args.reps} logs of "
          f"{args.episodes} conversations, seeds {args.seed_base}.."
          f"{args.seed_base + args.reps - 1}:")
    for k, v in rows.items():
        unflagged = "–" if v["coverage_unflagged"] is None else f"{v['coverage_unflagged']:.3f}"
        print(f"  {k:18s} coverage {v['coverage']:.3f} over {v['intervals']} intervals "
              f"(unflagged only: {unflagged} over {v['unflagged']}; {v['flagged']} "
              f"flagged), mean width "
              f"{v['mean_width']:.4f}")
    print("unsupported candidate escalate_on_error (support flags per interval):")
    flagged = {}
    for k, v in sorted(unsupported.items()):
        share = float(np.mean([x != "UNFLAGGED" for x in v]))
        flagged[k] = {"flagged_share": share, "intervals": len(v)}
        print(f"  {k:18s} flagged {share:.3f} of {len(v)} ({', '.join(sorted(set(v)))})")
    print("no interval (not applicable or no estimate): " + "; ".join(
        f"{k}: {', '.join(sorted(v))}" for k, v in sorted(not_applicable.items())))
    print(f"scored table vs Python policy: largest |difference| {max_gap:.3g} over {compared}"
          " values and interval ends")
    if args.records is not None:
        args.records.write_text(json.dumps(dump, indent=1) + "\n")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "reps": args.reps, "episodes": args.episodes, "seed_base": args.seed_base,
        "n_boot": args.n_boot, "truth": truth, "supported": rows,
        "unsupported": flagged, "not_applicable": {k: sorted(v) for k, v in
                                                   not_applicable.items()},
        "scored_vs_policy_max_gap": max_gap, "compared": compared}, indent=2,
        sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
