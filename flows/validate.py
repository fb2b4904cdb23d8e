"""validate: the Great Expectations suite over each ingested step table."""

from __future__ import annotations

from prefect import flow

from flows.common import (
    datasets,
    md_table,
    path,
    publish,
    record_provenance,
    stage_params,
    write_metrics,
)
from tasks.validate import validate_step_table
from tracerl.fileio import write_json
from tracerl.params import get


class ValidationFailed(RuntimeError):
    outputs_complete = True  # published anyway: the report says what failed


@flow(name="validate")
def validate_flow() -> dict[str, bool]:
    from tracerl.validation import write_report

    params = stage_params()
    out = path(params, "reports") / "validate"
    results = {}
    for name in datasets(params):
        report = validate_step_table(path(params, "ingested") / name / "steps",
                                     float(get(params, "validate.reward_min")),
                                     float(get(params, "validate.reward_max")))
        write_report(report, out / "datasets" / name, title=f"Step table: {name}")
        results[name] = report
    write_json(out / "summary.json", {
        name: {"success": r.success, "rows": r.rows, "episodes": r.episodes,
               "expectations": len(r.results), "failed": len(r.failures)}
        for name, r in results.items()})
    write_metrics(params, "validate", {
        name: {"rows": r.rows, "episodes": r.episodes, "expectations": len(r.results),
               "failed": len(r.failures)} for name, r in results.items()})
    record_provenance(params, "validate")
    publish("validate-summary", md_table(
        ["dataset", "rows", "episodes", "expectations", "failed", "status"],
        [[k, r.rows, r.episodes, len(r.results), len(r.failures),
          "pass" if r.success else "FAIL"] for k, r in results.items()]),
        "Great Expectations suite over the step tables (HTML under reports/validate)")
    failed = [f"{k}: {r.failure_message()}" for k, r in results.items() if not r.success]
    if failed:
        raise ValidationFailed("\n".join(failed))
    return {k: r.success for k, r in results.items()}
