"""The report's compare section: logged agents on the tasks they share, and the leaderboard,
from the compare stage's `compare.json` (the tables are tracerl.data.compare's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracerl.data.compare import (
    PAIR_HEADER,
    disagreement_table,
    leaderboard_table,
    pair_rows,
    pair_sentences,
    pass_k_table,
)
from tracerl.report.html import _esc, _load, section, table


def _pair(pair: dict[str, Any]) -> str:
    parts = [f"<h3>{_esc(pair['agent'])} vs {_esc(pair['baseline'])}</h3>",
             *(f"<p>{_esc(s)}</p>" for s in pair_sentences(pair))]
    header, rows = pass_k_table(pair)
    if rows:
        parts.append(table(header, rows))
    header, rows = disagreement_table(pair)
    parts.append(f"<details><summary>The {len(rows)} task(s) where they disagree, largest gap "
                 f"first</summary>{table(header, rows)}</details>" if rows else
                 '<p class="note">No common task where they disagree.</p>')
    return "\n".join(parts)


def compare_section(reports: Path) -> tuple[str, str] | None:
    """(anchor, html) of the section from `reports/compare/compare.json`; None without it."""
    result = _load(Path(reports) / "compare" / "compare.json")
    if not result:
        return None
    pairs = result["pairs"]
    body = ['<p class="note">Each pair on the tasks both agents logged: the paired difference '
            "(agent minus baseline; the mean over those tasks of the two task means), its "
            "bootstrap interval over tasks, and the exact test of equal success.</p>"]
    if pairs:
        body.append(table(PAIR_HEADER, pair_rows(pairs)))
    body += [f'<p class="note">{_esc(n)}</p>' for n in result["notes"]]
    body += ["<h3>Leaderboard (each agent on its own tasks)</h3>",
             table(*leaderboard_table(result["leaderboard"]))]
    body += [_pair(p) for p in pairs]
    return section("compare", "Logged agents compared on the same tasks", body)
