"""ope: every candidate policy through every evaluation layer, judged against the truth."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, path, publish, stage_params
from tasks.ope import evaluate_candidates
from tracerl.fileio import write_json, write_text
from tracerl.ope.report import markdown, plot
from tracerl.ope.selection import select


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
    plot(records, out / "estimate_vs_truth.png")
    publish("ope-estimates", "# Layered off-policy evaluation\n\n" + table,
            "Every candidate through replay, verifier, critic and importance sampling; "
            f"plot: {out / 'estimate_vs_truth.png'}")
    return {"records": len(records), "selection": selection}
