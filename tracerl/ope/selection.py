"""Choosing among candidate policies from their estimates, honestly.

For each estimator: the rank correlation of its values with the truth over the candidates,
and regret@1, the true value lost by deploying its top pick. A candidate is never ranked
first on an estimate that carries `unsupported_actions`, `low_support` or
`interval_unreliable` (tracerl.ope.estimate.BLOCKING_FLAGS), whatever its support number,
nor on one with no point estimate (replay with too few episodes replayed to the end): the
report names each such candidate that would otherwise have ranked above the pick, and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tracerl.ope.estimate import DEFAULT_MIN_SUPPORT, blocking_flags


def spearman(values: Sequence[float], truth: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either is constant."""
    x = pd.Series(values, dtype=float).rank().to_numpy()
    y = pd.Series(truth, dtype=float).rank().to_numpy()
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def select(records: Sequence[dict[str, Any]],
           min_support: float = DEFAULT_MIN_SUPPORT) -> list[dict[str, Any]]:
    """One row per (dataset, layer, estimator) over the candidates' records.

    Records need keys dataset, policy, layer, estimator, value, support, flags and truth
    (ci_high is read when present). `min_support` only names the threshold in the notes
    and picks the supported candidates for regret_at_1_supported: the guard is the flags,
    which the layers set from the same threshold.
    """
    frame = pd.DataFrame(list(records))
    if "flags" not in frame:
        frame["flags"] = [[] for _ in range(len(frame))]
    frame["blocked_by"] = [blocking_flags(f) for f in frame["flags"]]
    rows = []
    for (dataset, layer, estimator), group in frame.groupby(
            ["dataset", "layer", "estimator"], sort=True):
        usable = group[group["value"].notna()]
        row: dict[str, Any] = {"dataset": dataset, "layer": layer, "estimator": estimator,
                               "candidates": int(len(group)), "estimated": int(len(usable))}
        ordered = usable.sort_values(["value", "policy"], ascending=[False, True])
        eligible = ordered[ordered["blocked_by"].str.len() == 0]
        row["pick"] = None if eligible.empty else str(eligible.iloc[0]["policy"])
        bar = -np.inf if eligible.empty else float(eligible.iloc[0]["value"])
        notes = []
        for _, r in group.sort_values("policy").iterrows():  # candidates, not episodes
            if r["value"] is not None and not pd.isna(r["value"]):
                if r["blocked_by"] and r["value"] > bar:
                    notes.append(f"{r['policy']} estimates {r['value']:.3f} but carries "
                                 f"{', '.join(r['blocked_by'])} (support "
                                 f"{r['support']:.2f}, min_support {min_support}): not "
                                 "ranked first")
            elif r.get("ci_high") is not None and not pd.isna(r.get("ci_high")) \
                    and r["ci_high"] > bar:
                notes.append(f"{r['policy']} has no point estimate (bounds only, up to "
                             f"{r['ci_high']:.3f}): not ranked first")
        if usable.empty:
            notes.append("no candidate could be estimated")
        elif eligible.empty:
            notes.append("no candidate's estimate is free of unsupported_actions, "
                         "low_support and interval_unreliable: none ranked first")
        if not usable.empty and usable["truth"].notna().all():
            row["rank_correlation"] = spearman(usable["value"], usable["truth"])
            if row["pick"] is not None:
                picked = float(usable.loc[usable["policy"] == row["pick"], "truth"].iloc[0])
                # Against every candidate, and against those the data can vouch for.
                row["regret_at_1"] = float(group["truth"].max()) - picked
                row["regret_at_1_supported"] = float(
                    group.loc[group["support"] >= min_support, "truth"].max()) - picked
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows
