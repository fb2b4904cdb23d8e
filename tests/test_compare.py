"""Logged agents compared on the same tasks (tracerl.data.compare), checked against numbers
recomputed independently: the raw tau2 JSON read with the stdlib, scipy.stats for the exact
test and the bootstrap, brute-force enumeration for the stratified exact test."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from tracerl.config.schema import Compare, ParamsError, validate_params
from tracerl.data.compare import (
    AgentEpisodes,
    agent_episodes,
    compare,
    compare_datasets,
    exact_test,
    pass_hat_k,
    task_scores,
)
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.report.compare import compare_markdown

TAU2 = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "tau2-bench"
AGENTS = ("gpt-4.1", "ft-gpt-4.1-sft")
DEFAULTS = Compare().model_dump()
SETTINGS = {k: DEFAULTS[k] for k in ("confidence", "n_boot", "seed", "max_k", "min_tasks",
                                     "success_threshold")}
EPISODE_SETTINGS = {"value": DEFAULTS["value"],
                    "exclude_terminations": DEFAULTS["exclude_terminations"]}


def _raw_successes(agent: str) -> dict[str, list[int]]:
    """task id -> successes of its trials, straight from the tau2 results file (tau2-bench's
    is_successful: reward within 1e-6 of 1)."""
    sims = json.loads((TAU2 / f"{agent}_airline.json").read_text())["simulations"]
    out: dict[str, list[int]] = defaultdict(list)
    for s in sims:
        out[str(s["task_id"])].append(int(abs(s["reward_info"]["reward"] - 1) <= 1e-6))
    return out


@pytest.fixture(scope="module")
def tau2_episodes(tmp_path_factory) -> dict[str, AgentEpisodes]:
    if not TAU2.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    out = {}
    for agent in AGENTS:
        folder = tmp_path_factory.mktemp(agent)
        summary = ingest([TAU2 / f"{agent}_airline.json"], folder, fmt="tau2")
        assert summary.quarantined == 0
        import pyarrow.parquet as pq

        steps = pq.read_table(folder / "steps")
        labelled = relabel(steps, ["tau2_outcome@1"], {"task_success": 1.0})
        out[agent] = agent_episodes(labelled, agent, **EPISODE_SETTINGS)
    return out


def test_tau2_fine_tuned_against_gpt41_recomputed_from_the_raw_json(tau2_episodes):
    result = compare(tau2_episodes["ft-gpt-4.1-sft"], tau2_episodes["gpt-4.1"], **SETTINGS)
    ft, base = _raw_successes("ft-gpt-4.1-sft"), _raw_successes("gpt-4.1")
    common = sorted(set(ft) & set(base))
    assert result.n_tasks == len(common) == 20
    mean = {a: sum(sum(r[t]) / len(r[t]) for t in common) / len(common)
            for a, r in (("ft", ft), ("base", base))}
    assert (mean["ft"], mean["base"]) == (0.65, 0.50)
    assert result.agent_score == pytest.approx(mean["ft"])
    assert result.baseline_score == pytest.approx(mean["base"])
    assert result.difference == pytest.approx(0.15, abs=1e-12)

    only_ft = sum(1 for t in common if ft[t] == [1] and base[t] == [0])
    only_base = sum(1 for t in common if ft[t] == [0] and base[t] == [1])
    assert (result.agent_better, result.baseline_better) == (only_ft, only_base) == (6, 3)
    assert result.exact.name.startswith("McNemar")
    assert result.exact.p_value == pytest.approx(
        stats.binomtest(only_ft, only_ft + only_base, 0.5).pvalue, rel=1e-12)
    assert {d["task"] for d in result.disagreements()} == {
        t for t in common if ft[t] != base[t]}

    # The interval: scipy's paired percentile bootstrap on the same per-task pairs agrees to
    # one step of the discrete bootstrap distribution (1/20).
    ref = stats.bootstrap((np.array([ft[t][0] for t in common], float),
                           np.array([base[t][0] for t in common], float)),
                          lambda a, b, axis: np.mean(a - b, axis=axis), paired=True,
                          vectorized=True, n_resamples=20_000, method="percentile",
                          rng=np.random.default_rng(7)).confidence_interval
    assert result.ci_low == pytest.approx(ref.low, abs=0.05 + 1e-9)
    assert result.ci_high == pytest.approx(ref.high, abs=0.05 + 1e-9)
    assert -1.0 <= result.ci_low < result.difference < result.ci_high <= 1.0
    assert any(f.startswith("interval_unreliable: 20 tasks") for f in result.flags)


def test_same_seed_same_numbers_another_seed_same_point_estimate(tau2_episodes):
    a, b = tau2_episodes["ft-gpt-4.1-sft"], tau2_episodes["gpt-4.1"]
    first = compare(a, b, **SETTINGS).to_dict()
    assert compare(a, b, **SETTINGS).to_dict() == first
    other = compare(a, b, **{**SETTINGS, "seed": 99}).to_dict()
    assert other["difference"] == first["difference"]
    assert other["exact_test"] == first["exact_test"]


def _episodes(name: str, rows: list[tuple[str, float]], **kw) -> AgentEpisodes:
    return AgentEpisodes(name, np.array([f"{name}-{i}" for i in range(len(rows))], object),
                         np.array([t for t, _ in rows], object),
                         np.array([v for _, v in rows], float), **kw)


def test_three_agents_every_pair_in_the_outputs(tau2_episodes):
    # A synthetic third agent: gpt-4.1's episodes with task 2 dropped and two trials per task
    # (its own outcome and its opposite on tasks whose id is even).
    base = tau2_episodes["gpt-4.1"]
    rows = [(t, v) for t, v in zip(base.task, base.value, strict=True) if t != "2"]
    rows += [(t, 1.0 - v if int(t) % 2 == 0 else v) for t, v in rows]
    third = _episodes("third", rows)
    result = compare_datasets([base, tau2_episodes["ft-gpt-4.1-sft"], third], "all",
                              **SETTINGS)
    assert [(p.agent, p.baseline) for p in result.pairs] == [
        ("ft-gpt-4.1-sft", "gpt-4.1"), ("third", "gpt-4.1"), ("third", "ft-gpt-4.1-sft")]
    raw = {"gpt-4.1": _raw_successes("gpt-4.1"),
           "ft-gpt-4.1-sft": _raw_successes("ft-gpt-4.1-sft"),
           "third": {t: [int(v) for tt, v in rows if tt == t] for t, _ in rows}}
    metrics = result.metrics()["pairs"]
    for p in result.pairs:
        a, b = raw[p.agent], raw[p.baseline]
        common = sorted(set(a) & set(b))
        expected = sum(sum(a[t]) / len(a[t]) - sum(b[t]) / len(b[t]) for t in common)
        assert p.n_tasks == len(common)
        assert metrics[p.key]["difference"] == pytest.approx(expected / len(common))
        assert metrics[p.key]["ci_low"] <= metrics[p.key]["difference"] <= metrics[p.key][
            "ci_high"]
        assert "p_value" in metrics[p.key]
    third_pair = result.pairs[1]
    assert third_pair.tasks_only_baseline == ["2"] and third_pair.n_tasks == 19
    assert third_pair.exact.name.startswith("exact conditional test stratified by task")
    markdown = compare_markdown(result.to_dict())
    for p in result.pairs:
        assert f"{p.agent} vs {p.baseline}" in markdown
    board = result.leaderboard.to_pandas()
    assert board["score"].is_monotonic_decreasing and set(board.index) == set(raw)
    assert board["rank"].tolist() == sorted(board["rank"]) and board["rank"].iloc[0] == 1
    assert board.loc["third", "trials_min"] == 2 and "pass^2" in board.columns


def test_exact_test_equals_brute_force_enumeration():
    rng = np.random.default_rng(20)
    for _ in range(150):
        n_tasks = int(rng.integers(1, 5))
        na, nb = rng.integers(1, 4, n_tasks), rng.integers(1, 4, n_tasks)
        p = rng.random(n_tasks)
        sa, sb = rng.binomial(na, p), rng.binomial(nb, p)
        # Every way of dealing each task's successes over its trials (the agent's first).
        per_task = [[sum(1 for j in chosen if j < na[i])
                     for chosen in itertools.combinations(range(na[i] + nb[i]), sa[i] + sb[i])]
                    for i in range(n_tasks)]
        counts = Counter(sum(c) for c in itertools.product(*per_task))
        total = sum(counts.values())
        observed = counts[int(sa.sum())] / total
        expected = sum(c / total for c in counts.values() if c / total <= observed * (1 + 1e-7))
        assert exact_test(na, sa, nb, sb).p_value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("b", "c"), [(6, 3), (0, 0), (10, 0), (5, 5), (40, 25), (1, 0)])
def test_one_trial_each_is_mcnemars_exact_test(b, c):
    ties = 7
    agent = np.array([1] * b + [0] * c + [1] * ties)
    baseline = np.array([0] * b + [1] * c + [1] * ties)
    ones = np.ones(len(agent), dtype=np.int64)
    result = exact_test(ones, agent, ones, baseline)
    assert result.name.startswith("McNemar") and result.informative_tasks == b + c
    expected = stats.binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    assert result.p_value == pytest.approx(expected, rel=1e-12)


def test_exact_test_many_tasks_stays_a_probability():
    rng = np.random.default_rng(3)
    n = rng.integers(2, 9, 4000)
    sa, sb = rng.binomial(n, 0.55), rng.binomial(n, 0.5)
    p = exact_test(n, sa, n, sb).p_value
    assert 0.0 <= p <= 1.0


def test_pass_hat_k_is_comb_c_k_over_comb_n_k():
    trials = np.array([4, 4, 5, 8, 3])
    successes = np.array([4, 2, 0, 6, 3])
    for k in range(1, 4):
        expected = [math.comb(c, k) / math.comb(n, k) for n, c in zip(trials, successes,
                                                                       strict=True)]
        assert pass_hat_k(trials, successes, k) == pytest.approx(expected, abs=1e-15)
    with pytest.raises(ValueError, match="pass\\^4 needs at least 4 trials"):
        pass_hat_k(trials, successes, 4)


def test_pass_k_of_a_pair_with_repeated_trials():
    # Two agents, 30 tasks of 4 trials each; pass^k per agent recomputed with math.comb.
    rng = np.random.default_rng(11)
    tasks = [f"t{i}" for i in range(30)]
    a_rows = [(t, float(rng.random() < 0.7)) for t in tasks for _ in range(4)]
    b_rows = [(t, float(rng.random() < 0.5)) for t in tasks for _ in range(4)]
    result = compare(_episodes("a", a_rows), _episodes("b", b_rows), **SETTINGS)
    assert [r["k"] for r in result.pass_k] == [1, 2, 3, 4]
    for rows, side in ((a_rows, "agent"), (b_rows, "baseline")):
        c = Counter(t for t, v in rows if v)
        for r in result.pass_k:
            expected = sum(math.comb(c[t], r["k"]) / math.comb(4, r["k"]) for t in tasks) / 30
            assert r[side] == pytest.approx(expected)
    for r in result.pass_k:
        assert r["ci_low"] <= r["difference"] <= r["ci_high"]
    assert result.pass_k[0]["difference"] == pytest.approx(result.difference)
    assert not any(f.startswith("interval_unreliable") for f in result.flags)


def test_no_common_task_one_dataset_and_non_binary_values_say_so():
    a = _episodes("a", [("x", 1.0), ("y", 0.0)])
    b = _episodes("b", [("z", 1.0)])
    none = compare(a, b, **SETTINGS)
    assert none.n_tasks == 0 and none.difference is None and none.flags == ["no_common_tasks"]
    assert none.to_dict()["tasks_only_agent"] == ["x", "y"]

    alone = compare_datasets([a], "all", **SETTINGS)
    assert alone.pairs == [] and "no pair to compare" in alone.notes[0]
    assert alone.leaderboard.rows[0]["score"] == 0.5 and alone.metrics()["pairs"] == {}

    shaped = _episodes("shaped", [("x", 0.8), ("y", 0.2)])
    result = compare(shaped, a, **SETTINGS)
    assert result.exact is None and "not 0/1" in result.exact_note
    assert result.difference == pytest.approx(0.0) and result.pass_k == []
    counted = compare(shaped, a, **{**SETTINGS, "success_threshold": 0.5})
    assert counted.exact is not None and counted.agent_score == 0.5


def _steps(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema([
        ("episode_id", pa.string()), ("task", pa.string()), ("done", pa.bool_()),
        ("reward", pa.float64()),
        ("reward_components", pa.map_(pa.string(), pa.float64())),
        ("episode", pa.struct([("termination_reason", pa.string())]))]))


def test_episode_values_and_what_is_left_out():
    def row(ep, task, done, reward, ending="user_stop", parts=None):
        return {"episode_id": ep, "task": task, "done": done, "reward": reward,
                "reward_components": parts, "episode": {"termination_reason": ending}}

    steps = _steps([
        row("e1", "1", False, None), row("e1", "1", True, 1.0, parts=[("task_success", 1.0)]),
        row("e2", "1", False, 0.25), row("e2", "1", True, 0.5, parts=[("task_success", 0.0)]),
        row("e3", None, True, 1.0), row("e4", "2", True, None),
        row("e5", "3", True, 0.0, ending="infrastructure_error",
            parts=[("task_success", 0.0)]),
        row("e6", "4", False, 1.0)])  # no done row
    got = agent_episodes(steps, "x", **EPISODE_SETTINGS)
    assert got.episode_id.tolist() == ["e1", "e2"] and got.value.tolist() == [1.0, 0.75]
    assert got.excluded == {"no done row": 1, "no task id": 1, "no value": 1,
                            "termination infrastructure_error": 1}
    component = agent_episodes(steps, "x", value="task_success", exclude_terminations=[])
    assert component.episode_id.tolist() == ["e1", "e2", "e5"]
    assert component.value.tolist() == [1.0, 0.0, 0.0]
    assert component.excluded == {"no done row": 1, "no task id": 1,
                                  "no task_success component": 1}


def test_params_section_defaults_and_mistakes():
    base = {"datasets": {"a": {}, "b": {}}, "validate": {"reward_min": 0.0, "reward_max": 1.0},
            "paths": {"ingested": "i", "labelled": "l", "reports": "r", "metrics": "m",
                      "plots": "p"},
            "relabel": {"verifiers": ["tau2_outcome@1"], "weights": {"task_success": 1.0}},
            "coverage": {"featurizer": "dialogue"}}
    assert validate_params(base).compare == Compare()
    validate_params({**base, "compare": {"pairs": [{"agent": "b", "baseline": "a"}]}})
    with pytest.raises(ParamsError, match="compare.pairs: 'bb' is not one of datasets.*did "
                                          "you mean 'b'"):
        validate_params({**base, "compare": {"pairs": [{"agent": "bb", "baseline": "a"}]}})
    with pytest.raises(ParamsError, match="agent and baseline are both 'a'"):
        validate_params({**base, "compare": {"pairs": [{"agent": "a", "baseline": "a"}]}})
    with pytest.raises(ParamsError, match="unknown key compare.n_boots"):
        validate_params({**base, "compare": {"n_boots": 5}})


def test_tasks_in_natural_order_and_each_agent_reduced_once():
    numeric = task_scores(_episodes("n", [("13", 1.0), ("2", 0.0), ("007", 1.0)]), None)
    assert numeric.tasks.tolist() == ["2", "007", "13"]
    mixed = task_scores(_episodes("m", [("t-13", 1.0), ("t-2", 0.0), ("a", 1.0)]), None)
    assert mixed.tasks.tolist() == ["a", "t-2", "t-13"]
    agent = _episodes("x", [("1", 1.0)])
    assert task_scores(agent, None) is task_scores(agent, None)
