"""train: one encoding for every dataset, then the learners of `train.learners` on each
(and behaviour cloning's accuracy on groups it never saw, when `train.heldout` asks)."""

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
from tasks.train import fit_encoder, train_policies
from tracerl.io.fileio import write_json


def train_metrics(results: dict[str, dict]) -> dict[str, dict]:
    """metrics/<pipeline>/train.json: steps and episodes per dataset, per one-hot learner
    the states it saw and those with no logged valid action, BC's held-out accuracy."""
    metrics = {}
    for name, r in results.items():
        m = {"rows": r["rows"], "episodes": r["episodes"]}
        for learner, p in r["policies"].items():
            if "states" in p:
                m[learner] = {"states": p["states"],
                              "unsupported_states": p["unsupported_states"]}
        if "bc_heldout" in r:
            m["bc_heldout_accuracy"] = r["bc_heldout"]["accuracy"]
            m["bc_heldout_majority_baseline"] = r["bc_heldout"]["majority_baseline"]
        metrics[name] = m
    return metrics


@flow(name="train", flow_run_name=namer("train"))
def train_flow() -> dict[str, dict]:
    params = stage_params()
    train = params.train
    names = train.datasets or datasets(params)
    identify("train", params, names)
    labelled, models = path(params, "labelled"), path(params, "models")
    spec = fit_encoder(train, [labelled / n / "steps" for n in datasets(params)], models)
    filters = params.relabel.filters if params.relabel else None
    results = {n: train_policies(n, labelled / n / "steps", models, spec, train,
                                 params.gamma, filters=filters, export=params.export,
                                 ope=params.ope) for n in names}
    write_json(path(params, "reports") / "train" / "summary.json", results)
    write_metrics(params, "train", train_metrics(results))
    record_provenance(params, "train")
    publish.wrote("train", [models / n for n in names])
    rows = []
    for n, r in results.items():
        h = r.get("bc_heldout") or {}
        rows.append([n, r["episodes"], r["rows"], ", ".join(r["policies"]),
                     "–" if not h else f"{h['accuracy']:.3f}",
                     "–" if not h else f"{h['majority_baseline']:.3f}", r["data_hash"][:12]])
    notes = [f"{n} {learner}: {p['unsupported_states']} seen state(s) with no logged valid "
             "action" for n, r in results.items() for learner, p in r["policies"].items()
             if p.get("unsupported_states")]
    if any("bc_heldout" in r for r in results.values()):
        notes.append("held-out accuracy: BC fitted without the test fold's groups, its most "
                     "probable action against the logged one; a test fold shares no group "
                     "with its training folds")
    publish.summary("train", publish.PASS, ["dataset", "episodes", "steps", "policies",
                                            "BC held-out accuracy", "majority baseline",
                                            "data hash"], rows, notes=notes,
                    description="Policies trained (saved under the models path)")
    return results
