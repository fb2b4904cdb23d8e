"""What the exports and the report make of the step credit (`tracerl.rl.credit`): weights,
the report's worst pairs and largest drops, and preference pairs mined from logged
alternatives.

Preference pairs (`mine_pairs`): two logged steps at one encoded state whose actions differ
and whose Q intervals do not overlap, within one dataset or across datasets (agents) on the
same task; each dataset's steps read its own critic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tracerl.rl.credit import INTERVAL, StepCredit


# --- what the report shows ------------------------------------------------------------------
def _num(x: float) -> str:
    return f"{x:+.2f}".replace("-", "\u2212")


def worst_pairs(credit: StepCredit, top: int) -> list[dict[str, Any]]:
    """The (state, action) pairs with the most negative advantage among those logged at
    least min_count times, each with a sentence saying it."""
    tr = credit.tr
    ok = np.flatnonzero(credit.count >= credit.min_count)
    order = ok[np.lexsort((credit.pair_a[ok], credit.pair_s[ok], credit.advantage[ok]))]
    out = []
    for j in order[:top]:
        if credit.advantage[j] >= 0:
            break
        action, state = tr.actions[int(credit.pair_a[j])], str(tr.labels[int(credit.pair_s[j])])
        clear = credit.adv_high[j] < 0
        sentence = (f"calling `{action}` at `{state}` is followed by a "
                    f"{'worse' if clear else 'possibly worse'} outcome than the logging "
                    f"policy's average there: advantage {_num(credit.advantage[j])} "
                    f"({credit.level:.0%} CI {_num(credit.adv_low[j])} to "
                    f"{_num(credit.adv_high[j])}), n = {int(credit.count[j])}")
        out.append({"state": state, "action": action, "advantage": float(credit.advantage[j]),
                    "advantage_ci": [float(credit.adv_low[j]), float(credit.adv_high[j])],
                    "q": float(credit.q[j]), "v": float(credit.v[int(credit.pair_s[j])]),
                    "n": int(credit.count[j]), "n_state": int(credit.state_count[j]),
                    "behavior_prob": float(credit.behavior_prob[j]),
                    "flags": list(credit.flags[j]), "interval_excludes_zero": bool(clear),
                    "sentence": sentence})
    return out


def episode_drops(credit: StepCredit, episode_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per episode (ascending episode_id, as tr numbers them): the step where the value
    dropped most (None when no step has a value after it)."""
    tr = credit.tr
    drop = np.where(np.isnan(credit.drop), np.inf, credit.drop)
    order = np.lexsort((tr.t, drop, tr.episode))  # per episode: smallest drop first
    first = order[np.r_[True, tr.episode[order][1:] != tr.episode[order][:-1]]] \
        if tr.n else order
    out = []
    for i in first:  # one per episode
        e = int(tr.episode[i])
        if not np.isfinite(drop[i]):
            out.append({"episode_id": episode_ids[e], "t": None})
            continue
        step = credit.step(int(i))
        out.append({"episode_id": episode_ids[e], "t": step["t"], "action": step["action"],
                    "state": step["state"], "value_change": float(credit.drop[i]),
                    "v_before": step["v"], "q": step["q"], "advantage": step["advantage"],
                    "n": step["n"], "flags": step["flags"]})
    return out


def summary(credit: StepCredit, episode_ids: Sequence[str], top: int) -> dict[str, Any]:
    """What the report and the UI show of one dataset's credit."""
    drops = episode_drops(credit, episode_ids)
    ranked = sorted((d for d in drops if d["t"] is not None),
                    key=lambda d: (d["value_change"], d["episode_id"]))
    return {"interval": INTERVAL, "level": credit.level, "steps": credit.tr.n,
            "episodes": credit.n_episodes, "state_action_pairs": len(credit.pair_s),
            "min_count": credit.min_count, "converged": credit.converged,
            "value_range": None if credit.value_range is None else list(credit.value_range),
            "value": float(credit.v[credit.tr.initial_states].mean()) if credit.tr.n else None,
            "worst_pairs": worst_pairs(credit, top), "largest_drops": ranked[:top]}


# --- preference pairs ------------------------------------------------------------------------
@dataclass(frozen=True)
class PairSpec:
    """One preference record to write: at the anchor step (its prompt), the logged action
    `rejected` lost to `chosen`, a logged step of another action at the same encoded state
    (`chosen_dataset`, `chosen_row`; rows in tr order)."""

    scope: str
    dataset: str
    row: int
    chosen_dataset: str
    chosen_row: int
    state: str
    chosen_action: str
    rejected_action: str
    chosen_q: tuple[float, float, float]    # (q, low, high)
    rejected_q: tuple[float, float, float]
    chosen_n: int
    rejected_n: int


