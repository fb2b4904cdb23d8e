"""ope: every candidate policy through every evaluation layer, judged against the truth."""

from __future__ import annotations

from prefect import flow, unmapped

from flows import _publish as publish
from flows._stage import (
    datasets,
    identify,
    namer,
    path,
    record_provenance,
    stage_params,
    write_metrics,
)
from flows.desk_ope import publish_ope
from tasks.ope import (
    boot_chunks_of,
    bootstrap_chunk,
    candidates_of,
    evaluate_candidate,
    finish_candidate,
    prepare_candidates,
)
from tracerl.io.fileio import write_json, write_text
from tracerl.io.staging import staged
from tracerl.ope.report import markdown, plot
from tracerl.ope.selection import select


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


@flow(name="ope", flow_run_name=namer("ope"))
def ope_flow() -> dict:
    params = stage_params()
    identify("ope", params, datasets(params))
    names = datasets(params)
    prepared = prepare_candidates.map([path(params, "labelled") / name / "steps"
                                       for name in names],
                                      [path(params, "models") / name for name in names], names,
                                      unmapped(params))
    runs = [(name, data, candidate) for name, data in zip(names, prepared, strict=True)
            for candidate in candidates_of(params)]  # dataset then candidate order
    # Per (dataset, candidate): one task for the layers, one per chunk of the critic's
    # bootstrap, one joining them in chunk order. The prepared data stays on the runner's
    # side (a Dask worker's result goes to the workers that need it, never through here).
    started = [evaluate_candidate.submit(data, candidate, name) for name, data, candidate in runs]
    chunks = [[bootstrap_chunk.submit(data, start, i, candidate, name)
               for i in range(boot_chunks_of(params))]
              for (name, data, candidate), start in zip(runs, started, strict=True)]
    finished = [finish_candidate.submit(start, values, candidate, name)
                for (name, _, candidate), start, values in zip(runs, started, chunks, strict=True)]
    records = [r for f in finished for r in f.result()]
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
    publish.wrote("ope", [out / "estimates.json", out / "selection.json", out / "estimates.md",
                       out / "estimate_vs_truth.png"])
    publish_ope(records, selection, headline, min_support, table,
                out / "estimate_vs_truth.png", datasets(params))
    return {"records": len(records), "selection": selection}
