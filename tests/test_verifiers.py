"""Tests for versioned verifiers, offline relabelling and the SWiRL-style episode filters.

Expectations on hand-made episodes are written out by hand; the relabel checks on logged
data compare against the rewards the calculator environment itself logged.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tracerl.config.registries import VERIFIERS
from tracerl.data.ingest.parse import records_to_table
from tracerl.data.relabel import (
    MODES,
    episodes_by_filter,
    outcome_filter,
    process_filter,
    provenance,
    relabel,
    select_training_data,
)
from tracerl.data.schema import STEP_SCHEMA
from tracerl.data.verifiers import (
    CostPenalty,
    FormatValid,
    ToolErrorPenalty,
    get_verifier,
    register,
)
from tracerl.envs.calculator import logs as calculator
from tracerl.envs.calculator.behavior import BehaviorPolicy, TabularPolicy
from tracerl.envs.calculator.logs import log_records
from tracerl.envs.calculator.rules import STATE_KEYS, keys_to_rows
from tracerl.envs.calculator.simulator import simulate
from tracerl.envs.calculator.verifiers import CalculatorExact

TOOLS = ["lookup_x", "lookup_y", "add", "sub", "mul", "final"]
ALL_IDS = ["calculator_exact@1", "format_valid@1", "tool_error_penalty@1", "cost_penalty@1"]
ENV_WEIGHTS = {"task_success": 1.0, "tool_error_penalty": 1.0, "cost_penalty": 1.0,
               "format_valid": 0.0}
ERR = "invalid call"


def step(ep: str, t: int, tool: str | None, *, task: str = "add", args: dict | None = None,
         result: object = None, error: str | None = None, tools: list[str] | None = TOOLS,
         action_type: str = "tool_call", reward: float = 0.0) -> dict:
    """One native step record; only the fields the verifiers read vary."""
    return {
        "episode_id": ep, "t": t, "task": task,
        "state": None if tools is None else {
            "user_goal": "g", "conversation_history": "", "available_tools": tools,
            "memory": None, "retrieved_context": None},
        "action": {"type": action_type, "tool": tool, "arguments": args or {}},
        "observation": {"tool_result": result, "error": error},
        "reward": reward, "done": False, "prompt_version": "p", "tool_schema_version": "s",
        "environment_version": "e", "action_logprobs": None,
        "reward_components": {"task_success": 9.0}, "reward_source": "env",
        "verifier_version": None, "split": "train",
        "metadata": None,
    }


def table(records: list[dict]) -> pa.Table:
    return records_to_table(records, "hand.jsonl", list(range(1, len(records) + 1)))


def episode(ep: str, task: str, x: int, y: int, op: str, answer: object) -> list[dict]:
    """A four-call episode: lookup_x, lookup_y, op(x, y), final(answer)."""
    value = {"add": x + y, "sub": x - y, "mul": x * y}[op]
    return [step(ep, 0, "lookup_x", task=task, result=x),
            step(ep, 1, "lookup_y", task=task, result=y),
            step(ep, 2, op, task=task, args={"a": x, "b": y}, result=value),
            step(ep, 3, "final", task=task, args={"answer": answer})]


# --------------------------------------------------------------------------- registry


def test_registry_ids_and_components() -> None:
    expected = {"calculator_exact@1": "task_success", "format_valid@1": "format_valid",
                "tool_error_penalty@1": "tool_error_penalty", "cost_penalty@1": "cost_penalty"}
    for vid, component in expected.items():
        v = get_verifier(vid)
        assert v.id == vid and VERIFIERS[vid] is v
        assert v.id == f"{v.name}@{v.version}"
        assert v.component == component


def test_unknown_verifier_lists_known_ids() -> None:
    with pytest.raises(KeyError) as exc:
        get_verifier("calculator_exact@2")
    message = str(exc.value)
    assert "calculator_exact@2" in message
    for vid in ALL_IDS:
        assert vid in message


def test_register_refuses_a_taken_id_unless_replacing() -> None:
    with pytest.raises(ValueError, match="cost_penalty@1"):
        register(CostPenalty(cost=0.5))
    custom = CostPenalty(cost=0.5, version="test-0.5")
    try:
        assert register(custom) is custom
        assert get_verifier("cost_penalty@test-0.5") is custom
    finally:
        VERIFIERS.remove(custom.id)


def test_provenance_names_component_and_inputs_in_stable_order() -> None:
    prov = provenance(list(reversed(ALL_IDS)))
    assert list(prov) == sorted(ALL_IDS)
    assert prov["calculator_exact@1"]["component"] == "task_success"
    assert "lookup_x" in prov["calculator_exact@1"]["inputs"]
    assert prov["tool_error_penalty@1"] == {"component": "tool_error_penalty",
                                            "inputs": "observation.error"}


# --------------------------------------------------------------------------- calculator_exact


def test_calculator_exact_hand_made_episodes() -> None:
    records = (
        episode("correct_add", "add", 3, 4, "add", 7)          # 3 + 4 = 7: +1
        + episode("wrong_op", "add", 5, 2, "sub", 3)           # 5 - 2 = 3, task wants 7: -1
        + episode("coincidence", "mul", 2, 2, "add", 4)        # 2 + 2 = 4 = 2 * 2: +1
        + [step("no_lookup_y", 0, "lookup_x", result=3),       # y never looked up: -1
           step("no_lookup_y", 1, "add", args={"a": 3, "b": None}, result=None),
           step("no_lookup_y", 2, "final", args={"answer": 7})]
        + episode("null_answer", "sub", 9, 1, "sub", None)     # answer missing: -1
        + [step("rejected_final", 0, "lookup_x", result=1),    # a rejected final is not
           step("rejected_final", 1, "final", args={"answer": None}, error=ERR)]  # judged: 0
    )
    expected = np.array([0, 0, 0, 1.0,
                         0, 0, 0, -1.0,
                         0, 0, 0, 1.0,
                         0, 0, -1.0,
                         0, 0, 0, -1.0,
                         0, 0])
    tab = table(records)
    np.testing.assert_array_equal(get_verifier("calculator_exact@1").score(tab), expected)

    # Shuffled rows split over several chunks: scores stay aligned with their rows.
    perm = np.random.default_rng(0).permutation(len(records))
    shuffled = tab.take(pa.array(perm))
    chunked = pa.concat_tables([shuffled.slice(0, 5), shuffled.slice(5, 9), shuffled.slice(14)])
    assert chunked.column("t").num_chunks == 3
    np.testing.assert_array_equal(CalculatorExact().score(chunked), expected[perm])


def test_calculator_exact_reads_the_log_not_hidden_state() -> None:
    # The logged lookups say x=6, y=3; a final answer of 9 is right whatever the env knew.
    records = [step("e", 0, "lookup_x", result=6), step("e", 1, "lookup_y", result=3),
               step("e", 2, "add", args={"a": 6, "b": 3}, result=9),
               step("e", 3, "final", args={"answer": 9})]
    assert CalculatorExact().score(table(records)).tolist() == [0, 0, 0, 1.0]
    # An unknown task cannot be checked: -1.
    records = [{**r, "task": "div"} for r in records]
    assert CalculatorExact().score(table(records)).tolist() == [0, 0, 0, -1.0]


def test_verifiers_on_an_empty_table() -> None:
    empty = STEP_SCHEMA.empty_table()
    for vid in ALL_IDS:
        assert get_verifier(vid).score(empty).shape == (0,)


# --------------------------------------------------------------------------- process verifiers


def process_episode() -> pa.Table:
    return table([
        step("p", 0, "lookup_x", result=4),                          # valid
        step("p", 1, "search", result=None),                         # not an available tool
        step("p", 2, "mul", args={"a": 4, "b": None}, error=ERR),    # rejected: error set
        step("p", 3, "lookup_y", result=2, tools=["lookup_x"]),      # offered list lacks it
        step("p", 4, None, action_type="message"),                   # not a tool call
        step("p", 5, "lookup_y", result=2, tools=None),              # no state logged
        step("p", 6, "lookup_y", result=2),                          # valid
    ])


def test_format_valid() -> None:
    assert FormatValid().score(process_episode()).tolist() == [1, 0, 0, 0, 0, 0, 1]


def test_tool_error_penalty() -> None:
    assert ToolErrorPenalty().score(process_episode()).tolist() == [0, 0, -1, 0, 0, 0, 0]


def test_cost_penalty_default_and_custom_cost() -> None:
    tab = process_episode()
    assert get_verifier("cost_penalty@1").score(tab).tolist() == [-0.02, 0, 0, 0, 0, 0, -0.02]
    assert CostPenalty(cost=0.5).score(tab).tolist() == [-0.5, 0, 0, 0, 0, 0, -0.5]


# --------------------------------------------------------------------------- relabel


def logged_table(name: str, n_episodes: int, seed: int) -> pa.Table:
    return table(list(log_records(name, n_episodes, seed, 0.2)))


def with_invalid_calls(n_episodes: int, seed: int) -> pa.Table:
    """Calculator log of a noisier policy that also makes rejected calls.

    The behaviour datasets never make an invalid call (their noise is over valid calls),
    so this mixes the good_coverage policy with 10% uniform-over-all-tools noise and writes
    it with the calculator's own record writer.
    """
    behavior = BehaviorPolicy("good_coverage")
    rows = behavior.action_probs(keys_to_rows(STATE_KEYS))
    noisy = {key: 0.9 * row + 0.1 / 6 for key, row in zip(STATE_KEYS, rows, strict=True)}
    ro = simulate(TabularPolicy(noisy), n_episodes, seed)
    tab = table(list(calculator._records(ro, "noisy", [False] * n_episodes)))
    errors = tab.column("observation").combine_chunks().field("error").drop_null()
    assert len(errors) > 10  # the fixture does exercise rejected calls
    return tab


@pytest.mark.parametrize("make", [
    lambda: logged_table("good_coverage", 500, 11),
    lambda: logged_table("no_mul_support", 500, 12),
    lambda: with_invalid_calls(500, 13),
], ids=["good_coverage", "no_mul_support", "invalid_calls"])
def test_relabel_reproduces_the_logged_reward(make) -> None:
    tab = make()
    assert tab.num_rows > 1000
    out = relabel(tab, ALL_IDS, ENV_WEIGHTS)
    np.testing.assert_array_equal(out.column("reward").to_numpy(),
                                  tab.column("reward").to_numpy())
    # The components themselves match what the environment logged.
    logged = [dict(m) for m in tab.column("reward_components").to_pylist()]
    relabelled = [dict(m) for m in out.column("reward_components").to_pylist()]
    assert relabelled == logged


def test_relabel_bookkeeping_and_untouched_columns() -> None:
    tab = logged_table("good_coverage", 200, 5)
    out = relabel(tab, list(reversed(ALL_IDS)), ENV_WEIGHTS)
    assert out.column("reward_logged").equals(tab.column("reward"))
    assert set(out.column("reward_source").to_pylist()) == {"relabel"}
    assert set(out.column("verifier_version").to_pylist()) == {
        "calculator_exact@1,cost_penalty@1,format_valid@1,tool_error_penalty@1"}
    changed = {"reward", "reward_components", "reward_source", "verifier_version"}
    assert out.column_names == tab.column_names + ["reward_logged"]
    for name in tab.column_names:
        if name not in changed:
            assert out.column(name).equals(tab.column(name)), name
    assert out.schema.field("reward_components").type == tab.schema.field(
        "reward_components").type
    # Relabelling again keeps the reward as originally logged.
    again = relabel(out, ["tool_error_penalty@1"], {"tool_error_penalty": 1.0})
    assert again.column("reward_logged").equals(tab.column("reward"))
    assert again.column_names == out.column_names


def test_changing_a_weight_changes_the_reward_as_expected() -> None:
    tab = with_invalid_calls(300, 21)
    weights = {"task_success": 2.0, "tool_error_penalty": 1.0, "cost_penalty": 0.0,
               "format_valid": 0.5}
    out = relabel(tab, ALL_IDS, weights)
    # From the env's logged components: 2 * task_success + tool_error + 0.5 * format_valid.
    comps = [dict(m) for m in tab.column("reward_components").to_pylist()]
    want = [2 * c["task_success"] + c["tool_error_penalty"] + 0.5 * c["format_valid"]
            for c in comps]
    np.testing.assert_allclose(out.column("reward").to_numpy(), want, rtol=0, atol=1e-12)
    # A hand-checked row kind: a correct final is 2 + 0 + 0.5 = 2.5.
    finals = [r for r, c in zip(out.column("reward").to_pylist(), comps, strict=True)
              if c["task_success"] == 1.0]
    assert finals and set(finals) == {2.5}


def test_relabel_with_a_subset_and_errors() -> None:
    tab = table(episode("e", "add", 1, 2, "add", 3))
    out = relabel(tab, ["calculator_exact@1"], {"task_success": 3.0, "unused": 5.0})
    assert out.column("reward").to_pylist() == [0, 0, 0, 3.0]
    assert out.column("reward_components").to_pylist()[3] == [("task_success", 1.0)]
    with pytest.raises(KeyError, match="format_valid"):
        relabel(tab, ALL_IDS, {k: v for k, v in ENV_WEIGHTS.items() if k != "format_valid"})
    with pytest.raises(KeyError, match="nope@1"):
        relabel(tab, ["nope@1"], {})


# --------------------------------------------------------------------------- filters


def filter_table() -> pa.Table:
    records = (
        episode("good", "add", 3, 4, "add", 7)           # valid steps, right answer
        + episode("wrong", "add", 3, 4, "sub", -1)       # valid steps, wrong answer
        + [step("invalid", 0, "lookup_x", result=3),     # an invalid call ends it
           step("invalid", 1, "final", args={"answer": None}, error=ERR)]
        # An invalid call, then a recovered, correct ending: outcome-good, process-bad.
        + [step("recovered", 0, "lookup_x", result=3),
           step("recovered", 1, "mul", args={"a": 3, "b": None}, error=ERR)]
        + [{**r, "episode_id": "recovered", "t": r["t"] + 2}
           for r in episode("x", "add", 3, 4, "add", 7)]
    )
    # Interleave episodes so filters cannot rely on contiguous rows.
    perm = np.random.default_rng(1).permutation(len(records))
    return relabel(table(records).take(pa.array(perm)), ALL_IDS, ENV_WEIGHTS)


def kept(tab: pa.Table) -> set[str]:
    return set(tab.column("episode_id").to_pylist())


@pytest.mark.parametrize("mode,episodes", [
    ("all", {"good", "wrong", "invalid", "recovered"}),
    ("process", {"good", "wrong"}),
    ("outcome", {"good", "recovered"}),
    ("process+outcome", {"good"}),
])
def test_select_training_data(mode: str, episodes: set[str]) -> None:
    tab = filter_table()
    out = select_training_data(tab, mode)
    assert kept(out) == episodes
    # Whole episodes survive, rows in their original relative order.
    ids = tab.column("episode_id").to_pylist()
    want_rows = [i for i, e in enumerate(ids) if e in episodes]
    assert out.equals(tab.take(pa.array(want_rows, type=pa.int64())))


def test_episodes_by_filter_counts_the_episodes_each_filter_keeps() -> None:
    assert episodes_by_filter(filter_table()) == {"all": 4, "process": 2, "outcome": 2,
                                                  "process+outcome": 1}
    assert episodes_by_filter(filter_table().slice(0, 0)) == dict.fromkeys(MODES, 0)


def test_process_and_outcome_filters() -> None:
    tab = filter_table()
    assert kept(process_filter(tab)) == {"good", "wrong"}
    assert kept(outcome_filter(tab)) == {"good", "recovered"}
    assert process_filter(tab).num_rows == 8 and outcome_filter(tab).num_rows == 10


def test_filter_errors() -> None:
    tab = filter_table()
    with pytest.raises(ValueError, match="unknown mode"):
        select_training_data(tab, "outcome+process")
    only_outcome = relabel(table(episode("e", "add", 1, 1, "add", 2)), ["calculator_exact@1"],
                           {"task_success": 1.0})
    with pytest.raises(ValueError, match="format_valid"):
        process_filter(only_outcome)
    assert kept(outcome_filter(only_outcome)) == {"e"}


def test_labels_applied_part_by_part_write_the_whole_tables_bytes(tmp_path) -> None:
    """The relabel stage scores the table once, then labels and writes it a row group at
    a time from its parts (read_row_groups / write_row_groups): the same Parquet bytes as
    writing the relabelled whole with the same row-group size; the lean table the
    verifiers read (columns_read) gives the same labels."""
    import pyarrow.parquet as pq

    from tracerl.data.relabel import columns_read, score
    from tracerl.io.fileio import read_row_groups, read_table, write_row_groups

    tab = logged_table("good_coverage", 300, 7)
    src = tmp_path / "steps"
    src.mkdir()
    for i, start in enumerate(range(0, tab.num_rows, 250)):  # parts as ingest writes them
        pq.write_table(tab.slice(start, 250), src / f"part-{i:05d}.parquet")
    whole = relabel(read_table(src), ALL_IDS, ENV_WEIGHTS)
    columns = columns_read(ALL_IDS, tab.column_names)
    assert columns is not None and "extra" not in columns
    labels = score(read_table(src, columns), ALL_IDS, ENV_WEIGHTS)
    for rows in (333, tab.num_rows + 1):
        parts = list(read_row_groups(src, rows))
        assert [o for o, _ in parts] == list(range(0, tab.num_rows, rows))
        assert pa.concat_tables(labels.apply(p, o) for o, p in parts).equals(whole)
    # write_table's row groups (ROW_GROUP_ROWS rows), scaled down to 500 rows
    assert tab.num_rows > 1000
    write_row_groups((labels.apply(p, o) for o, p in read_row_groups(src, 500)),
                     tmp_path / "parts")
    pq.write_table(whole, tmp_path / "whole.parquet", row_group_size=500)
    assert ((tmp_path / "parts" / "part-00000.parquet").read_bytes()
            == (tmp_path / "whole.parquet").read_bytes())
