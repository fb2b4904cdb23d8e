"""The learners (count-argmax and logistic BC, naive and support-constrained FQI over
one-hot and hashed features) and the one artifact format.

Q-values and chosen actions on the tiny datasets are worked out by hand in comments; the
acceptance numbers on the calculator datasets are those of the book chapter's toy example,
evaluated exactly with the calculator's exact evaluator.
"""

from __future__ import annotations

import functools

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracerl.config.learning import Train
from tracerl.data.ingest.parse import records_to_table
from tracerl.data.schema import SCHEMA_VERSION, canonical_json
from tracerl.envs.calculator.behavior import BehaviorPolicy
from tracerl.envs.calculator.encoder import CalculatorEncoder
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.logs import log_records
from tracerl.envs.calculator.rules import ACTIONS, STATE_KEYS, keys_to_rows
from tracerl.envs.calculator.simulator import mc_value
from tracerl.envs.support_desk import FixtureParams, generate
from tracerl.envs.support_desk.features import critic_features, policy_features, to_transitions
from tracerl.envs.support_desk.sim import ESCALATE
from tracerl.rl.artifact import code_version, dumps_policy, load_policy, save_policy
from tracerl.rl.bc import CountBC, LogisticBC
from tracerl.rl.features import Hashed, OneHot
from tracerl.rl.fqi import FittedQIteration
from tracerl.rl.learners import fit_learners
from tracerl.rl.transitions import Transitions

ADD, SUB, MUL, FINAL = (ACTIONS.index(a) for a in ("add", "sub", "mul", "final"))
S0 = "mul|1|1|-"  # x and y known, no result: valid add, sub, mul
X3Y4 = {"x": 3, "y": 4}
ENCODER = CalculatorEncoder()
POLICY = OneHot(ENCODER.cardinality, len(ACTIONS), ENCODER.policy_variables)


def rows(*keys: str) -> np.ndarray:
    return keys_to_rows(list(keys))


def table(records: list[dict]) -> pa.Table:
    return records_to_table(records, "test.jsonl", list(range(1, len(records) + 1)))


def step(ep: str, t: int, memory: dict, tool: str, reward: float, done: bool,
         task: str = "mul") -> dict:
    return {"episode_id": ep, "t": t, "task": task,
            "state": {"memory": canonical_json(memory)},
            "action": {"type": "tool_call", "tool": tool, "arguments": {}},
            "reward": reward, "done": done}


def op_then_final(ep: str, op: str, op_reward: float, result: int, final_reward: float
                  ) -> list[dict]:
    """S0 --op--> mul|1|1|<result> --final--> end."""
    return [step(ep, 0, X3Y4, op, op_reward, False),
            step(ep, 1, {**X3Y4, "result": result}, "final", final_reward, True)]


def fit(learner, records: list[dict]):
    return learner.fit(ENCODER.transitions(table(records)))


def probs(policy, key: str) -> list[float]:
    return policy.action_probs(rows(key))[0].tolist()


# --------------------------------------------------------------------------- BC


def test_bc_takes_the_majority_action() -> None:
    recs = [step(f"e{i}", 0, X3Y4, op, -0.02, True)
            for i, op in enumerate(["add", "sub", "add", "sub", "add"])]
    bc = fit(CountBC(POLICY), recs)  # add 3, sub 2
    assert probs(bc, S0) == [0, 0, 1, 0, 0, 0]
    assert bc.counts_.tolist() == [[0, 0, 3, 2, 0, 0]]
    frequencies = fit(CountBC(POLICY, act="frequencies"), recs)  # the behaviour model
    assert probs(frequencies, S0) == pytest.approx([0, 0, 0.6, 0.4, 0, 0])


