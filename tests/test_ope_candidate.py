"""The OPE engine judges a `Candidate` (tracerl.ope.candidate): a policy, a scored table of
its log-probs of the logged actions, its per-step distribution, a behaviour override; each
layer whose input is missing says what it needs."""

from __future__ import annotations

import numpy as np
import pytest

from tracerl.config.learning import Ope
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk.candidates import behavior_model, make_candidates
from tracerl.envs.support_desk.features import critic_features, to_transitions
from tracerl.ope.candidate import Candidate
from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates

GAMMA = 0.99


@pytest.fixture(scope="module")
def desk():
    p = sd.FixtureParams()
    train = to_transitions(sd.generate(p, 1_000, seed=11))
    logged = to_transitions(sd.generate(p, 1_000, seed=12))
    pi_hat_b = behavior_model(train, seed=11)
    candidates = make_candidates(train, p.behavior, pi_hat_b, gamma=GAMMA, seed=11)
    cfg = Settings.of(Ope(n_boot=100, seed=5), gamma=GAMMA, verifiers=[], weights={},
                      n_episodes=logged.n_episodes)
    return logged, candidates, cfg, LoggedData.prepare(logged, critic_features(), pi_hat_b,
                                                        cfg, 5)


def _by(records):
    return {f"{e.layer}/{e.estimator}": e for e in records}


def test_a_scored_table_gives_the_policys_importance_estimates(desk):
    tr, candidates, cfg, data = desk
    policy = candidates["behavior"]
    full = Candidate.of_policy("behavior", policy, tr)
    table = Candidate("behavior", logged_logprob=full.logged_logprob)
    out = evaluate_candidates(data, {"policy": policy, "table": table}, cfg, seed=1)
    by_policy, by_table = _by(out["policy"]), _by(out["table"])
    for name in ("is", "pdis", "wis", "pdwis"):
        assert by_table[f"importance/{name}"].value == pytest.approx(
            by_policy[f"importance/{name}"].value, abs=1e-9)
    for needs_distribution in ("critic/fqe", "importance/dr", "importance/wdr"):
        e = by_table[needs_distribution]
        assert e.value is None
        assert any("needs the candidate's distribution at each logged step (step_probs)"
                   in f for f in e.flags)


def test_a_per_step_distribution_gives_the_critic_and_dr(desk):
    tr, candidates, cfg, data = desk
    policy = candidates["behavior"]
    full = Candidate.of_policy("behavior", policy, tr)
    # A distribution that depends on the history beyond the encoded state: the per-step
    # solve (here equal to the policy's at every step, so the same value).
    steps = Candidate("steps", step_probs=full.step_probs + 0.0)
    out = evaluate_candidates(data, {"policy": policy, "steps": steps}, cfg, seed=1)
    assert _by(out["steps"])["critic/fqe"].value == pytest.approx(
        _by(out["policy"])["critic/fqe"].value, abs=1e-6)
    assert _by(out["steps"])["importance/dr"].value is not None


def test_the_logging_policy_is_fully_supported_and_a_behaviour_override_is_used(desk):
    tr, candidates, cfg, data = desk
    logger = Candidate("self", logged_logprob=np.log(data.pi_b),
                       behavior_logprob=np.log(data.pi_b))
    e = _by(evaluate_candidates(data, {"self": logger}, cfg, seed=1)["self"])
    assert e["importance/is"].support == 1.0
    assert e["importance/is"].details["propensities"] == "the candidate's behavior_logprob"
    w = e["importance/wis"]
    logged = np.bincount(tr.episode, weights=tr.r * GAMMA ** tr.t, minlength=tr.n_episodes)
    assert w.value == pytest.approx(logged.mean(), abs=1e-9)


def test_history_dependent_step_probs_keep_the_critic_per_step(desk):
    tr, _, _, _ = desk
    probs = np.full((tr.n, tr.n_actions), 1.0 / tr.n_actions)
    probs[0] = np.eye(tr.n_actions)[0]
    c = Candidate("odd", step_probs=probs)
    same_state = np.flatnonzero(tr.s == tr.s[0])
    assert c.state_distribution(tr) is None or len(same_state) == 1


def test_a_deterministic_policy_few_logged_episodes_follow_is_not_supported(desk):
    tr, candidates, cfg, data = desk
    out = evaluate_candidates(data, {"cfqi": candidates["constrained_fqi"],
                                     "self": candidates["behavior"]}, cfg, seed=1)
    cfqi, own = _by(out["cfqi"])["critic/fqe"], _by(out["self"])["critic/fqe"]
    assert own.support >= 0.99 and not {"low_support", "unsupported_actions"} & {
        f.split(":")[0] for f in own.flags}
    followed = cfqi.details["support"]["consistent_episodes"]
    assert followed < cfg.min_n_eff and cfqi.support < cfg.min_support
    assert "low_support" in cfqi.flags


@pytest.mark.parametrize("episodes", [300, 3000])
def test_the_calculator_logger_and_its_clone_are_fully_supported(episodes):
    from tests.calculator_ope import CRITIC_FEATURES, ENCODER, prepared, settings, steps_of
    from tracerl.envs.calculator.behavior import BehaviorPolicy
    from tracerl.rl.learners import behavior_model

    steps = steps_of("good_coverage", episodes, seed=episodes + 17)
    s = settings(episodes, n_boot=50, layers=["critic", "importance"])
    data = prepared(steps, s, replay=False)
    clone = behavior_model(ENCODER.transitions(steps), CRITIC_FEATURES)
    out = evaluate_candidates(data, {"logger": BehaviorPolicy("good_coverage"),
                                     "clone": clone}, s, seed=3)
    for name in ("logger", "clone"):
        for e in out[name]:
            assert e.support >= 0.99, (name, e.estimator, e.support)
            assert not {"low_support", "unsupported_actions"} & {
                f.split(":")[0] for f in e.flags}, (name, e.estimator, e.flags)
