"""ope (kind: features): every candidate trained by the feature-based train stage, through
every layer that applies, on each evaluated dataset's logs; beside each agent's own logged
value, the truth where the dataset's fixture brings one (a simulator: each candidate's
value and success by rolling it out, with their standard errors; real logs have none), and
for candidates cloned from another agent, whether they would beat the agent that logged
the data."""

from __future__ import annotations

from prefect import flow

from flows import _publish as publish
from flows._stage import (
    datasets,
    identify,
    md_table,
    namer,
    path,
    record_provenance,
    stage_params,
    write_metrics,
)
from flows.fa_train import stage_gamma
from tasks.fa import logged_value_of, no_truth_reason, ope_features, truth_features
from tracerl.config.fixtures import get_fixture
from tracerl.config.params import get
from tracerl.io.fileio import write_json, write_text
from tracerl.io.staging import staged
from tracerl.ope.fa_evaluate import pick, verdict_against_logged
from tracerl.ope.report import plot

TRUTH_LABEL = "truth (Monte Carlo rollouts in the fixture's simulator)"


def _ci(r: dict) -> str:
    return "–" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"


def _flags(r: dict) -> str:
    return ", ".join(dict.fromkeys(f.split(":")[0] for f in r["flags"])) or "–"


def _value(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _se(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f}"


def fixture_name_of(params: dict, name: str) -> str | None:
    """datasets.<name>.fixture, else the pipeline's `fixture:`; None for real logs."""
    entry = (get(params, "datasets") or {}).get(name) or {}
    return entry.get("fixture") or get(params, "fixture")


def with_truth(records: list[dict], truth: dict[str, dict[str, float]] | None) -> list[dict]:
    """Each record with the metric it estimates (the verifier layer: success; the others:
    the return) and that metric's truth and standard error for its candidate (None
    without a truth)."""
    out = []
    for r in records:
        metric = "success" if r["layer"] == "verifier" else "return"
        t = (truth or {}).get(r["policy"])
        out.append({**r, "metric": metric, "truth": None if t is None else t[metric],
                    "truth_se": None if t is None else t[f"{metric}_se"]})
    return out


def headline_metrics(records: list[dict], logged: dict[str, dict], headline: str) -> dict:
    """metrics/<pipeline>/ope.json: each dataset's logged value; per dataset and candidate
    the headline estimate, its support and flag count, and where a truth exists the truth,
    its SE and the estimate's error against it (`minus_truth`: DVC reads a key named
    "error" as a failure to load metrics)."""
    metrics: dict = {"logged": {n: {"value": v["value"]} for n, v in logged.items()}}
    for r in records:
        if f"{r['layer']}/{r['estimator']}" == headline and r["value"] is not None:
            row = {"estimate": r["value"], "support": r["support"], "flags": len(r["flags"])}
            if r["truth"] is not None:
                row.update(truth=r["truth"], truth_se=r["truth_se"],
                           minus_truth=r["value"] - r["truth"])
            metrics.setdefault(r["dataset"], {})[r["policy"]] = row
    return metrics


def comparisons(records: list[dict], logged: dict[str, dict], headline: str,
                min_support: float) -> list[dict]:
    """Per cross-agent candidate: its headline estimate on the evaluated agent's logs beside
    both agents' logged values, and the verdict the numbers allow."""
    out = []
    for r in records:
        if not r["cross_agent"] or f"{r['layer']}/{r['estimator']}" != headline:
            continue
        others = {f"{o['layer']}/{o['estimator']}": o["value"] for o in records
                  if o["policy"] == r["policy"] and o["dataset"] == r["dataset"]}
        out.append({"candidate": r["policy"], "trained_on": r["trained_on"],
                    "evaluated_on": r["dataset"], "headline": headline,
                    "estimate": r["value"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                    "support": r["support"], "flags": r["flags"],
                    "other_estimates": others,
                    "source_logged": logged[r["trained_on"]]["value"],
                    "source_logged_ci": [logged[r["trained_on"]]["ci_low"],
                                         logged[r["trained_on"]]["ci_high"]],
                    "evaluated_logged": logged[r["dataset"]]["value"],
                    "evaluated_logged_ci": [logged[r["dataset"]]["ci_low"],
                                            logged[r["dataset"]]["ci_high"]],
                    "verdict": verdict_against_logged(r, logged[r["dataset"]], min_support)})
    return out


@flow(name="ope", flow_run_name=namer("ope"))
def fa_ope_flow() -> dict:
    params = stage_params()
    ope = dict(get(params, "ope"))
    train = dict(get(params, "train"))
    names = list(ope["datasets"])
    identify("ope", params, names)
    gamma = stage_gamma(params)
    labelled, models = path(params, "labelled"), path(params, "models")
    trained = train.get("datasets") or datasets(params)
    candidates = {f"{d}/{learner}": models / d / f"{learner}.json"
                  for d in trained for learner in train["learners"]}
    relabel = dict(get(params, "relabel"))  # replay scores with the relabel stage's verifiers
    fixtures = {n: fixture_name_of(params, n) for n in names}
    no_truth = {n: no_truth_reason(f, get_fixture(f) if f else None) for n, f in fixtures.items()}
    truths = {f: truth_features(f, candidates, params)  # once per fixture, not per dataset
              for f in dict.fromkeys(fixtures[n] for n in names if no_truth[n] is None)}
    results = {n: ope_features(n, labelled / n / "steps", models, candidates, ope, relabel,
                               gamma, fixtures[n]) for n in names}
    for n, res in results.items():
        res["records"] = with_truth(res["records"], truths.get(fixtures[n]))
        res["truth"] = no_truth[n] or (
            f"Monte Carlo in the {fixtures[n]} fixture's simulator, each candidate with its "
            f"standard error")
    logged = {n: logged_value_of(n, labelled / n / "steps", models, ope, gamma)
              for n in datasets(params)}
    records = [r for res in results.values() for r in res["records"]]
    headline, min_support = ope["headline"], float(ope["min_support"])
    selection = []
    for n in names:
        chosen, why = pick([r for r in records if r["dataset"] == n], headline)
        selection.append({"dataset": n, "headline": headline, "pick": chosen, "note": why})
    compared = comparisons(records, logged, headline, min_support)
    out = path(params, "reports") / "ope"
    write_json(out / "estimates.json", records)
    write_json(out / "selection.json", selection)
    write_json(out / "logged.json", logged)
    write_json(out / "comparison.json", compared)
    write_json(out / "datasets.json", {n: {k: v for k, v in res.items() if k != "records"}
                                       for n, res in results.items()})
    full = md_table(["dataset", "candidate", "layer", "estimator", "value", "CI", "truth",
                     "truth SE", "support", "flags"],
                    [[r["dataset"], r["policy"], r["layer"], r["estimator"], _value(r["value"]),
                      _ci(r), _value(r["truth"]), _se(r["truth_se"]), _value(r["support"]),
                      "; ".join(r["flags"]) or "–"] for r in records])
    truth_notes = [f"{n}: {res['truth']}" for n, res in results.items()]
    write_text(out / "estimates.md", full + "\n\nTruth: " + "; ".join(truth_notes) + "\n")
    figure = out / "estimate_vs_truth.png"
    if any(r["truth"] is not None for r in records):
        plot(records, staged(figure), truth_label=TRUTH_LABEL,
             limits=tuple(ope["return_range"]) if ope.get("return_range") else None)
    write_metrics(params, "ope", headline_metrics(records, logged, headline))
    record_provenance(params, "ope")
    publish.wrote("ope", [out])
    rows = [[s["dataset"], s["pick"] or "none", _value(logged[s["dataset"]]["value"]),
             s["note"]] for s in selection]
    verdict = ("pick " + ", ".join(f"{s['pick']} on {s['dataset']}" for s in selection)
               if all(s["pick"] for s in selection) else "no unflagged pick on some dataset")
    notes = [f"{c['candidate']} on {c['evaluated_on']}: {c['verdict']} (estimate "
             f"{_value(c['estimate'])}, support {c['support']:.2f}; {c['trained_on']} logged "
             f"{c['source_logged']:.3f}, {c['evaluated_on']} logged "
             f"{c['evaluated_logged']:.3f})" for c in compared]
    notes += [f"{n}: truth: {res['truth']}" for n, res in results.items()]
    notes += [f"{n}: replay and verifier not applicable: {res['replay']}"
              for n, res in results.items() if res["replay"]]
    notes += [f"{n}: importance sampling uses estimated propensities (no log-probs logged)"
              for n, res in results.items() if not res["logged_propensities"]]
    publish.summary("ope", verdict, ["dataset", f"pick ({headline}, unflagged only)",
                                  "logged value", "why"], rows, notes=notes,
                 description="Feature-based OPE: which candidate the headline would pick")
    for n in names:
        publish.detail(f"ope-{n}", f"OPE on {n}: {headline}, one row per candidate",
                    ["candidate", "trained on", "estimate", "CI", "truth", "truth SE",
                     "support", "flags"],
                    [[r["policy"], r["trained_on"], _value(r["value"]), _ci(r),
                      _value(r["truth"]), _se(r["truth_se"]), _value(r["support"]), _flags(r)]
                     for r in records
                     if r["dataset"] == n and f"{r['layer']}/{r['estimator']}" == headline],
                    f"{n}: each candidate by {headline}")
    if any(r["truth"] is not None for r in records):
        publish.image("ope-plot", figure, "OPE estimate against the truth",
                   "Every return estimate against its candidate's Monte Carlo truth")
    publish.detail("ope-estimates", "Every layer and estimator", [], [],
                "Every candidate through every layer (full table)", footer=full)
    return {"selection": selection, "comparison": compared}
