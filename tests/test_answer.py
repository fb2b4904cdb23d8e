"""The answer first: one line per dataset from the engine's own selection rule (select) and
its verdict against the logged policy — deploy, keep the logged policy, or cannot tell —
on every surface that prints it (the HTML report, `tracerl results`)."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from tests.conftest import ROOT
from tracerl.ope.select import select
from tracerl.report.answer import (
    CANNOT_TELL,
    DEPLOY,
    KEEP,
    answers,
    headline_metrics,
    headline_points,
)

HEADLINE = "critic/fqe"


def _record(dataset, policy, value, low, high, flags=(), support=1.0, truth=None,
            layer="critic", estimator="fqe"):
    return {"dataset": dataset, "policy": policy, "layer": layer, "estimator": estimator,
            "metric": "return", "value": value, "ci_low": low, "ci_high": high,
            "support": support, "flags": list(flags), "truth": truth, "truth_se": None,
            "ess": None, "n": 100, "trained_on": dataset}


def _logged(value, low, high):
    return {"value": value, "ci_low": low, "ci_high": high, "n": 100}


def _answer(records, logged, min_support=0.95):
    found = answers(records, select(records, min_support), logged, HEADLINE, min_support)
    return {a.dataset: a for a in found}


def test_deploy_when_the_picks_interval_clears_the_logged_one():
    records = [_record("d", "bc", 0.8, 0.7, 0.9, truth=0.8),
               _record("d", "fqi", 0.95, 0.9, 1.0, flags=["unsupported_actions:3"],
                       support=0.5, truth=0.1)]  # higher but unsupported: never the pick
    a = _answer(records, {"d": _logged(0.4, 0.3, 0.5)})["d"]
    assert (a.decision, a.candidate, a.estimate) == (DEPLOY, "bc", 0.8)
    line = a.line()
    assert line.startswith("d: deploy bc (margin 0.200) — ")
    assert "0.800 [0.700, 0.900]" in line and "logged 0.400 [0.300, 0.500]" in line


def test_keep_the_logged_policy_when_the_pick_is_worse():
    a = _answer([_record("d", "bc", 0.2, 0.1, 0.3)], {"d": _logged(0.6, 0.5, 0.7)})["d"]
    assert (a.decision, a.candidate) == (KEEP, "bc")
    assert a.line().startswith("d: keep the logged agent (margin 0.200) — bc critic/fqe 0.200")


def test_cannot_tell_when_the_intervals_overlap():
    a = _answer([_record("d", "bc", 0.55, 0.4, 0.7)], {"d": _logged(0.5, 0.45, 0.55)})["d"]
    assert (a.decision, a.candidate) == (CANNOT_TELL, "bc")
    assert "overlaps" in a.why


def test_cannot_tell_when_every_estimate_is_flagged_says_which_flags():
    records = [_record("d", "bc", 0.9, 0.0, 1.0, flags=["interval_unreliable"]),
               _record("d", "fqi", 0.7, 0.6, 0.8, flags=["low_support", "unsupported_actions"],
                       support=0.4)]
    a = _answer(records, {"d": _logged(0.5, 0.4, 0.6)})["d"]
    assert (a.decision, a.candidate, a.estimate) == (CANNOT_TELL, None, None)
    assert "interval_unreliable" in a.why and "low_support" in a.why
    assert "logged 0.500" in a.line()


def test_one_answer_per_dataset_from_the_headline_estimator_only():
    records = [_record("a", "bc", 0.8, 0.7, 0.9), _record("b", "bc", 0.1, 0.0, 0.2),
               _record("a", "bc", 0.1, 0.0, 0.2, layer="importance", estimator="is")]
    found = _answer(records, {"a": _logged(0.4, 0.3, 0.5), "b": _logged(0.4, 0.3, 0.5)})
    assert sorted(found) == ["a", "b"]
    assert found["a"].decision == DEPLOY and found["b"].decision == KEEP


def test_headline_metrics_and_plot_points():
    records = [_record("d", "bc", 0.8, 0.7, 0.9, truth=0.8),
               _record("d", "fqi", 0.9, 0.85, 0.95, truth=0.9)]
    logged = {"d": _logged(0.4, 0.3, 0.5)}
    selection = select(records, 0.95)
    metrics = headline_metrics(answers(records, selection, logged, HEADLINE, 0.95), selection)
    assert metrics == {"d": {"estimate": 0.9, "logged": 0.4, "regret": 0.0}}
    points = headline_points(records, logged, "d", HEADLINE)
    assert [p["dataset_policy"] for p in points] == ["d · bc", "d · fqi",
                                                     "d · (logged policy)"]


def _ope_outputs(reports, records, logged):
    ope = reports / "ope"
    ope.mkdir(parents=True)
    for name, obj in {"estimates.json": records, "logged.json": logged,
                      "selection.json": select(records, 0.95)}.items():
        (ope / name).write_bytes(orjson.dumps(obj))


def test_the_html_report_opens_with_the_answer(tmp_path):
    from tracerl.report.learning import build_report

    reports = tmp_path / "reports"
    _ope_outputs(reports, [_record("d", "bc", 0.8, 0.7, 0.9)], {"d": _logged(0.4, 0.3, 0.5)})
    page = build_report(reports, tmp_path / "metrics", title="t", headline=HEADLINE)
    body = page.split("<main>", 1)[1]
    assert body.startswith('<section id="answer">')
    assert '<span class="verdict pass">deploy bc</span>' in body.split("</section>", 1)[0]


@pytest.mark.integration
def test_tracerl_results_prints_the_answer_first(tmp_path):
    reports = tmp_path / "reports"
    _ope_outputs(reports, [_record("d", "bc", 0.2, 0.1, 0.3)], {"d": _logged(0.6, 0.5, 0.7)})
    done = subprocess.run([sys.executable, "-m", "tracerl", "results", "--reports",
                           str(reports), "--metrics", str(tmp_path / "metrics")],
                          capture_output=True, text=True, cwd=tmp_path, check=True,
                          env={**os.environ, "COLUMNS": "100"})
    lines = done.stdout.splitlines()
    assert lines[0].startswith("answer (critic/fqe")
    assert lines[1].startswith("d: keep the logged agent (margin 0.200) — bc critic/fqe 0.200")


@pytest.mark.integration
@pytest.mark.parametrize("params", ["params.yaml", "pipelines/tau2/params.yaml",
                                    "pipelines/support_desk/params.yaml"])
def test_each_pipelines_markdown_report_opens_with_the_answer(params):
    """The ope stage's estimates.md of each pipeline of this checkout (after `make run`)."""
    import json

    from tracerl.config.params import get, load_params
    from tracerl.report.answer import ranking_lines

    path = ROOT / get(load_params(ROOT / params), "paths.reports") / "ope" / "estimates.md"
    if not path.is_file():
        pytest.skip(f"{path} is absent: run `make run`")
    text = path.read_text()
    assert text.startswith("Answer (")
    # Several logged agents: their ranking opens the answer (issue 31), the datasets follow.
    rank_file = path.parent / "ranking.json"
    ranking = ranking_lines(json.loads(rank_file.read_text()) if rank_file.is_file() else None)
    bullets = text.splitlines()[2:]
    assert [b.removeprefix("- ") for b in bullets[:len(ranking)]] == ranking
    first = bullets[len(ranking)]
    assert first.startswith("- ") and any(
        w in first for w in (f": {DEPLOY} ", f": {KEEP}", f": {CANNOT_TELL} — "))


