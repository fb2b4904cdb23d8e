"""Whole-episode consistency: t counts 0, 1, 2, ... and exactly the last step is done."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class EpisodeProblem:
    field: str
    reason: str


def find_inconsistent_episodes(
    episode_id: pa.ChunkedArray | pa.Array, t: np.ndarray, done: np.ndarray
) -> dict[str, EpisodeProblem]:
    """Episodes that break the step-order rules, each with the field and reason.

    Rules: no duplicate (episode_id, t); t runs 0..n-1 with no gap; exactly one done step,
    and it is the last one.
    """
    if len(episode_id) == 0:
        return {}
    if isinstance(episode_id, pa.ChunkedArray | pa.Array):
        # Arrow's dictionary encoding: integer codes without a Python string per row
        # (pandas.factorize over an object array costs ~100 bytes a row at 3M rows).
        whole = episode_id.combine_chunks() if isinstance(episode_id, pa.ChunkedArray) \
            else episode_id
        encoded = whole.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        names = encoded.dictionary.to_pylist()
    else:
        import pandas as pd  # only here: ingest passes Arrow and never imports pandas

        codes, names = pd.factorize(episode_id)
    if len(codes) == 0:
        return {}
    t = np.asarray(t, dtype=np.int64)
    done = np.asarray(done, dtype=bool)
    order = np.lexsort((t, codes))
    c, ts, ds = codes[order], t[order], done[order]
    n_episodes = len(names)
    counts = np.bincount(c, minlength=n_episodes)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = np.arange(len(c)) - start[c]

    duplicate = np.zeros(n_episodes, dtype=bool)
    same = (c[1:] == c[:-1]) & (ts[1:] == ts[:-1])
    duplicate[c[1:][same]] = True
    gap = np.zeros(n_episodes, dtype=bool)
    gap[c[ts != position]] = True
    done_count = np.bincount(c, weights=ds, minlength=n_episodes)
    after_done = np.zeros(n_episodes, dtype=bool)
    after_done[c[ds & (position != counts[c] - 1)]] = True
    no_done = done_count == 0

    bad = np.flatnonzero(duplicate | gap | after_done | no_done)
    problems: dict[str, EpisodeProblem] = {}
    for e in bad:  # few: explain each in words
        lo, hi = start[e], start[e] + counts[e]
        steps, dones = ts[lo:hi], ds[lo:hi]
        name = names[e]
        if duplicate[e]:
            twice = sorted({int(x) for x, y in zip(steps[1:], steps[:-1], strict=True) if x == y})
            problems[name] = EpisodeProblem(
                "t", f"episode {name!r} has t={twice[0]} more than once "
                "(duplicate (episode_id, t))")
        elif gap[e]:
            missing = sorted(set(range(int(steps.max()) + 1)) - {int(x) for x in steps})
            problems[name] = EpisodeProblem(
                "t", f"episode {name!r} is missing t={missing[0]} (t must count 0, 1, 2, ...)")
        elif after_done[e]:
            first_done = int(steps[dones][0])
            problems[name] = EpisodeProblem(
                "done", f"episode {name!r} has a step at t={first_done + 1} after done at "
                f"t={first_done}")
        else:
            problems[name] = EpisodeProblem("done", f"episode {name!r} has no step with done=true")
    return problems
