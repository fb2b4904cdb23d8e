"""report: one self-contained HTML report of the run (every table and plot, inlined)."""

from __future__ import annotations

from prefect import flow

from flows import desk
from flows.common import datasets, path, record_provenance, stage_params
from flows.identity import identify, namer
from tracerl.fileio import write_text
from tracerl.params import get
from tracerl.report_html import build_report


@flow(name="report", flow_run_name=namer("report"))
def report_flow() -> str:
    params = stage_params()
    identify("report", params, datasets(params))
    reports = path(params, "reports")
    out = reports / "report" / "index.html"
    page = build_report(reports, path(params, "metrics"),
                        headline=str(get(params, "ope.headline", "critic/fqe")))
    write_text(out, page)
    record_provenance(params, "report")
    desk.wrote("report", [out])
    desk.summary("report", desk.PASS, ["report", "bytes", "sections"],
                 [[out, len(page.encode()), page.count("<section ")]],
                 links={"html report": out},
                 description="The run's self-contained HTML report (no network needed)")
    return str(out)
