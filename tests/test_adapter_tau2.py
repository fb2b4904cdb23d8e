"""tau2-bench results files in: counts computed straight from the JSON (stdlib json, none of
the adapter's code) equal what ingest writes; lineage, turns and observations hold."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.data.ingest import ingest
from tracerl.data.redact import Redactor
from tracerl.io.fileio import read_table

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "tau2-bench"
FILES = sorted(REAL.glob("*.json"))
pytestmark = pytest.mark.skipif(len(FILES) != 2, reason=f"tau2-bench logs not found in {REAL}")


def _expected(paths: list[Path]) -> dict:
    """Counts from the raw JSON: one row per assistant tool call or call-less message."""
    out = {"episodes": 0, "tool_calls": 0, "messages": 0, "reward_sum": 0.0, "turns": 0,
           "user_messages": 0, "tool_errors": 0, "rows_by_episode": {}, "reward_by_episode": {}}
    for path in paths:
        for sim in json.loads(path.read_text())["simulations"]:
            out["episodes"] += 1
            rows = 0
            for m in sim["messages"]:
                if m["role"] == "assistant":
                    out["turns"] += 1
                    calls = len(m.get("tool_calls") or [])
                    out["tool_calls"] += calls
                    out["messages"] += calls == 0
                    rows += max(calls, 1)
                elif m["role"] == "user":
                    out["user_messages"] += 1
                elif m["role"] == "tool":
                    out["tool_errors"] += bool(m.get("error"))
            out["rows_by_episode"][sim["id"]] = rows
            out["reward_by_episode"][sim["id"]] = sim["reward_info"]["reward"]
            out["reward_sum"] += sim["reward_info"]["reward"]
    return out


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("tau2") / "out"
    result = CliRunner().invoke(app, ["ingest", *map(str, FILES), "--out", str(out)])
    return out, result


def test_cli_auto_format_gives_every_episode_and_nothing_quarantined(ingested):
    out, result = ingested
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "ingest_summary.json").read_text())
    expected = _expected(FILES)
    assert expected["episodes"] == 40
    assert summary["episodes"] == 40
    assert (summary["read"], summary["accepted"], summary["quarantined"]) == (40, 40, 0)
    assert summary["rows"] == expected["tool_calls"] + expected["messages"]
    assert set(summary["formats"].values()) == {"tau2"}
    assert (out / "quarantine.jsonl").read_text() == ""


def test_row_tool_call_message_and_reward_counts_match_the_json(ingested):
    out, _ = ingested
    expected = _expected(FILES)
    flat = read_table(out / "steps").flatten()
    for name in ("episode_id", "done", "reward", "action.tool"):
        assert name in flat.column_names
    kinds = flat.column("action.type").to_pylist()
    assert kinds.count("tool_call") == expected["tool_calls"]
    assert kinds.count("message") == expected["messages"]
    done = flat.column("done").to_numpy(zero_copy_only=False)
    assert done.sum() == expected["episodes"]
    reward = flat.column("reward").to_numpy(zero_copy_only=False)
    assert reward[done].sum() == pytest.approx(expected["reward_sum"])
    assert flat.column("reward").filter(pc.invert(flat.column("done"))).null_count == \
        flat.num_rows - expected["episodes"]
    episodes = flat.column("episode_id").to_pylist()
    assert {e: episodes.count(e) for e in set(episodes)} == expected["rows_by_episode"]
    by_episode = dict(zip(flat.column("episode_id").filter(flat.column("done")).to_pylist(),
                          reward[done].tolist(), strict=True))
    assert by_episode == expected["reward_by_episode"]
    assert flat.column("observation.error").drop_null().__len__() == expected["tool_errors"]
    turns = set(zip(episodes, flat.column("turn").to_pylist(), strict=True))
    assert len(turns) == expected["turns"]
    events = [e for es in flat.column("observation.events").to_pylist() if es for e in es]
    assert sum(e["actor"] == "user" and e["kind"] == "message" for e in events) == \
        expected["user_messages"]


def test_every_row_points_back_to_its_message(ingested):
    out, _ = ingested
    docs = {str(p): json.loads(p.read_text()) for p in FILES}
    rows = read_table(out / "steps").to_pylist()
    t_by_episode: dict[str, list[int]] = {}
    for row in rows:
        doc = docs[row["source_file"]] if row["source_file"] in docs else docs[
            str(Path(row["source_file"]))]
        parts = row["source_pointer"].strip("/").split("/")
        node = doc
        for p in parts:
            node = node[int(p)] if isinstance(node, list) else node[p]
        sim = doc["simulations"][int(parts[1])]
        assert row["source_record"] == int(parts[1]) + 1
        assert row["episode_id"] == sim["id"]
        if row["action"]["type"] == "tool_call":  # the pointer names the call itself
            assert node["name"] == row["action"]["tool"]
            assert json.loads(row["action"]["arguments"]) == node["arguments"]
            assert row["call_id"] == node["id"]
            assert row["call_index"] == int(parts[-1])
        else:
            assert node["role"] == "assistant" and not node.get("tool_calls")
            assert row["action"]["content"] == node["content"]
        t_by_episode.setdefault(row["episode_id"], []).append(row["t"])
    for ts in t_by_episode.values():
        assert sorted(ts) == list(range(len(ts)))


def test_parallel_calls_share_a_turn_and_results_match_by_id(ingested):
    out, _ = ingested
    rows = read_table(out / "steps").to_pylist()
    results = {}
    for path in FILES:
        for sim in json.loads(path.read_text())["simulations"]:
            for m in sim["messages"]:
                if m["role"] == "tool":
                    results[m["id"]] = m["content"]
    parallel = 0
    by_turn: dict[tuple, list[dict]] = {}
    for row in rows:
        by_turn.setdefault((row["episode_id"], row["turn"]), []).append(row)
        if row["call_id"] is not None:
            logged = results[row["call_id"]]
            stored = json.loads(row["observation"]["tool_result"])
            # rows are redacted like native steps (emails in tool results, say)
            expected, _ = Redactor().record(json.loads(logged) if logged[:1] in "{[" else logged)
            assert stored == expected
    for group in by_turn.values():
        if len(group) > 1:
            parallel += 1
            assert [r["call_index"] for r in group] == list(range(len(group)))
            assert len({r["t"] for r in group}) == len(group)
    assert parallel == 20  # 17 + 3 assistant messages with several calls (README)


def test_episode_facts_are_on_the_rows_and_the_done_row(ingested):
    out, _ = ingested
    table = read_table(out / "steps")
    logged = {}
    for path in FILES:
        doc = json.loads(path.read_text())
        for sim in doc["simulations"]:
            logged[sim["id"]] = (doc["info"]["agent_info"]["llm"], sim["termination_reason"],
                                 sim["agent_cost"])
    for row in table.select(["episode_id", "episode"]).to_pylist():
        facts = row["episode"]
        assert (facts["agent_model"], facts["termination_reason"],
                facts["agent_cost_usd"]) == logged[row["episode_id"]]
        assert facts["user_model"] == "gpt-4.1" and facts["domain"] == "airline"
    done = table.filter(table.column("done")).to_pylist()
    for row in done:
        extra = json.loads(row["extra"])
        assert extra["episode"]["reward_info"]["reward"] == row["reward"]
        assert extra["task"]["id"] == row["task"]
        assert dict(row["reward_components"]) == extra["episode"]["reward_info"][
            "reward_breakdown"]


def _tiny_results() -> dict:
    """A tau2-shaped file: one clean simulation with a user tool call (telecom style)."""
    messages = [
        {"role": "assistant", "content": "Hi!", "tool_calls": None, "turn_idx": 0},
        {"role": "user", "content": "my phone is off", "tool_calls": None},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "a1", "name": "get_line", "arguments": {"n": 1}, "requestor": "assistant"},
            {"id": "a2", "name": "get_plan", "arguments": {}, "requestor": "assistant"}]},
        {"role": "tool", "id": "a2", "content": "{\"plan\": \"x\"}", "error": False,
         "requestor": "assistant"},
        {"role": "tool", "id": "a1", "content": "Error: no line", "error": True,
         "requestor": "assistant"},
        {"role": "assistant", "content": "Please toggle airplane mode.", "tool_calls": None},
        {"role": "user", "content": None, "tool_calls": [
            {"id": "u1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}]},
        {"role": "tool", "id": "u1", "content": "ok", "error": False, "requestor": "user"},
        {"role": "user", "content": "done ###STOP###", "tool_calls": None},
    ]
    sim = {"id": "sim-1", "task_id": "t1", "trial": 0, "termination_reason": "user_stop",
           "agent_cost": 0.5, "user_cost": 0.1, "duration": 3.0, "seed": 7, "messages": messages,
           "reward_info": {"reward": 0.0, "reward_breakdown": {"DB": 0.0}, "action_checks": []}}
    return {"info": {"agent_info": {"llm": "m"}, "user_info": {"llm": "u"},
                     "environment_info": {"domain_name": "telecom"}},
            "tasks": [{"id": "t1"}], "simulations": [sim]}


def test_user_tool_calls_become_events_and_bad_simulations_are_quarantined(tmp_path):
    doc = _tiny_results()
    broken = copy.deepcopy(doc["simulations"][0]) | {"id": "sim-2"}
    broken["messages"][4]["id"] = "nowhere"  # a result for a call that was never made
    doc["simulations"].append(broken)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    summary = ingest([path], tmp_path / "out", max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    q = [json.loads(x) for x in (tmp_path / "out" / "quarantine.jsonl").read_text().splitlines()]
    assert q[0]["source_record"] == 2 and q[0]["field"] == "/simulations/1/messages/4"
    assert "nowhere" in q[0]["reason"]
    rows = read_table(tmp_path / "out" / "steps").to_pylist()
    assert [(r["t"], r["turn"], r["call_index"], r["action"]["type"]) for r in rows] == [
        (0, 0, None, "message"), (1, 1, 0, "tool_call"), (2, 1, 1, "tool_call"),
        (3, 2, None, "message")]
    assert rows[1]["observation"]["error"] == "Error: no line"
    assert json.loads(rows[2]["observation"]["tool_result"]) == {"plan": "x"}
    assert rows[1]["action"]["content"] == "Checking." and rows[2]["action"]["content"] is None
    assert [(e["actor"], e["kind"], e["tool"]) for e in rows[3]["observation"]["events"]] == [
        ("user", "tool_call", "toggle_airplane_mode"), ("user", "tool_result", None),
        ("user", "message", None)]
    assert json.loads(rows[0]["extra"]) == {"turn_idx": 0}  # unknown message fields kept
    assert rows[3]["done"] and rows[3]["reward"] == 0.0
    assert rows[0]["episode"]["domain"] == "telecom"
    assert rows[1]["metadata"]["cost_usd"] is None  # this message logged no cost