def _frame(name: str, credit: StepCredit, split: np.ndarray, task: np.ndarray,
           single: np.ndarray) -> pd.DataFrame:
    tr, j = credit.tr, credit.pair
    return pd.DataFrame({
        "dataset": name, "row": np.arange(tr.n), "state": tr.labels[tr.s],
        "action": np.asarray(tr.actions, dtype=object)[tr.a], "q": credit.q[j],
        "low": credit.q_low[j], "high": credit.q_high[j], "n": credit.count[j],
        "split": split, "task": task, "single": single})


def mine_pairs(steps: Mapping[str, tuple[StepCredit, np.ndarray, np.ndarray, np.ndarray]],
               scope: Sequence[str], min_count: int = 1) -> list[PairSpec]:
    """The pair records of every dataset. steps: dataset -> (its credit, and per step of
    its tr: split, task (split key), whether its turn is that step alone). A pair: at one
    state (label) two actions with non-overlapping Q intervals, each logged at least
    min_count times (in its dataset); its records are anchored on every single-step turn
    of the worse action (its prompt), one per anchor and scope (the better action whose
    lower bound is highest), the better action's message taken from a logged single-step
    turn in the same split (within: the same dataset, the same task preferred; across:
    another dataset, the same task). Sorted, so deterministic."""
    frames = [_frame(n, *v) for n, v in steps.items()]
    if not frames:
        return []
    df = pd.concat(frames, ignore_index=True)
    df = df[df["n"] >= min_count]
    out: list[PairSpec] = []
    side = ["dataset", "state", "action", "q", "low", "high", "n"]
    for kind in scope:
        keys = ["dataset", "state", "action"] + (["task"] if kind == "across" else [])
        level = df.drop_duplicates(keys)[side + (["task"] if kind == "across" else [])]
        on = ["state"] + (["dataset"] if kind == "within" else ["task"])
        m = level.merge(level, on=on, suffixes=("_hi", "_lo"))
        m = m[(m["action_hi"] != m["action_lo"]) & (m["low_hi"] > m["high_lo"])]
        if kind == "across":
            m = m[m["dataset_hi"] != m["dataset_lo"]]
        else:
            m = m.assign(dataset_hi=m["dataset"], dataset_lo=m["dataset"]).drop(
                columns="dataset")
        if m.empty:
            continue
        cand = df[df["single"]]
        anchors = cand.merge(m, left_on=["dataset", "state", "action"] +
                             (["task"] if kind == "across" else []),
                             right_on=["dataset_lo", "state", "action_lo"] +
                             (["task"] if kind == "across" else []))
        reps = cand.sort_values(["dataset", "row"])
        by_task = reps.drop_duplicates(["dataset", "state", "action", "split", "task"])
        by_split = reps.drop_duplicates(["dataset", "state", "action", "split"])
        join = ["dataset_hi", "state", "action_hi", "split"]
        rep_cols = {"dataset": "dataset_hi", "action": "action_hi", "row": "rep_row"}
        t = anchors.merge(by_task[["dataset", "state", "action", "split", "task", "row"]]
                          .rename(columns=rep_cols), on=[*join, "task"], how="left")
        if kind == "within":
            any_task = by_split[["dataset", "state", "action", "split", "row"]].rename(
                columns={**rep_cols, "row": "rep_any"})
            t = t.merge(any_task, on=join, how="left")
            t["rep_row"] = t["rep_row"].fillna(t["rep_any"])
        # One record per anchor: the better action with the highest lower bound (ties by
        # name, then dataset), so a step's prompt is not repeated once per alternative.
        t = t[t["rep_row"].notna()].sort_values(
            ["dataset", "row", "low_hi", "action_hi", "dataset_hi"],
            ascending=[True, True, False, True, True]).drop_duplicates(["dataset", "row"])
        for r in t.itertuples(index=False):  # over the records written
            out.append(PairSpec(kind, r.dataset, int(r.row), r.dataset_hi, int(r.rep_row),
                                r.state, r.action_hi, r.action_lo,
                                (float(r.q_hi), float(r.low_hi), float(r.high_hi)),
                                (float(r.q_lo), float(r.low_lo), float(r.high_lo)),
                                int(r.n_hi), int(r.n_lo)))
    return out
