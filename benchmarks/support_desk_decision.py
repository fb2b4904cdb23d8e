"""Does the answer a team reads (deploy X / keep the logged agent / cannot tell) hold on the
support desk, on fresh seeds and candidates not in the repo? Beside the last release's.

    .venv/bin/python benchmarks/support_desk_decision.py [--sizes 1000 5000] [--seeds 4]
        [--base-seed 9_310_000] [--truth-episodes 40000] [--baseline 36961d4]
        [--json PATH] [--candidates all|deterministic|table]

Per size and seed (--base-seed + 1000 x size index + k, none of them in the repo), one log
of the support desk's scripted logger (logged propensities) is simulated and evaluated as
the ope stage does (critic and importance layers, `pipelines/support_desk/params.yaml`'s
`ope`), on candidates drawn per seed around the logger: the logger itself, scripted agents
with a random script share in [0.75, 0.95] and no skipped check (truth 0.5-0.85: much
better than the logger's 0.27, every action of theirs the logger takes w.p. >= 0.06), a
mixture of the logger and the full script, a slightly better one (script share 0.45), one
that escalates after errors (an action the logger never takes), the deterministic
script itself (truth about 0.87; the logger takes its every action w.p. >= 0.4, so its IS
weights are up to 2.5^t on the episodes that follow it: few do) and a deterministic table
(`SkipTable`: the script, but on cancellations or, by the seed's draw, address changes it
runs the action tool without checking the policy first; truth about 0.52; the logger takes
that action w.p. >= 0.06; after it, its path is thinly logged) and another (`Reorder`: the
script asking for the order id before the email, truth about 0.87). `--candidates
deterministic` keeps the logger, the three deterministic candidates and one worse one
(slightly_better), `--candidates table` the same without the script: logs whose only
much-better candidates are deterministic, whose trajectory weights few logged episodes
follow (the critic's support is its state-action occupancy, `tracerl.ope.support`).
Truth: each candidate's Monte Carlo return on the fixture's simulator (--truth-episodes
conversations).

The right answer: "deploy" when some candidate's truth beats the logger's by >= 0.05 (any
deployed candidate must then beat it in truth), else "keep" or "cannot tell". Printed per
size: the share of correct answers, the share of logs answered "deploy" of a candidate
whose truth beats the logger's by >= 0.2 with an interval covering that truth (the
issue's bar: >= 0.80 at 5,000), the share of "deploy" where one is due, deploys of a
candidate not better in truth (must be 0), the deployed intervals covering their truth,
the coverage of unflagged estimates per layer, intervals outside the return range (must
be 0). The same seeds, candidates and truths are run on the last release's code
(--baseline, a commit: its `tracerl/` is exported to a temporary folder and this script
runs again there, in a subprocess) and printed beside. Writes
benchmarks/results/support_desk_decision.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "support_desk_decision.json"
PARAMS = ROOT / "pipelines" / "support_desk" / "params.yaml"
DATASET = "scripted"
BETTER = 0.05  # a candidate this much better than the logger in truth makes "deploy" due
MUCH_BETTER = 0.2  # the issue's bar: deploy such a candidate, interval covering its truth


class SkipTable:
    """A deterministic table: the script, except that on the intents in `skip` it runs the
    intent's action tool where the script checks the policy first."""

    def __init__(self, skip: tuple[int, ...]) -> None:
        self.skip = tuple(int(i) for i in skip)

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        from tracerl.envs.support_desk import sim

        a = sim.script_actions(states)
        intent = states[:, sim.S_INTENT]
        tool = np.select([intent == sim.REFUND, intent == sim.CANCEL],
                         [sim.ISSUE_REFUND, sim.CANCEL_ORDER], default=sim.UPDATE_ADDRESS)
        skip = (a == sim.CHECK_POLICY) & np.isin(intent, self.skip)
        a = np.where(skip, tool, a)
        probs = np.zeros((len(a), sim.N_ACTIONS))
        probs[np.arange(len(a)), a] = 1.0
        return probs


