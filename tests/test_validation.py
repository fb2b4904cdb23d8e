"""Tests for tracerl.data.validation: the GX suite over the step table and its report files."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tracerl.data.schema import SCHEMA_VERSION, STEP_SCHEMA, record_to_row
from tracerl.data.validation import ValidationReport, validate_steps, write_report

REWARD_MIN, REWARD_MAX = -1.0, 1.0
TOOLS = ["search", "calculator"]


def _records() -> list[dict[str, Any]]:
    """Three valid episodes in the native JSON layout."""
    return [
        # e1: two tool calls, then an answer.
        {"episode_id": "e1", "t": 0, "task": "sum", "done": False, "reward": 0.0,
         "split": "train", "state": {"user_goal": "add", "available_tools": TOOLS},
         "action": {"type": "tool_call", "tool": "search", "arguments": {"q": "x"}}},
        {"episode_id": "e1", "t": 1, "task": "sum", "done": False, "reward": 0.0,
         "split": "train", "state": {"user_goal": "add", "available_tools": TOOLS},
         "action": {"type": "tool_call", "tool": "calculator", "arguments": {"e": "1+1"}},
         "observation": {"tool_result": 2}},
        {"episode_id": "e1", "t": 2, "task": "sum", "done": True, "reward": 1.0,
         "split": "train", "action": {"type": "final_answer"}},
        # e2: a message, then an answer with the lowest reward.
        {"episode_id": "e2", "t": 0, "done": False, "split": "validation",
         "action": {"type": "message"}},
        {"episode_id": "e2", "t": 1, "done": True, "reward": -1.0, "split": "validation",
         "action": {"type": "final_answer"}},
        # e3: no split, a tool call with unknown available_tools (null passes), no reward.
        {"episode_id": "e3", "t": 0, "done": False,
         "action": {"type": "tool_call", "tool": "anything"}},
        {"episode_id": "e3", "t": 1, "done": True, "action": {"type": "final_answer"}},
    ]


def _rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for line, record in enumerate(records, start=1):
        row = record_to_row(record)
        row.update(source_file="steps.jsonl", source_record=line, schema_version=SCHEMA_VERSION)
        rows.append(row)
    return rows


def _table(records: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(_rows(records), schema=STEP_SCHEMA)


def _edit(episode_id: str, t: int, **changes: Any) -> list[dict[str, Any]]:
    records = _records()
    for record in records:
        if (record["episode_id"], record["t"]) == (episode_id, t):
            record.update(changes)
    return records


def _validate(table: pa.Table) -> ValidationReport:
    return validate_steps(table, REWARD_MIN, REWARD_MAX)


def _only_failure(report: ValidationReport) -> Any:
    """The single failed outcome: each defect must be caught by exactly one expectation."""
    failed = [r for r in report.results if not r.success]
    assert len(failed) == 1, report.failure_message()
    assert not report.success
    return failed[0]


def _offenders(outcome: Any) -> set[tuple[str, int]]:
    return {(s["episode_id"], s["t"]) for s in outcome.sample}


@pytest.fixture(scope="module")
def good_report() -> ValidationReport:
    # Module scope: the first validate_steps call pays the GX import once.
    return _validate(_table(_records()))


@pytest.mark.integration
def test_import_is_cheap() -> None:
    code = "import sys, tracerl.data.validation; assert 'great_expectations' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_good_table_passes_every_expectation(good_report: ValidationReport) -> None:
    assert good_report.success, good_report.failure_message()
    assert all(r.success for r in good_report.results)
    assert (good_report.rows, good_report.episodes) == (7, 3)
    names = {r.name for r in good_report.results}
    assert {"(episode_id, t) is unique", "reward within [-1.0, 1.0]", "t >= 0",
            "exactly one done row per episode", "action.tool in state.available_tools",
            "action.type has dtype str", "t has dtype int32", "done has dtype bool",
            "reward has dtype float64", "episode_id is not null"} <= names
    assert "all" in good_report.failure_message()


def test_report_dict_is_json_and_deterministic(good_report: ValidationReport) -> None:
    first = json.dumps(good_report.to_dict(), sort_keys=True)
    assert first == json.dumps(good_report.to_dict(), sort_keys=True)
    assert json.loads(first)["expectations"] == len(good_report.results)


def test_duplicate_episode_step() -> None:
    records = _records()
    records.append(copy.deepcopy(records[1]))  # e1 t=1 again
    outcome = _only_failure(_validate(_table(records)))
    assert outcome.expectation == "expect_compound_columns_to_be_unique"
    assert outcome.unexpected_count == 2
    assert _offenders(outcome) == {("e1", 1)}
    assert outcome.sample[0]["value"] == ["e1", 1]


def test_episode_with_two_done_rows() -> None:
    outcome = _only_failure(_validate(_table(_edit("e2", 0, done=True))))
    assert outcome.name == "exactly one done row per episode"
    assert _offenders(outcome) == {("e2", 0), ("e2", 1)}
    assert {s["value"] for s in outcome.sample} == {2}


def test_episode_without_done() -> None:
    outcome = _only_failure(_validate(_table(_edit("e3", 1, done=False))))
    assert outcome.name == "exactly one done row per episode"
    assert _offenders(outcome) == {("e3", 0), ("e3", 1)}
    assert {s["value"] for s in outcome.sample} == {0}


def test_reward_out_of_bounds() -> None:
    outcome = _only_failure(_validate(_table(_edit("e1", 1, reward=5.0))))
    assert outcome.name == "reward within [-1.0, 1.0]"
    assert outcome.sample == [
        {"episode_id": "e1", "t": 1, "value": 5.0, "source": "steps.jsonl:2"}
    ]
    # The same table passes with wider bounds.
    assert validate_steps(_table(_edit("e1", 1, reward=5.0)), -1.0, 5.0).success


def test_tool_not_in_available_tools() -> None:
    action = {"type": "tool_call", "tool": "shell", "arguments": {}}
    outcome = _only_failure(_validate(_table(_edit("e1", 1, action=action))))
    assert outcome.name == "action.tool in state.available_tools"
    assert outcome.sample == [
        {"episode_id": "e1", "t": 1, "value": "shell", "source": "steps.jsonl:2"}
    ]


def test_bad_split_value() -> None:
    rows = _rows(_records())
    rows[3]["split"] = "holdout"  # e2 t=0; record_to_row would reject it
    outcome = _only_failure(_validate(pa.Table.from_pylist(rows, schema=STEP_SCHEMA)))
    assert outcome.column == "split"
    assert outcome.expectation == "expect_column_values_to_be_in_set"
    assert outcome.sample == [
        {"episode_id": "e2", "t": 0, "value": "holdout", "source": "steps.jsonl:4"}
    ]


def test_wrong_column_type_and_sample_limit() -> None:
    table = _table(_records())
    i = table.schema.get_field_index("t")
    table = table.set_column(i, pa.field("t", pa.int64()), table.column("t").cast(pa.int64()))
    report = validate_steps(table, 0.0, 0.0, sample_rows=1)  # the rewards 1 and -1 fail too
    failed = {r.name: r for r in report.results if not r.success}
    assert set(failed) == {"t has dtype int32", "reward within [0.0, 0.0]"}
    assert failed["t has dtype int32"].observed == "int64"
    assert failed["reward within [0.0, 0.0]"].unexpected_count == 2
    assert len(failed["reward within [0.0, 0.0]"].sample) == 1


def test_failure_message_names_rows() -> None:
    report = _validate(_table(_edit("e1", 1, reward=5.0)))
    message = report.failure_message()
    assert "reward within [-1.0, 1.0]" in message
    assert "episode_id='e1' t=1 value=5.0" in message


def test_missing_columns_raise() -> None:
    with pytest.raises(ValueError, match="lacks step-schema columns"):
        validate_steps(_table(_records()).drop_columns(["split"]), REWARD_MIN, REWARD_MAX)


def test_write_report(tmp_path: Path) -> None:
    report = _validate(_table(_edit("e1", 1, reward=5.0)))
    out = tmp_path / "validation"
    write_report(report, out, title="Steps <test>")
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(json.dumps(report.to_dict()))
    assert summary["success"] is False
    page = (out / "report.html").read_text()
    assert "reward within [-1.0, 1.0]" in page
    assert "FAIL" in page and "Steps &lt;test&gt;" in page
    assert "<script" not in page and "http" not in page


def test_sample_spreads_over_episodes() -> None:
    records = _edit("e3", 1, done=False)
    records[4]["done"] = False  # e2 t=1: now e2 and e3 both lack a done row
    report = validate_steps(_table(records), REWARD_MIN, REWARD_MAX, sample_rows=2)
    outcome = _only_failure(report)
    assert outcome.unexpected_count == 4
    assert _offenders(outcome) == {("e2", 0), ("e3", 0)}


def test_parts_give_the_whole_tables_report() -> None:
    """The stage builds the suite's frame a Parquet batch at a time: any split of the
    table into consecutive parts gives the same report as the whole (here with failing
    checks, whose samples read the kept columns)."""
    from tracerl.data.validation import validate_step_parts

    records = _edit("e3", 1, done=False)
    records[4]["done"] = False
    table = _table(records)
    whole = validate_steps(table, 0.0, 0.0, sample_rows=2).to_dict()
    for cut in (1, 3, table.num_rows):
        parts = [table.slice(i, cut) for i in range(0, table.num_rows, cut)]
        assert validate_step_parts(parts, 0.0, 0.0, sample_rows=2).to_dict() == whole
    with pytest.raises(ValueError, match="no parts"):
        validate_step_parts([], REWARD_MIN, REWARD_MAX)
