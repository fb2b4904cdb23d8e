"""OPE without repetition: LSTD-Q critic, IS family on flat transitions, support, selection."""

from __future__ import annotations

import numpy as np
import pytest

from tracerl.hashed_features import HashedFeaturizer, expected_sa
from tracerl.ope.estimate import LOW_SUPPORT
from tracerl.ope.fa_data import FATransitions
from tracerl.ope.fa_layers import (
    ESTIMATED_PROPENSITIES,
    INTERVAL_UNRELIABLE,
    FAOPEConfig,
    evaluate_policy,
)
from tracerl.ope.linear_fqe import LinearFQE, lstdq_closed_form

GAMMA = 0.9


def two_step_log(n: int, seed: int, p_b: float = 0.5) -> FATransitions:
    """Two decisions per episode (state = step index); reward = the action (0 or 1)."""
    rng = np.random.default_rng(seed)
    a = (rng.random((n, 2)) < p_b).astype(np.int64)
    logp = np.log(np.where(a == 1, p_b, 1 - p_b))
    states = np.tile(np.array([[0], [1]]), (n, 1))
    return FATransitions(
        episode=np.repeat(np.arange(n), 2), t=np.tile([0, 1], n), states=states,
        actions=a.reshape(-1), rewards=a.reshape(-1).astype(float),
        done=np.tile([False, True], n), has_next=np.tile([True, False], n),
        next_states=np.tile(np.array([[1], [0]]), (n, 1)), behavior_logp=logp.reshape(-1),
        n_actions=2)


def featurizer() -> HashedFeaturizer:
    return HashedFeaturizer("toy", (2,), ((0,),), n_bits=12, n_actions=2)


def test_lstdq_equals_the_closed_form_and_the_exact_value() -> None:
    tr = two_step_log(400, seed=1)
    target = np.tile([[0.2, 0.8]], (tr.n_steps, 1))
    f = featurizer()
    fqe = LinearFQE(f, gamma=GAMMA, alpha=1e-8).fit(tr, target)
    phi = f.transform_sa(tr.states, tr.actions).toarray()
    boot = tr.has_next & ~tr.done
    psi = np.zeros_like(phi)
    nxt = np.flatnonzero(boot) + 1
    psi[boot] = GAMMA * expected_sa(f, tr.states[nxt], target[nxt]).toarray()
    used = fqe.used_
    theta = lstdq_closed_form(phi[:, used], psi[:, used], tr.rewards, alpha=1e-8)
    np.testing.assert_allclose(fqe.theta_, theta, atol=1e-9)
    # tabular features: Q(s, a) = a + gamma * 0.8 at s = 0; V = 0.8 + gamma 0.8
    assert fqe.value_ == pytest.approx(0.8 + GAMMA * 0.8, abs=1e-6)
    assert fqe.contributions_.mean() == pytest.approx(fqe.value_)


def test_is_family_is_unbiased_on_a_two_step_toy() -> None:
    tr = two_step_log(40_000, seed=2)
    target = np.tile([[0.2, 0.8]], (tr.n_steps, 1))
    truth = 0.8 + GAMMA * 0.8
    cfg = FAOPEConfig(gamma=GAMMA, n_boot=200, seed=3)
    est = {e.estimator: e for e in evaluate_policy(
        tr, target, critic_featurizer=featurizer(), behavior_probs=np.full((tr.n_steps, 2), .5),
        config=cfg)}
    for name in ("is", "pdis", "wis", "pdwis", "dr", "wdr", "lstdq"):
        e = est[name]
        assert e.ci_low <= truth <= e.ci_high, name
        assert abs(e.value - truth) < 0.03, name
        assert e.support == 1.0
        # deterministic rewards: the critic (and DR / WDR built on it) know the value
        # exactly, their interval would have zero width: widened by the stated rule, flagged
        exact = name in ("lstdq", "dr", "wdr")
        assert (INTERVAL_UNRELIABLE in e.flags) == exact, name


def test_estimated_propensities_are_flagged() -> None:
    tr = two_step_log(2000, seed=4)
    tr = FATransitions(**{**{k: getattr(tr, k) for k in tr.__dataclass_fields__},
                          "behavior_logp": np.full(tr.n_steps, np.nan)})
    target = np.tile([[0.3, 0.7]], (tr.n_steps, 1))
    est = evaluate_policy(tr, target, critic_featurizer=featurizer(),
                          behavior_probs=np.full((tr.n_steps, 2), 0.5),
                          config=FAOPEConfig(gamma=GAMMA, n_boot=100))
    is_family = [e for e in est if e.layer == "importance"]
    assert is_family and all(ESTIMATED_PROPENSITIES in e.flags and e.applicable
                             for e in is_family)
    assert all(e.details["propensities"] == "estimated" for e in is_family)


def test_unsupported_target_is_flagged_and_widened() -> None:
    tr = two_step_log(2000, seed=5, p_b=0.0)  # the log only ever shows action 0
    target = np.tile([[0.5, 0.5]], (tr.n_steps, 1))
    pb = np.tile([[1.0, 0.0]], (tr.n_steps, 1))
    est = evaluate_policy(tr, target, critic_featurizer=featurizer(), behavior_probs=pb,
                          config=FAOPEConfig(gamma=GAMMA, n_boot=100))
    for e in est:
        assert e.support == pytest.approx(0.25)
        assert LOW_SUPPORT in e.flags
        if e.applicable:
            assert INTERVAL_UNRELIABLE in e.flags
            assert "unsupported_mass" in e.details["interval_widened"]


def test_one_pass_is_terms_and_shared_bootstrap_match_the_core() -> None:
    from tracerl.ope import importance as imp
    from tracerl.ope.episodes import EpisodeBatch
    from tracerl.ope.estimate import ContributionSpec, estimates_from_contributions
    from tracerl.ope.fa_layers import _linearise, bootstrap_estimates, is_family_contributions

    rng = np.random.default_rng(0)
    n, lengths = 300, rng.integers(1, 6, size=300)
    episode = np.repeat(np.arange(n), lengths)
    t = np.concatenate([np.arange(k) for k in lengths])
    m = len(episode)
    batch = EpisodeBatch.from_steps(episode, t, rng.random(m), rng.uniform(0.2, 1, m),
                                    rng.uniform(0, 1, m), q_hat=rng.random(m),
                                    v_hat=rng.random(m), gamma=0.9)
    terms = is_family_contributions(batch)
    for name in ("is", "pdis", "dr"):
        np.testing.assert_allclose(terms[name][0], imp._CONTRIBUTIONS[name](batch))
    for name in ("pdwis", "wdr"):  # linearised: same value as the ratio of sums
        num, den = imp._CONTRIBUTIONS[name](batch)
        np.testing.assert_allclose(terms[name][0], _linearise(num, den))
        assert terms[name][0].mean() == pytest.approx((num.sum(0) / den.sum(0)).sum())
    specs = [ContributionSpec("importance", k, terms[k][0], support=1.0,
                              ratio_denominators=terms[k][1]) for k in terms]
    ours = bootstrap_estimates(specs, seed=5, n_boot=300)
    core = estimates_from_contributions(specs, seed=5, n_boot=300)
    for a, b in zip(ours, core, strict=True):
        assert (a.value, a.ci_low, a.ci_high) == pytest.approx((b.value, b.ci_low, b.ci_high))
