"""tau2-bench shapes found in public runs that the first reader missed, each built in code
from the real file it names: a simulation file given on its own (the directory layout's
`simulations/<id>.json`, with or without its results.json), and a full-duplex (voice) run
whose simulation holds `ticks` instead of `messages`."""

from __future__ import annotations

import json
from pathlib import Path

from tracerl.data.formats import detect_format
from tracerl.data.ingest import ingest
from tracerl.io.fileio import read_table


def _ingest(tmp_path: Path, *paths: Path):
    out = tmp_path / "out"
    summary = ingest(list(paths), out, max_bad_fraction=1.0)
    rows = read_table(out / "steps").to_pylist() if summary.rows else []
    quarantine = [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]
    assert summary.read == summary.accepted + summary.quarantined
    return summary, rows, quarantine


def _chunk(role: str, content: str | None = None, speech: bool = False,
           action: str | None = None, **kw) -> dict:
    chunk = {"role": role, "speech_effects": None, "source_effects": None,
             "turn_taking_action": {"action": action} if action else None,
             "contains_speech": speech, **kw}
    if content is not None:
        chunk["content"] = content
    return chunk


def _tick(tick_id: int, agent: dict, user: dict, **kw) -> dict:
    return {"tick_id": tick_id, "timestamp": f"2026-06-30T11:40:{tick_id:02d}.000000",
            "agent_chunk": agent, "user_chunk": user, **kw}


def _full_duplex(sim_id: str, ticks: list) -> dict:
    # the fields of sierra-research/tau2-bench
    # tests/test_voice/test_interaction_metrics/testdata/experiment/simulations/
    # 49b22f0c-4a56-41c5-922f-bc2a56e53a23.json (mode full_duplex, `ticks`, no `messages`)
    return {"id": sim_id, "task_id": "40", "timestamp": "2026-06-30T11:46:16.709632",
            "start_time": "2026-06-30T11:40:23.773211", "end_time": "2026-06-30T11:46:16.7",
            "duration": 352.87, "termination_reason": "user_stop", "trial": 0,
            "seed": 626729, "mode": "full_duplex", "ticks": ticks}


def test_a_full_duplex_simulation_is_read_from_its_ticks(tmp_path):
    """tau2's SimulationRun.messages is None for full-duplex runs (get_messages derives the
    messages from `ticks`): chunks of one utterance join, silent ticks are none, the
    agent's and the user's tool calls and results keep their tick's order."""
    ticks = [
        _tick(0, _chunk("assistant"), _chunk("user", action="wait")),
        _tick(1, _chunk("assistant"), _chunk("user", "Hi, my phone ", True, "generate_message",
                                             utterance_ids=["u1"])),
        _tick(2, _chunk("assistant"), _chunk("user", "has no signal.", True, "keep_talking",
                                             utterance_ids=["u1"])),
        _tick(3, _chunk("assistant", "Let me check ", True, utterance_ids=["a1"]),
              _chunk("user", action="wait")),
        _tick(4, _chunk("assistant", "your line.", True, utterance_ids=["a1"]),
              _chunk("user", action="wait")),
        _tick(5, _chunk("assistant"), _chunk("user", action="wait"),
              agent_tool_calls=[{"id": "call_1", "name": "get_line_status",
                                 "arguments": {"phone": "555"}, "requestor": "assistant"}],
              agent_tool_results=[{"id": "call_1", "role": "tool", "requestor": "assistant",
                                   "content": "{\"status\": \"suspended\"}", "error": False}]),
        _tick(6, _chunk("assistant", "Please toggle airplane mode.", True,
                        utterance_ids=["a2"]), _chunk("user"),
              user_tool_calls=[{"id": "u_call", "name": "toggle_airplane_mode",
                                "arguments": {}, "requestor": "user"}],
              user_tool_results=[{"id": "u_call", "role": "tool", "requestor": "user",
                                  "content": "Airplane mode off", "error": False}]),
        _tick(7, _chunk("assistant"), _chunk("user", "Done, thanks.", True, "generate_message",
                                             utterance_ids=["u2"])),
    ]
    sim = _full_duplex("49b22f0c", ticks)
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(sim))
    assert detect_format(path) == "tau2"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.accepted, summary.quarantined, quarantine) == (1, 0, [])
    assert [(r["action"]["type"], r["action"]["tool"], r["action"]["content"]) for r in rows] \
        == [("message", None, "Let me check your line."),
            ("tool_call", "get_line_status", None),
            ("message", None, "Please toggle airplane mode.")]
    assert rows[0]["state"]["user_goal"] == "Hi, my phone has no signal."
    assert json.loads(rows[0]["extra"]) == {"tick_ids": [3, 4]}
    assert json.loads(rows[1]["observation"]["tool_result"]) == {"status": "suspended"}
    assert [(e["actor"], e["kind"], e["content"]) for e in rows[2]["observation"]["events"]] \
        == [("user", "tool_call", None), ("user", "tool_result", "Airplane mode off"),
            ("user", "message", "Done, thanks.")]
    assert rows[2]["done"] and rows[2]["episode"]["termination_reason"] == "user_stop"
    assert "ticks" not in json.loads(rows[2]["extra"])["episode"]  # not copied whole


