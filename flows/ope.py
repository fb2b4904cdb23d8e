"""ope: every candidate policy through every evaluation layer, judged against the truth."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, path, publish, record_provenance, stage_params, write_metrics
from tasks.ope import evaluate_candidates
from tracerl.fileio import write_json, write_text
from tracerl.ope.report import markdown, plot
from tracerl.ope.selection import select
from tracerl.staging import staged


def headline_metrics(records: list[dict], headline: str) -> dict:
    """Per dataset and candidate: the headline estimator's value, its error against the
    truth (`minus_truth`, where a simulator gives one) and its support. Missing numbers
    are left out."""
    out: dict[str, dict] = {}
    for r in records:
        if f"{r['layer']}/{r['estimator']}" != headline or r["value"] is None:
            continue
        row = {"estimate": r["value"], "support": r["support"]}
        if r["truth"] is not None:
            # Not named "error": DVC reads any "error" key as a failure to load metrics.
            row["minus_truth"] = r["value"] - r["truth"]
        out.setdefault(r["dataset"], {})[r["policy"]] = {k: v for k, v in row.items()
                                                          if v is not None}
    return out


def plot_points(records: list[dict], dataset: str) -> list[dict]:
    """Estimate against truth of every return estimate of `dataset` (for `dvc plots`)."""
    return [{"candidate": r["policy"], "estimator": f"{r['layer']}/{r['estimator']}",
             "estimate": r["value"], "truth": r["truth"], "ci_low": r["ci_low"],
             "ci_high": r["ci_high"], "support": r["support"]}
            for r in records if r["dataset"] == dataset and r["metric"] == "return"
            and r["value"] is not None and r["truth"] is not None]


@flow(name="ope")
def ope_flow() -> dict:
    params = stage_params()
    records = []
    for name in datasets(params):
        records += evaluate_candidates(path(params, "labelled") / name / "steps",
                                       path(params, "models") / name, name, params)
    min_support = float(params["ope"]["min_support"])
    selection = select(records, min_support)
    out = path(params, "reports") / "ope"
    write_json(out / "estimates.json", records)
    write_json(out / "selection.json", selection)
    table = markdown(records, selection, min_support)
    write_text(out / "estimates.md", table + "\n")
    plot(records, staged(out / "estimate_vs_truth.png"))
    headline = str(params["ope"]["headline"])
    write_metrics(params, "ope", headline_metrics(records, headline))
    for name in datasets(params):
        write_json(path(params, "plots") / "ope" / f"{name}.json",
                   plot_points(records, name))
    record_provenance(params, "ope")
    publish("ope-estimates", "# Layered off-policy evaluation\n\n" + table,
            "Every candidate through replay, verifier, critic and importance sampling; "
            f"plot: {out / 'estimate_vs_truth.png'}")
    return {"records": len(records), "selection": selection}
