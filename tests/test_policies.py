"""Tests for the tabular learners (BC, naive and support-constrained FQI) and artifacts.

Q-values and chosen actions on the tiny datasets are worked out by hand in comments; the
acceptance numbers on the calculator datasets are those of the book chapter's toy example,
evaluated exactly with calculator.exact_value.
"""

from __future__ import annotations

import functools

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tracerl.data.ingest.parse import records_to_table
from tracerl.data.schema import SCHEMA_VERSION, canonical_json
from tracerl.envs.calculator import env as calculator
from tracerl.envs.calculator.env import ACTIONS, exact_value, log_records, mc_value
from tracerl.envs.calculator.features import CalculatorFeaturizer
from tracerl.features import ToolSignatureFeaturizer
from tracerl.policies import BehaviorCloning, FittedQIteration, Transitions
from tracerl.policies.artifact import (
    code_version,
    dumps_policy,
    load_policy,
    save_policy,
    table_hash,
)

ADD, SUB, MUL, FINAL = (ACTIONS.index(a) for a in ("add", "sub", "mul", "final"))
S0 = "mul|1|1|-"  # x and y known, no result: valid add, sub, mul
X3Y4 = {"x": 3, "y": 4}


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
    return learner.fit(table(records), CalculatorFeaturizer())


def probs(policy, key: str) -> list[float]:
    return policy.action_probs([key])[0].tolist()


# --------------------------------------------------------------------------- BC


def test_bc_takes_the_majority_action() -> None:
    recs = [step(f"e{i}", 0, X3Y4, op, -0.02, True)
            for i, op in enumerate(["add", "sub", "add", "sub", "add"])]
    bc = fit(BehaviorCloning(), recs)  # add 3, sub 2
    assert probs(bc, S0) == [0, 0, 1, 0, 0, 0]
    assert bc.counts_.tolist() == [[0, 0, 3, 2, 0, 0]]


def test_bc_tie_breaking() -> None:
    recs = [step("a", 0, X3Y4, "sub", -0.02, True), step("b", 0, X3Y4, "add", -0.02, True)]
    # add and sub once each: lowest index is add (2 before 3).
    assert fit(BehaviorCloning(), recs).act([S0]).tolist() == [ADD]
    picks = {int(fit(BehaviorCloning(tie_break="random", seed=s), recs).act([S0])[0])
             for s in range(20)}
    assert picks == {ADD, SUB}  # never the unlogged mul
    again = [int(fit(BehaviorCloning(tie_break="random", seed=5), recs).act([S0])[0])
             for _ in range(3)]
    assert len(set(again)) == 1  # a seed fixes the choice


def test_bc_never_clones_an_invalid_action() -> None:
    # lookup_x is logged 3 times at S0 but is invalid there; sub (valid) once.
    recs = [step(f"e{i}", 0, X3Y4, "lookup_x", -1.0, True) for i in range(3)]
    recs.append(step("v", 0, X3Y4, "sub", -0.02, True))
    assert fit(BehaviorCloning(), recs).act([S0]).tolist() == [SUB]
    only_invalid = fit(BehaviorCloning(), recs[:3])
    assert only_invalid.unsupported_states_ == [S0]
    assert only_invalid.act([S0]).tolist() == [ADD]  # all valid counts 0: lowest index


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
    fqi = fit(FittedQIteration(gamma=0.5, n_iterations=10), toy_fqi_records())
    q = fqi.q_values([S0, "mul|1|1|7", "mul|1|1|-1"])
    assert q[0].tolist() == pytest.approx([0, 0, -0.25, -0.7, 0, 0])
    assert q[1, FINAL] == pytest.approx(-0.5)
    assert q[2, FINAL] == pytest.approx(-1.0)
    # Q(S0, mul) = 0 beats both logged (negative) ops: the naive learner picks mul.
    assert fqi.act([S0]).tolist() == [MUL]
    assert probs(fqi, S0) == [0, 0, 0, 0, 1, 0]
    assert fqi.unsupported_states_ == []
    assert fqi.support_[list(fqi.state_keys_).index(S0)].tolist() == [0, 0, 1, 1, 0, 0]


def test_constrained_fqi_refuses_the_unlogged_action() -> None:
    fqi = fit(FittedQIteration(gamma=0.5, n_iterations=10, support="logged"),
              toy_fqi_records())
    q = fqi.q_values([S0])[0]
    assert q.tolist() == pytest.approx([0, 0, -0.25, -0.7, 0, 0])  # same Q here
    assert fqi.act([S0]).tolist() == [ADD]  # best logged: -0.25 > -0.7