def test_a_full_duplex_simulation_without_transcripts_is_kept(tmp_path):
    """The real testdata file's chunks carry no text, only `contains_speech`: the agent
    spoke (one message per run of speaking ticks, its text not logged), so the simulation
    is a record, not quarantined for having no agent action."""
    ticks = [_tick(0, _chunk("assistant"), _chunk("user", action="wait")),
             _tick(26, _chunk("assistant"), _chunk("user", speech=True,
                                                   action="generate_message")),
             _tick(27, _chunk("assistant"), _chunk("user", speech=True, action="keep_talking")),
             _tick(29, _chunk("assistant", speech=True), _chunk("user", action="wait")),
             _tick(30, _chunk("assistant", speech=True), _chunk("user", action="wait")),
             _tick(72, _chunk("assistant"), _chunk("user", speech=True,
                                                   action="generate_message"))]
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(_full_duplex("7c6a3e3e", ticks)))
    summary, rows, _ = _ingest(tmp_path, path)
    assert (summary.accepted, len(rows)) == (1, 1)
    assert rows[0]["action"] == {"type": "message", "tool": None, "arguments": None,
                                 "content": None}
    assert json.loads(rows[0]["extra"])["tick_ids"] == [29, 30]


def test_simulation_files_given_on_their_own(tmp_path):
    """A directory layout's simulation files given without their results.json (tau2's
    own voice testdata is `experiment/simulations/<id>.json` alone), and one given
    beside its results.json, whose `info` and `tasks` it then takes."""
    sim = {"id": "sim-a", "task_id": "t1", "trial": 0, "termination_reason": "agent_stop",
           "start_time": "2025-11-26T01:12:47", "reward_info": {"reward": 1.0},
           "messages": [{"role": "assistant", "content": "Hi! How can I help you today?",
                         "tool_calls": None, "turn_idx": 0},
                        {"role": "user", "content": "###STOP###", "turn_idx": 1}]}
    alone = tmp_path / "experiment" / "simulations" / "sim-a.json"
    alone.parent.mkdir(parents=True)
    alone.write_text(json.dumps(sim))
    assert detect_format(alone) == "tau2"  # (not a chat record: it has `messages`)
    summary, rows, _ = _ingest(tmp_path, tmp_path / "experiment")
    assert (summary.read, summary.accepted, rows[0]["episode_id"]) == (1, 1, "sim-a")
    assert rows[0]["reward"] == 1.0 and rows[0]["environment_version"] == "tau2:None@None"

    run = tmp_path / "run"
    (run / "simulations").mkdir(parents=True)
    (run / "simulations" / "sim-a.json").write_text(json.dumps(sim))
    (run / "results.json").write_text(json.dumps({
        "info": {"git_commit": "abc", "environment_info": {"domain_name": "airline"}},
        "tasks": [{"id": "t1", "evaluation_criteria": {"actions": []}}],
        "simulation_index": [{"id": "sim-a"}]}))
    summary, rows, _ = _ingest(tmp_path / "b", run / "simulations" / "sim-a.json")
    assert summary.accepted == 1
    assert rows[0]["environment_version"] == "tau2:airline@abc"
    assert json.loads(rows[0]["extra"])["task"]["id"] == "t1"


