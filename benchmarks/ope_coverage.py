"""Coverage of the OPE intervals: how often the truth lies inside the nominal 95% interval.

    .venv/bin/python benchmarks/ope_coverage.py [--episodes 3000 ...] [--seeds 50]
        [--seed-base 0] [--datasets good_coverage ...] [--behaviours default ...]
        [--n-boot N] [--workers 2] [--json PATH] [--plot PATH] [--check]

For each seed, FRESH calculator logs are drawn (`--episodes` episodes, the params.yaml
test fraction), relabelled with the params.yaml verifiers; the three learners of the train
stage (params.yaml `train:`, tracerl.rl.learners) are fitted on the train split; the
stage's 10 candidates (tasks/ope.py) are evaluated by EVERY layer with the stage's
settings (params.yaml `ope:`). Each interval is compared with the exact value of the
candidate (`calculator.exact_value`: "success" for the verifier layer, "return" for the
others), with 1e-9 slack.

Behaviour settings: `default` is params.yaml `calculator.behavior.<dataset>`; `alt` is
lookup 0.95, op 0.70, final 0.60 with the same ops. Seeds: seed i draws its logs and its
estimator seeds from SeedSequence([seed_base, dataset, behaviour, episodes, i]).

Counted: the stochastic candidates (a deterministic one replays once, its IS weights are
0/1: its intervals cover by construction) whose estimate has support 1 (the target never
leaves logged pairs; unsupported ones are flagged and never ranked first). Two figures per
layer: coverage of every such interval, and of the trusted ones (no `interval_unreliable`
flag; flagged ones are never ranked first). Target: either figure >= 0.90 on every layer,
the second only if the misses all carry the flag; with several settings (datasets x
behaviours), pooled and in each setting ("!" marks a miss; "/F": every interval flagged).
The exit status is 0 (it is a report) unless --check is given; then 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# One BLAS thread per worker process: the workers already use every core.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: tasks/ and tracerl/ from this checkout

ESTIMATORS = ("return", "success", "fqe", "is", "pdis", "wis", "pdwis", "dr", "wdr")
ALT_BEHAVIOUR = {"lookup": 0.95, "op": 0.70, "final": 0.60}
TARGET = 0.90
TOLERANCE = {"return": 0.03, "fqe": 0.03, "wis": 0.05, "wdr": 0.05}
SLACK = 1e-9  # zero-width intervals of deterministic candidates: rounding only
UNRELIABLE = "interval_unreliable"


def seeds_of(seed_base: int, dataset: str, behaviour: str, episodes: int,
             i: int) -> tuple[int, int]:
    """(log seed, estimator seed) of one run, distinct, all derived from seed_base."""
    key = [seed_base, ["good_coverage", "no_mul_support"].index(dataset),
           ["default", "alt"].index(behaviour), episodes, i]
    log_seed, est_seed = np.random.SeedSequence(key).generate_state(2)
    return int(log_seed), int(est_seed % 2**31)


def behaviour_spec(params: dict, dataset: str, behaviour: str):
    from tracerl.envs.calculator.behavior import BehaviorSpec

    values = dict(params["calculator"]["behavior"].get(dataset) or {})
    if behaviour == "alt":
        values.update(ALT_BEHAVIOUR)
    return BehaviorSpec.from_params(values)


def one_run(job: tuple) -> list[dict]:
    """One fresh log: one row per (candidate, estimator)."""
    import pyarrow.compute as pc

    from tasks.ope import critic_features
    from tasks.train import train_features
    from tracerl.config.learning import Ope, Train
    from tracerl.data.ingest.parse import records_to_table
    from tracerl.data.relabel import relabel, select_training_data
    from tracerl.envs.calculator.behavior import BehaviorPolicy
    from tracerl.envs.calculator.exact import exact_value
    from tracerl.envs.calculator.logs import log_records
    from tracerl.envs.calculator.replay import CalculatorReplay
    from tracerl.ope.evaluate import LoggedData, Settings, evaluate_policy
    from tracerl.rl.encoding import get_encoder
    from tracerl.rl.learners import behavior_model, fit_learners
    from tracerl.rl.policy import UniformValidPolicy, with_derived

    params, dataset, behaviour, episodes, i, seed_base, n_boot = job
    log_seed, est_seed = seeds_of(seed_base, dataset, behaviour, episodes, i)
    spec = behaviour_spec(params, dataset, behaviour)
    gamma = float(params["gamma"])
    records = list(log_records(dataset, episodes, log_seed,
                               float(params["calculator"]["test_fraction"]), spec=spec,
                               gamma=gamma))
    steps = relabel(records_to_table(records, "bench.jsonl", list(range(1, len(records) + 1))),
                    list(params["relabel"]["verifiers"]), dict(params["relabel"]["weights"]))
    train = Train.model_validate(params["train"])
    ope = Ope.model_validate({**params["ope"], "n_boot": n_boot})
    encoder = get_encoder(train.encoder, **train.encoder_params)
    data = steps.filter(pc.equal(steps.column("split"), train.split)) if train.split else steps
    tr = encoder.transitions(select_training_data(data, train.data_filter))
    base = {"behavior": BehaviorPolicy(dataset, spec),
            **fit_learners(tr, train_features(train, encoder), train, gamma)}
    if ope.split != "all":
        steps = steps.filter(pc.equal(steps.column("split"), ope.split))
    logged_tr = encoder.transitions(steps)
    features = critic_features(ope, train, encoder)
    settings = Settings.of(ope, gamma=gamma, verifiers=params["relabel"]["verifiers"],
                           weights=params["relabel"]["weights"],
                           n_episodes=logged_tr.n_episodes)
    logged = LoggedData.prepare(logged_tr, features, behavior_model(logged_tr, features),
                                settings, ope.seed, steps, CalculatorReplay())
    candidates = with_derived(base, ope.candidates.model_dump(),
                              UniformValidPolicy(encoder.valid_actions))
    rows = []
    for k, (name, policy) in enumerate(candidates.items()):
        truth = exact_value(policy, gamma)
        probs = np.asarray(policy.action_probs(logged_tr.rows), dtype=float)
        stochastic = bool(np.any(probs.max(axis=1) < 1.0 - 1e-12))
        for e in evaluate_policy(logged, policy, settings, seed=est_seed + 1000 * k):
            if e.ci_low is None:
                continue
            t = truth["success" if e.layer == "verifier" else "return"]
            rows.append({
                "dataset": dataset, "behaviour": behaviour, "episodes": episodes, "seed": i,
                "policy": name, "estimator": e.estimator, "truth": t,
                "stochastic": stochastic, "supported": e.support >= 1.0 - 1e-12,
                "unreliable": any(f.startswith(UNRELIABLE) for f in e.flags),
                "value": e.value, "width": e.ci_high - e.ci_low,
                "covered": bool(e.ci_low - SLACK <= t <= e.ci_high + SLACK)})
    return rows


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson 95% interval of a binomial proportion k / n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def summary(rows: list[dict]) -> list[dict]:
    """Per (episodes, estimator): coverage of the counted intervals, of the trusted ones
    (no interval_unreliable flag), how many, and the mean width."""
    out = []
    for episodes in sorted({r["episodes"] for r in rows}):
        for estimator in ESTIMATORS:
            sel = [r for r in rows if r["episodes"] == episodes and r["estimator"] == estimator
                   and r["stochastic"] and r["supported"]]
            trusted = [r for r in sel if not r["unreliable"]]
            covered = sum(r["covered"] for r in sel)
            trusted_covered = sum(r["covered"] for r in trusted)
            lo, hi = wilson(covered, len(sel))
            out.append({
                "episodes": episodes, "layer": estimator, "intervals": len(sel),
                "coverage": covered / len(sel) if sel else None,
                "coverage_wilson_low": lo, "coverage_wilson_high": hi,
                "flagged_unreliable": len(sel) - len(trusted),
                "misses_unflagged": len(trusted) - trusted_covered,
                "coverage_trusted": trusted_covered / len(trusted) if trusted else None,
                "mean_width": float(np.mean([r["width"] for r in sel])) if sel else None,
                "mean_width_trusted": float(np.mean([r["width"] for r in trusted]))
                if trusted else None,
                "mean_abs_error": float(np.mean([abs(r["value"] - r["truth"]) for r in sel
                                                 if r["value"] is not None]))
                if any(r["value"] is not None for r in sel) else None,
                "max_abs_error": max((abs(r["value"] - r["truth"]) for r in sel
                                      if r["value"] is not None), default=None),
            })
    return out


def verdict(row: dict) -> bool:
    """Met: coverage >= target, or every miss is flagged (then trusted coverage is 1)."""
    if not row["intervals"]:
        return True
    return row["coverage"] >= TARGET or row["misses_unflagged"] == 0 or (
        row["coverage_trusted"] is not None and row["coverage_trusted"] >= TARGET)


def table(rows: list[dict]) -> list[str]:
    head = (f"{'episodes':>8} {'layer':<19} {'intervals':>9} {'coverage':>8} "
            f"{'(Wilson 95%)':<15} {'flagged':>7} {'trusted cov':>11} {'width':>7} "
            f"{'trusted w':>9} {'|err|':>7} {'max|err|':>8} verdict")
    lines = [head, "-" * len(head)]

    def num(x: float | None, digits: int = 3) -> str:
        return "–" if x is None else f"{x:.{digits}f}"

    for r in summary(rows):
        lo, hi = r["coverage_wilson_low"], r["coverage_wilson_high"]
        lines.append(f"{r['episodes']:>8} {r['layer']:<19} {r['intervals']:>9} "
                     f"{num(r['coverage']):>8} [{lo:.3f}, {hi:.3f}]  "
                     f"{r['flagged_unreliable']:>7} {num(r['coverage_trusted']):>11} "
                     f"{num(r['mean_width'], 4):>7} {num(r['mean_width_trusted'], 4):>9} "
                     f"{num(r['mean_abs_error'], 4):>7} {num(r['max_abs_error'], 4):>8} "
                     f"{'PASS' if verdict(r) else 'FAIL'}")
    return lines


def plot(summary_rows: list[dict], path: Path) -> None:
    """Coverage vs n and mean width vs n, one line per layer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    cover, width = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for j, estimator in enumerate(ESTIMATORS):
        sel = [r for r in summary_rows if r["layer"] == estimator and r["intervals"]]
        if not sel:
            continue
        n = [r["episodes"] for r in sel]
        style = {"color": f"C{j}", "marker": "o", "ms": 3, "lw": 1, "label": estimator}
        cover.plot(n, [r["coverage"] for r in sel], **style)
        width.plot(n, [r["mean_width"] for r in sel], **style)
    cover.axhline(0.95, color="grey", ls="--", lw=1, label="nominal 0.95")
    cover.axhline(TARGET, color="red", ls=":", lw=1, label=f"target {TARGET}")
    for ax, title in ((cover, "coverage of the truth (stochastic, supported)"),
                      (width, "mean interval width")):
        ax.set_xscale("log")
        ax.set_xlabel("logged episodes")
        ax.set_title(title, fontsize=10)
    cover.set_ylim(0.5, 1.01)
    width.set_yscale("log")
    cover.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": "tracerl"})


