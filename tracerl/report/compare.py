"""How the compare stage's results read: the markdown of `compare.md` and the UI artifacts,
and the report's compare section, all from `compare.json` (tracerl.data.compare's
`Comparison.to_dict()`), laid out once here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracerl.report.html import _esc, _load, section, table

Table = tuple[list[str], list[list[str]]]


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def fmt_ci(low: float | None, high: float | None) -> str:
    return "–" if low is None else f"[{low:.3f}, {high:.3f}]"


def fmt_p(p: float | None) -> str:
    return "–" if p is None else f"{p:.4f}" if p >= 1e-4 else f"{p:.2e}"


def _flag_names(flags: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(f.split(":")[0] for f in flags)) or "–"


def leaderboard_table(board: Mapping[str, Any]) -> Table:
    """Every agent, best first (from `Leaderboard.to_dict()`)."""
    rows = board["rows"]
    ks = sorted({int(k) for r in rows for k in r["pass_k"] if int(k) >= 2})
    header = ["rank", "agent", "score", "CI", "tasks", "episodes", "trials per task",
              *[f"pass^{k}" for k in ks]]
    if len(rows) > 1:
        header.append(f"score on the {len(board['shared_tasks'])} tasks all share")
    body = []
    for r in rows:
        trials = (str(r["trials_min"]) if r["trials_min"] == r["trials_max"]
                  else f"{r['trials_min']}–{r['trials_max']}")
        cells = [str(r["rank"] or "–"), r["agent"], fmt(r["score"]),
                 fmt_ci(r["ci_low"], r["ci_high"]), str(r["tasks"]), str(r["episodes"]), trials,
                 *[fmt(r["pass_k"].get(str(k))) for k in ks]]
        if len(rows) > 1:
            cells.append(fmt(r["shared_score"]))
        body.append(cells)
    return header, body


PAIR_HEADER = ["agent", "baseline", "common tasks", "agent score", "baseline score",
               "difference", "CI", "exact p", "agent better / worse", "flags"]


def pair_rows(pairs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per pair (PAIR_HEADER), from `PairComparison.to_dict()`s."""
    return [[p["agent"], p["baseline"], str(p["n_tasks"]), fmt(p["agent_score"]),
             fmt(p["baseline_score"]), fmt(p["difference"]), fmt_ci(p["ci_low"], p["ci_high"]),
             fmt_p(p["exact_test"]["p_value"]) if p["exact_test"] else "n/a",
             f"{p['agent_better']} / {p['baseline_better']}", _flag_names(p["flags"])]
            for p in pairs]


def pair_sentences(pair: Mapping[str, Any]) -> list[str]:
    """What a pair's numbers mean, in plain sentences (headline, exact test, exclusions,
    flags)."""
    out = [f"{pair['agent']} vs {pair['baseline']}: {pair['n_tasks']} common tasks; "
           f"{pair['score']} {fmt(pair['agent_score'])} vs {fmt(pair['baseline_score'])}, "
           f"difference {fmt(pair['difference'])} {fmt_ci(pair['ci_low'], pair['ci_high'])} "
           f"({pair['confidence']:.0%} paired bootstrap over tasks, {pair['n_boot']} "
           f"resamples, seed {pair['seed']})."]
    exact = pair["exact_test"]
    if exact:
        out.append(f"{exact['name']}: p = {fmt_p(exact['p_value'])} (the agent's successes "
                   f"{exact['statistic']}, {exact['expected']:.1f} expected if both succeed "
                   f"equally often; {exact['informative_tasks']} tasks could have gone either "
                   "way).")
    elif pair["exact_test_note"]:
        out.append(f"Exact test: {pair['exact_test_note']}.")
    for name, tasks in ((pair["agent"], pair["tasks_only_agent"]),
                        (pair["baseline"], pair["tasks_only_baseline"])):
        if tasks:
            out.append(f"Only {name} logged {len(tasks)} task(s), left out of the pair: "
                       f"{', '.join(tasks[:10])}{' …' if len(tasks) > 10 else ''}.")
    out += [f"Flag {f}." for f in pair["flags"]]
    return out


def pass_k_table(pair: Mapping[str, Any]) -> Table:
    """pass^k of both agents for k >= 2 (no rows when a task has a single trial)."""
    return (["k", f"pass^k {pair['agent']}", f"pass^k {pair['baseline']}", "difference", "CI"],
            [[str(r["k"]), fmt(r["agent"]), fmt(r["baseline"]), fmt(r["difference"]),
              fmt_ci(r["ci_low"], r["ci_high"])] for r in pair["pass_k"] if r["k"] >= 2])


def disagreement_table(pair: Mapping[str, Any], max_tasks: int | None = None) -> Table:
    """The tasks where the pair disagrees (the first `max_tasks`), largest gap first."""
    rows = pair["disagreements"][:max_tasks]
    return (["task", pair["agent"], pair["baseline"], "difference", "trials (agent / baseline)"],
            [[r["task"], fmt(r["agent"]), fmt(r["baseline"]), f"{r['difference']:+.3f}",
              f"{r['agent_trials']} / {r['baseline_trials']}"] for r in rows])


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table; a `|` inside a cell is escaped."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def leaderboard_markdown(board: Mapping[str, Any]) -> str:
    return ("**Leaderboard** (each agent on its own tasks; score: mean over tasks of the "
            "task's mean score)\n\n" + markdown_table(*leaderboard_table(board)))


def pairs_markdown(pairs: Sequence[Mapping[str, Any]]) -> str:
    return ("**Paired comparisons** (agent minus baseline over the tasks both logged)\n\n"
            + markdown_table(PAIR_HEADER, pair_rows(pairs)))


def disagreements_markdown(pair: Mapping[str, Any], max_tasks: int = 20) -> str:
    """A pair's sentences, its pass^k and (the first `max_tasks` of) its disagreements."""
    lines = [" ".join(pair_sentences(pair)), ""]
    header, rows = pass_k_table(pair)
    if rows:
        lines += [markdown_table(header, rows), ""]
    n = len(pair["disagreements"])
    if not n:
        return "\n".join([*lines, "No common task where they disagree."])
    lines += [f"Tasks where they disagree ({n}; largest gap first):", "",
              markdown_table(*disagreement_table(pair, max_tasks))]
    if n > max_tasks:
        lines.append(f"\n… and {n - max_tasks} more (all in compare.json)")
    return "\n".join(lines)


def compare_markdown(result: Mapping[str, Any], max_tasks: int = 20) -> str:
    """`compare.md`: the leaderboard, every pair, each pair's disagreements (the first
    `max_tasks`; compare.json has them all)."""
    lines = [leaderboard_markdown(result["leaderboard"]), ""]
    if result["notes"]:
        lines += [*[f"- {n}" for n in result["notes"]], ""]
    if result["pairs"]:
        lines += [pairs_markdown(result["pairs"]), ""]
    for p in result["pairs"]:
        lines += [disagreements_markdown(p, max_tasks), ""]
    return "\n".join(lines).rstrip() + "\n"


# --- the HTML report ----------------------------------------------------------------------


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
