"""Are the exports worth using? The support desk's Monte Carlo truth says (issue 18, item 4).

    .venv/bin/python benchmarks/support_desk_exports.py [--episodes 5000]
        [--seed 20261207] [--truth-episodes 200000] [--truth-seed 20261209] [--draws 10]
        [--params pipelines/support_desk/params.yaml] [--out benchmarks/results/...]

One fresh log of the scripted logger (`--episodes` conversations from `--seed`: neither
the pipeline's size and seeds nor the ones the guard and tests were developed on) goes the
pipeline's way: OpenAI-chat JSONL -> ingest (openai-chat adapter) -> relabel (the
pipeline's verifiers and weights). Then, with every other setting from the params file:

(a) behaviour cloning (train.bc over train.features, the pipeline's clone) fitted on all
    logged steps, against the same clone fitted on the SFT export: `tracerl.export`'s
    files (sft_openai, every split: the comparison is of the filter, not of the split)
    read back through the openai-chat adapter, the messages of weight 1 only (episodes
    chosen by the outcome filter, steps failing the process check at weight 0: SWiRL);
(b) the logger as logged, against the logger behind the guard (params `guard:`, fitted on
    the same log): a draw the guard blocks is re-sampled, up to `--draws` draws.

Each policy's truth is `tracerl.envs.support_desk.truth.mc_truth` (`--truth-episodes` fresh
rollouts from `--truth-seed`, SE = sd / sqrt(n)); a difference's SE is sqrt(se_1^2 + se_2^2)
(the rollouts share the seed, so the customers, and the returns are positively correlated:
that SE is an upper bound). The bar is a difference above 2 SE; where it is not met the
shortfall is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracerl.config.schema import load_config  # noqa: E402
from tracerl.data.ingest import ingest  # noqa: E402
from tracerl.data.relabel import relabel  # noqa: E402
from tracerl.envs.support_desk import chat, generate  # noqa: E402
from tracerl.envs.support_desk.fixture import fixture_params  # noqa: E402
from tracerl.envs.support_desk.truth import mc_truth  # noqa: E402
from tracerl.export.run import export_dataset  # noqa: E402
from tracerl.feature_maps import train_features  # noqa: E402
from tracerl.guard import Guard, GuardedPolicy  # noqa: E402
from tracerl.io.fileio import read_table  # noqa: E402
from tracerl.rl.encoding import encoder_for  # noqa: E402
from tracerl.rl.learners import make_bc  # noqa: E402


def labelled_steps(params, episodes: int, seed: int, tmp: Path) -> pa.Table:
    """A fresh log, the pipeline's way: chat JSONL -> ingest -> relabel."""
    fp = fixture_params(params)
    ep = generate(fp, n=episodes, seed=seed)
    path = chat.write_jsonl(ep, tmp / "logs.jsonl", behavior_policy=fp.behavior.name,
                            gamma=params.gamma)
    summary = ingest([path], tmp / "ingested", fmt="openai-chat", workers=1, strict=False)
    if summary.quarantined:
        raise SystemExit(f"ingest quarantined {summary.quarantined} conversations")
    return relabel(read_table(tmp / "ingested" / "steps"), params.relabel.verifiers,
                   params.relabel.weights)


def sft_steps(params, steps: pa.Table, tmp: Path) -> tuple[pa.Table, dict]:
    """The SFT export of `steps` (params export:, relabel.filters), read back from its
    OpenAI-format files through the openai-chat adapter; each row's message weight in
    column `weight`."""
    out = tmp / "export"
    config = params.export.model_copy(update={"out": str(out), "formats": ["sft_openai"]})
    filters = params.relabel.filters
    manifest = export_dataset(steps, out, config, process=filters.process,
                              outcome=filters.outcome)
    files = sorted((out / "sft_openai").glob("*.jsonl"))
    summary = ingest(files, tmp / "sft_ingested", fmt="openai-chat", workers=1, strict=False)
    if summary.quarantined:
        raise SystemExit(f"the SFT export did not read back: {summary.quarantined} records "
                         "quarantined")
    back = read_table(tmp / "sft_ingested" / "steps")
    # An assistant message's fields the schema does not name (its `weight`) are kept in
    # its row's `extra` (JSON text).
    weights = [json.loads(x)["weight"] if x else None
               for x in back.column("extra").to_pylist()]
    if any(w is None for w in weights):
        raise SystemExit("an SFT message came back without its weight")
    back = back.append_column("weight", pa.array(weights, pa.float64()))
    back = back.set_column(back.schema.get_field_index("reward"), "reward",
                           pc.fill_null(back.column("reward"), 0.0))
    return back, manifest["exports"]["sft"]


