"""The run's HTML report is one self-contained file: every table, plots inlined, no network."""

from __future__ import annotations

import re

import orjson

from tracerl.report.html import markdown_to_html
from tracerl.report.learning import build_report as build


def build_report(reports, metrics):
    return build(reports, metrics, "tracerl pipeline report", "critic/fqe")

# A 1x1 PNG.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(obj))


def _outputs(tmp_path):
    reports, metrics = tmp_path / "reports", tmp_path / "metrics"
    _write(reports / "ingest/summary.json", {"good": {"read": 10, "accepted": 9,
                                                       "quarantined": 1, "episodes": 3,
                                                       "passed": True}})
    _write(reports / "validate/summary.json", {"good": {"rows": 9, "episodes": 3,
                                                         "expectations": 12, "failed": 0,
                                                         "success": True}})
    (reports / "coverage").mkdir(parents=True)
    (reports / "coverage/good.md").write_text("**Coverage**: 9 <transitions>\n\n| a | b |\n"
                                              "|---|---:|\n| x | 1 |\n")
    (reports / "coverage/good.png").write_bytes(PNG)
    record = {"dataset": "good", "policy": "bc", "layer": "critic", "estimator": "fqe",
              "metric": "return", "value": 0.5, "ci_low": 0.4, "ci_high": 0.6, "truth": 0.55,
              "support": 1.0, "ess": None, "flags": ["low_ess:3"]}
    _write(reports / "ope/estimates.json", [record, {**record, "policy": "naive_fqi",
                                                     "value": 0.7}])
    _write(reports / "ope/selection.json", [{"dataset": "good", "layer": "critic",
                                             "estimator": "fqe", "pick": "naive_fqi"}])
    (reports / "ope/estimate_vs_truth.png").write_bytes(PNG)
    _write(metrics / "table.json", {"good": {"bc": {"success": 1.0, "success_mc": 0.99,
                                                    "success_mul": 1.0, "success_mul_mc": 1.0,
                                                    "return": 0.9}}})
    return reports, metrics


def test_report_inlines_everything_and_names_every_section(tmp_path):
    reports, metrics = _outputs(tmp_path)
    page = build_report(reports, metrics)
    # Self-contained: no external script, style sheet or image.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "<script" not in page
    assert page.count('src="data:image/png;base64,') == 2  # coverage and OPE plots
    for section in ("ingest", "validate", "coverage", "table", "ope"):
        assert f'<section id="{section}">' in page
    assert "<td>naive_fqi</td>" in page and "low_ess" in page
    assert "&lt;transitions&gt;" in page  # text from the stage's markdown is escaped
    # A missing stage says so.
    assert "relabel" not in page.split("<main>")[1] or "no relabel" in page


def test_same_outputs_give_the_same_bytes(tmp_path):
    reports, metrics = _outputs(tmp_path)
    assert build_report(reports, metrics) == build_report(reports, metrics)


def test_markdown_tables_become_html_tables():
    out = markdown_to_html("# Title\n\n| a | b |\n|---|---:|\n| **x** | 2 |\n")
    assert "<h3>Title</h3>" in out
    assert "<th>a</th>" in out and "<td><strong>x</strong></td>" in out
    assert '<td style="text-align:right">2</td>' in out


def _cells(page: str) -> list[list[str]]:
    """The text of each body row's cells, as a browser reads them (tags dropped)."""
    from html.parser import HTMLParser

    rows: list[list[str]] = []

    class Cells(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                rows[-1].append("".join(self.cell).strip())
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    Cells().feed(page)
    return rows


def test_a_state_key_with_escaped_pipes_stays_one_cell():
    """`\\|` inside a cell is a pipe of the cell (GFM): the key is one cell and every number
    sits under its own header, in a code span or not."""
    md = ("| state | N(s) | add | mul |\n|---|---:|---:|---:|\n"
          "| `mul\\|1\\|1\\|-` | 1,030 | 0.12 (0.13) | 0.75 (0.75) |\n"
          "| intent=refund\\|email\\|verified | 1,587 | – | 0.5 |\n")
    rows = _cells(markdown_to_html(md))
    assert rows == [["state", "N(s)", "add", "mul"],
                    ["mul|1|1|-", "1,030", "0.12 (0.13)", "0.75 (0.75)"],
                    ["intent=refund|email|verified", "1,587", "–", "0.5"]]
    assert "<code>mul|1|1|-</code>" in markdown_to_html(md)


def test_the_coverage_section_keeps_state_keys_in_one_cell(tmp_path):
    reports, metrics = _outputs(tmp_path)
    (reports / "coverage/good.md").write_text(
        "Behaviour at the most visited decision states:\n\n| state | N(s) | add |\n"
        "|---|---:|---:|\n| `add\\|1\\|1\\|-` | 991 | 0.75 (0.75) |\n")
    rows = _cells(build_report(reports, metrics).split('<section id="coverage">')[1]
                  .split("</section>")[0])
    assert rows == [["state", "N(s)", "add"], ["add|1|1|-", "991", "0.75 (0.75)"]]