def test_fqi_one_iteration_bootstraps_from_q_zero() -> None:
    # Iteration 1 sees V = 0 everywhere: Q(S0, add) = 0, Q(S0, sub) = -0.2, and add ties
    # with the unlogged mul at 0; lowest index breaks the tie to add.
    fqi = fit(FittedQIteration(gamma=0.5, n_iterations=1), toy_fqi_records())
    assert fqi.q_values([S0])[0].tolist() == pytest.approx([0, 0, 0, -0.2, 0, 0])
    assert fqi.q_values(["mul|1|1|7"])[0, FINAL] == pytest.approx(-0.5)
    assert fqi.act([S0]).tolist() == [ADD]
    rand = {int(fit(FittedQIteration(gamma=0.5, n_iterations=1, tie_break="random",
                                     seed=s), toy_fqi_records()).act([S0])[0])
            for s in range(20)}
    assert rand == {ADD, MUL}


def test_fqi_done_and_truncated_rows_bootstrap_nothing() -> None:
    # e1: S0 --add, r=-0.1, done--> a row after it (an inconsistent log): (1 - done) = 0,
    #     so its target is -0.1 even though the next state has Q(final) = 5.
    # e2: S0 --sub, r=-0.3, not done, and the log ends: target -0.3.
    recs = [step("e1", 0, X3Y4, "add", -0.1, True),
            step("e1", 1, {**X3Y4, "result": 7}, "final", 5.0, True),
            step("e2", 0, X3Y4, "sub", -0.3, False)]
    fqi = fit(FittedQIteration(gamma=0.9, n_iterations=5), recs)
    assert fqi.q_values([S0])[0, [ADD, SUB]].tolist() == pytest.approx([-0.1, -0.3])


def test_constrained_fqi_falls_back_when_nothing_valid_was_logged() -> None:
    recs = [step("e", 0, X3Y4, "final", -1.0, True)]  # final is invalid at S0
    fqi = fit(FittedQIteration(support="logged"), recs)
    assert fqi.unsupported_states_ == [S0]
    assert fqi.act([S0]).tolist() == [ADD]  # valid actions, all Q = 0: lowest index


def test_unseen_states_act_uniformly_over_valid_actions_and_are_counted() -> None:
    for policy in (fit(BehaviorCloning(), toy_fqi_records()),
                   fit(FittedQIteration(), toy_fqi_records())):
        assert policy.n_unseen_queries_ == 0
        p = policy.action_probs(["add|1|1|-", S0, "add|1|1|-", "sub|0|0|-"])
        assert p[0].tolist() == pytest.approx([0, 0, 1 / 3, 1 / 3, 1 / 3, 0])
        assert p[2].tolist() == p[0].tolist()
        assert p[3].tolist() == [1, 0, 0, 0, 0, 0]  # only lookup_x is valid
        assert policy.n_unseen_queries_ == 3
        assert policy.is_seen(["add|1|1|-", S0]).tolist() == [False, True]
        acts = policy.act(["add|1|1|-"] * 300)
        assert set(acts.tolist()) == {ADD, SUB, MUL}
        assert policy.act(["add|1|1|-"] * 300).tolist() == acts.tolist()  # seeded
        assert policy.n_unseen_queries_ == 603


def test_parameters_are_stored_as_given_and_checked() -> None:
    fqi = FittedQIteration(gamma=0.9, n_iterations=7, support="logged", tie_break="random",
                           seed=3)
    assert fqi.get_params() == {"gamma": 0.9, "n_iterations": 7, "support": "logged",
                                "tie_break": "random", "seed": 3}
    with pytest.raises(ValueError, match="support"):
        fit(FittedQIteration(support="strict"), toy_fqi_records())
    with pytest.raises(ValueError, match="tie_break"):
        fit(BehaviorCloning(tie_break="first"), toy_fqi_records())
    with pytest.raises(ValueError, match="featurizer"):
        BehaviorCloning().fit(table(toy_fqi_records()))


# --------------------------------------------------------------------------- acceptance


