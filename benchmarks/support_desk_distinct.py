"""Share of distinct conversations among the support desk's logged episodes with the
support_desk pipeline's default params (pipelines/support_desk/params.yaml).

    python benchmarks/support_desk_distinct.py [--episodes 100000] [--params FILE]

A conversation is its messages (the text the agent and user exchanged, the tool calls
and results); two episodes are the same when those are equal byte for byte.
"""

from __future__ import annotations

import argparse
import time

import yaml

from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk import chat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--params", default="pipelines/support_desk/params.yaml")
    args = parser.parse_args()
    with open(args.params, encoding="utf-8") as f:
        params = yaml.safe_load(f)
    p = sd.FixtureParams.from_dict(params["support_desk"])
    started = time.perf_counter()
    episodes = sd.generate(p, args.episodes)  # the first dataset's seed (seed + 0)
    share = chat.distinct_share(episodes)
    with_info = chat.distinct_share(episodes, messages_only=False)
    print(f"{args.episodes:,} episodes (seed {p.seed}): distinct conversations {share:.4f} "
          f"(messages), {with_info:.4f} (whole record but info); mean length "
          f"{episodes.lengths.mean():.1f} actions; {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