class Reorder:
    """A deterministic table: the script, but asking for the order id before the email (a
    path the logger's noise takes w.p. 0.06 at its first step, then its script)."""

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        from tracerl.envs.support_desk import sim

        a = sim.script_actions(states)
        early = ((states[:, sim.S_INTENT] != 0) & (states[:, sim.S_EMAIL] == 0)
                 & (states[:, sim.S_OID] == 0))
        a = np.where(early, sim.ASK_ORDER_ID, a)
        probs = np.zeros((len(a), sim.N_ACTIONS))
        probs[np.arange(len(a)), a] = 1.0
        return probs


SETS = {"all": None,
        "deterministic": ("behavior", "script", "reorder", "skip_table", "slightly_better"),
        "table": ("behavior", "reorder", "skip_table", "slightly_better")}
CANDIDATE_SET = os.environ.get("SUPPORT_DESK_CANDIDATES", "all")  # the worker's copy


def candidates_of(seed: int, which: str | None = None) -> dict:
    """The seed's candidates (see the module docstring), drawn from its own stream;
    `which`: a key of SETS (default: this process's --candidates)."""
    from tracerl.envs import support_desk as sd
    from tracerl.envs.support_desk.sim import (
        EscalateOnError,
        ScriptedPolicy,
        one_hot_policy,
        script_actions,
    )
    from tracerl.rl.policy import MixturePolicy

    rng = np.random.default_rng([seed, 17])
    logger = sd.FixtureParams().behavior
    script = one_hot_policy(script_actions)
    out = {"behavior": logger,
            "scripted_hi": ScriptedPolicy(p_script=float(rng.uniform(0.85, 0.95)),
                                          p_skip_check=0.0),
            "scripted_mid": ScriptedPolicy(p_script=float(rng.uniform(0.75, 0.85)),
                                           p_skip_check=0.0),
            "mix_script": MixturePolicy((logger, script), (0.5, 0.5)),
            "slightly_better": ScriptedPolicy(p_script=0.45,
                                              p_skip_check=float(rng.uniform(0.2, 0.3))),
            "escalate_on_error": EscalateOnError(logger, float(rng.uniform(0.3, 0.7))),
            "script": script,
            "skip_table": SkipTable(((2,), (4,))[int(rng.integers(2))]),
            "reorder": Reorder()}
    which = CANDIDATE_SET if which is None else which
    if which not in SETS:
        raise ValueError(f"--candidates must be one of {sorted(SETS)}, got {which!r}")
    return out if SETS[which] is None else {k: out[k] for k in SETS[which]}


def run_one(n: int, seed: int, truth: dict[str, float]) -> dict:
    """One fresh log: the answer, the headline records and every return record."""
    from tracerl.config.schema import load_config
    from tracerl.envs import support_desk as sd
    from tracerl.envs.support_desk.features import to_transitions
    from tracerl.feature_maps import critic_features
    from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates, logged_value
    from tracerl.ope.records import record
    from tracerl.ope.select import select
    from tracerl.report import answer as answer_module
    from tracerl.rl.learners import behavior_model

    params = load_config(PARAMS)
    train, ope, gamma = params.train, params.ope, params.gamma
    tr = to_transitions(sd.generate(sd.FixtureParams(), n, seed=seed))
    critic = critic_features(ope, train, tr.encoder)
    run = ope.model_copy(update={"layers": ["critic", "importance"]})
    settings = Settings.of(run, gamma=gamma, verifiers=[], weights={},
                           n_episodes=tr.n_episodes)
    behavior = behavior_model(tr, critic, C=train.bc.C, max_iter=train.bc.max_iter,
                              seed=train.seed)
    data = LoggedData.prepare(tr, critic, behavior, settings, ope.seed)
    candidates = candidates_of(seed)
    estimates = evaluate_candidates(data, candidates, settings, ope.seed)
    records = [record(DATASET, name, e, {"return": truth[name], "return_se": 0.0,
                                         "success": None})
               for name, es in estimates.items() for e in es]
    logged = {DATASET: logged_value(tr, gamma=gamma, seed=ope.seed, n_boot=ope.n_boot,
                                    level=ope.confidence).to_dict()}
    selection = select(records, ope.min_support)
    found = answer_module.answers(records, selection, logged, ope.headline,
                                  ope.min_support)[0]
    words = {answer_module.DEPLOY: "deploy", answer_module.KEEP: "keep",
             answer_module.CANNOT_TELL: "cannot tell"}
    return {"n": n, "seed": seed, "answer": words[found.decision], "pick": found.candidate,
            "ci": [found.ci_low, found.ci_high], "line": found.line(),
            "records": [{k: r[k] for k in ("policy", "layer", "estimator", "value", "ci_low",
                                           "ci_high", "support", "flags", "truth")}
                        for r in records if r["metric"] == "return"],
            "range": list(ope.return_range), "headline": ope.headline,
            "min_support": ope.min_support}


