"""Choosing among candidate policies from their estimates, honestly.

For each estimator: the rank correlation of its values with the truth over the candidates,
and regret@1, the true value lost by deploying its top pick. A candidate whose estimate
rests on support below `min_support` is never ranked first: the report says so instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


def spearman(values: Sequence[float], truth: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either is constant."""
    x = pd.Series(values, dtype=float).rank().to_numpy()
    y = pd.Series(truth, dtype=float).rank().to_numpy()
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def select(records: Sequence[dict[str, Any]], min_support: float) -> list[dict[str, Any]]:
    """One row per (dataset, layer, estimator) over the candidates' records.

    Records need keys dataset, policy, layer, estimator, value, support and truth.
    """
    frame = pd.DataFrame(list(records))
    rows = []
    for (dataset, layer, estimator), group in frame.groupby(
            ["dataset", "layer", "estimator"], sort=True):
        usable = group[group["value"].notna()]
        row: dict[str, Any] = {"dataset": dataset, "layer": layer, "estimator": estimator,
                               "candidates": int(len(group)), "estimated": int(len(usable))}
        if usable.empty:
            rows.append({**row, "note": "no candidate could be estimated"})
            continue
        ordered = usable.sort_values(["value", "policy"], ascending=[False, True])
        supported = ordered[ordered["support"] >= min_support]
        top = ordered.iloc[0]
        row["pick"] = None if supported.empty else str(supported.iloc[0]["policy"])
        notes = []
        if top["support"] < min_support:
            notes.append(f"{top['policy']} has the highest estimate ({top['value']:.3f}) but "
                         f"support {top['support']:.2f} < min_support {min_support}: not "
                         "ranked first")
        if supported.empty:
            notes.append("no candidate has enough support to be ranked first")
        if usable["truth"].notna().all():
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