def _rec(policy, layer, estimator, value, lo, hi, flags=(), support=1.0, details=None):
    return {"dataset": "d", "policy": policy, "layer": layer, "estimator": estimator,
            "metric": "return", "value": value, "ci_low": lo, "ci_high": hi,
            "support": support, "flags": list(flags), "details": details or {}}


def test_verdicts_identified_bounded_unidentified_with_next_steps():
    from tracerl.report.answer import candidate_verdict, verdict_line

    records = [
        _rec("a", "critic", "fqe", 0.5, 0.4, 0.6), _rec("a", "importance", "wis", 0.52, 0.4, 0.6),
        _rec("b", "critic", "fqe", 0.9, 0.0, 1.0, ["low_support", "estimated_propensities"],
             support=0.3, details={"support": {"tasks_lacking": ["t7", "t2"]}}),
        _rec("c", "critic", "fqe", None, None, None,
             ["not_applicable: needs the candidate's distribution at each logged step "
              "(step_probs)"]),
        _rec("c", "importance", "is", None, None, None, ["no estimate: ESS 0"])]
    a = candidate_verdict(records, "d", "a", "critic/fqe", 0.95)
    assert a.status == "identified" and a.estimate == 0.5 and "importance/wis" in a.why
    b = candidate_verdict(records, "d", "b", "critic/fqe", 0.95)
    assert b.status == "bounded" and (b.ci_low, b.ci_high) == (0.0, 1.0)
    assert "action_logprobs" in b.next_step and "t7, t2" in b.next_step
    c = candidate_verdict(records, "d", "c", "critic/fqe", 0.95)
    assert c.status == "unidentified" and "step_probs" in c.next_step
    line = verdict_line(records, "d", "critic/fqe", 0.95)
    assert line.startswith("d verdicts: a identified") and line.count(" | ") == 2
