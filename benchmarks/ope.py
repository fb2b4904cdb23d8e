"""Benchmark the ope stage's evaluation at 1x, 10x, 100x a base number of logged episodes.

    .venv/bin/python benchmarks/ope.py [--base 3000] [--multipliers 1 10 100] [--seed N]
                                       [--keep] [--check] [--baseline REV ...]

What is timed is what the tasks of `tasks/ope.py` do for one dataset, minus their
file I/O: the encoder's transitions, the behaviour model and `LoggedData.prepare` on the
labelled step table, then for each of the stage's 10 candidates every layer (replay,
verifier, critic, importance with all six IS estimators) with the params.yaml `ope:`
settings, replays per episode by the stage's rule min(max_samples, ceil(min_draws /
episodes)): `start_evaluation`, the critic's bootstrap chunks and `finish_evaluation`, as
the stage's tasks run them. The library functions inside are wrapped with timers (a few
calls per candidate) to show where the time goes. The exact truth per candidate is
computed outside the clock.

Each size runs in two fresh child processes, one after the other: the first logs the
good_coverage episodes (`calculator.log_records`, params.yaml test fraction and seed),
builds and relabels the step table, trains the three learners on the train split as the
train stage does, and writes table, policies and settings under a temporary folder (its
time is reported, never counted). The second reads them and is measured: peak RSS is its
exact ru_maxrss, returned by os.wait4 when it is reaped. This parent imports nothing heavy
(on Linux a child's ru_maxrss also counts the parent's resident set when it exec()s).

Targets at the largest size (300k episodes by default): total < 10 s, peak RSS < 1 GB
(1e9 bytes) (issue 32). Each --baseline revision (default e9b42f0, main before issue 32)
measures the same data with its own --child right after this tree's, from a temporary git
worktree with this venv (`benchmarks/baseline.py`), printed beside it. The exit status is
0 (it is a report) unless --check is given; then it is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from baseline import checkout, measured  # noqa: E402

DATASET = "good_coverage"
TARGET_SECONDS = 10.0  # issue 32
TARGET_PEAK_BYTES = 1e9
MB = 1e6  # figures in MB (10^6 bytes), to match the 1 GB (10^9 bytes) target
CHUNK_RECORDS = 200_000  # records turned into a table at a time while logging
SCOPE_RL = ("SCOPE-RL 0.2.1, as quoted in the issue (their figure, not measured here): "
            "236 s and 21.8 GB for 4 policies on the same data with its FQE-based estimators")


# --------------------------------------------------------------------------- data child


def make_data(episodes: int, folder: Path, seed: int | None) -> dict:
    """Log, relabel, train and write everything the measured child reads; seconds."""
    import dataclasses
    import itertools

    import pyarrow as pa
    import pyarrow.compute as pc

    import tracerl.envs  # noqa: F401  (registers the calculator's encoder)
    from tasks.train import ENCODER_FILE, train_features
    from tracerl.config.learning import Ope, Train
    from tracerl.config.params import load_params
    from tracerl.data.ingest.parse import records_to_table
    from tracerl.data.relabel import relabel, select_training_data
    from tracerl.envs.calculator.logs import log_records
    from tracerl.io.fileio import write_json, write_table
    from tracerl.ope.evaluate import Settings
    from tracerl.rl.artifact import save_policy
    from tracerl.rl.encoding import get_encoder
    from tracerl.rl.learners import fit_learners

    params = load_params(ROOT / "params.yaml")
    seed = int(params["calculator"]["seed"]) if seed is None else seed
    seconds = {}
    t0 = time.perf_counter()
    records = log_records(DATASET, episodes, seed, float(params["calculator"]["test_fraction"]))
    parts, line = [], 0
    while chunk := list(itertools.islice(records, CHUNK_RECORDS)):
        parts.append(records_to_table(chunk, "bench.jsonl",
                                      list(range(line + 1, line + len(chunk) + 1))))
        line += len(chunk)
    steps = relabel(pa.concat_tables(parts), list(params["relabel"]["verifiers"]),
                    dict(params["relabel"]["weights"]))
    seconds["log + table + relabel"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    train, ope = Train.model_validate(params["train"]), Ope.model_validate(params["ope"])
    encoder = get_encoder(train.encoder, **train.encoder_params)
    data = steps
    if train.split:
        data = data.filter(pc.equal(data.column("split"), train.split))
    tr = encoder.transitions(select_training_data(data, train.data_filter))
    (folder / "policies").mkdir(parents=True, exist_ok=True)
    write_json(folder / ENCODER_FILE, encoder.spec())
    for name, policy in fit_learners(tr, train_features(train, encoder), train,
                                     float(params["gamma"])).items():
        save_policy(policy, folder / "policies" / f"{name}.json", "benchmark")
    seconds["train"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if ope.split != "all":
        steps = steps.filter(pc.equal(steps.column("split"), ope.split))
    n_episodes = int(pc.sum(pc.equal(steps.column("t"), 0)).as_py() or 0)
    settings = dataclasses.asdict(Settings.of(
        ope, gamma=float(params["gamma"]), verifiers=params["relabel"]["verifiers"],
        weights=params["relabel"]["weights"], n_episodes=n_episodes))
    (folder / "settings.json").write_text(json.dumps({
        "settings": settings, "learners": list(train.learners), "episodes": n_episodes,
        "rows": steps.num_rows, "seed": seed}, indent=2))
    write_table(steps, folder / "steps")
    seconds["write"] = time.perf_counter() - t0
    return {"seconds": seconds, "episodes": n_episodes, "rows": steps.num_rows}


# --------------------------------------------------------------------------- measured child


class Clock:
    """Inclusive wall time and calls per call path of wrapped functions."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.totals: dict[str, list[float]] = {}

    def wrap(self, label: str, fn):
        def timed(*args, **kwargs):
            self.stack.append(label)
            path = " > ".join(self.stack)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                entry = self.totals.setdefault(path, [0.0, 0])
                entry[0] += time.perf_counter() - t0
                entry[1] += 1
                self.stack.pop()
        return timed


