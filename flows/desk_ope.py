"""The OPE stage's review desk: a verdict per dataset, then one screen per dataset (one row
per candidate, the headline estimator), the estimate-vs-truth plot, then the full table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows import _publish as publish


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _flags(r: dict[str, Any]) -> str:
    return ", ".join(dict.fromkeys(f.split(":")[0] for f in r["flags"])) or "–"


def headline_rows(records: list[dict], dataset: str, headline: str) -> list[list[Any]]:
    rows = []
    for r in records:
        if r["dataset"] != dataset or f"{r['layer']}/{r['estimator']}" != headline:
            continue
        ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        rows.append([r["policy"], _num(r["value"]), ci, _num(r["truth"]),
                     _num(r["support"], 2), _flags(r)])
    return rows


def publish_ope(records: list[dict], selection: list[dict], headline: str, min_support: float,
                full_table: str, plot: Path, datasets: list[str]) -> None:
    layer, estimator = headline.split("/")
    picks = {s["dataset"]: s for s in selection
             if s["layer"] == layer and s["estimator"] == estimator}
    rows, notes = [], []
    for name in datasets:
        s = picks.get(name, {})
        flagged = sorted({r["policy"] for r in records if r["dataset"] == name and r["flags"]
                          and f"{r['layer']}/{r['estimator']}" == headline})
        truth = {r["policy"]: r["truth"] for r in records
                 if r["dataset"] == name and r["truth"] is not None and r["metric"] == "return"}
        best = max(truth, key=lambda p: (truth[p], p)) if truth else None
        rows.append([name, s.get("pick") or "none", best or "–",
                     _num(s.get("regret_at_1")), _num(s.get("rank_correlation"), 2),
                     len(flagged)])
        if s.get("note"):
            notes.append(f"{name}: {s['note']}")
    verdict = ("deploy " + ", ".join(f"{r[1]} ({r[0]})" for r in rows)
               if all(r[1] != "none" for r in rows) else "no supported pick on some dataset")
    publish.summary("ope", verdict, ["dataset", f"pick ({headline})", "best by truth",
                                  "regret@1", "rank corr.", "candidates flagged"], rows,
                 notes=notes, description=f"Which candidate the headline estimator {headline} "
                                          f"would deploy (support >= {min_support})")
    for name in datasets:
        publish.detail(f"ope-{name}", f"OPE on {name}: {headline}, one row per candidate",
                    ["candidate", "estimate", "CI", "truth", "support", "flags"],
                    headline_rows(records, name, headline),
                    f"{name}: each candidate by the headline estimator {headline}")
    publish.image("ope-plot", plot, "OPE estimate against the truth",
               "Every return estimate against the exact truth, with intervals")
    publish.detail("ope-estimates", "Layered off-policy evaluation: every layer and estimator",
                [], [], "Every candidate through replay, verifier, critic and importance "
                        "sampling (full table)", footer=full_table)
