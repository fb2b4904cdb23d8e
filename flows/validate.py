"""validate: the Great Expectations suite over each ingested step table."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, unmapped

from flows import desk
from flows.common import datasets, path, record_provenance, stage_params, write_metrics
from flows.gx import futures_done, require_current_suite
from flows.identity import identify, namer
from tasks.validate import gx_data_docs, validate_step_table
from tracerl.fileio import write_json
from tracerl.params import get


class ValidationFailed(RuntimeError):
    pass


@flow(name="validate", flow_run_name=namer("validate"))
def validate_flow() -> dict[str, bool]:
    from tracerl.validation import write_report

    params = stage_params()
    identify("validate", params, datasets(params))
    out = path(params, "reports") / "validate"
    names = datasets(params)
    require_current_suite(params, names)
    futures = validate_step_table.map([path(params, "ingested") / name / "steps"
                                       for name in names],
                                      unmapped(float(get(params, "validate.reward_min"))),
                                      unmapped(float(get(params, "validate.reward_max"))))
    results = {name: f.result() for name, f in zip(names, futures, strict=True)}
    for name, report in results.items():
        write_report(report, out / "datasets" / name, title=f"Step table: {name}")
    docs = gx_data_docs.map([path(params, "ingested") / name / "steps" for name in names],
                            unmapped(Path("gx")), names,
                            [out / "data_docs" / name for name in names])
    for name, f in zip(names, futures_done(docs), strict=True):
        get_run_logger().info("validate %s: GX checkpoint %s_checkpoint %s; Data Docs %s",
                              name, name, "passed" if f else "FAILED",
                              out / "data_docs" / name / "index.html")
    write_json(out / "summary.json", {
        name: {"success": r.success, "rows": r.rows, "episodes": r.episodes,
               "expectations": len(r.results), "failed": len(r.failures)}
        for name, r in results.items()})
    write_metrics(params, "validate", {
        name: {"rows": r.rows, "episodes": r.episodes, "expectations": len(r.results),
               "failed": len(r.failures)} for name, r in results.items()})
    record_provenance(params, "validate")
    failed = [f"{k}: {r.failure_message()}" for k, r in results.items() if not r.success]
    desk.summary("validate", desk.FAIL if failed else desk.PASS,
                 ["dataset", "rows", "episodes", "expectations", "failed", "status"],
                 [[k, r.rows, r.episodes, len(r.results), len(r.failures),
                   "pass" if r.success else "FAIL"] for k, r in results.items()],
                 notes=failed,
                 links={**{f"{k} report": out / "datasets" / k / "report.html"
                           for k in results},
                        **{f"{k} data docs": out / "data_docs" / k / "index.html"
                           for k in results}},
                 description="Great Expectations suite over the step tables")
    if failed:
        raise ValidationFailed("\n".join(failed))
    return {k: r.success for k, r in results.items()}