def instrument(clock: Clock) -> None:
    """Wrap the functions the layers call (in this child process only)."""
    import tracerl.data.relabel
    from tracerl.ope import critic, evaluate, grouped
    from tracerl.ope import replay as replay_module

    # replay_sums (tracerl.ope.replay) looks both up at call time, in their own modules
    for module, name, label in ((replay_module, "replay", "replay engine"),
                                (tracerl.data.relabel, "relabel",
                                 "verifiers on the replayed trace (relabel)")):
        setattr(module, name, clock.wrap(label, getattr(module, name)))
    for module, name, label in (
            (evaluate, "supports", "support (reach backup where not fully covered)"),
            (evaluate, "replay_estimates", "replay + verifier layers"),
            (grouped, "critic_n_eff", "critic n_eff (visitation backups)"),
            (grouped, "critic_boot_values", "critic refits per resample (the chunks)"),
            (grouped, "cross_fitted", "cross-fitted critics for DR/WDR"),
            (evaluate, "estimate_is_family", "IS family (bootstrap)")):
        if callable(getattr(module, name, None)):
            setattr(module, name, clock.wrap(label, getattr(module, name)))
    critic.Critic.fit = clock.wrap("critic fit", critic.Critic.fit)


def measure(folder: Path) -> dict:
    """The timed evaluation of the 10 candidates; figures as a JSON-ready dict."""
    import resource

    import numpy as np
    import orjson
    import pyarrow.compute as pc

    import tracerl.envs  # noqa: F401  (registers the calculator's encoder)
    from tasks.ope import critic_features
    from tracerl.config.learning import Ope, Train
    from tracerl.config.params import load_params
    from tracerl.envs.calculator.behavior import BehaviorPolicy
    from tracerl.envs.calculator.exact import exact_value
    from tracerl.envs.calculator.replay import CalculatorReplay
    from tracerl.io.fileio import read_table
    from tracerl.ope import evaluate
    from tracerl.rl.artifact import load_policy
    from tracerl.rl.encoding import encoder_of
    from tracerl.rl.learners import behavior_model
    from tracerl.rl.policy import UniformValidPolicy, with_derived

    params = load_params(ROOT / "params.yaml")
    train, ope = Train.model_validate(params["train"]), Ope.model_validate(params["ope"])
    meta = json.loads((folder / "settings.json").read_text())
    settings = evaluate.Settings(**{k: tuple(v) if k == "return_range" and v else v
                                    for k, v in meta["settings"].items()})
    clock = Clock()
    instrument(clock)
    start_t = clock.wrap("start_evaluation (every layer but the critic's refits)",
                         evaluate.start_evaluation)
    chunk_t = clock.wrap("critic bootstrap chunks", evaluate.boot_chunk_values)
    finish_t = clock.wrap("finish_evaluation (intervals, disagreements)",
                          evaluate.finish_evaluation)

    t0 = time.perf_counter()
    steps = read_table(folder / "steps")  # as tasks/ope.py reads it
    if ope.split != "all":  # already filtered by the data child: a no-op here
        steps = steps.filter(pc.equal(steps.column("split"), ope.split))
    encoder = encoder_of(orjson.loads((folder / "encoder.json").read_bytes()))
    base = {"behavior": BehaviorPolicy(DATASET),
            **{name: load_policy(folder / "policies" / f"{name}.json", encoder)
               for name in meta["learners"]}}
    read_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    adapter = CalculatorReplay()  # as the stage does: one adapter, responses coded once
    tr = encoder.transitions(steps)
    features = critic_features(ope, train, encoder)
    data = evaluate.LoggedData.prepare(tr, features, behavior_model(tr, features), settings,
                                       ope.seed, steps, adapter)
    prepare_s = time.perf_counter() - t0

    t_cands = time.perf_counter()
    candidates = with_derived(base, ope.candidates.model_dump(),
                              UniformValidPolicy(encoder.valid_actions))
    seed0 = ope.seed
    per_candidate, errors, truth_s = [], {}, 0.0
    for k, (name, policy) in enumerate(candidates.items()):
        t0 = time.perf_counter()
        truth = exact_value(policy, settings.gamma)  # outside the clock
        truth_s += time.perf_counter() - t0
        before = clock.totals.get("start_evaluation (every layer but the critic's refits) > "
                                  "replay + verifier layers", [0.0])[0]
        t0 = time.perf_counter()
        pending = start_t(data, policy, settings, seed0 + 1000 * k)
        out = finish_t(pending, [chunk_t(data, pending, i) for i in range(pending.n_chunks)])
        t1 = time.perf_counter()
        replay_s = clock.totals.get("start_evaluation (every layer but the critic's refits) > "
                                    "replay + verifier layers", [0.0])[0] - before
        replays = next((e.details.get("replays_per_episode") for e in out
                        if e.layer == "replay"), None)
        per_candidate.append({"name": name, "replays": replays, "replay_verify": replay_s,
                              "critic_importance": t1 - t0 - replay_s, "total": t1 - t0})
        for e in out:
            if e.applicable:
                key = e.estimator if e.layer != "verifier" else "verifier (success)"
                want = truth["success" if e.layer == "verifier" else "return"]
                errors[key] = max(errors.get(key, 0.0), abs(e.value - want))
    candidates_s = time.perf_counter() - t_cands - truth_s
    return {
        "episodes": int(tr.n_episodes), "rows": steps.num_rows,
        "replay_samples": settings.replay_samples, "n_boot": settings.n_boot,
        "read_s": read_s, "prepare_s": prepare_s, "candidates_s": candidates_s,
        "truth_s": truth_s, "per_candidate": per_candidate,
        "clock": {p: v for p, v in clock.totals.items()}, "max_abs_error": errors,
        "layers": list(settings.layers), "is_estimators": list(settings.is_estimators),
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "numpy": np.__version__,
    }


