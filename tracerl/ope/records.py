"""The OPE stage's records: one dict per estimate (with its candidate, where it was trained,
and the truth where a simulator gives one), the headline metrics, and the tables and the
estimate-vs-truth plot a reviewer reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracerl.ope.estimate import Estimate


def record(dataset: str, policy: str, estimate: Estimate, truth: Mapping[str, float] | None,
           trained_on: str | None = None, provenance: Mapping[str, Any] | None = None
           ) -> dict[str, Any]:
    """The stage's record of one estimate: where it came from, the metric it estimates (the
    verifier layer: success; the others: the return) and that metric's truth and standard
    error for its candidate (None where no simulator gives one: real logs). A candidate from
    outside (tracerl.ope.external) carries its `provenance` (source, file and sha256,
    scoring settings)."""
    metric = "success" if estimate.layer == "verifier" else "return"
    d = estimate.to_dict()
    trained_on = trained_on or dataset
    return {"dataset": dataset, "policy": policy, "trained_on": trained_on,
            "cross_agent": trained_on != dataset, "layer": d["layer"],
            "estimator": d["estimator"], "metric": metric, "value": d["value"],
            "ci_low": d["ci_low"], "ci_high": d["ci_high"], "ci_level": d["ci_level"],
            "support": d["support"], "n": d["n"], "ess": d["ess"], "flags": d["flags"],
            "truth": None if truth is None else float(truth[metric]),
            "truth_se": None if truth is None else float(truth.get(f"{metric}_se", 0.0)),
            "details": d["details"], **({"provenance": dict(provenance)} if provenance else {})}


# metrics/<pipeline>/ope.json's `verdict` per candidate (tracerl.report.answer's words).
VERDICT_CODES = {"identified": 2, "bounded": 1, "unidentified": 0}


def headline_metrics(records: Sequence[Mapping[str, Any]], logged: Mapping[str, Mapping],
                     headline: str, verdicts: Mapping[tuple[str, str], str] | None = None
                     ) -> dict[str, Any]:
    """metrics/<pipeline>/ope.json: each dataset's logged value; per dataset and candidate
    the headline estimate, its support and flag count, and where a truth exists the truth,
    its SE and the estimate's error against it (`minus_truth`: DVC reads a key named
    "error" as a failure to load metrics); `verdicts`: (dataset, candidate) -> identified /
    bounded / unidentified (tracerl.report.answer.candidate_verdict), every candidate's,
    with or without a point value, as the number `verdict` (metrics hold numbers only):
    2 identified, 1 bounded, 0 unidentified (`VERDICT_CODES`). Missing numbers are left
    out. An external candidate's provenance is in its records, datasets.json and the
    report, not here."""
    metrics: dict[str, Any] = {"logged": {n: {"value": v["value"]} for n, v in logged.items()
                                          if v.get("value") is not None}}
    for r in records:
        if f"{r['layer']}/{r['estimator']}" != headline or r["value"] is None:
            continue
        row = {"estimate": r["value"], "support": r["support"], "flags": len(r["flags"])}
        if r["truth"] is not None:
            row.update(truth=r["truth"], truth_se=r["truth_se"],
                       minus_truth=r["value"] - r["truth"])
        metrics.setdefault(r["dataset"], {})[r["policy"]] = {k: v for k, v in row.items()
                                                             if v is not None}
    for (dataset, policy), verdict in (verdicts or {}).items():
        metrics.setdefault(dataset, {}).setdefault(policy, {})["verdict"] = \
            VERDICT_CODES[verdict]
    return metrics


def describe_provenance(name: str, p: Mapping[str, Any]) -> str:
    """One line on where an external candidate came from (report and summary notes)."""
    if p.get("source") == "python policy":
        kwargs = ", ".join(f"{k}={v!r}" for k, v in (p.get("kwargs") or {}).items())
        return f"{name}: Python policy {p.get('policy')}({kwargs})"
    scoring = ", ".join(f"{k}={v}" for k, v in (p.get("scoring") or {}).items()) or \
        "no scoring settings given"
    behavior = (p.get("behavior") or {})
    return (f"{name}: scored table {p.get('file')} (sha256 {str(p.get('sha256'))[:12]}, "
            f"{p.get('records')} records; {scoring}; distribution: "
            f"{p.get('distribution') or 'none (log-probs of the logged actions only)'}; "
            f"behaviour: {behavior.get('file') or behavior.get('source', '?')})")


def plot_points(records: Sequence[Mapping[str, Any]], dataset: str) -> list[dict]:
    """Estimate against truth of every return estimate of `dataset` (for `dvc plots`)."""
    return [{"candidate": r["policy"], "estimator": f"{r['layer']}/{r['estimator']}",
             "estimate": r["value"], "truth": r["truth"], "ci_low": r["ci_low"],
             "ci_high": r["ci_high"], "support": r["support"]}
            for r in records if r["dataset"] == dataset and r["metric"] == "return"
            and r["value"] is not None and r["truth"] is not None]


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


OUT_OF_RANGE_WORDS = "out of range"


def is_out_of_range(record: Mapping[str, Any]) -> bool:
    """The estimate was projected onto the return range (tracerl.ope.intervals rule 5): its
    number is the range's end, not an estimate, and is never printed or drawn as one."""
    return any(str(f).split(":")[0] == "out_of_range" for f in record.get("flags") or ())


