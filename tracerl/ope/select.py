"""The one selection rule: choosing among candidate policies from their estimates, honestly.

Per (dataset, layer, estimator), the pick is, among the candidates whose estimate has a
value and carries none of `BLOCKING_FLAGS` (`unsupported_actions`, `low_support` — the
support number below min_support —, `interval_unreliable`, `out_of_range`, ...), the one
with the highest lower confidence bound (`ci_low`; ties, and estimates without an
interval, by value, then name): the decision-theoretic pick of safe policy improvement
(Thomas et al. 2015), the candidate the data guarantee most of. A candidate with a higher
point value but a wider interval (more extrapolation from the logs: more of its weight
truncated, more of its play uncovered) is not the pick; the note names it. The note also
names each blocked candidate that would otherwise have ranked above the pick, and why.
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


def lower_bounds(frame: pd.DataFrame) -> pd.Series:
    """Each estimate's lower confidence bound, its value where it has no interval."""
    if "ci_low" not in frame:
        return frame["value"].astype(float)
    low = pd.to_numeric(frame["ci_low"], errors="coerce")
    return low.where(low.notna(), frame["value"]).astype(float)


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
        usable = usable.assign(lower=lower_bounds(usable))
        ordered = usable.sort_values(["lower", "value", "policy"],
                                     ascending=[False, False, True])
        eligible = ordered[ordered["blocked_by"].str.len() == 0]
        row["pick"] = None if eligible.empty else str(eligible.iloc[0]["policy"])
        bar = -np.inf if eligible.empty else float(eligible.iloc[0]["value"])
        notes = []
        if not eligible.empty:
            chosen = eligible.iloc[0]
            for _, r in eligible.iloc[1:].sort_values("policy").iterrows():
                if r["value"] > chosen["value"]:
                    notes.append(f"{r['policy']} estimates {r['value']:.3f} above the pick's "
                                 f"{chosen['value']:.3f} but its lower bound {r['lower']:.3f} "
                                 f"is below the pick's {chosen['lower']:.3f}: not ranked "
                                 "first")
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


HOLM = "Holm"
# Exact enumeration of the sign-flip test up to this many non-zero task differences (2^16
# sign patterns); above, this many seeded random flips.
EXACT_FLIPS = 16
RANDOM_FLIPS = 20_000


def sign_flip_p(differences: np.ndarray, seed: int) -> float:
    """Two-sided p-value of the paired sign-flip test of mean(differences) = 0 (per-task
    differences of two agents on the same tasks): exact up to EXACT_FLIPS non-zero ones."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.abs(d) > 1e-12]
    if not len(d):
        return 1.0
    observed = abs(d.mean())
    if len(d) <= EXACT_FLIPS:
        signs = 1 - 2 * ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1)
    else:
        signs = np.random.default_rng([seed, 11]).choice([-1.0, 1.0],
                                                        size=(RANDOM_FLIPS, len(d)))
    return float(np.mean(np.abs(signs @ d / len(d)) >= observed - 1e-12))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error over every pair): the k-th smallest p
    times (m - k + 1), kept monotone, capped at 1."""
    order = np.argsort(np.asarray(p_values, dtype=np.float64), kind="stable")
    m = len(order)
    out = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):  # over the pairs, a handful
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        out[i] = running
    return out.tolist()


def rank_agents(agents: Mapping[str, Mapping[str, Any]], *, level: float, seed: int,
                n_boot: int) -> dict[str, Any]:
    """Several logged agents on the same tasks, ranked: per agent (its logs' `value`, its
    `model` where the logs name one, `task_returns`: task -> mean return), best first, then
    every pair's paired difference over the tasks both ran (mean, percentile bootstrap
    interval over tasks, sign-flip p-value) with Holm's adjustment over all the pairs: a
    pair is told apart when its adjusted p < 1 - level."""
    names = sorted(agents, key=lambda a: (-(agents[a].get("value") or -np.inf), a))
    rows = [{"agent": a, "model": agents[a].get("model"), "value": agents[a].get("value"),
             "ci_low": agents[a].get("ci_low"), "ci_high": agents[a].get("ci_high"),
             "tasks": len(agents[a].get("task_returns") or {})} for a in names]
    pairs = []
    for i, better in enumerate(names):
        for worse in names[i + 1:]:
            a, b = agents[better]["task_returns"], agents[worse]["task_returns"]
            shared = sorted(set(a) & set(b))
            d = np.asarray([a[t] - b[t] for t in shared], dtype=np.float64)
            pair: dict[str, Any] = {"agent": better, "other": worse, "tasks": len(shared),
                                    "difference": float(d.mean()) if len(d) else None,
                                    "ci_low": None, "ci_high": None,
                                    "p_value": sign_flip_p(d, seed) if len(d) else None}
            if len(d) > 1 and n_boot:
                draws = np.random.default_rng([seed, 13, i]).integers(
                    0, len(d), size=(n_boot, len(d)))
                means = d[draws].mean(axis=1)
                pair["ci_low"], pair["ci_high"] = (
                    float(np.quantile(means, (1 - level) / 2)),
                    float(np.quantile(means, (1 + level) / 2)))
            pairs.append(pair)
    tested = [p for p in pairs if p["p_value"] is not None]
    for p, adjusted in zip(tested, holm([p["p_value"] for p in tested]), strict=True):
        p["p_holm"] = adjusted
        p["told_apart"] = bool(adjusted < 1.0 - level)
    return {"agents": rows, "pairs": pairs, "adjustment": HOLM, "level": level,
            "test": "paired sign-flip over shared tasks (exact up to 16 non-zero "
                    "differences)"}
