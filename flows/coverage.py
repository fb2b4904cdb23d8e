"""coverage: which states and actions the logs support, per dataset."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, path, publish, record_provenance, stage_params, write_metrics
from tasks.coverage import coverage_of, cross_agent_coverage_of
from tracerl.params import get


@flow(name="coverage")
def coverage_flow() -> dict[str, dict]:
    params = stage_params()
    out = path(params, "reports") / "coverage"
    results = {}
    featurizer = get(params, "coverage.featurizer")
    featurizer_params = get(params, "coverage.featurizer_params") or {}
    labelled = path(params, "labelled")
    for name in datasets(params):
        results[name] = coverage_of(labelled / name / "steps", featurizer, out, name,
                                    path(params, "plots") / "coverage" / f"{name}.json",
                                    featurizer_params)
        publish(f"coverage-{name}", f"# Coverage: {name}\n\n{results[name]['markdown']}",
                f"N(s), N(s, a) and never-logged actions of {name} (plot: {out / name}.png)")
    metrics = {name: r["summary"] for name, r in results.items()}
    # Cross-agent: which of one agent's (state, action) pairs another agent's logs contain.
    for pair in get(params, "coverage.cross_agent") or []:
        target, reference = pair["target"], pair["reference"]
        cross = cross_agent_coverage_of(labelled / target / "steps",
                                        labelled / reference / "steps", featurizer,
                                        featurizer_params, out, target, reference)
        results[f"{target} in {reference}"] = cross
        metrics[f"{target}_in_{reference}"] = {
            k: v for k, v in cross["overall"].items()
            if isinstance(v, int | float) and not isinstance(v, bool)}
        publish(f"cross-agent-{target}-in-{reference}",
                f"# Cross-agent coverage\n\n{cross['markdown']}",
                f"Share of {target}'s (state, action) pairs found in {reference}'s logs")
    write_metrics(params, "coverage", metrics)
    record_provenance(params, "coverage")
    return results
