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


# The answer above the fold: at 1400×1000 (a laptop's browser window) the last answer line
# ends within the first 1000 px. A script added to a copy of the page measures where the
# answer's lines end after layout and writes it on <body>; --dump-dom reads it back.
FOLD = (1400, 1000)
_MEASURE = """<script>
const items = document.querySelectorAll('#answer li');
const last = items.length ? items[items.length - 1].getBoundingClientRect() : null;
document.body.dataset.answerBottom = last ? String(last.bottom + window.scrollY) : '';
document.body.dataset.answerLines = String(items.length);
const ranked = document.querySelectorAll('#answer li.ranking');
document.body.dataset.rankingLines = String(ranked.length);
document.body.dataset.firstRanking = String(items.length > 0 && items[0] === ranked[0]);
document.body.dataset.viewport = window.innerWidth + 'x' + window.innerHeight;
</script>"""


def _answer_layout(page: Path, tmp: Path) -> dict[str, str]:
    """Where the answer ends on the page at 1400×1000, and a screenshot of the first screen."""
    import re
    import subprocess

    from flows._runtime.ui_check import CHROMIUM_FLAGS, chromium, screenshot

    measured = tmp / f"measured-{page.parent.name}.html"
    measured.write_text(page.read_text().replace("</body>", _MEASURE + "</body>"))
    size = f"--window-size={FOLD[0]},{FOLD[1]}"
    dom = subprocess.run([chromium(), *CHROMIUM_FLAGS, size, "--dump-dom",
                          measured.resolve().as_uri()], capture_output=True, text=True,
                         timeout=90, check=True).stdout
    body = re.search(r"<body([^>]*)>", dom).group(1)
    found = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))
    shot = screenshot(page.resolve().as_uri(), tmp / f"first-screen-{page.parent.name}.png",
                      size=f"{FOLD[0]},{FOLD[1]}")
    found["screenshot"] = str(shot)
    return found


def _with_ope(pipeline: str, tmp: Path) -> Path:
    """The pipeline's report (its own data sections) with ope outputs on its datasets: one
    candidate to deploy, one dataset where nothing can be picked (the longest line)."""
    import orjson

    from tracerl.config.params import dataset_names, load_params
    from tracerl.ope.select import select
    from tracerl.report.learning import build_report

    _report(pipeline, tmp)
    names = dataset_names(load_params(PIPELINES[pipeline]))
    records, logged = [], {}
    for i, name in enumerate(names):
        for policy, value, flags in [("bc", 0.8, []), ("constrained_fqi", 0.7, []),
                                     ("naive_fqi", 0.95, ["unsupported_actions:12",
                                                          "low_support"])]:
            flags = flags if i % 2 == 0 else [*flags, "interval_unreliable"]
            records.append({"dataset": name, "policy": policy, "trained_on": name,
                            "layer": "critic", "estimator": "fqe", "metric": "return",
                            "value": value, "ci_low": value - 0.05, "ci_high": value + 0.05,
                            "support": 0.5 if flags else 1.0, "flags": flags, "truth": None,
                            "truth_se": None, "ess": None, "n": 300})
        logged[name] = {"value": 0.4, "ci_low": 0.35, "ci_high": 0.45, "n": 300}
    ope = tmp / "reports" / "ope"
    ope.mkdir(parents=True)
    for file, obj in {"estimates.json": records, "logged.json": logged,
                      "selection.json": select(records, 0.95)}.items():
        (ope / file).write_bytes(orjson.dumps(obj))
    out = tmp / pipeline / "index.html"
    out.parent.mkdir()
    out.write_text(build_report(tmp / "reports", tmp / "metrics",
                                title="tracerl pipeline report", headline="critic/fqe"))
    return out


def _assert_above_the_fold(layout: dict[str, str], datasets: int, where: str,
                           ranking: int = 0) -> None:
    width, height = (int(x) for x in layout["viewport"].split("x"))
    assert width == FOLD[0], (where, layout)
    # The agents' ranking first when several logged agents are compared (issue 31), then per
    # dataset the answer line and its candidates' verdicts line (issue 17).
    assert int(layout["ranking-lines"]) == ranking, (where, layout)
    assert (layout["first-ranking"] == "true") == (ranking > 0), (where, layout)
    assert int(layout["answer-lines"]) == ranking + 2 * datasets, (where, layout)
    # --dump-dom's viewport may be shorter than the window (913 of 1000 px): the stricter
    assert 0 < float(layout["answer-bottom"]) <= min(height, FOLD[1]), (where, layout)


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_the_answer_is_above_the_fold_in_the_browser(tmp_path, pipeline):
    from tracerl.config.params import dataset_names, load_params

    page = _with_ope(pipeline, tmp_path)
    layout = _answer_layout(page, tmp_path)
    _assert_above_the_fold(layout, len(dataset_names(load_params(PIPELINES[pipeline]))),
                           pipeline)
    assert Path(layout["screenshot"]).stat().st_size > 0


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_each_pipelines_own_report_has_the_answer_above_the_fold(tmp_path, pipeline):
    """The report this checkout's pipeline built (`make run`), as it is."""
    import json

    from tracerl.config.params import get, load_params
    from tracerl.report.answer import answers_of, ranking_lines

    params = load_params(PIPELINES[pipeline])
    reports = ROOT / get(params, "paths.reports")
    page = reports / "report" / "index.html"
    if not page.is_file():
        pytest.skip(f"{page} is absent: run `make run`")
    found = answers_of(reports / "ope", get(params, "ope.headline"),
                       get(params, "ope.min_support"))
    rank_file = reports / "ope" / "ranking.json"
    ranking = ranking_lines(json.loads(rank_file.read_text()) if rank_file.is_file() else None)
    layout = _answer_layout(page, tmp_path)
    _assert_above_the_fold(layout, len(found), pipeline, len(ranking))
