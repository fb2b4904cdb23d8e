"""The one selection rule: choosing among candidate policies from their estimates, honestly.

Per (dataset, layer, estimator), the pick is the candidate with the highest value among
those whose estimate has a value and carries none of `BLOCKING_FLAGS` (`unsupported_actions`,
`low_support`, `interval_unreliable`, `out_of_range`), whatever its support number;
the note names each candidate that would otherwise have ranked above the pick, and why.
Where a truth exists: the rank correlation of the values with it over the candidates, and
regret@1, the true value lost by deploying the pick. Beside the logged agent's own value,
`verdict_against_logged` says whether a candidate would beat it, only when its estimate is
supported, unflagged and its interval clears the logged one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tracerl.ope.estimate import LOW_SUPPORT, UNSUPPORTED_ACTIONS
from tracerl.ope.intervals import INTERVAL_UNRELIABLE, OUT_OF_RANGE

# Flags that keep a candidate from being ranked first: support, the interval, the range,
# the propensities' hygiene and the critic's credibility where it could change the decision
# (tracerl.ope.evaluate). The behaviour model's self-check is not one: it diagnoses the
# encoder, and no estimate that divides by logged propensities uses that model.
BLOCKING_FLAGS = (UNSUPPORTED_ACTIONS, LOW_SUPPORT, INTERVAL_UNRELIABLE, OUT_OF_RANGE,
                  "heavy_tailed_weights", "behavior_mismatch",
                  "ill_conditioned", "critic_miscalibrated", "critic_biased", "uncorroborated",
                  "no estimate")


def blocking_flags(flags: Iterable[str]) -> list[str]:
    """The flags (names only) that keep an estimate from ranking its candidate first."""
    names = dict.fromkeys(str(f).split(":")[0] for f in flags)
    return [f for f in names if f in BLOCKING_FLAGS]


def spearman(values: Sequence[float], truth: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either is constant."""
    x = pd.Series(values, dtype=float).rank().to_numpy()
    y = pd.Series(truth, dtype=float).rank().to_numpy()
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def select(records: Sequence[dict[str, Any]], min_support: float) -> list[dict[str, Any]]:
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
        if not usable.empty and "truth" in usable and usable["truth"].notna().all():
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


def pick_of(selection: Sequence[Mapping[str, Any]], dataset: str, headline: str
            ) -> tuple[str | None, str]:
    """(pick, note) of the headline estimator on `dataset`."""
    layer, _, estimator = headline.partition("/")
    for row in selection:
        if (row["dataset"], row["layer"], row["estimator"]) == (dataset, layer, estimator):
            return row.get("pick"), row.get("note", "")
    return None, f"no {headline} estimate on {dataset}"


def verdict_against_logged(record: Mapping[str, Any], logged: Mapping[str, Any],
                           min_support: float) -> str:
    """Would the candidate beat the logged agent? Only said when the estimate is supported
    and unflagged and its interval clears the logged value's interval; else says why not."""
    if record["value"] is None:
        return "cannot say: " + "; ".join(record["flags"])
    if record["support"] < min_support:
        return (f"not enough support: {record['support']:.2f} of the candidate's episodes "
                f"stay on actions the log covers (needs {min_support:.2f})")
    if blocking_flags(record["flags"]):
        return "cannot say: estimate flagged " + ", ".join(blocking_flags(record["flags"]))
    if record["ci_low"] is not None and record["ci_low"] > logged["ci_high"]:
        return "better than the logged agent (intervals do not overlap)"
    if record["ci_high"] is not None and record["ci_high"] < logged["ci_low"]:
        return "worse than the logged agent (intervals do not overlap)"
    return "cannot tell apart from the logged agent (intervals overlap)"


def comparisons(records: Sequence[Mapping[str, Any]], logged: Mapping[str, Mapping],
                headline: str, min_support: float) -> list[dict[str, Any]]:
    """Per candidate trained on another agent's logs: its headline estimate on the evaluated
    agent's logs beside both agents' logged values, and the verdict the numbers allow."""
    out = []
    for r in records:
        if not r.get("cross_agent") or f"{r['layer']}/{r['estimator']}" != headline:
            continue
        source, here = logged[r["trained_on"]], logged[r["dataset"]]
        out.append({"candidate": r["policy"], "trained_on": r["trained_on"],
                    "evaluated_on": r["dataset"], "headline": headline,
                    "estimate": r["value"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                    "support": r["support"], "flags": r["flags"],
                    "other_estimates": {f"{o['layer']}/{o['estimator']}": o["value"]
                                        for o in records if o["policy"] == r["policy"]
                                        and o["dataset"] == r["dataset"]},
                    "source_logged": source["value"],
                    "source_logged_ci": [source["ci_low"], source["ci_high"]],
                    "evaluated_logged": here["value"],
                    "evaluated_logged_ci": [here["ci_low"], here["ci_high"]],
                    "verdict": verdict_against_logged(r, here, min_support)})
    return out
