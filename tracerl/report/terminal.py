"""Print the pipeline's results on the terminal (what `make run` shows at the end).

Everything fits the terminal's width (`COLUMNS` when piped; 100 columns reads): cells wrap,
file paths are named once under their table, and a long note is a numbered footnote
printed once, however many rows it explains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
from rich import box
from rich.console import Console
from rich.table import Table

from tracerl.ope.records import shown_value

# A view prints one fixture's results from the reports and metrics folders (a fixture's
# `result_view`); True when it had any.
ResultView = Callable[[Path, Path, Console], bool]


def load(path: Path) -> dict | None:
    """A JSON report, or None when the stage has not written it."""
    return _load(path)


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _load(path: Path) -> dict | None:
    return orjson.loads(path.read_bytes()) if path.is_file() else None


_FIGURE = re.compile(r"[-+]?\d+(?:\.\d+)?")


class Footnotes:
    """Long notes of a table as numbered footnotes: a row holds its note's number, and each
    note is printed once under the table. Notes that differ only in their figures (the same
    candidates passed over, each estimator's own estimates) share one footnote, shown with
    the figures of the first row that has it."""

    def __init__(self, detail: str = "") -> None:
        self.detail = detail  # where every row's own note is (a file)
        self._notes: dict[str, list] = {}  # figures masked -> [number, text, rows]

    def ref(self, note: str, row: str) -> str:
        if not note:
            return ""
        entry = self._notes.setdefault(_FIGURE.sub("#", note),
                                       [len(self._notes) + 1, note, []])
        entry[2].append(row)
        return f"[{entry[0]}]"

    def print(self, console: Console) -> None:
        for number, text, rows in self._notes.values():
            shared = ""
            if len(rows) > 1 and _FIGURE.search(text):
                shared = (f" (figures of {rows[0]}; {len(rows) - 1} more rows have this note "
                          f"with their own{': ' + self.detail if self.detail else ''})")
            console.print(f"[{number}] {text}{shared}", markup=False, highlight=False)


class _ResultsTable(Table):
    def add_column(self, *args, **kwargs) -> None:
        kwargs.setdefault("overflow", "fold")  # a name too wide wraps; it is never cut
        super().add_column(*args, **kwargs)


def new_table(title: str) -> Table:
    """A results table: a rule under the header and no column bars, so nine columns fit
    100 characters; a cell wraps rather than loses its end."""
    return _ResultsTable(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                         title_justify="left", title_style="bold")


def show(console: Console, table: Table) -> None:
    """A table, a blank line before it."""
    console.print()
    console.print(table)


def print_path(console: Console, label: str, path: Path | str) -> None:
    """A file to look at, named once under its table (a path is never cut)."""
    console.print(f"{label}: {path}", markup=False, highlight=False, overflow="fold")


def _console() -> Console:
    """The terminal's width, or COLUMNS when the output is piped (rich's rule)."""
    return Console()


def print_results(reports: Path, ui_url: str | None = None,
                  console: Console | None = None, metrics: Path = Path("metrics"),
                  views: Sequence[ResultView] = (), answer: Sequence[str] = (),
                  answer_title: str = "answer") -> None:
    """Print the answer first (one line per dataset: `tracerl.report.answer`'s lines, given
    by the caller), then the reports' tables and metrics, then where the flow runs are:
    `ui_url`, which the caller takes from Prefect's settings (the library does not import
    Prefect). views: the pipeline's fixtures' own results views (e.g. the calculator
    table)."""
    console = console or _console()
    if answer:
        console.print(answer_title + ":", style="bold", highlight=False)
        for line in answer:
            console.print(line, markup=False, highlight=False, overflow="fold")
    ingest = _load(reports / "ingest" / "summary.json")
    if ingest:
        table = new_table("ingest")
        for col in ("dataset", "read", "accepted", "quarantined", "episodes", "status"):
            table.add_column(col)
        for name, s in ingest.items():
            table.add_row(name, str(s["read"]), str(s["accepted"]), str(s["quarantined"]),
                          str(s["episodes"]), "pass" if s["passed"] else "FAIL")
        show(console, table)
    validate = _load(reports / "validate" / "summary.json")
    if validate:
        table = new_table("validate (Great Expectations)")
        for col in ("dataset", "rows", "expectations", "failed", "status"):
            table.add_column(col)
        for name, s in validate.items():
            table.add_row(name, str(s["rows"]), str(s["expectations"]), str(s["failed"]),
                          "pass" if s.get("success", not s["failed"]) else "FAIL")
        show(console, table)
        print_path(console, "HTML report of each dataset",
                   reports / "validate" / "datasets" / "<dataset>" / "report.html")
    relabel = _load(reports / "relabel" / "summary.json")
    notes = [(name, vid, d["summary"]) for name, r in (relabel or {}).get("datasets", {}).items()
             for vid, d in r.get("verifier_diagnostics", {}).items()]
    if notes:
        table = new_table("relabel: what the verifiers report beyond their scores")
        for col in ("dataset", "verifier", "diagnostics"):
            table.add_column(col)
        for row in notes:
            table.add_row(*row)
        show(console, table)
    for path in sorted((reports / "coverage").glob("cross_agent_*.json")):
        cross = _load(path)
        table = new_table(f"cross-agent coverage: {cross['target']}'s (state, action) pairs "
                            f"found in {cross['reference']}'s logs")
        for col in ("action", "rows", "covered", "share", "pairs", "covered", "share"):
            table.add_column(col, justify="left" if col == "action" else "right")
        for name, c in [*sorted(cross["by_action"].items()), ("all", cross["overall"])]:
            table.add_row(name, str(c["rows"]), str(c["rows_covered"]),
                          _share(c["share_rows"]), str(c["pairs"]), str(c["pairs_covered"]),
                          _share(c["share_pairs"]))
        show(console, table)
        print_path(console, "detail", path)
    # Fixtures print their own results (e.g. the calculator table).
    shown = [view(reports, metrics, console) for view in views]
    selection = _load(reports / "ope" / "selection.json")
    _print_learning(reports, console)
    if selection:
        notes = Footnotes(str(reports / "ope" / "selection.json"))
        view = new_table("ope: which candidate each estimator would deploy")
        for col in ("dataset", "estimator", "pick", "rank corr.", "regret@1", "note"):
            view.add_column(col)
        for row in selection:
            if row["layer"] == "verifier":
                continue
            corr, regret = row.get("rank_correlation"), row.get("regret_at_1")
            estimator = f"{row['layer']}/{row['estimator']}"
            view.add_row(row["dataset"], estimator, row.get("pick") or "–",
                         "–" if corr is None else f"{corr:.2f}",
                         "–" if regret is None else f"{regret:.3f}",
                         notes.ref(row.get("note", ""), f"{row['dataset']} {estimator}"))
        show(console, view)
        notes.print(console)
        print_path(console, "full table", reports / "ope" / "estimates.md")
    if not (ingest or validate or any(shown) or selection or notes):
        console.print(f"no results under {reports}/ yet: run `make run`")
    if ui_url:
        console.print(f"Prefect UI (flow runs, artifacts): {ui_url}")


def _print_learning(reports: Path, console: Console) -> None:
    """The train and ope stages: BC on groups it never saw, the cross-agent verdicts beside
    the logged values (where they were computed)."""
    train = _load(reports / "train" / "summary.json") or {}
    held = {k: r["bc_heldout"] for k, r in train.items() if "bc_heldout" in r}
    if held:
        table = new_table("train: behaviour cloning on groups (tasks) it did not see "
                            "(grouped k-fold)")
        for col in ("dataset", "held-out accuracy", "majority baseline", "test steps", "folds",
                    "grouped by"):
            table.add_column(col)
        for name, h in held.items():
            table.add_row(name, _share(h["accuracy"]), _share(h["majority_baseline"]),
                          str(h["test_steps"]), str(h["n_folds"]),
                          f"{h['group_by']} ({h['n_groups']} values)")
        show(console, table)
    compared = _load(reports / "ope" / "comparison.json") or []
    if compared:
        notes = Footnotes(str(reports / "ope" / "comparison.json"))
        table = new_table("ope: would the other agent beat the one that logged the data?")
        for col in ("candidate", "on", "estimate", "support", "its logged", "logged here",
                    "verdict"):
            table.add_column(col)
        for c in compared:
            verdict, _, why = c["verdict"].partition(": ")
            table.add_row(c["candidate"], c["evaluated_on"],
                          shown_value(c, "estimate"),
                          f"{c['support']:.2f}", f"{c['source_logged']:.3f}",
                          f"{c['evaluated_logged']:.3f}",
                          f"{verdict} {notes.ref(why, c['candidate'])}".strip())
        show(console, table)
        notes.print(console)
        print_path(console, "full table", reports / "ope" / "estimates.md")
