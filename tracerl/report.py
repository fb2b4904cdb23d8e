"""Print the pipeline's results on the terminal (what `make run` shows at the end)."""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table


def _load(path: Path) -> dict | None:
    return orjson.loads(path.read_bytes()) if path.is_file() else None


def print_results(reports: Path, ui_url: str | None = None,
                  console: Console | None = None, metrics: Path = Path("metrics")) -> None:
    """Print the reports' tables and metrics, then where the flow runs are: `ui_url`, which
    the caller takes from Prefect's settings (the library does not import Prefect)."""
    console = console or Console(width=max(Console().width, 120))
    ingest = _load(reports / "ingest" / "summary.json")
    if ingest:
        table = Table(title="ingest")
        for col in ("dataset", "read", "accepted", "quarantined", "episodes", "status"):
            table.add_column(col)
        for name, s in ingest.items():
            table.add_row(name, str(s["read"]), str(s["accepted"]), str(s["quarantined"]),
                          str(s["episodes"]), "pass" if s["passed"] else "FAIL")
        console.print(table)
    validate = _load(reports / "validate" / "summary.json")
    if validate:
        table = Table(title="validate (Great Expectations)")
        for col in ("dataset", "rows", "expectations", "failed", "report"):
            table.add_column(col)
        for name, s in validate.items():
            table.add_row(name, str(s["rows"]), str(s["expectations"]), str(s["failed"]),
                          str(reports / "validate" / "datasets" / name / "report.html"))
        console.print(table)
    table = _load(metrics / "table.json")
    if table:
        from tracerl.envs.calculator_table import CHAPTER, CHAPTER_MUL

        view = Table(title="calculator: four policies on two datasets (exact / Monte Carlo; "
                     "chapter = the book's 500-episode figures)")
        for col in ("dataset", "policy", "success", "MC", "chapter", "mul tasks", "MC",
                    "chapter", "return"):
            view.add_column(col, justify="left" if col in ("dataset", "policy") else "right")
        order = ["behavior", "bc", "naive_fqi", "constrained_fqi"]
        for dataset, rows in table.items():
            for name in sorted(rows, key=lambda p: order.index(p) if p in order else 99):
                r = rows[name]
                chapter = CHAPTER.get(dataset, {}).get(name)
                chapter_mul = CHAPTER_MUL.get(dataset, {}).get(name)
                view.add_row(dataset, name, f"{r['success']:.3f}", f"{r['success_mc']:.3f}",
                             "" if chapter is None else f"{chapter:.2f}",
                             f"{r['success_mul']:.3f}", f"{r['success_mul_mc']:.3f}",
                             "" if chapter_mul is None else f"{chapter_mul:.2f}",
                             f"{r['return']:.4f}")
        console.print(view)
    selection = _load(reports / "ope" / "selection.json")
    if selection:
        view = Table(title="ope: which candidate each estimator would deploy (full table: "
                     "reports/ope/estimates.md)")
        for col in ("dataset", "estimator", "pick", "rank corr.", "regret@1", "note"):
            view.add_column(col)
        for row in selection:
            if row["layer"] == "verifier":
                continue
            corr, regret = row.get("rank_correlation"), row.get("regret_at_1")
            view.add_row(row["dataset"], f"{row['layer']}/{row['estimator']}",
                         row.get("pick") or "–", "–" if corr is None else f"{corr:.2f}",
                         "–" if regret is None else f"{regret:.3f}", row.get("note", ""))
        console.print(view)
    if not (ingest or validate or table or selection):
        console.print(f"no results under {reports}/ yet: run `make run`")
    if ui_url:
        console.print(f"Prefect UI (flow runs, artifacts): {ui_url}")