def judge(runs: list[dict], truth: dict[int, dict[str, float]]) -> dict:
    """The shares the module docstring names, over `runs` (one size)."""
    from tracerl.ope.select import blocking_flags

    correct = due = deployed_when_due = wrong_deploys = covering = deploys = 0
    much_better = 0
    outside = 0
    hits: dict[str, list[bool]] = {}
    for r in runs:
        t = truth[r["seed"]]
        logger = t["behavior"]
        best = max(v for k, v in t.items() if k != "behavior")
        should_deploy = best >= logger + BETTER
        due += should_deploy
        if r["answer"] == "deploy":
            deploys += 1
            better = t[r["pick"]] > logger
            wrong_deploys += not better
            correct += bool(should_deploy and better)
            deployed_when_due += bool(should_deploy and better)
            lo, hi = r["ci"]
            covers = bool(lo is not None and lo <= t[r["pick"]] <= hi)
            covering += covers
            much_better += covers and t[r["pick"]] >= logger + MUCH_BETTER
        else:
            correct += not should_deploy
        low, high = r["range"]
        for rec in r["records"]:
            for key in ("value", "ci_low", "ci_high"):
                x = rec[key]
                outside += x is not None and not low - 1e-9 <= x <= high + 1e-9
            if rec["value"] is None or rec["ci_low"] is None or blocking_flags(rec["flags"]) \
                    or rec["support"] < r["min_support"]:
                continue
            layer = f"{rec['layer']}/{rec['estimator']}"
            hits.setdefault(layer, []).append(rec["ci_low"] - 0.01 <= rec["truth"]
                                              <= rec["ci_high"] + 0.01)
    return {"runs": len(runs), "correct": correct / len(runs) if runs else None,
            "deploy_when_due": deployed_when_due / due if due else None, "due": due,
            "deploys": deploys, "deploys_not_better": wrong_deploys,
            "deployed_covering": covering / deploys if deploys else None,
            "deploy_much_better_covering": much_better / len(runs) if runs else None,
            "values_outside_range": outside,
            "unflagged_coverage": {k: [float(np.mean(v)), len(v)]
                                   for k, v in sorted(hits.items())},
            "answers": {a: sum(r["answer"] == a for r in runs)
                        for a in ("deploy", "keep", "cannot tell")}}


def truths(seeds: list[int], episodes: int) -> dict[int, dict[str, float]]:
    from tracerl.envs.support_desk.truth import mc_truth

    out = {}
    for seed in seeds:
        out[seed] = {name: float(mc_truth(policy, gamma=0.99, n=episodes,
                                          seed=seed + 7 * (k + 1))["value"])
                     for k, (name, policy) in enumerate(candidates_of(seed).items())}
    return out


