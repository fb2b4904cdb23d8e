"""validate: the Great Expectations suite over each ingested step table."""

from __future__ import annotations

from prefect import flow

from flows.common import (
    dataset_settings,
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


class ValidationFailed(RuntimeError):
    outputs_complete = True  # published anyway: the report says what failed


@flow(name="validate")
def validate_flow() -> dict[str, bool]:
    from tracerl.validation import TOOL_OFFERED, write_report

    params = stage_params()
    out = path(params, "reports") / "validate"
    results = {}
    for name in datasets(params):
        rules = dataset_settings(params, name, "validate")  # per-dataset rules over defaults
        report = validate_step_table(path(params, "ingested") / name / "steps",
                                     float(rules["reward_min"]), float(rules["reward_max"]),
                                     rules.get("tools"),
                                     rules.get("hallucinated_tools", "fail"))
        write_report(report, out / "datasets" / name, title=f"Step table: {name}")
        results[name] = report
    write_json(out / "summary.json", {
        name: {"success": r.success, "rows": r.rows, "episodes": r.episodes,
               "expectations": len(r.results), "failed": len(r.failures),
               "calls_to_tools_not_offered": r.unexpected(TOOL_OFFERED)}
        for name, r in results.items()})
    write_metrics(params, "validate", {
        name: {"rows": r.rows, "episodes": r.episodes, "expectations": len(r.results),
               "failed": len(r.failures),
               "calls_to_tools_not_offered": r.unexpected(TOOL_OFFERED)}
        for name, r in results.items()})
    record_provenance(params, "validate")
    publish("validate-summary", md_table(
        ["dataset", "rows", "episodes", "expectations", "failed",
         "calls to tools not offered", "status"],
        [[k, r.rows, r.episodes, len(r.results), len(r.failures), r.unexpected(TOOL_OFFERED),
          "pass" if r.success else "FAIL"] for k, r in results.items()]),
        "Great Expectations suite over the step tables (HTML under reports/validate)")
    failed = [f"{k}: {r.failure_message()}" for k, r in results.items() if not r.success]
    if failed:
        raise ValidationFailed("\n".join(failed))
    return {k: r.success for k, r in results.items()}
