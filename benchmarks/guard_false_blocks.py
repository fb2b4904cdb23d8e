"""The guard's false-block rate on held-out logs: how often it denies a call the logging
agent really made, in conversations it was not fitted on.

    .venv/bin/python benchmarks/guard_false_blocks.py [--params pipelines/support_desk/params.yaml]
        [--episodes 3000] [--held-out 0.2] [--score 300] [--seed 7]

The support desk's logs as its pipeline makes them (the simulator, its logging policy and
seed from params), split by conversation: `--held-out` of them (drawn with `--seed`) are
held out, the rest ingested (openai-chat), relabelled with the pipeline's verifiers and
fitted into the guard (params `guard:`, the pipeline's `train.encoder`, the logged
arguments). Every tool call of `--score` held-out conversations is then scored after its
own history. Reported: the share of those calls per verdict, the share denied (`block: low
value` + `block: unseen`) and the share denied as unseen (a tool, argument or number the
fitted logs never held, or a history the encoder cannot place): calls the logger made, so
every unseen denial is a false block; a low-value block may be right (the logger's refunds
without a policy check). The same for the calls of held-out conversations that succeeded.

    .venv/bin/python benchmarks/guard_false_blocks.py --logs FILE... [--held-out 0.2] [--seed 7]

Real logs (any format ingest reads, e.g. ../shared/realdata/tau2-bench/*.json): the same
split by episode, and the rule of `block: unseen` that needs no chat history, the tools and
arguments (`tracerl.guard.arguments`), applied to every held-out logged call: the share it
would deny, and why.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from tracerl.config.guard import GuardSettings
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.envs.support_desk import FixtureParams, chat, sim
from tracerl.envs.support_desk.params import SupportDesk
from tracerl.guard import BLOCK_LOW_VALUE, BLOCK_UNSEEN, ArgumentRanges, Guard
from tracerl.io.fileio import read_table
from tracerl.rl.encoding import encoder_for

ROOT = Path(__file__).resolve().parent.parent


def rates(verdicts: list[str]) -> dict[str, float | int]:
    counts = Counter(verdicts)
    n = max(len(verdicts), 1)
    return {"calls": len(verdicts),
            **{f"share {v}": round(c / n, 4) for v, c in sorted(counts.items())},
            "denied": round((counts[BLOCK_LOW_VALUE] + counts[BLOCK_UNSEEN]) / n, 4),
            "denied as unseen": round(counts[BLOCK_UNSEEN] / n, 4)}


def real_logs(files: list[Path], held_out: float, seed: int) -> dict:
    """The tools-and-arguments rule on a split of real logs (see the module docstring)."""
    import tracerl

    steps = pa.concat_tables([tracerl.read_logs(str(f)).steps for f in files],
                             promote_options="permissive")
    episodes = np.asarray(sorted(pc.unique(steps.column("episode_id")).to_pylist()))
    held = pa.array(episodes[np.random.default_rng(seed).random(len(episodes)) < held_out])
    inside = pc.is_in(steps.column("episode_id"), value_set=held)
    ranges = ArgumentRanges.fit(steps.filter(pc.invert(inside)))
    calls = [a for a in steps.filter(inside).column("action").to_pylist()
             if a and a["type"] == "tool_call"]
    reasons: Counter = Counter()
    for call in calls:
        if call["tool"] not in ranges.tools:
            reasons[f"tool {call['tool']} never called"] += 1
            continue
        unseen = ranges.judge(call["tool"], orjson.loads(call["arguments"] or "{}"))[1]
        reasons.update(unseen[:1])
    denied = sum(reasons.values())
    return {"episodes": len(episodes), "held_out": len(held), "held_out_calls": len(calls),
            "denied as unseen": denied,
            "share": round(denied / max(len(calls), 1), 4), "why": dict(reasons)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path,
                        default=ROOT / "pipelines/support_desk/params.yaml")
    parser.add_argument("--episodes", type=int, default=None,
                        help="conversations simulated [default: params support_desk.episodes]")
    parser.add_argument("--held-out", type=float, default=0.2)
    parser.add_argument("--score", type=int, default=300,
                        help="held-out conversations whose calls are scored")
    parser.add_argument("--seed", type=int, default=7, help="the split's seed")
    parser.add_argument("--logs", type=Path, nargs="+",
                        help="real logs: the tools-and-arguments rule only")
    args = parser.parse_args()
    if args.logs:
        print(json.dumps(real_logs(args.logs, args.held_out, args.seed), indent=2))
        return
    raw = yaml.safe_load(args.params.read_text())
    fixture = FixtureParams.of(SupportDesk(**raw["support_desk"]))
    n = args.episodes or fixture.episodes
    gamma = float(raw.get("gamma", 0.99))
    episodes = sim.simulate(fixture.behavior, n, fixture.env, seed=fixture.seed)
    records = list(chat.records(episodes, behavior_policy=fixture.behavior.name,
                                gamma=gamma))
    held = np.random.default_rng(args.seed).random(len(records)) < args.held_out
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "fitted.jsonl"
        logs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r, h in zip(
            records, held, strict=True) if not h))
        ingest([logs], Path(tmp) / "ingested", fmt="openai-chat", workers=1)
        steps = relabel(read_table(Path(tmp) / "ingested" / "steps"),
                        raw["relabel"]["verifiers"], raw["relabel"]["weights"])
    encoder = encoder_for([steps], raw["train"]["encoder"])
    guard = Guard.fit(encoder.transitions(steps), GuardSettings(**(raw.get("guard") or {})),
                      gamma=gamma, steps=steps)
    verdicts, succeeded, reasons = [], [], Counter()
    scored = [r for r, h in zip(records, held, strict=True) if h][: args.score]
    for record in scored:
        messages = record["messages"]
        won = float(record.get("reward") or 0.0) > 0
        for i, message in enumerate(messages):
            for call in message.get("tool_calls") or []:
                f = call["function"]
                answer = guard.score(messages[:i], {"name": f["name"],
                                                    "arguments": f["arguments"]})
                verdicts.append(answer["verdict"])
                if won:
                    succeeded.append(answer["verdict"])
                if answer["verdict"] == BLOCK_UNSEEN:
                    reasons[answer["reason"].split(" of ")[0][:80]] += 1
    print(json.dumps({"conversations": n, "fitted": int((~held).sum()),
                      "held_out_scored": len(scored), "all held-out calls": rates(verdicts),
                      "calls of successful conversations": rates(succeeded),
                      "unseen reasons": dict(reasons.most_common(5))}, indent=2))


if __name__ == "__main__":
    main()
