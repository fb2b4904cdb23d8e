"""report: one self-contained HTML report of the run (every table and plot, inlined)."""

from __future__ import annotations

from prefect import flow

from flows import _publish as publish
from flows._stage import datasets, identify, namer, path, record_provenance, stage_params
from tracerl.config.learning import Ope
from tracerl.io.fileio import write_text
from tracerl.report.compare import compare_section
from tracerl.report.learning import build_report


@flow(name="report", flow_run_name=namer("report"))
def report_flow() -> str:
    params = stage_params()
    identify("report", params, datasets(params))
    reports = path(params, "reports")
    out = reports / "report" / "index.html"
    compared = compare_section(reports)  # first screen, when the compare stage ran
    page = build_report(reports, path(params, "metrics"),
                        title=params.report.title,
                        headline=(params.ope or Ope()).headline,
                        first=[compared] if compared else [])
    write_text(out, page)
    record_provenance(params, "report")
    publish.wrote("report", [out])
    publish.summary("report", publish.PASS, ["report", "bytes", "sections"],
                    [[out, len(page.encode()), page.count("<section ")]],
                    links={"html report": out},
                    description="The run's self-contained HTML report (no network needed)")
    return str(out)
