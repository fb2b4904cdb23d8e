"""report (kind: features): one self-contained HTML report of a feature-based pipeline."""

from __future__ import annotations

from prefect import flow

from flows import _publish as publish
from flows._stage import datasets, identify, namer, path, record_provenance, stage_params
from tracerl.config.params import get
from tracerl.io.fileio import write_text
from tracerl.report.compare import compare_section
from tracerl.report.features import build_features_report


@flow(name="report", flow_run_name=namer("report"))
def fa_report_flow() -> str:
    params = stage_params()
    identify("report", params, datasets(params))
    out = path(params, "reports") / "report" / "index.html"
    compared = compare_section(path(params, "reports"))  # first screen, when compare ran
    html = build_features_report(path(params, "reports"),
                                 title=str(get(params, "report.title") or
                                           "tracerl pipeline report"),
                                 first=[compared] if compared else [])
    write_text(out, html)
    record_provenance(params, "report")
    publish.wrote("report", [out])
    publish.summary("report", publish.PASS, ["report", "bytes", "sections"],
                 [[out, len(html.encode()), html.count("<section ")]],
                 links={"html report": out},
                 description="The run's self-contained HTML report (no network needed)")
    return str(out)
