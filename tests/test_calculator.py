"""Tests for the calculator toy environment, its policies, evaluators and logger.

Expected values are derived by hand below (from the environment's rules), never by
calling the code under test.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj
import pytest

from tracerl.data.schema import LOGGED_FIELDS, V2_FIELDS, record_to_row
from tracerl.envs.calculator.behavior import (
    BehaviorPolicy,
    TabularPolicy,
    scripted_optimal_policy,
)
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.logs import log_records, write_jsonl
from tracerl.envs.calculator.rules import (
    ACTIONS,
    POLICY_VARIABLES,
    keys_to_rows,
    labels,
    parse_state_key,
    state_key,
)
from tracerl.envs.calculator.simulator import mc_value, simulate

GAMMA = 0.99
COST = 0.02
PAIRS = [(x, y) for x in range(1, 10) for y in range(1, 10)]
OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}

# Coincidences among x, y in 1..9, counted from first principles: add == mul only when
# x + y = x * y, i.e. (x - 1)(y - 1) = 1, i.e. x = y = 2. sub == add needs y = 0 and
# sub == mul needs y = x / (1 + x), neither possible for positive integers.
N_ADD_EQ_MUL = sum(1 for x, y in PAIRS if x + y == x * y)
N_SUB_EQ_ADD = sum(1 for x, y in PAIRS if x - y == x + y)
N_SUB_EQ_MUL = sum(1 for x, y in PAIRS if x - y == x * y)


def test_coincidence_counts_from_first_principles() -> None:
    assert (N_ADD_EQ_MUL, N_SUB_EQ_ADD, N_SUB_EQ_MUL) == (1, 0, 0)


def four_step_return(success: float, gamma: float = GAMMA) -> float:
    """Return of an episode that always makes 4 valid calls and succeeds w.p. `success`.

    Three -0.02 steps, then final: +1 - 0.02 on success, -1 - 0.02 otherwise.
    """
    final = success * (1 - COST) + (1 - success) * (-1 - COST)
    return -COST * (1 + gamma + gamma**2) + gamma**3 * final


# --------------------------------------------------------------------------- state keys


def test_state_key_format_and_roundtrip() -> None:
    assert state_key("mul", True, True, 12) == "mul|1|1|12"
    assert state_key("add", True, False, None) == "add|1|0|-"
    assert state_key("sub", True, True, -8) == "sub|1|1|-8"
    assert parse_state_key("sub|1|1|-8") == ("sub", True, True, -8)
    assert parse_state_key("add|0|0|-") == ("add", False, False, None)
    with pytest.raises(ValueError):
        state_key("div", True, True, 1)
    with pytest.raises(ValueError):
        parse_state_key("mul|1|1")


# --------------------------------------------------------------------------- exact values


def test_exact_behavior_good_coverage_matches_hand_derivation() -> None:
    # Lookups and final are the only valid calls in their states, so they happen w.p. 1;
    # success is decided at the op state: correct op w.p. 0.62 + 0.38/3, each other op
    # 0.38/3, and a wrong op still succeeds when its value coincides with the task's.
    p_c, p_o = 0.62 + 0.38 / 3, 0.38 / 3
    by_task = {
        "add": p_c + p_o * (N_SUB_EQ_ADD + N_ADD_EQ_MUL) / 81,
        "sub": p_c + p_o * (N_SUB_EQ_ADD + N_SUB_EQ_MUL) / 81,
        "mul": p_c + p_o * (N_ADD_EQ_MUL + N_SUB_EQ_MUL) / 81,
    }
    success = 0.62 + 0.38 / 3 * (1 + (2 / 3) * (1 / 81))
    assert sum(by_task.values()) / 3 == pytest.approx(success, abs=1e-12)

    ev = exact_value(BehaviorPolicy("good_coverage"))
    assert round(ev["success"], 4) == 0.7477
    assert ev["success"] == pytest.approx(success, abs=1e-12)
    for task, p in by_task.items():
        assert ev["success_by_task"][task] == pytest.approx(p, abs=1e-12)
    assert ev["return"] == pytest.approx(four_step_return(success), abs=1e-12)


def test_exact_behavior_no_mul_support_matches_hand_derivation() -> None:
    # add/sub tasks: correct op 0.62 + 0.38/2 = 0.81, the other op never coincides.
    # mul tasks: add or sub 50/50; only add(2, 2) == mul(2, 2) succeeds.
    by_task = {"add": 0.81, "sub": 0.81, "mul": 0.5 * N_ADD_EQ_MUL / 81}
    success = (0.81 + 0.81 + 0.5 / 81) / 3
    assert success == pytest.approx(0.5421, abs=5e-5)

    ev = exact_value(BehaviorPolicy("no_mul_support"))
    assert ev["success"] == pytest.approx(success, abs=1e-12)
    for task, p in by_task.items():
        assert ev["success_by_task"][task] == pytest.approx(p, abs=1e-12)
    assert ev["return"] == pytest.approx(four_step_return(success), abs=1e-12)


@pytest.mark.parametrize("gamma", [0.99, 0.9])
def test_exact_scripted_optimal(gamma: float) -> None:
    ev = exact_value(scripted_optimal_policy(), gamma=gamma)
    assert ev["success"] == 1.0
    assert ev["success_by_task"] == {"add": 1.0, "sub": 1.0, "mul": 1.0}
    expected = -0.02 * (1 + gamma + gamma**2) + 0.98 * gamma**3
    assert ev["return"] == pytest.approx(expected, abs=1e-12)


def test_exact_final_first_and_op_first_are_invalid() -> None:
    final_first = TabularPolicy({}, default=[0, 0, 0, 0, 0, 1])
    ev = exact_value(final_first)
    assert ev["return"] == pytest.approx(-1.0, abs=1e-12)
    assert ev["success"] == 0.0
    mul_first = TabularPolicy.deterministic({}, default="mul")
    assert exact_value(mul_first)["return"] == pytest.approx(-1.0, abs=1e-12)


def uniform_value(gamma: float = GAMMA) -> tuple[float, float]:
    """Hand derivation for the policy that is uniform over all 6 calls in every state.

    Each stage has one valid call w.p. 1/6 (three at the op state, 1/6 each); every
    invalid call yields -1 and ends the episode.
    """
    q = 1 / 6
    v3_right = q * (1 - COST) + 5 * q * -1.0  # final or an invalid call
    v3_wrong = q * (-1 - COST) + 5 * q * -1.0
    # Expected number of ops (of 3) whose value equals the task's, averaged over tasks.
    n_right = (
        (1 + (N_SUB_EQ_ADD + N_ADD_EQ_MUL) / 81)  # add
        + (1 + (N_SUB_EQ_ADD + N_SUB_EQ_MUL) / 81)  # sub
        + (1 + (N_ADD_EQ_MUL + N_SUB_EQ_MUL) / 81)  # mul
    ) / 3
    v2 = q * (3 * -COST + gamma * (n_right * v3_right + (3 - n_right) * v3_wrong)) + 3 * q * -1
    v1 = q * (-COST + gamma * v2) + 5 * q * -1
    v0 = q * (-COST + gamma * v1) + 5 * q * -1
    success = q * q * q * n_right * q
    return success, v0


def test_exact_uniform_random_policy_matches_hand_derivation() -> None:
    success, ret = uniform_value()
    ev = exact_value(TabularPolicy({}, default=np.full(6, 1 / 6)))
    assert ev["success"] == pytest.approx(success, abs=1e-12)
    assert ev["return"] == pytest.approx(ret, abs=1e-12)


# --------------------------------------------------------------------------- simulator


def mixed_policy() -> TabularPolicy:
    """Stochastic policy that mixes valid and invalid calls in every state."""
    table = {}
    for task in ("add", "sub", "mul"):
        table[state_key(task, False, False, None)] = [0.9, 0.05, 0, 0, 0, 0.05]
        table[state_key(task, True, False, None)] = [0.05, 0.9, 0, 0, 0, 0.05]
        table[state_key(task, True, True, None)] = [0, 0, 0.3, 0.3, 0.3, 0.1]
    return TabularPolicy(table, default=[0.02, 0, 0, 0, 0.08, 0.9])


@pytest.mark.parametrize(
    "policy",
    [BehaviorPolicy("good_coverage"), BehaviorPolicy("no_mul_support"), mixed_policy(),
     TabularPolicy({}, default=np.full(6, 1 / 6))],
    ids=["good_coverage", "no_mul_support", "mixed", "uniform"],
)
def test_monte_carlo_agrees_with_exact(policy) -> None:
    ev = exact_value(policy)
    mc = mc_value(policy, 20000, seed=3)
    assert mc["n_episodes"] == 20000
    assert abs(mc["return"] - ev["return"]) <= 3 * mc["return_se"]
    # Floor the SE so a (near-)deterministic success rate does not demand exact equality.
    assert abs(mc["success"] - ev["success"]) <= 3 * max(mc["success_se"], 1e-3)
    for task in ("add", "sub", "mul"):
        se = max(mc["success_by_task_se"][task], 1e-3)
        assert abs(mc["success_by_task"][task] - ev["success_by_task"][task]) <= 3 * se


def test_mc_detects_a_wrong_value() -> None:
    # The MC check above can fail: the behaviour estimate is far from the optimal value.
    mc = mc_value(BehaviorPolicy("good_coverage"), 20000, seed=3)
    assert abs(mc["success"] - 1.0) > 3 * mc["success_se"]


def test_simulate_layout_rewards_and_returns() -> None:
    ro = simulate(mixed_policy(), 3000, seed=11, gamma=0.9)
    assert ro.n_episodes == 3000
    assert ro.n_steps == int(ro.ep_length.sum())
    # Steps are grouped by episode with t = 0..n-1 and exactly the last one done.
    assert np.all(np.diff(ro.episode) >= 0)
    starts = np.cumsum(ro.ep_length) - ro.ep_length
    assert np.array_equal(ro.t, np.arange(ro.n_steps) - np.repeat(starts, ro.ep_length))
    last = np.zeros(ro.n_steps, dtype=bool)
    last[starts + ro.ep_length - 1] = True
    assert np.array_equal(ro.done, last)
    # Rewards take only the four values the rules allow, and match validity/success.
    assert set(np.round(ro.reward, 10).tolist()) <= {-0.02, 0.98, -1.02, -1.0}
    assert np.all(ro.reward[~ro.valid] == -1.0)
    assert np.all(ro.done[~ro.valid])
    final_ok = ro.valid & (ro.action == ACTIONS.index("final"))
    assert np.array_equal(ro.reward[final_ok] > 0, ro.task_success[final_ok] == 1)
    # Discounted returns recomputed by a plain loop.
    ret = np.zeros(ro.n_episodes)
    for e, t, r in zip(ro.episode, ro.t, ro.reward, strict=True):
        ret[e] += 0.9**t * r
    assert np.allclose(ret, ro.ep_return)
    # A successful episode ends with a valid final whose stored result is the truth.
    for e in np.flatnonzero(ro.ep_success)[:200]:
        i = starts[e] + ro.ep_length[e] - 1
        task = ("add", "sub", "mul")[ro.task[i]]
        assert ro.action[i] == ACTIONS.index("final")
        assert ro.result[i] == OPS[task](int(ro.x[i]), int(ro.y[i]))
    # State keys agree with what each episode has learned so far.
    keys = ro.state_keys()
    for i in range(300):
        task, xk, yk, res = parse_state_key(keys[i])
        assert task == ("add", "sub", "mul")[ro.task[i]]
        assert (xk, yk) == (ro.stage[i] >= 1, ro.stage[i] >= 2)
        assert (res is not None) == (ro.stage[i] == 3)


def test_simulate_asks_policy_once_per_t_for_unique_states() -> None:
    calls: list[list[tuple]] = []

    class Recording:
        def action_probs(self, states):
            calls.append([tuple(row) for row in np.asarray(states).tolist()])
            return BehaviorPolicy("good_coverage").action_probs(states)

    simulate(Recording(), 5000, seed=0)
    assert len(calls) == 4  # lookup_x, lookup_y, op, final
    for rows in calls:
        assert len(rows) == len(set(rows))
    assert len(calls[0]) == 3  # one start state per task
    # at final, whether the stored result is right is part of the state a policy sees
    assert {row[4] for row in calls[3]} == {1, 2}


def test_simulate_is_deterministic_in_seed() -> None:
    a = simulate(BehaviorPolicy("good_coverage"), 2000, seed=5)
    b = simulate(BehaviorPolicy("good_coverage"), 2000, seed=5)
    c = simulate(BehaviorPolicy("good_coverage"), 2000, seed=6)
    assert np.array_equal(a.action, b.action) and np.array_equal(a.ep_x, b.ep_x)
    assert not np.array_equal(a.ep_x, c.ep_x)


def test_simulate_zero_episodes() -> None:
    ro = simulate(BehaviorPolicy("good_coverage"), 0, seed=0)
    assert ro.n_episodes == 0 and ro.n_steps == 0


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        TabularPolicy({"add|0|0|-": [0.5, 0.6, 0, 0, 0, 0]})
    with pytest.raises(ValueError):
        TabularPolicy({"add|0|0|-": [1, 0, 0]})
    with pytest.raises(KeyError):
        TabularPolicy({}).action_probs(keys_to_rows(["add|0|0|-"]))
    with pytest.raises(ValueError):
        BehaviorPolicy("bad_variant")

    class Broken:
        def action_probs(self, states):
            return np.full((len(states), 6), 0.5)

    with pytest.raises(ValueError):
        simulate(Broken(), 10, seed=0)
    with pytest.raises(ValueError):
        exact_value(Broken())


def test_behavior_policy_rows() -> None:
    good, nomul = BehaviorPolicy("good_coverage"), BehaviorPolicy("no_mul_support")
    keys = ["mul|0|0|-", "mul|1|0|-", "mul|1|1|-", "add|1|1|-", "sub|1|1|3"]
    rows = keys_to_rows(keys)
    assert labels(rows, POLICY_VARIABLES) == keys
    g, n = good.action_probs(rows), nomul.action_probs(rows)
    assert g.shape == (5, 6)
    assert np.allclose(g.sum(axis=1), 1.0) and np.allclose(n.sum(axis=1), 1.0)
    assert g[0].tolist() == [1, 0, 0, 0, 0, 0] and g[1].tolist() == [0, 1, 0, 0, 0, 0]
    assert g[4].tolist() == [0, 0, 0, 0, 0, 1]
    assert np.allclose(g[2], [0, 0, 0.38 / 3, 0.38 / 3, 0.62 + 0.38 / 3, 0])
    assert np.allclose(n[2], [0, 0, 0.5, 0.5, 0, 0])
    assert np.allclose(n[3], [0, 0, 0.81, 0.19, 0, 0])


# --------------------------------------------------------------------------- logger

N_LOG = 6000
TEST_FRACTION = 0.2
STAGE_NAMES = ("start", "x_known", "y_known", "result")


@pytest.fixture(scope="module")
def logged() -> dict[str, list[dict]]:
    return {name: list(log_records(name, N_LOG, seed=7, test_fraction=TEST_FRACTION))
            for name in ("good_coverage", "no_mul_support")}


def episodes(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        out[r["episode_id"]].append(r)
    return out


def stated_prob(name: str, task: str, t: int, tool: str) -> float:
    """Behaviour probabilities as stated in the spec (valid calls only)."""
    if t in (0, 1, 3):  # lookup_x, lookup_y, final: the only valid call, so prob 1
        return 1.0
    if name == "good_coverage":
        return 0.62 + 0.38 / 3 if tool == task else 0.38 / 3
    if tool == "mul":  # the no_mul_support logger never calls mul
        return 0.0
    if task == "mul":
        return 0.5
    return 0.62 + 0.38 / 2 if tool == task else 0.38 / 2


def test_every_record_passes_schema() -> None:
    # The calculator logs in the v1 layout (no v2 field), which the v2 schema still takes.
    field_names = [f.name for f in LOGGED_FIELDS if f.name not in V2_FIELDS]
    for name in ("good_coverage", "no_mul_support"):
        for rec in log_records(name, 1500, seed=2, test_fraction=0.3):
            assert list(rec) == field_names
            record_to_row(rec)


def test_episode_structure_and_real_arguments(logged) -> None:
    for name, records in logged.items():
        eps = episodes(records)
        assert len(eps) == N_LOG
        assert f"{name}-000000" in eps
        for eid, steps in eps.items():
            assert [s["t"] for s in steps] == list(range(len(steps)))
            assert [s["done"] for s in steps] == [False] * (len(steps) - 1) + [True]
            assert len({s["split"] for s in steps}) == 1
            assert len({s["task"] for s in steps}) == 1
            # The behaviour policy only makes valid calls: always 4 steps in order.
            tools = [s["action"]["tool"] for s in steps]
            assert tools[:2] == ["lookup_x", "lookup_y"] and tools[3] == "final"
            x = steps[0]["observation"]["tool_result"]
            y = steps[1]["observation"]["tool_result"]
            assert 1 <= x <= 9 and 1 <= y <= 9
            op = steps[2]
            assert op["action"]["arguments"] == {"a": x, "b": y}
            assert op["observation"]["tool_result"] == OPS[tools[2]](x, y)
            final = steps[3]
            assert final["action"]["arguments"] == {"answer": OPS[tools[2]](x, y)}
            assert final["observation"] == {"tool_result": None, "error": None}
            truth = OPS[steps[0]["task"]](x, y)
            ok = final["action"]["arguments"]["answer"] == truth
            assert final["reward"] == (0.98 if ok else -1.02)
            assert final["reward_components"]["task_success"] == (1.0 if ok else -1.0)
            for s in steps:
                rc = s["reward_components"]
                assert s["reward"] == pytest.approx(
                    rc["task_success"] + rc["tool_error_penalty"] + rc["cost_penalty"])
                assert rc["format_valid"] == 1.0 and rc["cost_penalty"] == -0.02
                assert s["metadata"]["behavior_policy"] == f"calculator_scripted_v1/{name}"
            if eid.endswith("0"):  # spot-check the textual state on a tenth of episodes
                assert steps[0]["state"]["conversation_history"] == ""
                assert steps[0]["state"]["memory"] == "{}"
                assert steps[2]["state"]["conversation_history"] == (
                    f"lookup_x() -> {x}\nlookup_y() -> {y}")
                assert orjson.loads(steps[3]["state"]["memory"]) == {
                    "x": x, "y": y, "result": OPS[tools[2]](x, y)}
                assert steps[3]["state"]["conversation_history"].endswith(
                    f"{tools[2]}(a={x}, b={y}) -> {OPS[tools[2]](x, y)}")


def test_logprobs_match_stated_probabilities(logged) -> None:
    for name, records in logged.items():
        for r in records:
            p = stated_prob(name, r["task"], r["t"], r["action"]["tool"])
            if p == 1.0:
                assert r["action_logprobs"] == 0.0
            else:
                assert r["action_logprobs"] == pytest.approx(math.log(p), abs=1e-12)


@pytest.mark.parametrize("name", ["good_coverage", "no_mul_support"])
def test_op_frequencies_match_stated_probabilities(logged, name: str) -> None:
    counts: dict[str, Counter] = defaultdict(Counter)
    for r in logged[name]:
        if r["t"] == 2:
            counts[r["task"]][r["action"]["tool"]] += 1
    for task, c in counts.items():
        n = sum(c.values())
        assert n > 1800
        for tool in ("add", "sub", "mul"):
            p = stated_prob(name, task, 2, tool)
            se = math.sqrt(p * (1 - p) / n)
            assert abs(c[tool] / n - p) <= 4 * se + 1e-12, (task, tool)
    if name == "no_mul_support":
        assert all(r["action"]["tool"] != "mul" for r in logged[name])


def test_split_fraction(logged) -> None:
    for records in logged.values():
        split = {r["episode_id"]: r["split"] for r in records}
        frac = sum(s == "test" for s in split.values()) / len(split)
        se = math.sqrt(TEST_FRACTION * (1 - TEST_FRACTION) / len(split))
        assert abs(frac - TEST_FRACTION) <= 4 * se
    assert {r["split"] for r in log_records("good_coverage", 50, 1, 0.0)} == {"train"}
    assert {r["split"] for r in log_records("good_coverage", 50, 1, 1.0)} == {"test"}


def test_logger_determinism_and_files(tmp_path: Path) -> None:
    a = list(log_records("no_mul_support", 500, seed=3, test_fraction=0.2))
    assert a == list(log_records("no_mul_support", 500, seed=3, test_fraction=0.2))
    assert a != list(log_records("no_mul_support", 500, seed=4, test_fraction=0.2))
    p1, p2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    n1 = write_jsonl(p1, log_records("no_mul_support", 500, seed=3, test_fraction=0.2))
    n2 = write_jsonl(p2, iter(a))
    assert n1 == n2 == len(a)
    data = p1.read_bytes()
    assert data == p2.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == len(a)
    assert [orjson.loads(line) for line in data.splitlines()] == a
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl"]  # no temp
    # Readable by pyarrow's JSON reader, with integer tool results.
    table = pj.read_json(p1)
    assert table.num_rows == len(a)
    assert table.schema.field("observation").type.field("tool_result").type == pa.int64()


def test_write_jsonl_is_atomic_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old\n")

    def failing():
        yield {"a": 1}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_jsonl(target, failing())
    assert target.read_bytes() == b"old\n"
    assert [x.name for x in tmp_path.iterdir()] == ["out.jsonl"]


def test_log_records_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        log_records("bogus", 10, 0, 0.2)
    with pytest.raises(ValueError):
        log_records("good_coverage", 10, 0, 1.5)


@pytest.mark.integration
def test_library_does_not_import_prefect() -> None:
    code = ("import sys, tracerl.envs.calculator.simulator, tracerl.envs.calculator.exact, "
            "tracerl.envs.calculator.logs; assert 'prefect' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