@functools.cache
def trained(name: str, seed: int) -> dict[str, dict]:
    """Exact values of the three learners trained on the train split of 3000 episodes."""
    steps = table(list(log_records(name, 3000, seed, 0.2)))
    steps = steps.filter(pc.equal(steps["split"], "train"))
    tr = Transitions.from_steps(steps, CalculatorFeaturizer())
    learners = {"bc": BehaviorCloning(), "naive": FittedQIteration(support="none"),
                "constrained": FittedQIteration(support="logged")}
    return {k: exact_value(p.fit(tr)) for k, p in learners.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_good_coverage_every_learner_solves_every_task(seed: int) -> None:
    values = trained("good_coverage", seed)
    for value in values.values():
        assert value["success"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_no_mul_support_naive_extrapolates_constrained_refuses(seed: int) -> None:
    v = trained("no_mul_support", seed)
    assert v["bc"]["success"] == pytest.approx(0.67, abs=0.01)
    assert v["naive"]["success"] == pytest.approx(1.0)
    assert v["constrained"]["success"] == pytest.approx(2 / 3, abs=0.01)
    assert v["bc"]["success_by_task"]["mul"] <= 0.02
    assert v["naive"]["success_by_task"]["mul"] == pytest.approx(1.0)
    assert v["constrained"]["success_by_task"]["mul"] <= 0.02


def test_behaviour_policy_values() -> None:
    good = exact_value(calculator.BehaviorPolicy("good_coverage"))["success"]
    gap = exact_value(calculator.BehaviorPolicy("no_mul_support"))["success"]
    assert (good, gap) == (pytest.approx(0.748, abs=5e-4), pytest.approx(0.542, abs=5e-4))


def test_mc_value_evaluates_a_learned_policy() -> None:
    steps = table(list(log_records("no_mul_support", 1000, 0, 0.0)))
    naive = FittedQIteration().fit(steps, CalculatorFeaturizer())
    mc = mc_value(naive, 2000, seed=1)
    assert mc["success"] == pytest.approx(exact_value(naive)["success"], abs=1e-9)  # all 1


# --------------------------------------------------------------------------- artifacts


def test_artifact_round_trip(tmp_path) -> None:
    steps = table(list(log_records("no_mul_support", 300, 0, 0.0)))
    digest = table_hash(steps)
    probe = [*calculator.STATE_KEYS, "mul|1|1|-5"]
    for policy in (BehaviorCloning(), FittedQIteration(support="none"),
                   FittedQIteration(support="logged", tie_break="random", seed=4)):
        policy.fit(steps, CalculatorFeaturizer())
        path = save_policy(policy, tmp_path / "p.json", digest)
        loaded = load_policy(path)
        assert type(loaded) is type(policy)
        assert loaded.get_params() == policy.get_params()
        assert np.array_equal(loaded.action_probs(probe), policy.action_probs(probe))
        assert loaded.act(probe).tolist() == policy.act(probe).tolist()
        assert loaded.unsupported_states_ == policy.unsupported_states_
        if isinstance(policy, FittedQIteration):
            assert np.array_equal(loaded.q_, policy.q_)
            assert np.array_equal(loaded.support_, policy.support_)
        # Same bytes twice, and again after a load.
        assert dumps_policy(policy, digest) == dumps_policy(policy, digest)
        assert dumps_policy(loaded, digest) == path.read_bytes()
        doc = orjson.loads(path.read_bytes())
        assert doc["class"] == type(policy).__name__
        assert doc["data_hash"] == digest
        assert doc["schema_version"] == SCHEMA_VERSION
        assert doc["code_version"] == code_version()
        assert set(doc["code_version"]) == {"tracerl"}  # no commit: bytes stable across commits
        assert doc["featurizer"] == {"name": "calculator", "params": {}}
        assert doc["table"][S0]["probs"] == probs(policy, S0)


def test_artifact_round_trip_with_the_generic_featurizer(tmp_path) -> None:
    recs = [{"episode_id": e, "t": t, "task": "q", "reward": r, "done": d,
             "action": {"type": k, "tool": tool, "arguments": args}}
            for e, t, k, tool, args, r, d in [
                ("a", 0, "tool_call", "search", {"query": "x"}, 0.0, False),
                ("a", 1, "final_answer", None, None, 1.0, True),
                ("b", 0, "final_answer", None, None, -1.0, True)]]
    steps = table(recs)
    f = ToolSignatureFeaturizer.from_steps(steps)
    fqi = FittedQIteration(gamma=0.9).fit(steps, f)
    # q|: search -> 0 + 0.9 * 1 = 0.9 beats final_answer at -1.
    assert fqi.action_probs(["q|"])[0].tolist() == [0, 1]
    loaded = load_policy(save_policy(fqi, tmp_path / "g.json", "h"))
    keys = ["q|", "q|search", "other|"]
    assert np.array_equal(loaded.action_probs(keys), fqi.action_probs(keys))


def test_table_hash_depends_on_content_only(tmp_path) -> None:
    recs = list(log_records("no_mul_support", 60, 0, 0.2))
    full = table(recs)
    h = table_hash(full)
    assert len(h) == 64 and h == table_hash(table(recs))
    rebuilt = records_to_table(recs[10:50], "test.jsonl", list(range(11, 51)))
    assert table_hash(full.slice(10, 40)) == table_hash(rebuilt)
    assert table_hash(pa.concat_tables([full.slice(0, 7), full.slice(7)])) == h
    pq.write_table(full, tmp_path / "t.parquet")
    assert table_hash(pq.read_table(tmp_path / "t.parquet")) == h
    assert table_hash(full.slice(1)) != h
    changed = full.set_column(full.schema.get_field_index("reward"), "reward",
                              pa.array(np.zeros(full.num_rows)))
    assert table_hash(changed) != h