def worker(plan: list[list[int]], truth: dict[int, dict[str, float]], out: Path) -> None:
    runs = []
    for n, seed in plan:
        start = time.perf_counter()
        run = run_one(n, seed, truth[seed])
        run["seconds"] = time.perf_counter() - start
        print(f"  n={n} seed={seed}: {run['line'][:160]} ({run['seconds']:.0f} s)",
              flush=True)
        runs.append(run)
    out.write_text(json.dumps(runs))


def baseline_runs(commit: str, plan: list[list[int]], truth: dict, tmp: Path) -> list[dict]:
    """This script's runs on `commit`'s tracerl/ (exported to `tmp`), in a subprocess."""
    code = tmp / "code"
    code.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "tracerl"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    (tmp / "plan.json").write_text(json.dumps({"plan": plan, "truth": truth}))
    out = tmp / "runs.json"
    subprocess.run([sys.executable, __file__, "--worker", str(tmp / "plan.json"), str(out)],
                   check=True, env={**os.environ, "PYTHONPATH": str(code),
                                    "SUPPORT_DESK_CANDIDATES": CANDIDATE_SET}, cwd=ROOT)
    return json.loads(out.read_text())


def main() -> int:
    global CANDIDATE_SET
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--base-seed", type=int, default=9_310_000)
    ap.add_argument("--truth-episodes", type=int, default=40_000)
    ap.add_argument("--baseline", default="36961d4", help="a commit; 'none' to skip it")
    ap.add_argument("--json", type=Path, default=RESULTS)
    ap.add_argument("--candidates", choices=sorted(SETS), default=CANDIDATE_SET)
    ap.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    CANDIDATE_SET = args.candidates
    if args.worker:
        spec = json.loads(args.worker[0].read_text())
        worker(spec["plan"], {int(k): v for k, v in spec["truth"].items()}, args.worker[1])
        return 0
    plan = [[n, args.base_seed + 1000 * i + k] for i, n in enumerate(args.sizes)
            for k in range(args.seeds)]
    start = time.perf_counter()
    truth = truths(sorted({s for _, s in plan}), args.truth_episodes)
    print(f"truth ({args.truth_episodes} conversations each, "
          f"{time.perf_counter() - start:.0f} s)", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "plan.json").write_text(json.dumps({"plan": plan, "truth": truth}))
        print("this checkout:", flush=True)
        worker(plan, truth, Path(tmp) / "runs.json")
        results["this checkout"] = json.loads((Path(tmp) / "runs.json").read_text())
    if args.baseline != "none":
        with tempfile.TemporaryDirectory() as tmp:
            print(f"last release ({args.baseline}):", flush=True)
            results[args.baseline] = baseline_runs(args.baseline, plan, truth, Path(tmp))
    summary = {}
    for n in args.sizes:
        for name, runs in results.items():
            s = judge([r for r in runs if r["n"] == n], truth)
            summary[f"{name} n={n}"] = s
            cover = ", ".join(f"{k} {v[0]:.2f}/{v[1]}"
                              for k, v in s["unflagged_coverage"].items())
            due = "–" if s["deploy_when_due"] is None else f"{s['deploy_when_due']:.2f}"
            covered = "–" if s["deployed_covering"] is None else f"{s['deployed_covering']:.2f}"
            print(f"n={n} {name:>14}: correct {s['correct']:.2f} of {s['runs']}; deploy "
                  f"when due {due} (due {s['due']}); deploys not better in truth "
                  f"{s['deploys_not_better']}; deployed interval covers truth {covered}; "
                  f"deploy of a >= {MUCH_BETTER} better candidate, covering: "
                  f"{s['deploy_much_better_covering']:.2f}; "
                  f"values outside the range {s['values_outside_range']}; answers "
                  f"{s['answers']}; unflagged coverage: {cover}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                     "truth": {str(k): v for k, v in truth.items()},
                                     "summary": summary}, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
