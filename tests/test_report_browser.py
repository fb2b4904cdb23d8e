"""Each pipeline's HTML report as a browser shows it (headless Chromium): the coverage
tables keyed by states that hold `|` (`mul|1|1|-`, `intent=refund|email|verified`, the
dialogue featurizer's parts) have one cell per header in every row, the state whole in the
first; every number sits under its own header.

The reports are built by each pipeline's own builder (params `report.kind`) from coverage
markdown the coverage code writes on that pipeline's relabelled logs: the fixtures' simulated logs
(small), and the shared tau2-bench sample (skipped when it is absent)."""

from __future__ import annotations

import copy
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

PIPELINES = {"calculator": ROOT / "params.yaml",
             "support_desk": ROOT / "pipelines/support_desk/params.yaml",
             "tau2": ROOT / "pipelines/tau2/params.yaml"}
SMALL = {"calculator": {"calculator": {"episodes": 300}},
         "support_desk": {"support_desk": {"episodes": 300}}}


class _Tables(HTMLParser):
    """Each <table> of a page as rows of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _merge(base: dict, changes: dict) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _report(pipeline: str, tmp: Path) -> tuple[Path, set[str]]:
    """The pipeline's report over coverage of its own logs; the state keys written."""
    from tracerl.config.fixtures import fixture_of
    from tracerl.config.learning import Ope
    from tracerl.config.params import load_params
    from tracerl.config.schema import validate_params
    from tracerl.data.coverage import coverage_report
    from tracerl.data.ingest import ingest
    from tracerl.data.relabel import relabel
    from tracerl.io.fileio import read_table
    from tracerl.report.learning import build_report
    from tracerl.rl.encoding import policy_view

    params = copy.deepcopy(load_params(PIPELINES[pipeline]))
    _merge(params, SMALL.get(pipeline, {}))
    config = validate_params(params)
    reports = tmp / "reports"
    (reports / "coverage").mkdir(parents=True)
    keys: set[str] = set()
    for i, name in enumerate(config.dataset_names()):
        entry = config.dataset(name)
        fixture = fixture_of(config, name)
        if fixture is not None:
            raw = tmp / "raw" / f"{name}.jsonl"
            raw.parent.mkdir(parents=True, exist_ok=True)
            fixture.generate_logs(name, i, config, raw)
            inputs = [raw]
        else:
            inputs = [ROOT / p for p in entry.inputs]
            missing = [str(p) for p in inputs if not p.exists()]
            if missing:
                pytest.skip(f"{pipeline}: the shared sample is absent ({', '.join(missing)})")
        ingest(inputs, tmp / "ingested" / name, fmt=entry.format, max_bad_fraction=1.0,
               workers=1)
        steps = relabel(read_table(tmp / "ingested" / name / "steps"),
                        list(config.relabel.verifiers), dict(config.relabel.weights))
        report = coverage_report(policy_view(steps, config.coverage.featurizer,
                                             config.coverage.featurizer_params))
        (reports / "coverage" / f"{name}.md").write_text(report.to_markdown())
        keys |= {str(k) for k in report.state_keys.tolist()}
    page = build_report(reports, tmp / "metrics", title=config.report.title,
                        headline=(config.ope or Ope()).headline)
    out = tmp / "index.html"
    out.write_text(page)
    return out, keys


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_state_tables_have_the_right_cells_in_the_browser(tmp_path, pipeline):
    from flows._runtime.ui_check import dump_dom

    page, keys = _report(pipeline, tmp_path)
    dom = dump_dom(page.resolve().as_uri())
    coverage = dom.split('<section id="coverage">', 1)[1].split("</section>", 1)[0]
    parser = _Tables()
    parser.feed(coverage)
    state_tables = [t for t in parser.tables if t and t[0] and t[0][0] == "state"]
    assert state_tables, f"{pipeline}: no state table in the coverage section"
    piped = 0
    for table in parser.tables:
        width = len(table[0])
        for row in table[1:]:
            assert len(row) == width, (pipeline, table[0], row)
    for table in state_tables:
        for row in table[1:]:
            assert row[0] in keys, (pipeline, row)  # the whole key, `|` and all
            piped += "|" in row[0]
            # N(s): a count, under its header
            assert row[1].replace(",", "").isdigit(), (pipeline, table[0], row)
    assert piped, f"{pipeline}: no state key with `|` was shown"
