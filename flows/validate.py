"""validate: the Great Expectations suite over each ingested step table."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, unmapped

from flows import _publish as publish
from flows._stage import (
    identify,
    namer,
    params_file,
    record_provenance,
    stage_params,
    write_metrics,
)
from tasks.validate import validate_step_table
from tracerl.config.schema import Params
from tracerl.data.gx_project import stale
from tracerl.io.fileio import write_json


class ValidationFailed(RuntimeError):
    outputs_complete = True  # published anyway: the report says what failed


class SuiteOutOfDate(RuntimeError):
    pass


def require_current_suite(config: Params, names: list[str],
                          gx_dir: Path | None = None) -> None:
    """The kept suite and checkpoints (the folder `paths.gx` names) must be what params
    generate: a changed expectation is reviewed as a diff of that folder, never applied
    silently."""
    gx_dir = Path(gx_dir or config.paths.gx)
    out = stale(gx_dir, config.validate_.reward_min, config.validate_.reward_max, names)
    if out:
        file = params_file().as_posix()
        raise SuiteOutOfDate(f"{gx_dir.as_posix()}/ does not match params ({file}): "
                             f"{', '.join(out)}; run `python -m tracerl gx generate "
                             f"--params {file}` and commit the diff")


@flow(name="validate", flow_run_name=namer("validate"))
def validate_flow() -> dict[str, bool]:
    from tracerl.data.validation import TOOL_OFFERED, write_report

    config = stage_params()
    names = config.dataset_names()
    identify("validate", config, names)
    out = config.paths.reports / "validate"
    gx_dir = config.paths.gx  # the GX project folder of this pipeline
    require_current_suite(config, names, gx_dir)
    # Per-dataset rules (datasets.<name>.validate) over the validate section.
    rules = [config.validate_rules(name) for name in names]
    futures = validate_step_table.map([config.paths.ingested / name / "steps"
                                       for name in names],
                                      [r.reward_min for r in rules],
                                      [r.reward_max for r in rules],
                                      [r.tools for r in rules],
                                      [r.hallucinated_tools for r in rules],
                                      unmapped(gx_dir),
                                      [out / "data_docs" / name for name in names])
    results = {name: f.result() for name, f in zip(names, futures, strict=True)}
    for name, report in results.items():
        write_report(report, out / "datasets" / name, title=f"Step table: {name}")
        get_run_logger().info("validate %s: GX checkpoint %s_checkpoint %s; Data Docs %s",
                              name, name, "passed" if report.success else "FAILED",
                              out / "data_docs" / name / "index.html")
    write_json(out / "summary.json", {
        name: {"success": r.success, "rows": r.rows, "episodes": r.episodes,
               "expectations": len(r.results), "failed": len(r.failures),
               "calls_to_tools_not_offered": r.unexpected(TOOL_OFFERED)}
        for name, r in results.items()})
    write_metrics(config, "validate", {
        name: {"rows": r.rows, "episodes": r.episodes, "expectations": len(r.results),
               "failed": len(r.failures),
               "calls_to_tools_not_offered": r.unexpected(TOOL_OFFERED)}
        for name, r in results.items()})
    record_provenance(config, "validate")
    failed = [f"{k}: {r.failure_message()}" for k, r in results.items() if not r.success]
    publish.summary("validate", publish.FAIL if failed else publish.PASS,
                 ["dataset", "rows", "episodes", "expectations", "failed",
                  "calls to tools not offered", "status"],
                 [[k, r.rows, r.episodes, len(r.results), len(r.failures),
                   r.unexpected(TOOL_OFFERED), "pass" if r.success else "FAIL"]
                  for k, r in results.items()],
                 notes=failed,
                 links={**{f"{k} report": out / "datasets" / k / "report.html"
                           for k in results},
                        **{f"{k} data docs": out / "data_docs" / k / "index.html"
                           for k in results}},
                 description="Great Expectations suite over the step tables")
    if failed:
        raise ValidationFailed("\n".join(failed))
    return {k: r.success for k, r in results.items()}