def test_a_repacked_results_file_names_its_run_at_the_top(tmp_path):
    """sierra-research/tau2-bench web/leaderboard/public/submissions/
    adaptive-agent_community_2026-03-23/trajectories/adaptive_agent_medical_triage_
    opus46_cascata.json: no `info` or `tasks`, but `domain`, `agent`, `model`,
    `total_tasks`, `pass_rate` beside `simulations`; its messages carry the voice fields
    (`is_audio: false`, `contains_speech`, ...) and a tool-calling message has content
    "". Also a MultiToolMessage (tau2's data model: `{role: tool, tool_messages}`)."""
    sim = {"id": "90a5aaf4", "task_id": "2", "start_time": "2026-03-21T15:16:48.547009",
           "duration": 48.04, "termination_reason": "user_stop", "agent_cost": 0.0,
           "reward_info": {"reward": 1.0, "reward_breakdown": {"DB": 1.0, "COMMUNICATE": 1.0},
                           "action_checks": None},
           "messages": [
               {"role": "assistant", "content": "Hi! How can I help you today?",
                "tool_calls": None, "is_audio": False, "turn_idx": 0, "usage": None,
                "contains_speech": True, "is_final_chunk": True},
               {"role": "user", "content": "His name is Tyler Matthews.", "tool_calls": None,
                "is_audio": False, "turn_idx": 1},
               {"role": "assistant", "content": "", "is_audio": False, "turn_idx": 2,
                "usage": {"completion_tokens": 108, "prompt_tokens": 109}, "tool_calls": [
                    {"id": "toolu_01", "name": "find_patient_by_name_dob",
                     "arguments": {"first_name": "Tyler"}, "requestor": "assistant"},
                    {"id": "toolu_02", "name": "get_clinic_hours", "arguments": {},
                     "requestor": "assistant"}]},
               {"role": "tool", "tool_messages": [
                   {"id": "toolu_02", "role": "tool", "content": "9-5", "error": False,
                    "requestor": "assistant"},
                   {"id": "toolu_01", "role": "tool", "requestor": "assistant", "error": True,
                    "content": "Error: Patient not found with provided name and date of birth"}]},
               {"role": "assistant", "content": "I wasn't able to find Tyler.",
                "tool_calls": None, "turn_idx": 5}]}
    path = tmp_path / "adaptive_agent_medical_triage.json"
    path.write_text(json.dumps({"domain": "medical_triage", "agent": "adaptive_agent",
                                "model": "claude-opus-4-6", "total_tasks": 70, "passed": 69,
                                "pass_rate": 98.57, "simulations": [sim]}))
    assert detect_format(path) == "tau2"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.accepted, quarantine) == (1, [])
    assert [(r["action"]["tool"], r["observation"]["error"]) for r in rows] == [
        (None, None), ("find_patient_by_name_dob",
                       "Error: Patient not found with provided name and date of birth"),
        ("get_clinic_hours", None), (None, None)]
    assert json.loads(rows[2]["observation"]["tool_result"]) == "9-5"
    assert rows[0]["environment_version"] == "tau2:medical_triage@None"
    assert (rows[0]["episode"]["agent_model"], rows[0]["episode"]["domain"]) == (
        "claude-opus-4-6", "medical_triage")
    assert rows[-1]["reward"] == 1.0