# --------------------------------------------------------------------------- parent


def run_child(argv: list[str]) -> tuple[float, int, int, str, str, float]:
    """(wall seconds, peak RSS bytes from os.wait4, exit code, stdout, stderr, CPU
    seconds)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)  # reaped here
        out.seek(0)
        err.seek(0)
        return (seconds, usage.ru_maxrss * 1024, code, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"), usage.ru_utime + usage.ru_stime)


def child_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def layer_lines(result: dict) -> list[str]:
    """Where the time of the 10 candidates went, as a tree of wrapped calls."""
    total = result["candidates_s"]
    clock = result["clock"]
    lines = [f"{'seconds':>8} {'share':>6} {'calls':>6}  call (inclusive; nested calls below "
             f"their caller)"]
    for path in sorted(clock, key=lambda p: p.split(" > ")):  # each call under its caller
        seconds, calls = clock[path]
        depth = path.count(" > ")
        lines.append(f"{seconds:8.2f} {seconds / total:6.1%} {calls:>6}  "
                     f"{'  ' * depth}{path.split(' > ')[-1]}")
    covered = sum(v[0] for p, v in clock.items() if " > " not in p)
    lines.append(f"{total - covered:8.2f} {(total - covered) / total:6.1%} {'':>6}  rest "
                 f"(candidate construction, loop)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=int, default=3000, help="episodes at 1x [3000]")
    ap.add_argument("--multipliers", type=int, nargs="+", default=[1, 10, 100],
                    help="sizes as multiples of --base [1 10 100]")
    ap.add_argument("--seed", type=int, default=None,
                    help="logging seed [params.yaml calculator.seed]")
    ap.add_argument("--keep", action="store_true", help="keep the generated data folder")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--baseline", nargs="*", default=["e9b42f0"], metavar="REV",
                    help="revisions whose own --child measures the same data right after "
                         "this tree's (temporary git worktree, this venv) [e9b42f0]")
    ap.add_argument("--make-data", type=int, metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--child", type=int, metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.make_data is not None:
        print(json.dumps(make_data(args.make_data, args.dir, args.seed)))
        return 0
    if args.child is not None:
        print(json.dumps(measure(args.dir)))
        return 0

    print(f"python      {sys.version.split()[0]}; cpus {os.cpu_count()}; each size in its own "
          f"fresh child process, one after the other")
    work = Path(tempfile.mkdtemp(prefix="tracerl-ope-bench-"))
    results = []
    stack = ExitStack()
    trees = {rev: stack.enter_context(checkout(rev)) for rev in args.baseline}
    try:
        for m in args.multipliers:
            n = args.base * m
            folder = work / f"n{n}"
            seed = [] if args.seed is None else ["--seed", str(args.seed)]
            seconds, _, code, out, err, _ = run_child(
                [sys.executable, __file__, "--make-data", str(n), "--dir", str(folder), *seed])
            if code:
                sys.exit(f"making {n:,} episodes failed:\n{err[-4000:]}")
            made = child_json(out)
            gen = made["seconds"]
            print(f"data        {n:>9,} episodes, {made['rows']:>9,} steps: made in "
                  f"{seconds:5.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in gen.items())
                  + "; child wall incl. imports) - not counted", flush=True)
            wall, peak, code, out, err, cpu = run_child(
                [sys.executable, __file__, "--child", str(n), "--dir", str(folder)])
            if code:
                sys.exit(f"measuring {n:,} episodes failed:\n{err[-4000:]}")
            result = child_json(out)
            result.update(peak_bytes=peak, wall_s=wall, make_s=seconds, cpu_s=cpu,
                          load_average=os.getloadavg()[0], baselines={})
            for rev, tree in trees.items():  # the same data, the revision's own child
                try:
                    run = measured([sys.executable, str(tree / "benchmarks" / "ope.py"),
                                    "--child", str(n), "--dir", str(folder)], tree)
                except SystemExit as failed:  # an older child that cannot read this data
                    print(f"baseline {rev} failed on {n:,} episodes: {failed}", flush=True)
                    continue
                b = child_json(run.stdout)
                result["baselines"][rev] = {"total_s": b["prepare_s"] + b["candidates_s"],
                                            "cpu_s": run.cpu, "peak_bytes": run.peak_rss_bytes,
                                            "load_average": os.getloadavg()[0]}
            results.append(result)
            if not args.keep:
                shutil.rmtree(folder)
    finally:
        stack.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"data kept   {work}")

    first = results[0]
    print(f"settings    layers {first['layers']}; is_estimators {first['is_estimators']}; "
          f"n_boot {first['n_boot']}; 10 candidates; replays per episode for a stochastic "
          f"target by the stage's rule (column 'replays')\n")
    head = (f"{'episodes':>9} {'steps':>9} {'replays':>7} {'read s':>7} {'prepare s':>9} "
            f"{'10 cands s':>10} {'total s':>8} {'s/1k ep':>8} {'replay+verif s':>14} "
            f"{'critic+IS s':>11} {'peak RSS MB':>11}")
    print(head)
    print("-" * len(head))
    for r in results:
        total = r["prepare_s"] + r["candidates_s"]
        rv = sum(c["replay_verify"] for c in r["per_candidate"])
        ci = sum(c["critic_importance"] for c in r["per_candidate"])
        print(f"{r['episodes']:>9,} {r['rows']:>9,} {r['replay_samples']:>7} {r['read_s']:7.2f} "
              f"{r['prepare_s']:9.2f} {r['candidates_s']:10.2f} {total:8.2f} "
              f"{total / (r['episodes'] / 1000):8.3f} {rv:14.2f} {ci:11.2f} "
              f"{r['peak_bytes'] / MB:11,.0f}")
    for r in results:
        print(f"{r['episodes']:>9,} this tree: total {r['prepare_s'] + r['candidates_s']:.2f} "
              f"s, {r['cpu_s']:.1f} CPU s (whole child), peak RSS {r['peak_bytes'] / MB:,.0f} MB "
              f"(load average {r['load_average']:.2f} at its end)")
        for rev, b in r["baselines"].items():
            print(f"{r['episodes']:>9,} at {rev}: total {b['total_s']:.2f} s, "
                  f"{b['cpu_s']:.1f} CPU s (whole child), peak RSS "
                  f"{b['peak_bytes'] / MB:,.0f} MB (same data, same run; load average "
                  f"{b['load_average']:.2f} at its end)")
    print("\n'read s' (Parquet read + policy artifacts) is file I/O: not in total. total = "
          "prepare + 10 candidates (exact truth excluded).")
    print("replays per episode of a stochastic target (stage rule): " + ", ".join(
        f"{r['episodes']:,} -> {r['replay_samples']}" for r in results)
        + "; s/1k ep compares sizes with the same number of replays.")

    print("\nmax |estimate - truth| over the 10 candidates (a sanity check, not a target):")
    keys = list(dict.fromkeys(k for r in results for k in r["max_abs_error"]))
    print(f"  {'episodes':>9} " + " ".join(f"{k:>10}" for k in keys))
    for r in results:
        print(f"  {r['episodes']:>9,} " + " ".join(
            f"{r['max_abs_error'].get(k, float('nan')):>10.4f}" for k in keys))

    big = results[-1]
    total = big["prepare_s"] + big["candidates_s"]
    print(f"\nwhere the time goes at {big['episodes']:,} episodes (10 candidates, "
          f"{big['candidates_s']:.2f} s; prepare {big['prepare_s']:.2f} s more):")
    print("\n".join("  " + line for line in layer_lines(big)))
    print(f"\nper candidate at {big['episodes']:,} episodes:")
    print(f"  {'candidate':<30} {'replays':>7} {'replay+verif s':>14} {'critic+IS s':>11} "
          f"{'total s':>8}")
    for c in big["per_candidate"]:
        print(f"  {c['name']:<30} {c['replays']:>7} {c['replay_verify']:14.2f} "
              f"{c['critic_importance']:11.2f} {c['total']:8.2f}")

    time_ok = total < TARGET_SECONDS
    mem_ok = big["peak_bytes"] < TARGET_PEAK_BYTES
    print(f"\ntarget      total at {big['episodes']:,} episodes < {TARGET_SECONDS:.0f} s: "
          f"{total:.2f} s -> {'PASS' if time_ok else 'FAIL'}")
    print(f"target      peak RSS at {big['episodes']:,} episodes < "
          f"{TARGET_PEAK_BYTES / 1e9:.0f} GB: {big['peak_bytes'] / MB:,.0f} MB -> "
          f"{'PASS' if mem_ok else 'FAIL'}")
    print(f"for scale   {SCOPE_RL}")
    return 1 if args.check and not (time_ok and mem_ok) else 0


if __name__ == "__main__":
    sys.exit(main())
