"""train (kind: features): one encoding for every dataset, the feature-based learners on
each, and behaviour cloning's accuracy on tasks it never saw (grouped k-fold)."""

from __future__ import annotations

from prefect import flow

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
from tasks.fa import fit_encoder, train_features
from tracerl.config.params import get
from tracerl.io.fileio import write_json


def stage_gamma(params: dict) -> float:
    gamma = get(params, "gamma")
    if gamma is None:
        raise ValueError("the feature-based stages need `gamma` at the top of params")
    return float(gamma)


@flow(name="train", flow_run_name=namer("train"))
def fa_train_flow() -> dict[str, dict]:
    params = stage_params()
    train = dict(get(params, "train"))
    names = train.get("datasets") or datasets(params)
    identify("train", params, names)
    gamma = stage_gamma(params)
    labelled, models = path(params, "labelled"), path(params, "models")
    spec = fit_encoder(train["encoder"], dict(train.get("encoder_params") or {}),
                       [labelled / n / "steps" for n in datasets(params)], models,
                       int(train.get("n_bits", 12)), train.get("templates"))
    results = {n: train_features(n, labelled / n / "steps", models, spec, train, gamma)
               for n in names}
    write_json(path(params, "reports") / "train" / "summary.json", results)
    metrics = {}
    for n, r in results.items():
        m = {"rows": r["rows"], "episodes": r["episodes"]}
        if "bc_heldout" in r:
            m["bc_heldout_accuracy"] = r["bc_heldout"]["accuracy"]
            m["bc_heldout_majority_baseline"] = r["bc_heldout"]["majority_baseline"]
        metrics[n] = m
    write_metrics(params, "train", metrics)
    record_provenance(params, "train")
    publish.wrote("train", [models / n for n in names])
    rows = []
    for n, r in results.items():
        h = r.get("bc_heldout") or {}
        rows.append([n, r["episodes"], r["rows"], ", ".join(r["policies"]),
                     "–" if not h else f"{h['accuracy']:.3f}",
                     "–" if not h else f"{h['majority_baseline']:.3f}",
                     "–" if not h else f"{h['n_folds']} folds over {h['n_groups']} "
                                       f"{h['group_by']} values", r["data_hash"][:12]])
    publish.summary("train", publish.PASS, ["dataset", "episodes", "steps", "policies",
                                      "BC held-out accuracy", "majority baseline",
                                      "held-out split", "data hash"], rows,
                 notes=["held-out accuracy: BC fitted without the test fold's tasks, its most "
                        "probable action against the logged one; a test fold shares no task "
                        "with its training folds"],
                 description="Feature-based policies trained (saved under models/)")
    return results
