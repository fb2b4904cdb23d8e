"""Policies over hashed features: BC, FQI, support-constrained FQI, safe JSON artifacts."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from tracerl.envs.support_desk import FixtureParams, generate
from tracerl.envs.support_desk.features import (
    critic_featurizer,
    policy_featurizer,
    to_transitions,
)
from tracerl.envs.support_desk.sim import ESCALATE
from tracerl.policies.sklearn_policies import (
    FittedQRegressor,
    LogisticBC,
    load_fa_policy,
    save_fa_policy,
)


@pytest.fixture(scope="module")
def data():
    p = FixtureParams()
    tr = to_transitions(generate(p, 1500, seed=21))
    bc = LogisticBC(policy_featurizer(), max_iter=300).fit(tr)
    return p, tr, bc


def test_bc_recovers_the_behaviour(data) -> None:
    p, tr, bc = data
    probs = bc.action_probs(tr.states)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    truth = p.behavior.action_probs(tr.states)
    assert np.mean(np.abs(probs - truth).sum(axis=1)) < 0.2  # L1, sampling noise
    assert np.all(probs[:, ESCALATE] == 0)  # never logged: probability 0


def test_fqi_on_a_two_step_chain_is_exact() -> None:
    # s0 -a1-> s1 (r=0) -a0-> end (r=1); s0 -a0-> end (r=0.5). Q*(s0,a1) = gamma.
    from tracerl.hashed_features import HashedFeaturizer
    from tracerl.ope.fa_data import FATransitions
    f = HashedFeaturizer("toy", (2,), ((0,),), n_bits=10, n_actions=2)
    states = np.array([[0], [1], [0]])
    tr = FATransitions(episode=np.array([0, 0, 1]), t=np.array([0, 1, 0]), states=states,
                       actions=np.array([1, 0, 0]), rewards=np.array([0.0, 1.0, 0.5]),
                       done=np.array([False, True, True]),
                       has_next=np.array([True, False, False]),
                       next_states=np.array([[1], [0], [0]]),
                       behavior_logp=np.log([0.5, 1.0, 0.5]), n_actions=2)
    q = FittedQRegressor(f, gamma=0.9, alpha=1e-9, n_iterations=10).fit(tr)
    np.testing.assert_allclose(q.q_values(np.array([[0], [1]]))[[0, 0, 1], [0, 1, 0]],
                               [0.5, 0.9, 1.0], atol=1e-6)
    assert q.act(np.array([[0]]))[0] == 1


def test_constrained_fqi_takes_only_supported_actions(data) -> None:
    _, tr, bc = data
    naive = FittedQRegressor(critic_featurizer(), support="none", epsilon=0.1).fit(tr)
    cons = FittedQRegressor(critic_featurizer(), support="behavior", behavior_model=bc,
                            min_behavior_prob=0.01, epsilon=0.1).fit(tr)
    pb = bc.action_probs(tr.states)
    assert np.all(cons.action_probs(tr.states)[pb < 0.01] == 0)
    assert np.any(naive.action_probs(tr.states)[pb < 0.01] > 0)


def test_artifacts_round_trip_without_pickle(tmp_path, data) -> None:
    _, tr, bc = data
    cons = FittedQRegressor(critic_featurizer(), support="behavior", behavior_model=bc,
                            n_iterations=20).fit(tr)
    for pol in (bc, cons):
        path = save_fa_policy(pol, tmp_path / "p.json", tr.data_hash())
        art = orjson.loads(path.read_bytes())
        assert art["data_hash"] == tr.data_hash() and art["params"] == pol.get_params()
        again = load_fa_policy(path)
        np.testing.assert_array_equal(again.action_probs(tr.states), pol.action_probs(tr.states))
        save_fa_policy(again, tmp_path / "q.json", tr.data_hash())
        assert (tmp_path / "q.json").read_bytes() == path.read_bytes()
