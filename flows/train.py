"""train: behaviour cloning, naive FQI and support-constrained FQI on each dataset."""

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
from tasks.learning import train_policies
from tracerl.config.params import get
from tracerl.io.fileio import write_json


@flow(name="train", flow_run_name=namer("train"))
def train_flow() -> dict[str, dict]:
    params = stage_params()
    identify("train", params, datasets(params))
    results = {name: train_policies(path(params, "labelled") / name / "steps",
                                    get(params, "coverage.featurizer"),
                                    path(params, "models") / name, dict(get(params, "train")),
                                    float(get(params, "gamma")))
               for name in datasets(params)}
    write_json(path(params, "reports") / "train" / "summary.json", results)
    write_metrics(params, "train", {
        name: {"rows": r["rows"], **{policy: {"states": p["states"],
                                              "unsupported_states": p["unsupported_states"]}
                                     for policy, p in r["policies"].items()}}
        for name, r in results.items()})
    record_provenance(params, "train")
    rows = [[name, policy, r["rows"], p["states"], p["unsupported_states"], r["data_hash"][:12]]
            for name, r in results.items() for policy, p in r["policies"].items()]
    publish.wrote("train", [path(params, "models") / name for name in results])
    publish.summary("train", publish.PASS, ["dataset", "policy", "training rows", "states",
                                      "states with no logged valid action", "data hash"],
                 rows, description="Policies trained (saved under models/)")
    return results
