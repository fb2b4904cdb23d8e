"""ope: every candidate policy through every evaluation layer that applies, on each
evaluated dataset's logs; beside each agent's own logged value, the truth where the
dataset's fixture brings one (a simulator: exact, or Monte Carlo with its standard error;
real logs have none), and for candidates trained on another agent's logs whether they
would beat the agent that logged the data."""

from __future__ import annotations

from prefect import flow, unmapped

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
from tasks.ope import (
    bootstrap_chunk,
    candidates_of,
    dataset_info,
    evaluate_candidate,
    finish_candidate,
    logged_value_of,
    prepare_candidates,
    sections,
)
from tracerl.io.fileio import write_json, write_text
from tracerl.io.staging import staged
from tracerl.ope.records import (
    describe_provenance,
    flag_names,
    headline_metrics,
    interval,
    markdown,
    plot,
    plot_points,
    shown_value,
)
from tracerl.ope.select import comparisons, pick_of, rank_agents, select
from tracerl.report.answer import (
    Answer,
    answer_lines,
    answers,
    headline_points,
    verdict_line,
    verdicts,
)


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


@flow(name="ope", flow_run_name=namer("ope"))
def ope_flow() -> dict:
    params = stage_params()
    ope, _ = sections(params)
    names = ope.datasets or datasets(params)
    identify("ope", params, names)
    labelled, models = path(params, "labelled"), path(params, "models")
    prepared = prepare_candidates.map([labelled / n / "steps" for n in names],
                                      unmapped(models), names, unmapped(params))
    info = {n: dataset_info.submit(p, n) for n, p in zip(names, prepared, strict=True)}
    logged_futures = {n: logged_value_of.submit(labelled / n / "steps", models, n, params)
                      for n in datasets(params)}
    runs = [(n, data, candidate) for n, data in zip(names, prepared, strict=True)
            for candidate in candidates_of(params, n)]  # dataset then candidate order
    # Per (dataset, candidate): one task for the layers, one per chunk of a refitted
    # critic's bootstrap, one joining them in chunk order. The prepared data stays on the
    # runner's side (a Dask worker's result goes to the workers that need it).
    started = [evaluate_candidate.submit(data, candidate, n) for n, data, candidate in runs]
    info = {n: f.result() for n, f in info.items()}
    chunks = [[bootstrap_chunk.submit(data, start, i, candidate, n)
               for i in range(info[n]["boot_chunks"])]
              for (n, data, candidate), start in zip(runs, started, strict=True)]
    finished = [finish_candidate.submit(data, start, values, candidate, n)
                for (n, data, candidate), start, values in zip(runs, started, chunks,
                                                               strict=True)]
    records = [r for f in finished for r in f.result()]
    logged = {n: f.result() for n, f in logged_futures.items()}
    headline, min_support = ope.headline, ope.min_support
    selection = select(records, min_support)
    compared = comparisons(records, logged, headline, min_support)
    out = path(params, "reports") / "ope"
    write_json(out / "estimates.json", records)
    write_json(out / "selection.json", selection)
    write_json(out / "logged.json", logged)
    write_json(out / "comparison.json", compared)
    # Several logged agents on the same tasks (tau2): the answer opens with their ranking.
    ranking = rank_agents(logged, level=ope.confidence, seed=ope.seed, n_boot=ope.n_boot) \
        if len(logged) > 1 else None
    write_json(out / "ranking.json", ranking)
    write_json(out / "datasets.json", info)
    table = markdown(records, selection, min_support)
    outside = [f"{n}: {describe_provenance(c, p)}" for n in names
               for c, p in info[n].get("external", {}).items()]
    if outside:
        table += "\n\nCandidates from outside:\n\n" + "".join(f"- {x}\n" for x in outside)
    found = answers(records, selection, logged, headline, min_support)
    judged = {(n, v.candidate): v.status for n in names
              for v in verdicts(records, n, headline, min_support)}
    answer = answer_lines(found, ranking) + [verdict_line(records, n, headline, min_support)
                                             for n in names]
    write_text(out / "estimates.md", "Answer (" + headline + "):\n\n" + "".join(
        f"- {a}\n" for a in answer) + "\n" + table + "\n\nTruth: " + "; ".join(
        f"{n}: {d['truth']}" for n, d in info.items()) + "\n")
    with_truth = [n for n in names if any(r["truth"] is not None for r in records
                                          if r["dataset"] == n)]
    figure = out / "estimate_vs_truth.png"
    if with_truth:
        plot(records, staged(figure), truth_label="truth (the fixture's simulator)",
             limits=ope.return_range)
    write_metrics(params, "ope", headline_metrics(records, logged, headline, judged))
    for n in with_truth:
        write_json(path(params, "plots") / "ope" / f"{n}.json", plot_points(records, n))
    # Every evaluated dataset, with or without a truth: one file, a bar per (dataset, policy).
    write_json(path(params, "plots") / "ope" / "headline.json",
               [p for n in names for p in headline_points(records, logged, n, headline)])
    record_provenance(params, "ope")
    publish.wrote("ope", [out])
    _publish(records, selection, compared, logged, info, names, headline, min_support,
             table, figure if with_truth else None, found, answer)
    return {"records": len(records), "selection": selection}