def rows_where(tr, keep: np.ndarray):
    """The transitions' steps where `keep` (what a clone reads: states and actions)."""
    return dataclasses.replace(tr, s=tr.s[keep], a=tr.a[keep], r=tr.r[keep],
                               done=tr.done[keep], episode=tr.episode[keep], t=tr.t[keep],
                               s_next=tr.s_next[keep], behavior_logp=tr.behavior_logp[keep],
                               task=tr.task[keep])


def truth(policy, params, n: int, seed: int) -> dict:
    fp = fixture_params(params)
    m = mc_truth(policy, gamma=params.gamma, n=n, seed=seed, params=fp.env)
    return {k: m[k] for k in ("value", "se", "success", "success_se", "mean_length")}


def compare(name: str, better: dict, worse: dict, names: tuple[str, str]) -> dict:
    diff = better["value"] - worse["value"]
    se = math.sqrt(better["se"] ** 2 + worse["se"] ** 2)
    out = {"comparison": name, "better": names[0], "worse": names[1],
           "difference": diff, "se": se, "z": diff / se if se > 0 else math.inf,
           "holds": diff > 2 * se}
    if not out["holds"]:
        out["short_of_2se_by"] = 2 * se - diff
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=ROOT / "pipelines/support_desk/params.yaml")
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--truth-episodes", type=int, default=200_000)
    parser.add_argument("--truth-seed", type=int, default=20261209)
    parser.add_argument("--draws", type=int, default=10,
                        help="draws of the guarded logger before it takes a blocked one")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    params = load_config(args.params)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="support_desk_exports-"))
    try:
        steps = labelled_steps(params, args.episodes, args.seed, tmp)
        encoder = encoder_for([steps], params.train.encoder, **params.train.encoder_params)
        features = train_features(params.train, encoder)
        tr = encoder.transitions(steps)
        sft, sft_counts = sft_steps(params, steps, tmp)
        tr_sft = encoder.transitions(sft)
        weight = sft.column("weight").to_numpy()[_order(sft)]
        kept = weight > 0
        train = params.train
        clone_all = make_bc(features, train.bc, train.tie_break, train.seed).fit(tr)
        clone_sft = make_bc(features, train.bc, train.tie_break, train.seed).fit(
            rows_where(tr_sft, kept))
        guard = Guard.fit(tr, params.guard, gamma=params.gamma,
                          value_range=params.ope.return_range if params.ope else None)
        logger = fixture_params(params).behavior
        guarded = GuardedPolicy(logger, guard.table, args.draws)
        n, seed = args.truth_episodes, args.truth_seed
        values = {"bc_all_logs": truth(clone_all, params, n, seed),
                  "bc_sft_export": truth(clone_sft, params, n, seed),
                  "logger": truth(logger, params, n, seed),
                  "logger_guarded": truth(guarded, params, n, seed)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    blocked = guard.table.blocked(tr.rows[tr.s])
    report = {
        "setup": {"params": str(args.params.relative_to(ROOT)) if args.params.is_relative_to(
                      ROOT) else str(args.params),
                  "episodes": args.episodes, "seed": args.seed,
                  "truth_episodes": n, "truth_seed": seed, "draws": args.draws,
                  "logged_steps": tr.n, "sft_steps_read_back": tr_sft.n,
                  "sft_steps_trained": int(kept.sum()), "sft_export": sft_counts,
                  "guard": params.guard.dump(), "guard_states": guard.table.n_states,
                  "logged_steps_whose_action_is_blocked": float(
                      blocked[np.arange(tr.n), tr.a].mean())},
        "truth": values,
        "comparisons": [
            compare("(a) BC on the SFT export vs BC on all logs", values["bc_sft_export"],
                    values["bc_all_logs"], ("bc_sft_export", "bc_all_logs")),
            compare("(b) the logger behind the guard vs the logger", values["logger_guarded"],
                    values["logger"], ("logger_guarded", "logger"))],
        "seconds": round(time.perf_counter() - t0, 1)}
    for name, v in values.items():
        print(f"{name:16s} value {v['value']:+.4f} ± {v['se']:.4f}   success "
              f"{v['success']:.4f} ± {v['success_se']:.4f}   length {v['mean_length']:.2f}")
    for c in report["comparisons"]:
        verdict = "holds (> 2 SE)" if c["holds"] else \
            f"does NOT hold: short of 2 SE by {c['short_of_2se_by']:.4f}"
        print(f"{c['comparison']}: {c['difference']:+.4f} ± {c['se']:.4f} "
              f"(z = {c['z']:.1f}): {verdict}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(json.dumps(report["setup"], sort_keys=True))


def _order(steps: pa.Table) -> np.ndarray:
    """Row order by (episode_id, t): the order of every encoder's transitions."""
    from tracerl.rl.encoding import step_order

    return step_order(steps)


if __name__ == "__main__":
    main()
