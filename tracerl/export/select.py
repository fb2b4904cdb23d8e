"""What each export takes: the verifiers' checks per step, the rules that turn them into a
weight or a label, and the split of the tasks.

Weights and labels are per row (one agent action); a turn (one assistant message) takes
the smallest weight of its rows and is labelled good only when all its rows are. A weight
rule is a function of the table and its checks, registered by name in WEIGHT_RULES: the
slot where a critic's advantage plugs in later (a rule that reads more than the checks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracerl.config.export import SftExport
from tracerl.data import relabel as rl
from tracerl.data.verifiers import episode_codes

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class StepChecks:
    """Per row of a step table: what the SWiRL filters read (relabel.filters)."""

    process: np.ndarray   # bool: the step passed the process check
    success: np.ndarray   # bool: its episode ended correct (the outcome check)

    @classmethod
    def of(cls, steps: pa.Table, process: Mapping[str, float] | None = None,
           outcome: str | None = None) -> StepChecks:
        return cls(rl.step_passes_process(steps, process), rl.episode_succeeded(steps, outcome))


WeightRule = Callable[[pa.Table, StepChecks], np.ndarray]
WEIGHT_RULES: dict[str, WeightRule] = {
    "process": lambda steps, checks: checks.process.astype(np.float64),
    "none": lambda steps, checks: np.ones(steps.num_rows),
}
LABEL_RULES: dict[str, Callable[[StepChecks], np.ndarray]] = {
    "process": lambda c: c.process,
    "outcome": lambda c: c.success,
    "process+outcome": lambda c: c.process & c.success,
}


def step_weights(rule: str, steps: pa.Table, checks: StepChecks) -> np.ndarray:
    if rule not in WEIGHT_RULES:
        raise ValueError(f"unknown weight rule {rule!r}; rules: {sorted(WEIGHT_RULES)}")
    return np.asarray(WEIGHT_RULES[rule](steps, checks), dtype=np.float64)


def step_labels(rule: str, checks: StepChecks) -> np.ndarray:
    if rule not in LABEL_RULES:
        raise ValueError(f"unknown label rule {rule!r}; rules: {sorted(LABEL_RULES)}")
    return np.asarray(LABEL_RULES[rule](checks), dtype=bool)


def turn_min(steps: pa.Table, values: np.ndarray) -> np.ndarray:
    """Per row: the smallest of `values` over its turn (the rows of its episode sharing its
    `turn`: one assistant message; a row with a null turn, or a table without the column,
    is its own turn)."""
    values = np.asarray(values, dtype=np.float64)
    if "turn" not in steps.column_names or not steps.num_rows:
        return values
    turn = steps.column("turn").to_numpy(zero_copy_only=False)
    alone = pd.isna(turn)
    if alone.all():
        return values
    own = -1 - np.arange(steps.num_rows)  # a null turn: a group of its own
    key = np.where(alone, own, np.where(alone, 0, turn).astype(np.int64))
    frame = pd.DataFrame({"episode": episode_codes(steps)[0], "turn": key, "value": values})
    return frame.groupby(["episode", "turn"], sort=False)["value"].transform("min").to_numpy()


def sft_weights(steps: pa.Table, sft: SftExport, process: Mapping[str, float] | None = None,
                outcome: str | None = None) -> np.ndarray:
    """Per row (table order): the weight the SFT export gives the row's assistant message,
    the SWiRL selection: 0 where `sft.episodes` drops the episode, else the `sft.weight`
    rule's, the smallest over the turn (a message is trained on whole). The export writes
    these weights and the train stage's filtered BC clones the rows of weight > 0: one
    definition of what SFT trains on."""
    checks = StepChecks.of(steps, process, outcome)
    kept = rl.episodes_kept(steps, sft.episodes, process, outcome)
    return turn_min(steps, np.where(kept, step_weights(sft.weight, steps, checks), 0.0))


# --- splits -------------------------------------------------------------------------------
def split_key(task: str | None, episode_id: str) -> str:
    """What a split keeps together: the task, or the episode when it has no task."""
    return f"task:{task}" if task is not None else f"episode:{episode_id}"


def _unit_interval(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_splits(keys: Sequence[str], shares: Mapping[str, float], seed: int,
                  method: str = "hash") -> dict[str, str]:
    """Split of each key (no key in two splits), splits in SPLITS order.

    hash: a key's split is where sha256(seed, key), read as a number in [0, 1), falls
    among the cumulative shares, so it depends on the seed and the key alone (stable as
    logs grow); shuffle: the sorted keys permuted by the seed and cut at the shares, the
    counts by largest remainder (exact, but a new key can move others)."""
    names = [s for s in SPLITS if shares.get(s, 0.0) > 0]
    unique = sorted(set(keys))
    if method == "hash":
        edges = np.cumsum([shares[s] for s in names])
        return {k: names[min(int(np.searchsorted(edges, _unit_interval(seed, k), side="right")),
                             len(names) - 1)] for k in unique}
    if method != "shuffle":
        raise ValueError(f"unknown split method {method!r}; methods: hash, shuffle")
    n = len(unique)
    exact = np.array([shares[s] * n for s in names])
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts), kind="stable")[: n - counts.sum()]:
        counts[i] += 1
    order = np.random.default_rng(seed).permutation(n)
    out, at = {}, 0
    for name, count in zip(names, counts, strict=True):
        for j in order[at:at + count]:
            out[unique[j]] = name
        at += count
    return out