def test_bc_tie_breaking() -> None:
    recs = [step("a", 0, X3Y4, "sub", -0.02, True), step("b", 0, X3Y4, "add", -0.02, True)]
    # add and sub once each: lowest index is add (2 before 3).
    assert fit(CountBC(POLICY), recs).act(rows(S0)).tolist() == [ADD]
    picks = {int(fit(CountBC(POLICY, tie_break="random", seed=s), recs).act(rows(S0))[0])
             for s in range(20)}
    assert picks == {ADD, SUB}  # never the unlogged mul
    again = [int(fit(CountBC(POLICY, tie_break="random", seed=5), recs).act(rows(S0))[0])
             for _ in range(3)]
    assert len(set(again)) == 1  # a seed fixes the choice


def test_bc_never_clones_an_invalid_action() -> None:
    # lookup_x is logged 3 times at S0 but is invalid there; sub (valid) once.
    recs = [step(f"e{i}", 0, X3Y4, "lookup_x", -1.0, True) for i in range(3)]
    recs.append(step("v", 0, X3Y4, "sub", -0.02, True))
    assert fit(CountBC(POLICY), recs).act(rows(S0)).tolist() == [SUB]
    only_invalid = fit(CountBC(POLICY), recs[:3])
    assert only_invalid.unsupported_states_ == [S0]
    assert only_invalid.act(rows(S0)).tolist() == [ADD]  # all valid counts 0: lowest index


# --------------------------------------------------------------------------- FQI


def toy_fqi_records() -> list[dict]:
    """Three episodes from S0 (rewards made up for easy arithmetic).

    e1: S0 --add, 0--> A=mul|1|1|7 --final, -1--> end
    e2: S0 --add, 0--> A              --final,  0--> end
    e3: S0 --sub, -0.2--> B=mul|1|1|-1 --final, -1--> end
    With gamma = 0.5, from the first iteration on:
      Q(A, final) = mean(-1, 0) = -0.5;  Q(B, final) = -1.
    From the second iteration on (V(A) = -0.5, V(B) = -1):
      Q(S0, add) = 0 + 0.5 * (-0.5) = -0.25;  Q(S0, sub) = -0.2 + 0.5 * (-1) = -0.7.
    mul is never logged at S0, so Q(S0, mul) stays 0.
    """
    return (op_then_final("e1", "add", 0.0, 7, -1.0)
            + op_then_final("e2", "add", 0.0, 7, 0.0)
            + op_then_final("e3", "sub", -0.2, -1, -1.0))


def test_naive_fqi_q_values_by_hand_and_the_unlogged_action_wins() -> None:
    fqi = fit(FittedQIteration(POLICY, gamma=0.5, n_iterations=10), toy_fqi_records())
    q = fqi.q_values(rows(S0, "mul|1|1|7", "mul|1|1|-1"))
    assert q[0].tolist() == pytest.approx([0, 0, -0.25, -0.7, 0, 0])
    assert q[1, FINAL] == pytest.approx(-0.5)
    assert q[2, FINAL] == pytest.approx(-1.0)
    # Q(S0, mul) = 0 beats both logged (negative) ops: the naive learner picks mul.
    assert fqi.act(rows(S0)).tolist() == [MUL]
    assert probs(fqi, S0) == [0, 0, 0, 0, 1, 0]
    assert fqi.unsupported_states_ == []
    assert fqi.counts_[list(fqi.state_keys_).index(S0)].tolist() == [0, 0, 2, 1, 0, 0]


def test_constrained_fqi_refuses_the_unlogged_action() -> None:
    fqi = fit(FittedQIteration(POLICY, gamma=0.5, n_iterations=10, support="logged"),
              toy_fqi_records())
    assert fqi.q_values(rows(S0))[0].tolist() == pytest.approx([0, 0, -0.25, -0.7, 0, 0])
    assert fqi.act(rows(S0)).tolist() == [ADD]  # best logged: -0.25 > -0.7


