"""The report's sections of the learning half, from the one engine's records: the policies
trained (and BC on groups it never saw), the calculator table where it was computed, and
off-policy evaluation (each agent's logged value, cross-agent verdicts, one table per
dataset with the truth where a simulator gives one, the selection, the plot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tracerl.ope.records import describe_provenance, flag_names, interval
from tracerl.report.answer import DEPLOY, KEEP, answers_of, ranking_lines, verdict_lines_of
from tracerl.report.credit import credit_section
from tracerl.report.html import _esc, _load, data_sections, image, page, section, table


def train_section(reports: Path) -> tuple[str, str]:
    train = _load(reports / "train" / "summary.json")
    if not train:
        return section("train", "Train", ['<p class="note">no train outputs</p>'])
    body = [table(["dataset", "policy", "class", "training steps", "episodes", "states seen",
                   "states with no logged valid action", "data hash"],
                  [[k, p, s["class"], r["rows"], r["episodes"], s.get("states", "–"),
                    s.get("unsupported_states", "–"), r["data_hash"][:12]]
                   for k, r in train.items() for p, s in r["policies"].items()])]
    held = {k: r["bc_heldout"] for k, r in train.items() if "bc_heldout" in r}
    if held:
        body.append("<h3>Behaviour cloning on groups it did not see</h3>")
        body.append('<p class="note">Grouped k-fold: each test fold holds whole groups '
                    '(tasks) that its training folds never contained; accuracy is the cloned '
                    "policy's most probable action against the logged one, pooled over every "
                    "held-out step, beside always predicting the training folds' most "
                    "frequent action.</p>")
        body.append(table(["dataset", "held-out accuracy", "majority baseline", "test steps",
                           "folds", "groups (by)"],
                          [[k, h["accuracy"], h["majority_baseline"], h["test_steps"],
                            h["n_folds"], f"{h['n_groups']} ({h['group_by']})"]
                           for k, h in held.items()]))
    return section("train", "Train", body)


def table_section(metrics: Path) -> tuple[str, str] | None:
    calc = _load(metrics / "table.json")
    if not calc:
        return None
    return section("table", "Calculator table (exact and Monte Carlo)", [table(
        ["dataset", "policy", "success", "success MC", "mul success", "mul success MC",
         "return"],
        [[d, p, r["success"], r["success_mc"], r["success_mul"], r["success_mul_mc"],
          r["return"]] for d, rows in calc.items() for p, r in rows.items()])])


def ope_section(reports: Path, headline: str) -> tuple[str, str]:
    ope = reports / "ope"
    records = _load(ope / "estimates.json")
    if not records:
        return section("ope", "Off-policy evaluation", ['<p class="note">no ope outputs</p>'])
    logged = _load(ope / "logged.json") or {}
    compared = _load(ope / "comparison.json") or []
    info = _load(ope / "datasets.json") or {}
    selection = _load(ope / "selection.json") or []
    body = ["<h3>Each agent's logged value (its own logs)</h3>",
            table(["dataset", "logged value", "CI", "episodes"],
                  [[k, v["value"], interval(v), v["n"]] for k, v in logged.items()])] \
        if logged else []
    if compared:
        body.append("<h3>Would the other agent beat the one that logged the data?</h3>")
        body.append('<p class="note">A policy cloned from the other agent\'s logs, evaluated '
                    "on these logs; its own logged value shown beside. Support: the share of "
                    "its episodes that stay on decisions these logs cover; below the "
                    "threshold no estimator can know its value.</p>")
        body.append(table(["candidate", "evaluated on", "estimate (headline)", "CI", "support",
                           "flags", "its own logged value",
                           "logged value of the evaluated agent", "verdict"],
                          [[c["candidate"], c["evaluated_on"], c["estimate"], interval(c),
                            c["support"], flag_names(c["flags"]), c["source_logged"],
                            c["evaluated_logged"], c["verdict"]] for c in compared]))
    for n in dict.fromkeys(r["dataset"] for r in records):
        d = info.get(n, {})
        notes = [f"truth: {_esc(d['truth'])} (the verifier layer's truth is the success "
                 "rate, the others' the discounted return)" if "truth" in d else "",
                 f"critic interval: {d['critic']}" if "critic" in d else ""]
        notes = [x for x in notes if x]
        if not d.get("logged_propensities", True):
            notes.append("importance sampling uses <b>estimated propensities</b> (the "
                         "behaviour model fitted on these logs; no log-probs were logged): "
                         "flagged estimated_propensities")
        if d.get("replay"):
            notes.append(f"replay and verifier: not applicable — {_esc(d['replay'])}")
        notes += [f"from outside: {_esc(describe_provenance(c, p))}"
                  for c, p in d.get("external", {}).items()]
        size = f" ({d['episodes']} episodes, {d['steps']} steps)" if "episodes" in d else ""
        body.append(f"<h3>{_esc(n)}: {_esc(headline)}, one row per candidate{size}</h3>")
        body += [f'<p class="note">{x}</p>' for x in notes]
        body.append(table(["candidate", "trained on", "estimate", "CI", "truth", "truth SE",
                           "support", "flags"],
                          [[r["policy"], r.get("trained_on", n), r["value"], interval(r),
                            r["truth"], r.get("truth_se"), r["support"],
                            flag_names(r["flags"])]
                           for r in records if r["dataset"] == n
                           and f"{r['layer']}/{r['estimator']}" == headline]))
    body.append("<h3>Selection: what each estimator would pick (never a flagged "
                "estimate)</h3>")
    body.append(table(["dataset", "layer", "estimator", "pick", "rank corr.", "regret@1",
                       "note"],
                      [[s["dataset"], s["layer"], s["estimator"], s.get("pick") or "–",
                        s.get("rank_correlation"), s.get("regret_at_1"), s.get("note", "")]
                       for s in selection]))
    if any(r["truth"] is not None for r in records):
        body.append(image(ope / "estimate_vs_truth.png", "estimate vs truth"))
    body.append("<details><summary>Full table: every layer and estimator</summary>" +
                table(["dataset", "policy", "layer", "estimator", "value", "CI low", "CI high",
                       "truth", "support", "ESS", "flags"],
                      [[r["dataset"], r["policy"], r["layer"], r["estimator"], r["value"],
                        r["ci_low"], r["ci_high"], r["truth"], r["support"], r["ess"],
                        ", ".join(r["flags"])] for r in records]) + "</details>")
    return section("ope", "Off-policy evaluation", body)


_DECISION_CLASS = {DEPLOY: "pass", KEEP: "fail"}


def answer_section(reports: Path, headline: str, min_support: float) -> tuple[str, str]:
    """The answer first: per dataset, deploy a candidate, keep the logged policy or cannot
    tell, with the estimate, its interval and why (`tracerl.report.answer`)."""
    found = answers_of(Path(reports) / "ope", headline, min_support)
    if not found:
        return section("answer", "Answer", ['<p class="note">no ope outputs: no answer '
                                            "yet</p>"])
    ranking = ranking_lines(_load(Path(reports) / "ope" / "ranking.json"))
    body = ['<ul class="answer">'] + [f'<li class="ranking">{_esc(line)}</li>'
                                      for line in ranking] + [
        f'<li data-dataset="{_esc(a.dataset)}"><b>{_esc(a.dataset)}:</b> '
        f'<span class="verdict {_DECISION_CLASS.get(a.decision, "")}">{_esc(a.action)}'
        "</span> — "
        + (f"{_esc(a.figures())}; " if a.figures() else "") + f"{_esc(a.why)}"
        + (f"; would tell: {_esc(a.next_step)}" if a.next_step else "") + "</li>"
        for a in found] + [f'<li class="verdicts">{_esc(line)}</li>' for line in
                           verdict_lines_of(Path(reports) / "ope", headline, min_support)] + [
                           "</ul>",
                           f'<p class="note">The pick of the headline estimator {_esc(headline)} '
                           "(never a flagged estimate, support ≥ "
                           f"{min_support}); deploy only when its interval clears the logged "
                           "policy's. Detail: the off-policy evaluation section.</p>"]
    return section("answer", "Answer", body)


def build_report(reports: Path, metrics: Path, title: str, headline: str,
                 first: Sequence[tuple[str, str]] = (), min_support: float = 0.95) -> str:
    """The self-contained HTML report of the outputs under `reports/` and `metrics/` (a
    stage whose outputs are missing is said to be missing, not skipped): the answer first,
    then `first`: (anchor, html) sections placed before the others (the first screen)."""
    reports, metrics = Path(reports), Path(metrics)
    calc = table_section(metrics)
    sections = [answer_section(reports, headline, min_support), *first,
                *data_sections(reports), train_section(reports), *([calc] if calc else []),
                ope_section(reports, headline), credit_section(reports)]
    return page(title, sections)
