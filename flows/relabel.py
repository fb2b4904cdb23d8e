"""relabel: rewards recomputed by the versioned verifiers, weighted as params.yaml says."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, md_table, path, publish, stage_params
from tasks.learning import relabel_steps
from tracerl.fileio import write_json
from tracerl.params import get
from tracerl.relabel import provenance


@flow(name="relabel")
def relabel_flow() -> dict[str, dict]:
    params = stage_params()
    verifiers = list(get(params, "relabel.verifiers"))
    weights = {k: float(v) for k, v in get(params, "relabel.weights").items()}
    filters = get(params, "relabel.filters") or {}
    results = {name: relabel_steps(path(params, "ingested") / name / "steps",
                                   path(params, "labelled") / name / "steps",
                                   verifiers, weights, filters)
               for name in datasets(params)}
    write_json(path(params, "reports") / "relabel" / "summary.json",
               {"datasets": results, "verifiers": provenance(verifiers), "weights": weights})
    rows = [[name, r["rows"], r["rows_reward_changed"], f"{r['mean_reward']:.4f}",
             *(r["episodes_by_filter"][m] for m in ("all", "process", "outcome",
                                                    "process+outcome"))]
            for name, r in results.items()]
    publish("relabel-summary", md_table(
        ["dataset", "rows", "reward changed", "mean reward", "episodes", "process-filtered",
         "outcome-filtered", "both"], rows) + "\n\nverifiers: " + ", ".join(verifiers)
        + "".join(f"\n\n{name}, {vid}: {d['summary']}" for name, r in results.items()
                  for vid, d in r["verifier_diagnostics"].items()),
        "Rewards relabelled by versioned verifiers; SWiRL-style filter sizes")
    return results
