"""Print the pipeline's results on the terminal (what `make run` shows at the end)."""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table


def _load(path: Path) -> dict | None:
    return orjson.loads(path.read_bytes()) if path.is_file() else None


def print_results(reports: Path, console: Console | None = None) -> None:
    console = console or Console()
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
    if not (ingest or validate):
        console.print(f"no results under {reports}/ yet: run `make run`")
    console.print("Prefect UI (flow runs, artifacts): http://127.0.0.1:4200")
