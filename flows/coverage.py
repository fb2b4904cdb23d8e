"""coverage: which states and actions the logs support, per dataset."""

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
from tasks.coverage import coverage_of, cross_agent_coverage_of


@flow(name="coverage", flow_run_name=namer("coverage"))
def coverage_flow() -> dict[str, dict]:
    params = stage_params()
    identify("coverage", params, datasets(params))
    out = path(params, "reports") / "coverage"
    results = {}
    featurizer = params.coverage.featurizer
    featurizer_params = params.coverage.featurizer_params
    labelled = path(params, "labelled")
    for name in datasets(params):
        results[name] = coverage_of(labelled / name / "steps", featurizer, out, name,
                                    path(params, "plots") / "coverage" / f"{name}.json",
                                    featurizer_params)
        publish.detail(f"coverage-{name}", f"Coverage: {name}", [], [],
                    f"N(s), N(s, a) and never-logged actions of {name}",
                    footer=results[name]["markdown"])
        publish.image(f"coverage-{name}-plot", out / f"{name}.png", f"Coverage: {name}",
                   f"Logged counts per (state, action) of {name}")
    per_dataset = dict(results)
    metrics = {name: r["summary"] for name, r in per_dataset.items()}
    # Cross-agent: which of one agent's (state, action) pairs another agent's logs contain.
    for pair in params.coverage.cross_agent:
        target, reference = pair.target, pair.reference
        cross = cross_agent_coverage_of(labelled / target / "steps",
                                        labelled / reference / "steps", featurizer,
                                        featurizer_params, out, target, reference)
        results[f"{target} in {reference}"] = cross
        metrics[f"{target}_in_{reference}"] = {
            k: v for k, v in cross["overall"].items()
            if isinstance(v, int | float) and not isinstance(v, bool)}
        publish.detail(f"cross-agent-{target}-in-{reference}",
                    f"Cross-agent coverage: {target} in {reference}", [], [],
                    f"Share of {target}'s (state, action) pairs found in {reference}'s logs",
                    footer=cross["markdown"])
    write_metrics(params, "coverage", metrics)
    keys = ("n_transitions", "n_episodes", "n_states", "n_never_logged_pairs")
    never = [f"{k}: {r['summary']['n_never_logged_pairs']} valid (state, action) pairs never "
             "logged" for k, r in per_dataset.items() if r["summary"]["n_never_logged_pairs"]]
    publish.summary("coverage", "PASS (gaps noted)" if never else publish.PASS,
                 ["dataset", *keys], [[k, *(r["summary"][c] for c in keys)]
                                      for k, r in per_dataset.items()], notes=never,
                 description="How much of the state-action space the logs support")
    record_provenance(params, "coverage")
    return results
