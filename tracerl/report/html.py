"""One self-contained HTML report of a pipeline run: every stage's tables and plots.

Images are inlined as data URIs and the style sheet is in the page: no CDN, no network, so
the file can be mailed, archived or opened from any disk. The page holds no timestamp, so
the same stage outputs give the same bytes (the run's provenance is logged, not written).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from markdown_it import MarkdownIt

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a}
header{background:#1d2a3a;color:#fff;padding:16px 28px}header h1{margin:0;font-size:22px}
nav{padding:8px 28px;background:#eef2f6;position:sticky;top:0}
nav a{margin-right:14px;color:#1d4f91;text-decoration:none}
main{padding:8px 28px 40px;max-width:1400px}
section{margin:22px 0;border-top:1px solid #d6dde5;padding-top:6px}
h2{font-size:19px}h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #d6dde5;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f6f9}td.num,td[style*=right]{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#fafbfc}
.verdict{font-weight:600}.fail{color:#b3261e}.pass{color:#1e7b34}
img{max-width:100%;border:1px solid #d6dde5}
details summary{cursor:pointer;color:#1d4f91;margin:6px 0}
.note{color:#5b6670}
"""


def _load(path: Path) -> Any:
    return orjson.loads(path.read_bytes()) if path.is_file() else None


def _esc(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4f}"
    return _esc(x)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], raw: bool = False) -> str:
    """An HTML table; `raw` cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{h if raw else _esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{_fmt(c)}</td>' if _is_num(c)
        else f"<td>{c if raw else _fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def image(png: Path, alt: str) -> str:
    if not Path(png).is_file():
        return f'<p class="note">(no plot: {_esc(png)} is missing)</p>'
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


@cache
def _markdown() -> MarkdownIt:
    """CommonMark with GFM tables (markdown-it-py); raw HTML in the text is escaped."""
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_to_html(text: str) -> str:
    """The markdown the stages write, by a maintained CommonMark parser with GFM tables: a
    `\\|` inside a cell (state keys such as `mul\\|1\\|1\\|-`) is a pipe of the cell, not a
    column. Headings sit two levels below the page's (`#` → h3), under its section titles."""
    md = _markdown()
    tokens = md.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + 2, 6)}"
    return md.renderer.render(tokens, md.options, {})


def section(anchor: str, title: str, body: list[str]) -> tuple[str, str]:
    return anchor, f'<section id="{anchor}"><h2>{_esc(title)}</h2>' + "\n".join(body) + \
        "</section>"


def page(title: str, sections: list[tuple[str, str]]) -> str:
    """The self-contained HTML page of (anchor, section html) pairs."""
    nav = "".join(f'<a href="#{a}">{a}</a>' for a, _ in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{STYLE}</style></head><body>"
            f"<header><h1>{_esc(title)}</h1></header><nav>{nav}</nav><main>"
            + "\n".join(s for _, s in sections) + "</main></body></html>\n")


def data_sections(reports: Path) -> list[tuple[str, str]]:
    """The sections every pipeline has: ingest, validate, relabel, coverage."""
    reports = Path(reports)
    sections: list[tuple[str, str]] = []
    ingest = _load(reports / "ingest" / "summary.json")
    sections.append(section("ingest", "Ingest", [table(
        ["dataset", "read", "accepted", "quarantined", "episodes", "status"],
        [[k, s["read"], s["accepted"], s["quarantined"], s["episodes"],
          "pass" if s["passed"] else "FAIL"] for k, s in ingest.items()])] if ingest else
        ['<p class="note">no ingest outputs</p>']))

    validate = _load(reports / "validate" / "summary.json")
    body = ['<p class="note">no validate outputs</p>']
    if validate:
        body = [table(["dataset", "rows", "episodes", "expectations", "failed", "status", "report"],
                      [[k, s["rows"], s["episodes"], s["expectations"], s["failed"],
                        "pass" if s["success"] else "FAIL",
                        f"validate/datasets/{k}/report.html"] for k, s in validate.items()])]
        for k in validate:
            docs = reports / "validate" / "data_docs" / k / "index.html"
            if docs.is_file():
                body.append(f'<p>Great Expectations Data Docs of {_esc(k)}: '
                            f'<a href="../validate/data_docs/{_esc(k)}/index.html">'
                            f'validate/data_docs/{_esc(k)}/index.html</a></p>')
    sections.append(section("validate", "Validate (Great Expectations)", body))

    relabel = _load(reports / "relabel" / "summary.json")
    if relabel:
        rows = [[k, r["rows"], r["rows_reward_changed"], r["mean_reward"],
                 *(r["episodes_by_filter"].get(m) for m in ("all", "process", "outcome",
                                                             "process+outcome"))]
                for k, r in relabel["datasets"].items()]
        sections.append(section("relabel", "Relabel", [
            table(["dataset", "rows", "reward changed", "mean reward", "episodes",
                   "process-filtered", "outcome-filtered", "both"], rows),
            "<p>verifiers: " + _esc(", ".join(
                v if isinstance(v, str) else str(v.get("name", v))
                for v in (relabel.get("verifiers") or []))) + "</p>"]))

    cov_dir = reports / "coverage"
    body = []
    for md in sorted(cov_dir.glob("*.md")):
        body += [f"<h3>{_esc(md.stem)}</h3>", markdown_to_html(md.read_text()),
                 image(cov_dir / f"{md.stem}.png", f"coverage of {md.stem}")]
    sections.append(section("coverage", "Coverage", body or
                             ['<p class="note">no coverage outputs</p>']))
    return sections