def test_fqi_one_iteration_bootstraps_from_q_zero() -> None:
    # Iteration 1 sees V = 0 everywhere: Q(S0, add) = 0, Q(S0, sub) = -0.2, and add ties
    # with the unlogged mul at 0; lowest index breaks the tie to add.
    fqi = fit(FittedQIteration(POLICY, gamma=0.5, n_iterations=1), toy_fqi_records())
    assert fqi.q_values(rows(S0))[0].tolist() == pytest.approx([0, 0, 0, -0.2, 0, 0])
    assert fqi.q_values(rows("mul|1|1|7"))[0, FINAL] == pytest.approx(-0.5)
    assert fqi.act(rows(S0)).tolist() == [ADD]
    rand = {int(fit(FittedQIteration(POLICY, gamma=0.5, n_iterations=1, tie_break="random",
                                     seed=s), toy_fqi_records()).act(rows(S0))[0])
            for s in range(20)}
    assert rand == {ADD, MUL}


def test_fqi_done_and_truncated_rows_bootstrap_nothing() -> None:
    # e1: S0 --add, r=-0.1, done--> a row after it (an inconsistent log): (1 - done) = 0,
    #     so its target is -0.1 even though the next state has Q(final) = 5.
    # e2: S0 --sub, r=-0.3, not done, and the log ends: target -0.3.
    recs = [step("e1", 0, X3Y4, "add", -0.1, True),
            step("e1", 1, {**X3Y4, "result": 7}, "final", 5.0, True),
            step("e2", 0, X3Y4, "sub", -0.3, False)]
    fqi = fit(FittedQIteration(POLICY, gamma=0.9, n_iterations=5), recs)
    assert fqi.q_values(rows(S0))[0, [ADD, SUB]].tolist() == pytest.approx([-0.1, -0.3])


def test_constrained_fqi_falls_back_when_nothing_valid_was_logged() -> None:
    recs = [step("e", 0, X3Y4, "final", -1.0, True)]  # final is invalid at S0
    fqi = fit(FittedQIteration(POLICY, support="logged"), recs)
    assert fqi.unsupported_states_ == [S0]
    assert fqi.act(rows(S0)).tolist() == [ADD]  # valid actions, all Q = 0: lowest index


def test_unseen_states_act_uniformly_over_valid_actions_and_are_counted() -> None:
    for policy in (fit(CountBC(POLICY), toy_fqi_records()),
                   fit(FittedQIteration(POLICY), toy_fqi_records())):
        assert policy.n_unseen_queries_ == 0
        p = policy.action_probs(rows("add|1|1|-", S0, "add|1|1|-", "sub|0|0|-"))
        assert p[0].tolist() == pytest.approx([0, 0, 1 / 3, 1 / 3, 1 / 3, 0])
        assert p[2].tolist() == p[0].tolist()
        assert p[3].tolist() == [1, 0, 0, 0, 0, 0]  # only lookup_x is valid
        assert policy.n_unseen_queries_ == 3
        assert policy.is_seen(rows("add|1|1|-", S0)).tolist() == [False, True]
        acts = policy.act(rows(*["add|1|1|-"] * 300))
        assert set(acts.tolist()) == {ADD, SUB, MUL}
        assert policy.act(rows(*["add|1|1|-"] * 300)).tolist() == acts.tolist()  # seeded
        assert policy.n_unseen_queries_ == 603


def test_parameters_are_stored_as_given_and_checked() -> None:
    fqi = FittedQIteration(POLICY, gamma=0.9, n_iterations=7, support="logged",
                           tie_break="random", seed=3)
    assert {k: fqi.get_params()[k] for k in ("gamma", "n_iterations", "support",
                                             "tie_break", "seed")} == {
        "gamma": 0.9, "n_iterations": 7, "support": "logged", "tie_break": "random",
        "seed": 3}
    with pytest.raises(ValueError, match="support"):
        fit(FittedQIteration(POLICY, support="strict"), toy_fqi_records())
    with pytest.raises(ValueError, match="tie_break"):
        fit(CountBC(POLICY, tie_break="first"), toy_fqi_records())
    with pytest.raises(ValueError, match="one-hot"):
        CountBC(Hashed(ENCODER.cardinality, ((0,),), 8, 6)).fit(
            ENCODER.transitions(table(toy_fqi_records())))


