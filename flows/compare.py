"""compare: logged agents compared on the tasks they share, and a leaderboard."""

from __future__ import annotations

from prefect import flow

from flows import _publish as publish
from flows._stage import (
    datasets,
    identify,
    namer,
    path,
    record_provenance,
    stage_params,
    write_metrics,
)
from tasks.compare import compare_logged
from tracerl.report.compare import (
    PAIR_HEADER,
    disagreements_markdown,
    leaderboard_table,
    pair_rows,
)

MAX_SUMMARY_PAIRS = 12  # the summary's table fits a screen


def _escaped(rows: list[list[str]]) -> list[list[str]]:
    return [[c.replace("|", "\\|") for c in row] for row in rows]


@flow(name="compare", flow_run_name=namer("compare"))
def compare_flow() -> dict:
    params = stage_params()
    names = datasets(params)
    identify("compare", params, names)
    settings = params.compare.model_dump()
    if settings["pairs"] != "all":
        settings["pairs"] = [(p["agent"], p["baseline"]) for p in settings["pairs"]]
    out = path(params, "reports") / "compare"
    done = compare_logged(path(params, "labelled"), names, settings, out)
    result = done["result"]
    write_metrics(params, "compare", done["metrics"])
    record_provenance(params, "compare")
    publish.wrote("compare", [out / "compare.json", out / "compare.md"])

    pairs = result["pairs"]
    verdict = (f"{len(pairs)} pair{'' if len(pairs) == 1 else 's'} compared" if pairs
               else "no pair to compare")
    flagged: dict[str, list[str]] = {}
    for p in pairs:
        for f in p["flags"]:
            flagged.setdefault(f.split(":")[0], []).append(f"{p['agent']} vs {p['baseline']}")
    notes = [*result["notes"], *(f"{flag}: {', '.join(who[:4])}"
                                 f"{f' and {len(who) - 4} more' if len(who) > 4 else ''}"
                                 for flag, who in flagged.items())]
    shown = pairs[:MAX_SUMMARY_PAIRS]
    if len(pairs) > len(shown):
        notes.insert(0, f"{len(pairs) - len(shown)} more pairs: see compare-pairs")
    publish.summary("compare", verdict, PAIR_HEADER, _escaped(pair_rows(shown)),
                    notes=notes, links={"compare tables": out / "compare.md"},
                    description="Logged agents on the tasks they share: paired difference "
                                "(agent minus baseline), interval, exact test")
    if len(pairs) > len(shown):
        publish.detail("compare-pairs", "Every pair", PAIR_HEADER, _escaped(pair_rows(pairs)),
                       "Every pair's paired difference")
    header, rows = leaderboard_table(result["leaderboard"])
    publish.detail("compare-leaderboard", "Leaderboard: each dataset on its own tasks", header,
                   _escaped(rows), "Every dataset of the pipeline on its own tasks, best first")
    for p in pairs:
        publish.detail(f"compare-{p['agent']}-vs-{p['baseline']}",
                       f"{p['agent']} vs {p['baseline']}", [], [],
                       f"The tasks where {p['agent']} and {p['baseline']} disagree",
                       footer=disagreements_markdown(p))
    return result