def shown_value(record: Mapping[str, Any], key: str = "value") -> str:
    """A record's value as every table prints it: 3 decimals, "out of range" when flagged."""
    if record.get(key) is None:
        return "–"
    return OUT_OF_RANGE_WORDS if is_out_of_range(record) else f"{record[key]:.3f}"


def flag_names(flags: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(f.split(":")[0] for f in flags)) or "–"


def interval(r: Mapping[str, Any]) -> str:
    return "–" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"


def markdown(records: Sequence[Mapping[str, Any]], selection: Sequence[Mapping[str, Any]],
             min_support: float) -> str:
    """Every record, then what each estimator would pick."""
    lines = ["| dataset | policy | layer | estimator | value | 95% CI | truth | truth SE | "
             "support | ESS | flags |", "|---|---|---|---|---:|---|---:|---:|---:|---:|---|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {r['policy']} | {r['layer']} | {r['estimator']} | "
                     f"{shown_value(r)} | {interval(r)} | {_num(r['truth'])} | "
                     f"{_num(r['truth_se'], 4)} | {_num(r['support'], 2)} | "
                     f"{_num(r['ess'], 0)} | {flag_names(r['flags'])} |")
    lines += ["", "Selection (never ranked first: an estimate flagged unsupported_actions, "
              f"low_support (support < {min_support}) or interval_unreliable, or one with "
              "no point estimate):", "",
              "| dataset | layer | estimator | pick | rank corr. with truth | regret@1 | note |",
              "|---|---|---|---|---:|---:|---|"]
    for s in selection:
        lines.append(f"| {s['dataset']} | {s['layer']} | {s['estimator']} | "
                     f"{s.get('pick') or '–'} | {_num(s.get('rank_correlation'), 2)} | "
                     f"{_num(s.get('regret_at_1'))} | {s.get('note', '')} |")
    return "\n".join(lines)


def plot(records: Sequence[dict[str, Any]], path: Path,
         truth_label: str = "true expected return (exact evaluator)",
         limits: tuple[float, float] | None = None) -> Path:
    """Estimate against truth with intervals, one panel per dataset (return estimates);
    `truth_label` says where the truth comes from (the x axis); `limits` (the return
    range) bounds the axes, and the panel title counts the estimates outside it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = [r for r in records if r["metric"] == "return" and r["value"] is not None
             and r["truth"] is not None]
    datasets = sorted({r["dataset"] for r in shown})
    estimators = sorted({r["estimator"] for r in shown})
    fig = Figure(figsize=(6 * max(len(datasets), 1), 5.5), dpi=100)
    FigureCanvasAgg(fig)
    colors = {e: f"C{i % 10}" for i, e in enumerate(estimators)}
    for k, dataset in enumerate(datasets):
        ax = fig.add_subplot(1, max(len(datasets), 1), k + 1)
        rows = [r for r in shown if r["dataset"] == dataset]
        lo = min(min(r["truth"], r["ci_low"] if r["ci_low"] is not None else r["value"])
                 for r in rows)
        hi = max(max(r["truth"], r["ci_high"] if r["ci_high"] is not None else r["value"])
                 for r in rows)
        outside = 0
        if limits is not None:
            lo, hi = float(limits[0]), float(limits[1])
            outside = sum(not lo <= r["value"] <= hi for r in rows)
            ax.set_xlim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
            ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="estimate = truth")
        for j, estimator in enumerate(estimators):
            mine = [r for r in rows if r["estimator"] == estimator]
            if not mine:
                continue
            jitter = (j - len(estimators) / 2) * 0.004 * (hi - lo)
            x = [r["truth"] + jitter for r in mine]
            y = [r["value"] for r in mine]
            err = [[max(0.0, r["value"] - (r["ci_low"] if r["ci_low"] is not None
                                           else r["value"])) for r in mine],
                   [max(0.0, (r["ci_high"] if r["ci_high"] is not None else r["value"])
                        - r["value"]) for r in mine]]
            hollow = [r for r in mine if "unsupported_actions" in r["flags"]]
            ax.errorbar(x, y, yerr=err, fmt="o", ms=4, color=colors[estimator], capsize=2,
                        lw=0.8, label=estimator)
            if hollow:
                ax.scatter([r["truth"] + jitter for r in hollow], [r["value"] for r in hollow],
                           s=90, facecolors="none", edgecolors="red", lw=1.2)
        ax.set_title(f"{dataset} (red ring: estimate lacks support)" + (
            f"\n{outside} estimate(s) outside the return range not shown" if outside else ""),
            fontsize=10)
        ax.set_xlabel(truth_label)
        ax.set_ylabel("estimate (95% bootstrap interval)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": "tracerl"})
    return path
