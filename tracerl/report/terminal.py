"""Print the pipeline's results on the terminal (what `make run` shows at the end)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

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


def print_results(reports: Path, ui_url: str | None = None,
                  console: Console | None = None, metrics: Path = Path("metrics"),
                  views: Sequence[ResultView] = ()) -> None:
    """Print the reports' tables and metrics, then where the flow runs are: `ui_url`, which
    the caller takes from Prefect's settings (the library does not import Prefect).
    views: the pipeline's fixtures' own results views (e.g. the calculator table)."""
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
    relabel = _load(reports / "relabel" / "summary.json")
    notes = [(name, vid, d["summary"]) for name, r in (relabel or {}).get("datasets", {}).items()
             for vid, d in r.get("verifier_diagnostics", {}).items()]
    if notes:
        table = Table(title="relabel: what the verifiers report beyond their scores")
        for col in ("dataset", "verifier", "diagnostics"):
            table.add_column(col)
        for row in notes:
            table.add_row(*row)
        console.print(table)
    for path in sorted((reports / "coverage").glob("cross_agent_*.json")):
        cross = _load(path)
        table = Table(title=f"cross-agent coverage: {cross['target']}'s (state, action) pairs "
                            f"found in {cross['reference']}'s logs ({path})")
        for col in ("action", "rows", "covered", "share", "pairs", "covered", "share"):
            table.add_column(col, justify="left" if col == "action" else "right")
        for name, c in [*sorted(cross["by_action"].items()), ("all", cross["overall"])]:
            table.add_row(name, str(c["rows"]), str(c["rows_covered"]),
                          _share(c["share_rows"]), str(c["pairs"]), str(c["pairs_covered"]),
                          _share(c["share_pairs"]))
        console.print(table)
    # Fixtures print their own results (e.g. the calculator table).
    shown = [view(reports, metrics, console) for view in views]
    selection = _load(reports / "ope" / "selection.json")
    _print_learning(reports, console)
    if selection:
        view = Table(title="ope: which candidate each estimator would deploy, never a "
                     "flagged estimate (full table: reports/.../ope/estimates.md)")
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
        table = Table(title="train: behaviour cloning on groups (tasks) it did not see "
                            "(grouped k-fold)")
        for col in ("dataset", "held-out accuracy", "majority baseline", "test steps", "folds",
                    "grouped by"):
            table.add_column(col)
        for name, h in held.items():
            table.add_row(name, _share(h["accuracy"]), _share(h["majority_baseline"]),
                          str(h["test_steps"]), str(h["n_folds"]),
                          f"{h['group_by']} ({h['n_groups']} values)")
        console.print(table)
    compared = _load(reports / "ope" / "comparison.json") or []
    if compared:
        table = Table(title="ope: would the other agent beat the one that logged the data? "
                            "(full table: reports/.../ope/estimates.md)")
        for col in ("candidate", "on", "estimate", "support", "its logged", "logged here",
                    "verdict"):
            table.add_column(col)
        for c in compared:
            table.add_row(c["candidate"], c["evaluated_on"],
                          "–" if c["estimate"] is None else f"{c['estimate']:.3f}",
                          f"{c['support']:.2f}", f"{c['source_logged']:.3f}",
                          f"{c['evaluated_logged']:.3f}", c["verdict"])
        console.print(table)