def main(argv: list[str] | None = None) -> int:
    from tracerl.config.params import load_params

    params = load_params(ROOT / "params.yaml")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, nargs="+", default=[3000],
                    help="logged episodes per run; several sizes give one figure each")
    ap.add_argument("--seeds", type=int, default=50, help="fresh logs per setting [50]")
    ap.add_argument("--seed-base", type=int, default=0, help="all seeds derive from it [0]")
    ap.add_argument("--datasets", nargs="+", default=["good_coverage"],
                    choices=["good_coverage", "no_mul_support"])
    ap.add_argument("--behaviours", nargs="+", default=["default"], choices=["default", "alt"])
    ap.add_argument("--n-boot", type=int, default=int(params["ope"]["n_boot"]))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", type=Path, help="write the summary (and settings) here")
    ap.add_argument("--plot", type=Path, help="write the coverage/width plot (PNG) here")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)

    jobs = [(params, d, b, n, i, args.seed_base, args.n_boot) for n in args.episodes
            for d in args.datasets for b in args.behaviours for i in range(args.seeds)]
    print(f"python {sys.version.split()[0]}; numpy {np.__version__}; cpus {os.cpu_count()}; "
          f"workers {args.workers}")
    print(f"runs   {len(jobs)}: episodes {args.episodes} x datasets {args.datasets} x "
          f"behaviours {args.behaviours} x {args.seeds} seeds (seed base {args.seed_base}); "
          f"n_boot {args.n_boot}, level {params['ope']['confidence']}\n", flush=True)
    start = time.perf_counter()
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for done, part in enumerate(pool.map(one_run, jobs, chunksize=1), start=1):
            rows += part
            if done % 10 == 0 or done == len(jobs):
                print(f"  {done:>4}/{len(jobs)} runs, {time.perf_counter() - start:6.0f} s",
                      file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    print(f"wall   {elapsed:.0f} s ({elapsed / max(len(jobs), 1):.1f} s per run over "
          f"{args.workers} workers)\n")
    print("\n".join(table(rows)))
    summary_rows = summary(rows)
    ok = all(verdict(r) for r in summary_rows)
    # The OPE accuracy tests' tolerances (tests/test_ope_layers.py, at 3,000 episodes), over
    # every supported candidate with a point value, deterministic ones too.
    print(f"\naccuracy: supported candidates within {TOLERANCE} of the truth "
          "(share, max |err|)")
    for n in sorted({r["episodes"] for r in rows}):
        cells = []
        for estimator, tol in TOLERANCE.items():
            errs = [abs(r["value"] - r["truth"]) for r in rows if r["episodes"] == n
                    and r["estimator"] == estimator and r["supported"]
                    and r["value"] is not None]
            if errs:
                cells.append(f"{estimator} {np.mean([e <= tol for e in errs]):.3f} "
                             f"({max(errs):.4f}, {len(errs)})")
        print(f"{n:>8} " + "; ".join(cells))
    settings = sorted({(r["dataset"], r["behaviour"]) for r in rows})
    if len(settings) > 1:  # the target holds per setting too, not only pooled
        print("\nper setting: coverage (trusted coverage where any is flagged)")
        print(f"{'episodes':>8} {'dataset':<15} {'behaviour':<9} "
              + " ".join(f"{e:>11}" for e in ESTIMATORS))
        for d, b in settings:
            part = summary([r for r in rows if (r["dataset"], r["behaviour"]) == (d, b)])
            ok = ok and all(verdict(r) for r in part)
            for n in sorted({r["episodes"] for r in part}):
                cells = []
                for r in (r for r in part if r["episodes"] == n):
                    c = "–" if r["coverage"] is None else f"{r['coverage']:.3f}"
                    if r["flagged_unreliable"] and r["coverage_trusted"] is not None:
                        c += f"/{r['coverage_trusted']:.2f}"
                    elif r["flagged_unreliable"]:
                        c += "/F"
                    cells.append(("" if verdict(r) else "!") + c)
                print(f"{n:>8} {d:<15} {b:<9} " + " ".join(f"{c:>11}" for c in cells))
    print(f"\ntarget coverage >= {TARGET:.2f} on every layer (or every miss flagged "
          f"{UNRELIABLE}): {'met' if ok else 'MISSED'}")
    if args.json:
        # Scalars only in each row, so DVC's plots read the one array of the file.
        run = {"seeds": args.seeds, "seed_base": args.seed_base,
               "datasets": "+".join(args.datasets), "behaviours": "+".join(args.behaviours),
               "n_boot": args.n_boot, "wall_seconds": round(elapsed, 1)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"coverage": [{**r, **run} for r in summary_rows]},
                                        indent=1) + "\n")
        # The same figures one row per size (a column per layer), for `dvc plots`.
        def name(layer: str) -> str:  # the field names dvc.yaml's plots read
            return {"return": "replay", "success": "verifier"}.get(layer, layer)

        wide = [{"episodes": n, **{f"{name(r['layer'])}_{k}": r[k] for r in summary_rows
                                   if r["episodes"] == n for k in ("coverage", "mean_width")}}
                for n in sorted({r["episodes"] for r in summary_rows})]
        args.json.with_name(args.json.stem + "_by_size.json").write_text(
            json.dumps({"by_size": wide}, indent=1) + "\n")
    if args.plot:
        plot(summary_rows, args.plot)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
