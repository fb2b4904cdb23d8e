"""coverage: which states and actions the logs support, per dataset."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, path, publish, record_provenance, stage_params, write_metrics
from tasks.coverage import coverage_of
from tracerl.params import get


@flow(name="coverage")
def coverage_flow() -> dict[str, dict]:
    params = stage_params()
    out = path(params, "reports") / "coverage"
    results = {}
    for name in datasets(params):
        results[name] = coverage_of(path(params, "labelled") / name / "steps",
                                    get(params, "coverage.featurizer"), out, name,
                                    path(params, "plots") / "coverage" / f"{name}.json")
        publish(f"coverage-{name}", f"# Coverage: {name}\n\n{results[name]['markdown']}",
                f"N(s), N(s, a) and never-logged actions of {name} (plot: {out / name}.png)")
    write_metrics(params, "coverage", {name: r["summary"] for name, r in results.items()})
    record_provenance(params, "coverage")
    return results
