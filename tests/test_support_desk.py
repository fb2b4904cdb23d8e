"""The support-desk fixture: simulator, OpenAI-chat logs, truth."""

from __future__ import annotations

import json

import numpy as np

from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk import chat
from tracerl.envs.support_desk.features import to_transitions
from tracerl.envs.support_desk.sim import (
    ACTIONS,
    ESCALATE,
    REPLY_FINAL,
    SCRIPT,
    EscalateOnError,
    ScriptedPolicy,
    simulate,
)
from tracerl.envs.support_desk.truth import mc_truth


def test_logs_are_distinct_and_sized() -> None:
    ep = sd.generate(sd.FixtureParams(), 3000, seed=1)
    assert chat.distinct_share(ep) >= 0.95
    lengths = ep.lengths
    assert lengths.min() >= 5 and lengths.max() <= 40
    # the behaviour never escalates and ends only by its script
    assert not np.any(ep.action == ESCALATE)
    assert np.all(ep.done[ep.action == REPLY_FINAL])


def test_simulation_is_seeded() -> None:
    a = simulate(ScriptedPolicy(), 500, seed=3)
    b = simulate(ScriptedPolicy(), 500, seed=3)
    for name in ("episode", "t", "states", "action", "reward", "logp"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_logged_logprobs_are_the_behaviour_probabilities() -> None:
    pol = ScriptedPolicy()
    ep = simulate(pol, 500, seed=4)
    probs = pol.action_probs(ep.states)
    np.testing.assert_allclose(np.exp(ep.logp), probs[np.arange(len(ep.action)), ep.action])


def test_the_script_always_succeeds_and_wrong_arguments_fail() -> None:
    ep = simulate(SCRIPT, 2000, seed=5)
    assert ep.success.all() and not ep.error.any()
    esc = simulate(EscalateOnError(ScriptedPolicy()), 2000, seed=5)
    assert esc.error.any() and np.any(esc.action == ESCALATE)


def test_chat_records_match_the_episodes() -> None:
    ep = simulate(ScriptedPolicy(), 200, seed=6)
    for i, rec in enumerate(chat.records(ep, behavior_policy="b", gamma=0.99)):
        rec = json.loads(json.dumps(rec))
        assistant = [m for m in rec["messages"] if m["role"] == "assistant"]
        assert len(assistant) == ep.lengths[i] == len(rec["info"]["behavior_logprobs"])
        tool_ids = {m["tool_call_id"] for m in rec["messages"] if m["role"] == "tool"}
        for m in assistant:
            for call in m.get("tool_calls") or []:
                assert call["function"]["name"] in ACTIONS
                json.loads(call["function"]["arguments"])
                assert call["id"] in tool_ids
        assert rec["reward"] == float(ep.success[i])


def test_truth_agrees_with_an_independent_rollout() -> None:
    pol = ScriptedPolicy(p_skip_check=0.0)
    a = mc_truth(pol, gamma=0.99, n=20_000, seed=10)
    b = mc_truth(pol, gamma=0.99, n=20_000, seed=11)
    assert a["se"] < 0.01
    assert abs(a["value"] - b["value"]) < 4 * np.hypot(a["se"], b["se"])


def test_transitions_layer() -> None:
    ep = simulate(ScriptedPolicy(), 300, seed=7)
    tr = to_transitions(ep)
    assert tr.n_episodes == 300 and tr.n == len(ep.action)
    has_next = tr.s_next >= 0
    assert tr.done.sum() == 300 and (~has_next).sum() == 300
    np.testing.assert_array_equal(tr.rows[tr.s_next[has_next]], tr.states()[1:][has_next[:-1]])
