"""Issue 31: answers a team can act on. The agents' ranking (tau2's real logs), support from
the logged propensities, the self-check as an encoder diagnostic, and the decision rule of
the critic's corroboration; the answer's words for the logged agent and out-of-range values.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.io.fileio import read_table
from tracerl.ope.evaluate import logged_model, logged_value, task_returns
from tracerl.ope.select import holm, rank_agents, select, sign_flip_p
from tracerl.report.answer import KEEP, answers, headline_points, ranking_lines
from tracerl.rl.encoding import encoder_for

TAU2 = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "tau2-bench"
FILES = sorted(TAU2.glob("*_airline.json"))


@pytest.mark.skipif(len(FILES) < 2, reason=f"tau2-bench logs not found in {TAU2}")
def test_a_multi_agent_answer_opens_with_the_agents_ranked_by_model(tmp_path):
    logged = {}
    tables = {}
    for path in FILES:
        name = path.name.removesuffix("_airline.json")
        ingest([path], tmp_path / name, fmt="tau2")
        tables[name] = relabel(read_table(tmp_path / name / "steps"), ["tau2_outcome@1"],
                               {"task_success": 1.0})
    encoder = encoder_for(list(tables.values()), "dialogue")
    for name, steps in tables.items():
        tr = encoder.transitions(steps)
        logged[name] = {**logged_value(tr, gamma=1.0, seed=1, n_boot=200, level=0.95).to_dict(),
                        "model": logged_model(steps), "task_returns": task_returns(tr, 1.0)}
    # The model each file's rows name (stdlib json, not the adapter).
    models = {p.name.removesuffix("_airline.json"):
              json.loads(p.read_text())["info"]["agent_info"]["llm"] for p in FILES}
    assert {n: v["model"] for n, v in logged.items()} == models
    tasks = {p.name.removesuffix("_airline.json"):
             {s["task_id"] for s in json.loads(p.read_text())["simulations"]} for p in FILES}
    ranking = rank_agents(logged, level=0.95, seed=3, n_boot=500)
    order = [r["agent"] for r in ranking["agents"]]
    assert [logged[a]["value"] for a in order] == sorted(
        (v["value"] for v in logged.values()), reverse=True)
    pair = ranking["pairs"][0]
    assert pair["tasks"] == len(set.intersection(*tasks.values()))
    assert pair["p_holm"] >= pair["p_value"] and ranking["adjustment"] == "Holm"
    lines = ranking_lines(ranking)
    assert lines[0].startswith("agents ranked (logged value): 1. ")
    assert models[order[0]] in lines[0] and models[order[1]] in lines[0]
    assert "Holm-adjusted over 1 pair" in lines[1]
    # The answer a surface prints opens with that ranking.
    from tracerl.report.answer import answer_lines
    assert answer_lines([], ranking)[0] == lines[0]


def test_holm_and_the_exact_sign_flip_test():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # 6 tasks all +1: only the all-plus and all-minus of 64 sign patterns are as extreme.
    assert sign_flip_p(np.ones(6), seed=0) == pytest.approx(2 / 64)
    assert sign_flip_p(np.zeros(4), seed=0) == 1.0


def _record(policy, value, low, high, flags=(), support=1.0):
    return {"dataset": "d", "policy": policy, "layer": "critic", "estimator": "fqe",
            "metric": "return", "value": value, "ci_low": low, "ci_high": high,
            "support": support, "flags": list(flags), "truth": None, "truth_se": None,
            "ess": None, "n": 100, "trained_on": "d"}


def test_the_pick_being_the_logged_agent_is_keep_the_logged_agent():
    records = [_record("behavior", 0.27, 0.25, 0.29), _record("bc", 0.25, 0.2, 0.3)]
    logged = {"d": {"value": 0.26, "ci_low": 0.24, "ci_high": 0.28, "n": 100}}
    a = answers(records, select(records, 0.95), logged, "critic/fqe", 0.95)[0]
    assert (a.decision, a.candidate) == (KEEP, "behavior")
    assert a.line().startswith("d: keep the logged agent — ")


def test_cannot_tell_says_how_many_more_episodes_would_tell():
    records = [_record("bc", 0.35, 0.25, 0.45)]
    logged = {"d": {"value": 0.3, "ci_low": 0.25, "ci_high": 0.35, "n": 100}}
    a = answers(records, select(records, 0.95), logged, "critic/fqe", 0.95)[0]
    # half-widths 0.1 + 0.05 against a gap of 0.05: (0.15 / 0.05)^2 x 100 - 100 more
    assert "about 800 more logged episodes (now 100)" in a.line()


def test_out_of_range_values_are_never_printed_or_drawn_as_numbers():
    records = [_record("fqi", 1.0, 0.9, 1.0, flags=["out_of_range: outside [-1.2, 1]"]),
               _record("bc", 0.5, 0.45, 0.55)]
    logged = {"d": {"value": 0.3, "ci_low": 0.25, "ci_high": 0.35, "n": 100}}
    points = {p["policy"]: p for p in headline_points(records, logged, "d", "critic/fqe")}
    assert points["fqi"]["estimate"] is None and "out_of_range" in points["fqi"]["flags"]
    assert points["bc"]["estimate"] == 0.5
    from tracerl.ope.records import markdown
    row = next(line for line in markdown(records, select(records, 0.95), 0.95).splitlines()
               if "| fqi |" in line)
    assert row.split(" | ")[4] == "out of range"


def test_support_reads_the_logged_propensities_where_the_log_shows_the_action():
    """A fitted model far off the logged propensities where the log shows the action (here
    0.001 there, the logger's own probabilities elsewhere) does not make a candidate
    unsupported: coverage reads the logged probability at every (state, action) the log
    shows, the fitted one only where it never does."""
    from tracerl.envs import support_desk as sd
    from tracerl.envs.support_desk.features import critic_features, to_transitions
    from tracerl.envs.support_desk.sim import ScriptedPolicy
    from tracerl.ope.support import measure, observed_propensities

    logger = sd.FixtureParams().behavior
    tr = to_transitions(sd.generate(sd.FixtureParams(), 400, seed=5))
    shown = np.zeros((tr.n_states, tr.n_actions), dtype=bool)
    shown[tr.s, tr.a] = True
    fitted = np.where(shown, 0.001, logger.action_probs(tr.rows))
    table = observed_propensities(tr, tr.behavior_prob, fitted)
    assert np.allclose(table[tr.s, tr.a], tr.behavior_prob)  # a Markov logger: exact
    assert np.all(table[~shown] == fitted[~shown])
    probs = ScriptedPolicy(p_script=0.7, p_skip_check=0.0).action_probs(tr.states())
    sup = measure(tr, behavior_probs=fitted, pi_b=tr.behavior_prob,
                  pi_e_logged=probs[np.arange(tr.n), tr.a], steps=probs, per_state=None,
                  features=critic_features(), min_behavior_prob=0.05,
                  max_episode_ratio=10.0, min_n_eff=30.0)
    assert not sup.unsupported and sup.decisions > 1 - 1e-3
