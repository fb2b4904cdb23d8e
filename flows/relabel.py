"""relabel: rewards recomputed by the versioned verifiers, weighted as params.yaml says."""

from __future__ import annotations

import orjson
from prefect import flow

from flows import _publish as publish
from flows._stage import identify, namer, record_provenance, stage_params, write_metrics
from tasks.relabel import relabel_steps
from tracerl.config.schema import Params
from tracerl.data.relabel import provenance
from tracerl.data.verifiers import require_varied_returns
from tracerl.io.fileio import write_json


class NotValidated(RuntimeError):
    pass


def require_validated(config: Params, names: list[str]) -> None:
    """Relabel only step tables the validate stage passed (dvc.yaml makes its verdict a
    dep; this check also holds when the stage is run by hand)."""
    verdict_file = config.paths.reports / "validate" / "summary.json"
    try:
        verdict = orjson.loads(verdict_file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise NotValidated(f"{verdict_file}: no validation verdict ({exc}); "
                           "run the validate stage first") from None
    bad = [n for n in names if not verdict.get(n, {}).get("success")]
    if bad:
        raise NotValidated(f"{verdict_file}: step tables of {bad} did not pass validation; "
                           "see reports/validate/datasets/<dataset>/report.html")


@flow(name="relabel", flow_run_name=namer("relabel"))
def relabel_flow() -> dict[str, dict]:
    config = stage_params()
    names = config.dataset_names()
    identify("relabel", config, names)
    require_validated(config, names)
    settings = config.relabel
    verifiers, weights = list(settings.verifiers), dict(settings.weights)
    results = {name: relabel_steps(config.paths.ingested / name / "steps",
                                   config.paths.labelled / name / "steps",
                                   verifiers, weights, settings.filters)
               for name in names}
    require_varied_returns(results, verifiers)  # constant rewards: stop, saying what to add
    write_json(config.paths.reports / "relabel" / "summary.json",
               {"datasets": results, "verifiers": provenance(verifiers), "weights": weights})
    write_metrics(config, "relabel", {
        name: {"rows": r["rows"], "rows_reward_changed": r["rows_reward_changed"],
               "mean_reward": r["mean_reward"], "episodes": r["episodes_by_filter"]}
        for name, r in results.items()})
    record_provenance(config, "relabel")
    rows = [[name, r["rows"], r["rows_reward_changed"], f"{r['mean_reward']:.4f}",
             *(r["episodes_by_filter"][m] for m in ("all", "process", "outcome",
                                                    "process+outcome"))]
            for name, r in results.items()]
    publish.wrote("relabel", [config.paths.labelled / name for name in results])
    publish.summary("relabel", publish.PASS,
                 ["dataset", "rows", "reward changed", "mean reward", "episodes",
                  "process-filtered", "outcome-filtered", "both"], rows,
                 notes=["verifiers: " + ", ".join(verifiers),
                        *(f"{name}, {vid}: {d['summary']}" for name, r in results.items()
                          for vid, d in r["verifier_diagnostics"].items())],
                 description="Rewards relabelled by versioned verifiers; SWiRL filter sizes")
    return results