# --------------------------------------------------------------------------- acceptance


@functools.cache
def trained(name: str, seed: int) -> dict[str, dict]:
    """Exact values of the three learners trained on the train split of 3000 episodes."""
    steps = table(list(log_records(name, 3000, seed, 0.2)))
    steps = steps.filter(pc.equal(steps["split"], "train"))
    policies = fit_learners(ENCODER.transitions(steps), POLICY, Train(encoder="calculator"),
                            0.99)
    return {k: exact_value(p) for k, p in policies.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_good_coverage_every_learner_solves_every_task(seed: int) -> None:
    for value in trained("good_coverage", seed).values():
        assert value["success"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_no_mul_support_naive_extrapolates_constrained_refuses(seed: int) -> None:
    v = trained("no_mul_support", seed)
    assert v["bc"]["success"] == pytest.approx(0.67, abs=0.01)
    assert v["naive_fqi"]["success"] == pytest.approx(1.0)
    assert v["constrained_fqi"]["success"] == pytest.approx(2 / 3, abs=0.01)
    assert v["bc"]["success_by_task"]["mul"] <= 0.02
    assert v["naive_fqi"]["success_by_task"]["mul"] == pytest.approx(1.0)
    assert v["constrained_fqi"]["success_by_task"]["mul"] <= 0.02


def test_behaviour_policy_values() -> None:
    good = exact_value(BehaviorPolicy("good_coverage"))["success"]
    gap = exact_value(BehaviorPolicy("no_mul_support"))["success"]
    assert (good, gap) == (pytest.approx(0.748, abs=5e-4), pytest.approx(0.542, abs=5e-4))


def test_mc_value_evaluates_a_learned_policy() -> None:
    steps = table(list(log_records("no_mul_support", 1000, 0, 0.0)))
    naive = FittedQIteration(POLICY).fit(ENCODER.transitions(steps))
    mc = mc_value(naive, 2000, seed=1)
    assert mc["success"] == pytest.approx(exact_value(naive)["success"], abs=1e-9)  # all 1


# --------------------------------------------------------------------------- hashed features


@pytest.fixture(scope="module")
def desk():
    p = FixtureParams()
    tr = to_transitions(generate(p, 1500, seed=21))
    bc = LogisticBC(policy_features(), max_iter=300).fit(tr)
    return p, tr, bc


def test_logistic_bc_recovers_the_behaviour(desk) -> None:
    p, tr, bc = desk
    probs = bc.action_probs(tr.states())
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    truth = p.behavior.action_probs(tr.states())
    assert np.mean(np.abs(probs - truth).sum(axis=1)) < 0.2  # L1, sampling noise
    assert np.all(probs[:, ESCALATE] == 0)  # never logged: probability 0


def test_hashed_fqi_on_a_two_step_chain_is_exact() -> None:
    # s0 -a1-> s1 (r=0) -a0-> end (r=1); s0 -a0-> end (r=0.5). Q*(s0,a1) = gamma.
    f = Hashed((2,), ((0,),), n_bits=10, n_actions=2)
    tr = Transitions.build(episode=np.array([0, 0, 1]), t=np.array([0, 1, 0]),
                           rows=np.array([[0], [1], [0]]), a=np.array([1, 0, 0]),
                           r=np.array([0.0, 1.0, 0.5]), done=np.array([False, True, True]),
                           actions=("a0", "a1"), variables=("s",))
    q = FittedQIteration(f, gamma=0.9, alpha=1e-9, n_iterations=10).fit(tr)
    np.testing.assert_allclose(q.q_values(np.array([[0], [1]]))[[0, 0, 1], [0, 1, 0]],
                               [0.5, 0.9, 1.0], atol=1e-6)
    assert q.act(np.array([[0]]))[0] == 1


def test_constrained_fqi_takes_only_supported_actions(desk) -> None:
    _, tr, bc = desk
    naive = FittedQIteration(critic_features(), alpha=1e-3, epsilon=0.1).fit(tr)
    cons = FittedQIteration(critic_features(), alpha=1e-3, support="behavior",
                            behavior_model=bc, min_behavior_prob=0.01, epsilon=0.1).fit(tr)
    pb = bc.action_probs(tr.states())
    assert np.all(cons.action_probs(tr.states())[pb < 0.01] == 0)
    assert np.any(naive.action_probs(tr.states())[pb < 0.01] > 0)


# --------------------------------------------------------------------------- artifacts


def test_one_hot_artifact_round_trip(tmp_path) -> None:
    tr = ENCODER.transitions(table(list(log_records("no_mul_support", 300, 0, 0.0))))
    probe = rows(*STATE_KEYS, "mul|1|1|-5")
    for policy in (CountBC(POLICY), FittedQIteration(POLICY, support="none"),
                   FittedQIteration(POLICY, support="logged", tie_break="random", seed=4)):
        policy.fit(tr)
        path = save_policy(policy, tmp_path / "p.json", tr.data_hash())
        loaded = load_policy(path)
        assert type(loaded) is type(policy)
        assert loaded.get_params() == policy.get_params()
        assert np.array_equal(loaded.action_probs(probe), policy.action_probs(probe))
        assert loaded.act(probe).tolist() == policy.act(probe).tolist()
        assert loaded.unsupported_states_ == policy.unsupported_states_
        if isinstance(policy, FittedQIteration):
            assert np.array_equal(loaded.q_, policy.q_)
        # Same bytes twice, and again after a load.
        assert dumps_policy(policy, "h") == dumps_policy(policy, "h")
        assert dumps_policy(loaded, tr.data_hash()) == path.read_bytes()
        doc = orjson.loads(path.read_bytes())
        assert doc["class"] == type(policy).__name__
        assert doc["data_hash"] == tr.data_hash()
        assert doc["schema_version"] == SCHEMA_VERSION
        assert doc["code_version"] == code_version()
        assert set(doc["code_version"]) == {"tracerl"}  # no commit: bytes stable across commits
        assert doc["encoder"] == {"name": "calculator", "params": {}}
        assert doc["fitted"]["table"][S0]["counts"] == policy.counts_[
            list(policy.state_keys_).index(S0)].tolist()


def test_hashed_artifacts_round_trip_without_pickle(tmp_path, desk) -> None:
    _, tr, bc = desk
    cons = FittedQIteration(critic_features(), alpha=1e-3, support="behavior",
                            behavior_model=bc, n_iterations=20).fit(tr)
    for pol in (bc, cons):
        path = save_policy(pol, tmp_path / "p.json", tr.data_hash())
        art = orjson.loads(path.read_bytes())
        assert art["data_hash"] == tr.data_hash() and art["params"] == pol.get_params()
        again = load_policy(path)
        np.testing.assert_array_equal(again.action_probs(tr.states()),
                                      pol.action_probs(tr.states()))
        save_policy(again, tmp_path / "q.json", tr.data_hash())
        assert (tmp_path / "q.json").read_bytes() == path.read_bytes()


def test_logistic_bc_of_a_log_with_one_action_takes_it_and_round_trips() -> None:
    # A tiny log (one trace) where the agent only ever made one call: no second class.
    f = Hashed((2,), ((0,),), n_bits=6, n_actions=3)
    tr = Transitions.build(episode=np.array([0, 0]), t=np.array([0, 1]),
                           rows=np.array([[0], [1]]), a=np.array([2, 2]),
                           r=np.array([0.0, 1.0]), done=np.array([False, True]),
                           actions=("a0", "a1", "a2"), variables=("s",))
    bc = LogisticBC(f).fit(tr)
    np.testing.assert_array_equal(bc.action_probs(np.array([[0], [1]])),
                                  [[0, 0, 1], [0, 0, 1]])
    again = LogisticBC(f).restore(bc.fitted(), None)
    np.testing.assert_array_equal(again.action_probs(np.array([[1]])), [[0, 0, 1]])
