"""coverage: which states and actions the logs support, per dataset."""

from __future__ import annotations

from prefect import flow

from flows import desk
from flows.common import datasets, path, record_provenance, stage_params, write_metrics
from flows.identity import identify, namer
from tasks.coverage import coverage_of
from tracerl.params import get


@flow(name="coverage", flow_run_name=namer("coverage"))
def coverage_flow() -> dict[str, dict]:
    params = stage_params()
    identify("coverage", params, datasets(params))
    out = path(params, "reports") / "coverage"
    results = {}
    for name in datasets(params):
        results[name] = coverage_of(path(params, "labelled") / name / "steps",
                                    get(params, "coverage.featurizer"), out, name,
                                    path(params, "plots") / "coverage" / f"{name}.json")
        desk.detail(f"coverage-{name}", f"Coverage: {name}", [], [],
                    f"N(s), N(s, a) and never-logged actions of {name}",
                    footer=results[name]["markdown"])
        desk.image(f"coverage-{name}-plot", out / f"{name}.png", f"Coverage: {name}",
                   f"Logged counts per (state, action) of {name}")
    write_metrics(params, "coverage", {name: r["summary"] for name, r in results.items()})
    keys = ("n_transitions", "n_episodes", "n_states", "n_never_logged_pairs")
    never = [f"{k}: {r['summary']['n_never_logged_pairs']} valid (state, action) pairs never "
             "logged" for k, r in results.items() if r["summary"]["n_never_logged_pairs"]]
    desk.summary("coverage", "PASS (gaps noted)" if never else desk.PASS,
                 ["dataset", *keys], [[k, *(r["summary"][c] for c in keys)]
                                      for k, r in results.items()], notes=never,
                 description="How much of the state-action space the logs support")
    record_provenance(params, "coverage")
    return results
