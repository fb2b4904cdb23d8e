"""The self-contained HTML report of a pipeline whose train and ope stages are feature
based (`train.kind: features`): the data stages, BC's held-out accuracy, the OPE table
with support and flags, and each cloned agent's estimate beside the logged successes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tracerl.report.html import _esc, _load, data_sections, image, page, section, table


def _ci(low: float | None, high: float | None) -> str:
    return "–" if low is None else f"[{low:.3f}, {high:.3f}]"


def _flags(flags: list[str]) -> str:
    return ", ".join(dict.fromkeys(f.split(":")[0] for f in flags)) or "–"


def build_features_report(reports: Path, title: str = "tracerl pipeline report",
                          first: Sequence[tuple[str, str]] = ()) -> str:
    """The report of the outputs under `reports/` (missing outputs are said missing);
    `first`: (anchor, html) sections placed before the others (the first screen)."""
    reports = Path(reports)
    sections = [*first, *data_sections(reports)]

    train = _load(reports / "train" / "summary.json")
    body = ['<p class="note">no train outputs</p>']
    if train:
        body = [table(["dataset", "episodes", "steps", "policies", "data hash"],
                      [[k, r["episodes"], r["rows"], ", ".join(r["policies"]),
                        r["data_hash"][:12]] for k, r in train.items()])]
        held = {k: r["bc_heldout"] for k, r in train.items() if "bc_heldout" in r}
        body.append("<h3>Behaviour cloning on tasks it did not see</h3>")
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
    sections.append(section("train", "Train (feature-based)", body))

    records = _load(reports / "ope" / "estimates.json")
    logged = _load(reports / "ope" / "logged.json") or {}
    compared = _load(reports / "ope" / "comparison.json") or []
    info = _load(reports / "ope" / "datasets.json") or {}
    selection = _load(reports / "ope" / "selection.json") or []
    body = ['<p class="note">no ope outputs</p>']
    if records:
        body = ["<h3>Each agent's logged value (its own logs)</h3>",
                table(["dataset", "logged value", "CI", "episodes"],
                      [[k, v["value"], _ci(v["ci_low"], v["ci_high"]), v["n"]]
                       for k, v in logged.items()])]
        if compared:
            body.append("<h3>Would the other agent beat the one that logged the data?</h3>")
            body.append('<p class="note">A policy cloned from the other agent\'s logs, '
                        "evaluated on these logs; its own logged value shown beside. Support: "
                        "the share of its episodes that stay on actions these logs cover; "
                        "below the threshold no estimator can know its value.</p>")
            body.append(table(
                ["candidate", "evaluated on", "estimate (headline)", "CI", "support", "flags",
                 "its own logged value", "logged value of the evaluated agent", "verdict"],
                [[c["candidate"], c["evaluated_on"], c["estimate"],
                  _ci(c["ci_low"], c["ci_high"]), c["support"], _flags(c["flags"]),
                  c["source_logged"], c["evaluated_logged"], c["verdict"]]
                 for c in compared]))
            for c in compared:
                body.append(f"<p>{_esc(c['candidate'])}, other estimators: " + _esc(", ".join(
                    f"{k} {v:.3f}" for k, v in c["other_estimates"].items()
                    if v is not None)) + "</p>")
        for n, d in info.items():
            notes = []
            if not d["logged_propensities"]:
                notes.append("importance sampling uses <b>estimated propensities</b> (the "
                             "behaviour model cloned from these logs; no log-probs were "
                             "logged): flagged estimated_propensities")
            if d["replay"]:
                notes.append(f"replay and verifier: not applicable — {_esc(d['replay'])}")
            if d.get("truth"):
                notes.append(f"truth: {_esc(d['truth'])} (the verifier layer's truth is the "
                             "success rate, the others' the discounted return)")
            body.append(f"<h3>OPE on {_esc(n)} ({d['episodes']} episodes, {d['steps']} "
                        "steps)</h3>")
            body += [f'<p class="note">{x}</p>' for x in notes]
            body.append(table(["candidate", "trained on", "layer", "estimator", "value", "CI",
                               "truth", "truth SE", "support", "ESS", "flags"],
                              [[r["policy"], r["trained_on"], r["layer"], r["estimator"],
                                r["value"], _ci(r["ci_low"], r["ci_high"]), r.get("truth"),
                                r.get("truth_se"), r["support"], r["ess"], _flags(r["flags"])]
                               for r in records if r["dataset"] == n]))
        if any(r.get("truth") is not None for r in records):
            body.append("<h3>Estimate against the truth</h3>")
            body.append(image(reports / "ope" / "estimate_vs_truth.png",
                              "estimate vs truth"))
        body.append("<h3>Selection (never a flagged estimate)</h3>")
        body.append(table(["dataset", "headline", "pick", "why"],
                          [[s["dataset"], s["headline"], s["pick"] or "none", s["note"]]
                           for s in selection]))
    sections.append(section("ope", "Off-policy evaluation (feature-based)", body))
    return page(title, sections)
