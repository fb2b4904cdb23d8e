"""Load time of the support desk's guard and the latency of `Guard.score` on real histories.

    .venv/bin/python benchmarks/guard_latency.py [--params pipelines/support_desk/params.yaml]
        [--conversations 50] [--seed 123]

Needs the pipeline's outputs (`dvc repro pipelines/support_desk/dvc.yaml`: models/encoder.json
and the labelled steps). Every tool call of `--conversations` fresh conversations is scored
after its own history (each call re-reads the whole history: latency grows with its length).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from tracerl.config.schema import load_config
from tracerl.envs.support_desk import chat, sim
from tracerl.guard import Guard

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=ROOT / "pipelines/support_desk/params.yaml")
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args()
    t0 = time.perf_counter()
    guard = Guard.from_params(load_config(args.params))
    load_s = time.perf_counter() - t0
    episodes = sim.simulate(sim.ScriptedPolicy(), args.conversations, seed=args.seed)
    times = []
    for record in chat.records(episodes, behavior_policy="b", gamma=0.99):
        messages = record["messages"]
        for i, message in enumerate(messages):
            for call in message.get("tool_calls") or []:
                f = call["function"]
                start = time.perf_counter()
                guard.score(messages[:i], {"name": f["name"], "arguments": f["arguments"]})
                times.append(time.perf_counter() - start)
    times.sort()
    print(json.dumps({"load_s": round(load_s, 2), "states": guard.table.n_states,
                      "calls": len(times),
                      "median_ms": round(1000 * statistics.median(times), 1),
                      "p95_ms": round(1000 * times[int(0.95 * (len(times) - 1))], 1)}))


if __name__ == "__main__":
    main()
