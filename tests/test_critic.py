"""The one critic over hashed features (LSTD-Q, delta-method interval) and the layers on
logs that never repeat: the IS family on per-step arrays, estimated propensities, the
support of a target the log does not cover."""

from __future__ import annotations

import numpy as np
import pytest

from tracerl.config.learning import Ope
from tracerl.ope.critic import Critic, lstdq_closed_form
from tracerl.ope.estimate import LOW_SUPPORT, UNSUPPORTED_ACTIONS
from tracerl.ope.evaluate import LoggedData, Settings, evaluate_policy
from tracerl.ope.importance import IS_ESTIMATORS
from tracerl.rl.features import Hashed, matrix
from tracerl.rl.transitions import Transitions

GAMMA = 0.9


def two_step_log(n: int, seed: int, p_b: float = 0.5, logged: bool = True) -> Transitions:
    """Two decisions per episode (state = step index); reward = the action (0 or 1)."""
    rng = np.random.default_rng(seed)
    a = (rng.random((n, 2)) < p_b).astype(np.int64)
    logp = np.log(np.where(a == 1, p_b, 1 - p_b)) if logged else None
    return Transitions.build(
        episode=np.repeat(np.arange(n), 2), t=np.tile([0, 1], n),
        rows=np.tile(np.array([[0], [1]]), (n, 1)), a=a.reshape(-1),
        r=a.reshape(-1).astype(float), done=np.tile([False, True], n), actions=("a0", "a1"),
        variables=("step",), behavior_logp=None if logp is None else logp.reshape(-1))


def features() -> Hashed:
    return Hashed((2,), ((0,),), n_bits=12, n_actions=2)


class Fixed:
    def __init__(self, probs: list[float]) -> None:
        self.probs = np.asarray(probs)

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        return np.tile(self.probs, (len(states), 1))


def test_lstdq_equals_the_closed_form_and_the_exact_value() -> None:
    tr = two_step_log(400, seed=1)
    target = np.array([[0.2, 0.8], [0.2, 0.8]])
    f = features()
    fqe = Critic(f, gamma=GAMMA, alpha=1e-8).fit(tr, target)
    phi = matrix(f.sa_columns(tr.states(), tr.a), f.n_features).toarray()
    boot = np.flatnonzero((tr.s_next >= 0) & ~tr.done)
    psi = np.zeros_like(phi)
    nxt = tr.rows[tr.s_next[boot]]
    for a in range(2):
        psi[boot] += GAMMA * target[tr.s_next[boot], a][:, None] * matrix(
            f.sa_columns(nxt, a), f.n_features).toarray()
    used = fqe.used_
    theta = lstdq_closed_form(phi[:, used], psi[:, used], tr.r, alpha=1e-8)
    np.testing.assert_allclose(fqe.theta_, theta, atol=1e-9)
    # tabular features: Q(s, a) = a + gamma * 0.8 at s = 0; V = 0.8 + gamma 0.8
    assert fqe.value_ == pytest.approx(0.8 + GAMMA * 0.8, abs=1e-6)
    assert fqe.contributions_.mean() == pytest.approx(fqe.value_)


def _evaluate(tr: Transitions, target: list[float], behavior: list[float], **ope) -> dict:
    s = Settings.of(Ope(**{"n_boot": 200, "return_range": (0.0, 2.0), **ope}), gamma=GAMMA,
                    verifiers=[], weights={}, n_episodes=tr.n_episodes)
    data = LoggedData.prepare(tr, features(), Fixed(behavior), s, seed=3)
    assert data.groups is None  # hashed features: the delta method, no refits
    return {e.estimator: e for e in evaluate_policy(data, Fixed(target), s, seed=3)}


def test_is_family_and_the_critic_are_unbiased_on_a_two_step_toy() -> None:
    tr = two_step_log(40_000, seed=2)
    truth = 0.8 + GAMMA * 0.8
    est = _evaluate(tr, [0.2, 0.8], [0.5, 0.5])
    for name in (*IS_ESTIMATORS, "fqe"):
        e = est[name]
        assert e.ci_low <= truth <= e.ci_high, name
        assert abs(e.value - truth) < 0.03, name
        assert e.support == 1.0 and not e.flags, (name, e.flags)
    assert est["dr"].details["critic"].startswith("cross-fitted: 2 folds")
    assert est["fqe"].details["interval"] == "delta method (per-episode influence)"


def test_estimated_propensities_are_flagged() -> None:
    tr = two_step_log(2000, seed=4, logged=False)
    est = _evaluate(tr, [0.3, 0.7], [0.5, 0.5])
    is_family = [e for e in est.values() if e.layer == "importance"]
    assert is_family and all("estimated_propensities" in e.flags and e.applicable
                             for e in is_family)
    assert all(e.details["propensities"] == "estimated" for e in is_family)


def test_unsupported_target_is_flagged_and_widened() -> None:
    tr = two_step_log(2000, seed=5, p_b=0.0)  # the log only ever shows action 0
    est = _evaluate(tr, [0.5, 0.5], [1.0, 0.0])
    for e in est.values():
        # the target's episodes that never take action 1: 0.5 x 0.5 of its play is covered;
        # its support (enough effective episodes: those 2,000 x 0.25 follow it) is full
        assert e.covered == pytest.approx(0.25, abs=1e-6)
        assert e.details["support"]["covered"] == pytest.approx(0.25, abs=1e-6)
        assert e.support == 1.0 and LOW_SUPPORT not in e.flags
        assert UNSUPPORTED_ACTIONS in e.flags
        if e.applicable:
            assert "unsupported_mass" in e.details["interval_widened"]
            assert 0.0 <= e.ci_low <= e.ci_high <= 2.0  # inside the value's range