def _publish(records: list[dict], selection: list[dict], compared: list[dict],
             logged: dict, info: dict, names: list[str], headline: str, min_support: float,
             table: str, figure, found: list[Answer], answer: list[str]) -> None:
    """The stage's review desk: a verdict per dataset, one screen per dataset (one row per
    candidate, the headline estimator), the estimate-vs-truth plot, the full table."""
    rows, notes = [], []
    for n in names:
        chosen, note = pick_of(selection, n, headline)
        truth = {r["policy"]: r["truth"] for r in records if r["dataset"] == n
                 and r["truth"] is not None and r["metric"] == "return"}
        best = max(truth, key=lambda p: (truth[p], p)) if truth else None
        layer, _, estimator = headline.partition("/")
        row = next((s for s in selection if (s["dataset"], s["layer"], s["estimator"])
                    == (n, layer, estimator)), {})
        flagged = sorted({r["policy"] for r in records if r["dataset"] == n and r["flags"]
                          and f"{r['layer']}/{r['estimator']}" == headline})
        rows.append([n, chosen or "none", _num((logged.get(n) or {}).get("value")),
                     best or "–", _num(row.get("regret_at_1")), len(flagged)])
        if note:
            notes.append(f"{n}: {note}")
        notes.append(f"{n}: truth: {info[n]['truth']}")
        if info[n]["replay"]:
            notes.append(f"{n}: replay and verifier not applicable: {info[n]['replay']}")
        notes += [f"{n}: from outside: {describe_provenance(c, p)}"
                  for c, p in info[n].get("external", {}).items()]
        if not info[n]["logged_propensities"]:
            notes.append(f"{n}: importance sampling uses estimated propensities (no "
                         "log-probs logged)")
    notes += [f"{c['candidate']} on {c['evaluated_on']}: {c['verdict']} (estimate "
              f"{shown_value(c, 'estimate')}, support {c['support']:.2f}; {c['trained_on']} logged "
              f"{c['source_logged']:.3f}, {c['evaluated_on']} logged "
              f"{c['evaluated_logged']:.3f})" for c in compared]
    verdict = "; ".join(f"{a.dataset}: {a.action}" for a in found) or "no dataset evaluated"
    publish.summary("ope", verdict, ["dataset", f"pick ({headline})", "logged value",
                                     "best by truth", "regret@1", "candidates flagged"], rows,
                    notes=notes, description=f"Which candidate the headline estimator "
                                             f"{headline} would pick (support >= "
                                             f"{min_support}, never a flagged estimate)",
                    answer=answer)
    for n in names:
        publish.detail(f"ope-{n}", f"OPE on {n}: {headline}, one row per candidate",
                       ["candidate", "trained on", "estimate", "CI", "truth", "truth SE",
                        "support", "flags"],
                       [[r["policy"], r["trained_on"], shown_value(r), interval(r),
                         _num(r["truth"]), _num(r["truth_se"], 4), _num(r["support"], 2),
                         flag_names(r["flags"])] for r in records
                        if r["dataset"] == n and f"{r['layer']}/{r['estimator']}" == headline],
                       f"{n}: each candidate by the headline estimator {headline}")
    if figure is not None:
        publish.image("ope-plot", figure, "OPE estimate against the truth",
                      "Every return estimate against its candidate's truth, with intervals")
    publish.detail("ope-estimates", "Layered off-policy evaluation: every layer and estimator",
                   [], [], "Every candidate through replay, verifier, critic and importance "
                           "sampling (full table)", footer=table)
