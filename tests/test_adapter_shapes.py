"""Every shape each adapter promises, built by hand: OpenTelemetry (each attribute
generation, OTLP and Jaeger containers, JSONL of spans, log-record events, rewards),
Anthropic, ATIF, Claude Code, Langfuse, tau2's directory layout; reused call ids across
turns in openai-chat and tau2 shapes; a byte-order mark in every format; canonical
reward_components."""

from __future__ import annotations

import json
from functools import partial

import pytest

from tests.adapter_helpers import ingest_files, kv
from tracerl.data.formats import ReadOptions, detect_format
from tracerl.data.ingest import ingest
from tracerl.io.fileio import read_table

# every record read, whatever share of them is quarantined
_ingest = partial(ingest_files, max_bad_fraction=1.0)


def _calls(rows):
    return [(r["action"]["tool"], json.loads(r["action"]["arguments"] or "null"),
             json.loads(r["observation"]["tool_result"] or "null"))
            for r in rows if r["action"]["type"] == "tool_call"]


# --- reused call ids ----------------------------------------------------------------

def test_a_call_id_reused_across_turns_is_kept_in_openai_chat(tmp_path):
    def turn(n: int) -> list[dict]:
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "add", "arguments": json.dumps({"n": n})}}]},
                {"role": "tool", "tool_call_id": "call_0", "content": str(n * 10)}]
    messages = [{"role": "user", "content": "go"}, *turn(1), *turn(2), *turn(3),
                {"role": "assistant", "content": "60"}]
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"messages": messages}) + "\n")
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.accepted, summary.quarantined, summary.reused_call_ids) == (1, 0, 2)
    assert _calls(rows) == [("add", {"n": n}, str(n * 10)) for n in (1, 2, 3)]


def test_a_call_id_reused_across_turns_is_kept_in_tau2(tmp_path):
    messages = [{"role": "user", "content": "go"}]
    for n in (1, 2):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "name": "f", "arguments": {"n": n}, "requestor": "assistant"}]},
                     {"role": "tool", "id": "c", "content": f"r{n}", "requestor": "assistant"}]
    messages.append({"role": "assistant", "content": "ok"})
    doc = {"info": {}, "tasks": [], "simulations": [{"id": "s1", "task_id": "t",
                                                      "messages": messages,
                                                      "reward_info": {"reward": 1.0}}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    summary, rows, _ = _ingest(tmp_path, path)
    assert (summary.accepted, summary.reused_call_ids) == (1, 1)
    assert _calls(rows) == [("f", {"n": 1}, "r1"), ("f", {"n": 2}, "r2")]


# --- tau2 directory layout -------------------------------------------------------------

def test_tau2_directory_layout(tmp_path):
    run = tmp_path / "run"
    (run / "simulations").mkdir(parents=True)
    sims = []
    for k in range(3):
        sim = {"id": f"sim-{k}", "task_id": "t1", "trial": 0, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "name": "look", "arguments": {}, "requestor": "assistant"}]},
            {"role": "tool", "id": "a", "content": "{}", "requestor": "assistant"},
            {"role": "assistant", "content": "bye"}], "reward_info": {"reward": float(k)}}
        sims.append(sim)
        if k < 2:
            (run / "simulations" / f"sim-{k}.json").write_text(json.dumps(sim, indent=2))
    (run / "results.json").write_text(json.dumps({
        "info": {"environment_info": {"domain_name": "retail"}}, "tasks": [{"id": "t1"}],
        "simulation_index": [{"id": s["id"], "task_id": "t1", "trial": 0} for s in sims]}))
    assert detect_format(run / "results.json") == "tau2"
    summary, rows, quarantine = _ingest(tmp_path, run)  # the folder, as a user gives it
    assert summary.sidecar_files == sorted(str(p) for p in (run / "simulations").iterdir())
    assert (summary.read, summary.accepted, summary.quarantined) == (3, 2, 1)
    assert "sim-2" in quarantine[0]["reason"] and "missing" in quarantine[0]["reason"]
    assert {r["source_file"] for r in rows} == {str(run / "simulations" / "sim-0.json"),
                                               str(run / "simulations" / "sim-1.json")}
    assert sorted(r["reward"] for r in rows if r["done"]) == [0.0, 1.0]


# --- Anthropic -------------------------------------------------------------------------

ANTHROPIC_REQUEST = {
    "model": "claude-x", "system": [{"type": "text", "text": "Be brief."}],
    "tools": [{"name": "weather", "input_schema": {}}],
    "messages": [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "two cities", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "tu1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "tu2", "name": "weather", "input": {"city": "Rome"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu2", "content": [
                {"type": "text", "text": "21C"}]},
            {"type": "tool_result", "tool_use_id": "tu1", "content": "no data",
             "is_error": True}]},
        {"role": "assistant", "content": "Rome 21C; Oslo unknown."}]}
RESPONSE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "tool_use", "id": "tu9", "name": "weather",
                         "input": {"city": "Bern"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}
SSE = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [
    {"type": "message_start", "message": {"id": "msg_2", "type": "message",
                                          "role": "assistant", "model": "claude-x",
                                          "content": [], "usage": {"input_tokens": 3}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                          "text": "Let me "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "see."}},
    {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "tu3", "name": "weather", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                          "partial_json": "{\"city\": "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                          "partial_json": "\"Graz\"}"}},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
     "usage": {"output_tokens": 7}},
    {"type": "message_stop"}])


@pytest.mark.parametrize("shape", ["request", "response", "request+response", "cassette",
                                   "sse cassette", "jsonl"])
def test_anthropic_shapes(tmp_path, shape):
    path = tmp_path / ("a.jsonl" if shape == "jsonl" else "a.json")
    value = {"request": ANTHROPIC_REQUEST, "response": RESPONSE,
             "request+response": {"request": ANTHROPIC_REQUEST, "response": RESPONSE},
             "cassette": {"status": 200, "headers": {}, "body": json.dumps(RESPONSE)},
             "sse cassette": {"status": 200, "headers": {"content-type": "text/event-stream"},
                              "body": SSE}}.get(shape)
    if shape == "jsonl":
        path.write_text(json.dumps(ANTHROPIC_REQUEST) + "\n" + json.dumps(RESPONSE) + "\n")
    else:
        path.write_text(json.dumps(value))
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert not quarantine and summary.quarantined == 0
    if shape in ("request", "request+response", "jsonl"):
        first = rows[:3]
        assert [(r["turn"], r["call_index"], r["action"]["type"]) for r in first] == [
            (0, 0, "tool_call"), (0, 1, "tool_call"), (1, None, "message")]
        assert first[0]["observation"]["error"] == "no data"
        assert json.loads(first[1]["observation"]["tool_result"]) == "21C"
        assert first[0]["action"]["content"] == "Checking."
        assert json.loads(first[0]["extra"])["reasoning"] == "two cities"
        assert first[0]["state"]["user_goal"] == "Weather in Oslo and Rome?"
        assert first[0]["state"]["available_tools"] == ["weather"]
    if shape == "request+response":
        assert _calls(rows)[-1] == ("weather", {"city": "Bern"}, None) and len(rows) == 4
    if shape in ("response", "cassette"):
        assert _calls(rows) == [("weather", {"city": "Bern"}, None)]
        assert rows[0]["metadata"]["behavior_policy"] == "claude-x"
        assert rows[0]["episode"]["prompt_tokens"] == 10
    if shape == "sse cassette":
        assert _calls(rows) == [("weather", {"city": "Graz"}, None)]
        assert rows[0]["action"]["content"] == "Let me see."
        assert rows[0]["episode"]["completion_tokens"] == 7


# --- ATIF ------------------------------------------------------------------------------

def _atif(session: str = "s1", **extra) -> dict:
    return {"schema_version": "ATIF-v1.6", "session_id": session,
            "agent": {"name": "a", "version": "1", "model_name": "m1"}, "steps": [
                {"step_id": 1, "source": "system", "message": "You run shell commands."},
                {"step_id": 2, "source": "user", "message": "count files"},
                {"step_id": 3, "source": "agent", "message": "ls first",
                 "reasoning_content": "need a list",
                 "tool_calls": [{"tool_call_id": "call_1", "function_name": "bash",
                                 "arguments": {"cmd": "ls"}},
                                {"tool_call_id": "call_2", "function_name": "bash",
                                 "arguments": "{\"cmd\": \"pwd\"}"}],
                 "observation": {"results": [{"source_call_id": "call_2", "content": "/"},
                                             {"source_call_id": "call_1",
                                              "content": [{"type": "text", "text": "a b"}]}]},
                 "metrics": {"prompt_tokens": 10, "completion_tokens": 4, "cost_usd": 0.01,
                             "logprobs": [-0.5, -0.25, -0.25]}},
                {"step_id": 4, "source": "agent", "message": "again", "model_name": "m2",
                 "tool_calls": [{"tool_call_id": "call_1", "function_name": "bash",
                                 "arguments": {"cmd": "wc"}}],
                 "observation": {"results": [{"source_call_id": "call_1", "content": "2"}]}},
                {"step_id": 5, "source": "agent", "message": "<finish>2</finish>"}], **extra}


@pytest.mark.parametrize("shape", ["object", "list", "jsonl"])
def test_atif_shapes(tmp_path, shape):
    path = tmp_path / ("t.jsonl" if shape == "jsonl" else "t.json")
    trajectories = [_atif("s1"), _atif("s2")]
    if shape == "object":
        trajectories = trajectories[:1]
        path.write_text(json.dumps(trajectories[0]))
    elif shape == "list":
        path.write_text(json.dumps(trajectories, indent=2))
    else:
        path.write_text("".join(json.dumps(t) + "\n" for t in trajectories))
    assert detect_format(path) == "atif"
    summary, rows, quarantine = _ingest(tmp_path, path)
    n = len(trajectories)
    assert (summary.read, summary.quarantined, summary.rows) == (n, 0, 4 * n)
    assert summary.reused_call_ids == n  # call_1 again in step 4
    first = [r for r in rows if r["episode_id"] == "s1"]
    assert _calls(first) == [("bash", {"cmd": "ls"}, "a b"), ("bash", {"cmd": "pwd"}, "/"),
                             ("bash", {"cmd": "wc"}, "2")]
    assert [r["action_logprobs"] for r in first] == [-1.0, 0.0, None, None]
    assert [r["metadata"]["behavior_policy"] for r in first] == ["m1", "m1", "m2", "m1"]
    assert first[0]["metadata"]["cost_usd"] == 0.01
    assert first[0]["state"]["user_goal"] == "count files"
    assert json.loads(first[0]["extra"])["reasoning"] == "need a list"
    assert first[-1]["action"]["content"] == "<finish>2</finish>" and first[-1]["done"]


def test_atif_subagents_and_a_harbor_trial_reward(tmp_path):
    trial = tmp_path / "trial"
    (trial / "agent").mkdir(parents=True)
    sub = _atif("child")
    (trial / "agent" / "trajectory.json").write_text(json.dumps(
        _atif("parent", subagent_trajectories=[sub])))
    (trial / "result.json").write_text(json.dumps({
        "task_name": "count", "verifier_result": {"rewards": {"reward": 1.0}}}))
    summary, rows, _ = _ingest(tmp_path, trial)
    assert summary.sidecar_files == [str(trial / "result.json")]
    assert summary.notes["subagent_episodes"] == 1
    assert {r["episode_id"] for r in rows} == {"parent", "parent/child"}
    done = {r["episode_id"]: r for r in rows if r["done"]}
    assert done["parent"]["reward"] == 1.0 and done["parent"]["task"] == "count"


# --- Claude Code -----------------------------------------------------------------------

def _cc(kind: str, uuid: str, parent: str | None, message: dict | None = None, **kw) -> dict:
    line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "sess",
            "isSidechain": False, "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w",
            "version": "2.1.0", **kw}
    if message is not None:
        line["message"] = message
    return line


def _cc_session() -> list[dict]:
    part = {"model": "claude-x", "id": "msg_a", "role": "assistant", "type": "message"}
    return [
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
        {"type": "summary", "summary": "Fixing tests", "leafUuid": "a3"},
        _cc("user", "u1", None, {"role": "user", "content": "fix the tests"}),
        _cc("assistant", "a1", "u1", {**part, "content": [{"type": "thinking",
                                                           "thinking": "hmm"}]}),
        _cc("assistant", "a2", "a1", {**part, "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}]}),
        _cc("progress", "p1", "a2", data={"type": "hook_progress"}),
        _cc("assistant", "a3", "p1", {**part, "content": [
            {"type": "tool_use", "id": "t2", "name": "Read", "input": {"path": "x.py"}}],
            "usage": {"input_tokens": 5, "output_tokens": 9}}),
        _cc("user", "u2", "a2", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "1 failed",
             "is_error": True}]}, toolUseResult={"stdout": "1 failed"}),
        _cc("user", "u3", "a3", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": [
                {"type": "text", "text": "def f(): ..."}]}]}),
        _cc("assistant", "a4", "u3", {"model": "<synthetic>", "id": "msg_s", "role": "assistant",
                                      "content": [{"type": "text", "text": "API Error"}]}),
        _cc("assistant", "a5", "a4", {**part, "id": "msg_b", "content": [
            {"type": "text", "text": "Fixed."}]}),
        # an older transcript's sidechain in the same file
        _cc("user", "s1", None, {"role": "user", "content": "search docs"}, isSidechain=True),
        _cc("assistant", "s2", "s1", {**part, "id": "msg_c", "content": [
            {"type": "text", "text": "Found it."}]}, isSidechain=True),
    ]


def test_claude_code_session_with_a_sidechain(tmp_path):
    path = tmp_path / "sess.jsonl"
    lines = _cc_session()
    path.write_text("".join(json.dumps(x) + "\n" for x in lines)
                    + "{not json\n")
    assert detect_format(path) == "claude-code"
    summary, rows, quarantine = _ingest(tmp_path, path)
    # two episodes (session, sidechain) and one unreadable line
    assert (summary.read, summary.accepted, summary.quarantined) == (3, 2, 1)
    assert quarantine[0]["source_record"] == len(lines) + 1
    main = [r for r in rows if r["episode_id"] == "sess"]
    assert [(r["turn"], r["call_index"], r["action"]["type"]) for r in main] == [
        (0, 0, "tool_call"), (0, 1, "tool_call"), (1, None, "message")]
    assert main[0]["observation"]["error"] == "1 failed"
    assert json.loads(main[1]["observation"]["tool_result"]) == "def f(): ..."
    assert main[2]["observation"]["events"] is None
    assert [e["content"] for e in main[1]["observation"]["events"]] == ["API Error"]
    assert main[0]["episode"]["completion_tokens"] == 9
    side = [r for r in rows if r["episode_id"] != "sess"]
    assert [r["action"]["content"] for r in side] == ["Found it."]
    assert summary.notes["skipped_summary_lines"] == 1
    assert summary.notes["skipped_progress_lines"] == 1


def test_claude_code_subagent_files_are_their_own_episodes(tmp_path):
    folder = tmp_path / "sess" / "subagents"
    folder.mkdir(parents=True)
    part = {"model": "claude-x", "role": "assistant", "type": "message"}
    worker = [_cc("user", "w1", None, {"role": "user", "content": "look"}, isSidechain=True,
                  agentId="a1"),
              _cc("assistant", "w2", "w1", {**part, "id": "m1", "content": [
                  {"type": "text", "text": "done"}]}, isSidechain=True, agentId="a1")]
    compact = [_cc("user", "c1", None, {"role": "user", "content": "summarise"},
                   isSidechain=True, agentId="acompact-1"),
               _cc("assistant", "c2", "c1", {**part, "id": "m2", "content": [
                   {"type": "text", "text": "summary"}]}, isSidechain=True,
                   agentId="acompact-1")]
    (folder / "agent-a1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in worker))
    (folder / "agent-acompact-1.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in compact))
    summary, rows, _ = _ingest(tmp_path, folder)
    assert summary.read == 1 and {r["episode_id"] for r in rows} == {"sess/agent-a1"}
    assert summary.notes["compaction_agents_skipped"] == 1


# --- Langfuse --------------------------------------------------------------------------

def _observation(oid: str, kind: str, name: str, start: int, parent: str | None = None,
                 **kw) -> dict:
    return {"id": oid, "traceId": "tr1", "type": kind, "name": name,
            "parentObservationId": parent, "startTime": f"2026-01-01T00:00:{start:02d}Z",
            "endTime": f"2026-01-01T00:00:{start:02d}.5Z", **kw}


LANGFUSE_OBS = [
    _observation("ag", "AGENT", "assistant", 0),
    _observation("g1", "GENERATION", "chat", 1, "ag", model="gpt-x",
                 input=json.dumps([{"role": "system", "content": "help"},
                                   {"role": "user", "content": "weather in Rome"}]),
                 output=json.dumps({"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function", "function": {
                         "name": "weather", "arguments": "{\"city\": \"Rome\"}"}}]})),
    _observation("t1", "TOOL", "weather", 2, "ag", input={"city": "Rome"}, output="21C"),
    _observation("g2", "GENERATION", "chat", 3, "ag", model="gpt-x",
                 input=[{"role": "user", "content": "weather in Rome"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "function": {
                                "name": "weather", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "21C"}],
                 output="Rome: 21C."),
]
SCORES = [{"name": "correct", "value": 1, "dataType": "NUMERIC"},
          {"name": "note", "value": None, "stringValue": "ok", "dataType": "CATEGORICAL"}]


@pytest.mark.parametrize("shape", ["export", "inline", "list", "jsonl"])
def test_langfuse_shapes(tmp_path, shape):
    trace = {"id": "tr1", "name": "weather-bot", "timestamp": "2026-01-01T00:00:00Z",
             "sessionId": "s", "scores": SCORES}
    export = {"trace": trace, "observations": LANGFUSE_OBS}
    value = {"export": export, "inline": {**trace, "observations": LANGFUSE_OBS},
             "list": [export, {**export, "trace": {**trace, "id": "tr2"}}]}.get(shape)
    path = tmp_path / ("t.jsonl" if shape == "jsonl" else "t.json")
    path.write_text(json.dumps(export) + "\n" if shape == "jsonl" else json.dumps(value))
    assert detect_format(path) == "langfuse"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert not quarantine
    rows = [r for r in rows if r["episode_id"] == "tr1"]
    assert _calls(rows) == [("weather", {"city": "Rome"}, "21C")]
    assert rows[-1]["action"]["content"] == "Rome: 21C." and rows[-1]["done"]
    assert rows[-1]["reward"] == 1.0 and dict(rows[-1]["reward_components"]) == {"correct": 1.0}
    assert {r["task"] for r in rows} == {"weather-bot"}
    assert rows[0]["metadata"]["behavior_policy"] == "gpt-x"
    assert rows[0]["state"]["user_goal"] == "weather in Rome"


def test_langfuse_agents_and_span_tools(tmp_path):
    obs = [*LANGFUSE_OBS,
           _observation("ag2", "AGENT", "critic", 4),
           _observation("g3", "GENERATION", "chat", 5, "ag2", input="rate it",
                        output={"role": "assistant", "content": "", "additional_kwargs": {
                            "tool_calls": [{"id": "c9", "function": {"name": "Search",
                                                                   "arguments": "{}"}}]}}),
           _observation("sp", "SPAN", "Search", 6, "ag2", input={}, output={
               "content": "hits", "type": "tool", "tool_call_id": "c9"})]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"trace": {"id": "tr1"}, "observations": obs}))
    summary, rows, _ = _ingest(tmp_path, path)
    assert summary.read == 1 and summary.notes["agent_episodes"] == 2
    assert {r["episode_id"] for r in rows} == {"tr1/assistant", "tr1/critic"}
    assert _calls([r for r in rows if r["episode_id"] == "tr1/critic"]) == [
        ("Search", {}, "hits")]


# --- OpenTelemetry ---------------------------------------------------------------------

def _span(sid: str, name: str, start: int, attrs: dict, parent: str | None = None,
          events: list | None = None) -> dict:
    return {"traceId": "ab" * 16, "spanId": sid, "parentSpanId": parent or "", "name": name,
            "startTimeUnixNano": str(start * 10**9), "endTimeUnixNano": str(start * 10**9 + 5),
            "attributes": kv(attrs), "events": events or []}


CONV = {"gen_ai.conversation.id": "conv-1"}
TOOL = _span("t1", "execute_tool weather", 2, {**CONV, "gen_ai.operation.name": "execute_tool",
                                                "gen_ai.tool.name": "weather",
                                                "gen_ai.tool.call.id": "c1",
                                                "gen_ai.tool.call.result": "21C"}, "ag")
AGENT = _span("ag", "invoke_agent helper", 0, {**CONV, "gen_ai.operation.name": "invoke_agent",
                                                "gen_ai.agent.name": "helper"})


def _generation(gen: str) -> list[dict]:
    """The same two model calls (a tool call, then an answer) in one attribute generation."""
    first_in = [{"role": "system", "content": "help"}, {"role": "user", "content": "Rome?"}]
    if gen == "latest":
        a1 = {**CONV, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
              "gen_ai.input.messages": [
                  {"role": "user", "parts": [{"type": "text", "content": "Rome?"}]}],
              "gen_ai.system_instructions": [{"type": "text", "content": "help"}],
              "gen_ai.output.messages": [{"role": "assistant", "parts": [
                  {"type": "tool_call", "id": "c1", "name": "weather",
                   "arguments": {"city": "Rome"}}], "finish_reason": "tool_call"}]}
        a2 = {**CONV, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
              "gen_ai.input.messages": [
                  {"role": "user", "parts": [{"type": "text", "content": "Rome?"}]},
                  {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1",
                                                   "name": "weather", "arguments": {}}]},
                  {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                              "response": "21C"}]}],
              "gen_ai.output.messages": [{"role": "assistant", "parts": [
                  {"type": "text", "content": "21C in Rome."}]}]}
        return [_span("c1s", "chat m", 1, a1, "ag"), _span("c2s", "chat m", 3, a2, "ag")]
    if gen == "indexed":
        a1 = {**CONV, "gen_ai.request.model": "m", "gen_ai.system": "openai",
              "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "help",
              "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Rome?",
              "gen_ai.completion.0.role": "assistant",
              "gen_ai.completion.0.tool_calls.0.id": "c1",
              "gen_ai.completion.0.tool_calls.0.name": "weather",
              "gen_ai.completion.0.tool_calls.0.arguments": "{\"city\": \"Rome\"}"}
        a2 = {**CONV, "gen_ai.request.model": "m",
              "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Rome?",
              "gen_ai.prompt.1.role": "assistant",
              "gen_ai.prompt.1.tool_calls.0.id": "c1",
              "gen_ai.prompt.1.tool_calls.0.name": "weather",
              "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.tool_call_id": "c1",
              "gen_ai.prompt.2.content": "21C",
              "gen_ai.completion.0.role": "assistant",
              "gen_ai.completion.0.content": "21C in Rome."}
        return [_span("c1s", "openai.chat", 1, a1, "ag"), _span("c2s", "openai.chat", 3, a2, "ag")]
    # events: per-message span events (bodies in gen_ai.event.content)
    def ev(name, body):
        return {"name": name, "timeUnixNano": "1", "attributes": kv(
            {"gen_ai.event.content": body})}
    e1 = [ev("gen_ai.system.message", {"content": first_in[0]["content"]}),
          ev("gen_ai.user.message", {"content": "Rome?"}),
          ev("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls", "message": {
              "tool_calls": [{"id": "c1", "type": "function", "function": {
                  "name": "weather", "arguments": "{\"city\": \"Rome\"}"}}]}})]
    e2 = [ev("gen_ai.user.message", {"content": "Rome?"}),
          ev("gen_ai.assistant.message", {"tool_calls": [
              {"id": "c1", "type": "function", "function": {"name": "weather",
                                                           "arguments": "{}"}}]}),
          ev("gen_ai.tool.message", {"id": "c1", "content": "21C"}),
          ev("gen_ai.choice", {"index": 0, "message": {"content": "21C in Rome."}})]
    attrs = {**CONV, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    return [_span("c1s", "chat m", 1, attrs, "ag", e1), _span("c2s", "chat m", 3, attrs, "ag", e2)]


def _jaeger(spans: list[dict]) -> dict:
    def tag(kv):
        v = kv["value"]
        key, val = next(iter(v.items()))
        return {"key": kv["key"], "type": {"stringValue": "string", "intValue": "int64",
                                           "doubleValue": "float64",
                                           "boolValue": "bool"}[key], "value": val}
    out = []
    for s in spans:
        out.append({"traceID": s["traceId"], "spanID": s["spanId"],
                    "operationName": s["name"],
                    "references": [{"refType": "CHILD_OF", "traceID": s["traceId"],
                                    "spanID": s["parentSpanId"]}] if s["parentSpanId"] else [],
                    "startTime": int(s["startTimeUnixNano"]) // 1000, "duration": 1,
                    "tags": [tag(kv) for kv in s["attributes"]],
                    "logs": [{"timestamp": 1, "fields": [{"key": "event", "type": "string",
                                                          "value": e["name"]},
                                                         *[tag(kv) for kv in e["attributes"]]]}
                             for e in s["events"]], "processID": "p1"})
    return {"data": [{"traceID": "ab" * 16, "spans": out,
                      "processes": {"p1": {"serviceName": "svc", "tags": []}}}]}


@pytest.mark.parametrize("gen", ["latest", "indexed", "events"])
@pytest.mark.parametrize("container", ["otlp", "otlp jsonl", "spans jsonl", "jaeger"])
def test_otel_every_generation_in_every_container(tmp_path, gen, container):
    spans = [AGENT, *_generation(gen), TOOL]
    spans = [spans[2], spans[0], spans[3], spans[1]]  # export order is not time order
    otlp = {"resourceSpans": [{"resource": {"attributes": kv({"service.name": "svc"})},
                               "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}
    path = tmp_path / ("t.jsonl" if "jsonl" in container else "t.json")
    if container == "otlp":
        path.write_text(json.dumps(otlp, indent=1))
    elif container == "otlp jsonl":
        path.write_text("".join(json.dumps({"resourceSpans": [{"scopeSpans": [
            {"spans": [s]}]}]}) + "\n" for s in spans))
    elif container == "spans jsonl":
        path.write_text("".join(json.dumps(s) + "\n" for s in spans))
    else:
        path.write_text(json.dumps(_jaeger(spans)))
    assert detect_format(path) == "otel-genai"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert not quarantine and summary.read == 1
    assert [r["episode_id"] for r in rows] == ["conv-1", "conv-1"]
    assert _calls(rows) == [("weather", {"city": "Rome"}, "21C")]
    assert rows[1]["action"]["content"] == "21C in Rome." and rows[1]["done"]
    assert rows[0]["state"]["user_goal"] == "Rome?"
    assert rows[0]["metadata"]["behavior_policy"] == "m"
    assert rows[1]["observation"]["events"] is None  # the result is not repeated


def test_otel_layers_rewards_and_contentless_calls(tmp_path):
    outer = _span("w", "call_llm", 1, {**CONV, "gen_ai.request.model": "m",
                                       "gen_ai.usage.input_tokens": 3,
                                       "gen_ai.usage.output_tokens": 1}, "ag")
    inner = _generation("latest")[0]
    inner["parentSpanId"] = "w"
    evaluation = {"name": "gen_ai.evaluation.result", "timeUnixNano": "9", "attributes": kv(
        {"gen_ai.evaluation.name": "correct", "gen_ai.evaluation.score.value": 0.5})}
    agent = {**AGENT, "events": [evaluation]}
    bare = _span("b1", "chat m", 4, {**CONV, "gen_ai.operation.name": "chat",
                                     "gen_ai.request.model": "m", "app.reward": 2.0}, "ag")
    tool2 = _span("t2", "execute_tool lookup", 5, {**CONV, "gen_ai.operation.name": "execute_tool",
                                                   "gen_ai.tool.name": "lookup"}, "ag")
    plumbing = {**_span("h1", "GET /", 0, {"http.method": "GET"}), "traceId": "cd" * 16}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        agent, outer, inner, TOOL, bare, tool2, plumbing]}]}]}))
    summary, rows, _ = _ingest(tmp_path, path)
    assert summary.notes["traces_without_genai_spans"] == 1
    assert [(r["action"]["type"], r["action"]["tool"], r["turn"]) for r in rows] == [
        ("tool_call", "weather", 0), ("tool_call", "lookup", 1)]  # the wrapper is no turn
    assert rows[-1]["reward"] == 0.5 and dict(rows[-1]["reward_components"]) == {"correct": 0.5}
    summary, rows, _ = _ingest(tmp_path / "again", path,
                               read_options=ReadOptions(reward_attribute="app.reward"))
    assert rows[-1]["reward"] == 2.0


# --- byte-order marks, canonical components ---------------------------------------------

def test_a_byte_order_mark_is_skipped_in_every_format(tmp_path):
    from tests.test_realdata_ingest import FILES

    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    made = {"chat_list.json": json.dumps([{"messages": messages}] * 2),
            "chat_bare.json": json.dumps(messages),
            "chat_one.json": json.dumps({"messages": messages}),
            "chat.jsonl": json.dumps({"messages": messages}) + "\n"}
    inputs = [(name, text.encode()) for name, text in made.items()]
    inputs += [(p.name, p.read_bytes()) for p in FILES[:: max(1, len(FILES) // 8)]]
    for name, data in inputs:
        plain, marked = tmp_path / f"plain-{name}", tmp_path / f"bom-{name}"
        plain.write_bytes(data)
        marked.write_bytes(b"\xef\xbb\xbf" + data)
        assert detect_format(plain) == detect_format(marked), name
        a = ingest([plain], tmp_path / f"o1-{name}", max_bad_fraction=1.0)
        b = ingest([marked], tmp_path / f"o2-{name}", max_bad_fraction=1.0)
        assert (a.read, a.accepted, a.rows) == (b.read, b.accepted, b.rows), name
        assert b.read > 0 or name.startswith("agent-acompact"), name


def test_reward_components_are_stored_in_key_order(tmp_path):
    base = {"episode_id": "e", "t": 0, "action": {"type": "message"}, "done": True,
            "reward": 1.0}
    for k, order in enumerate([{"b": 1.0, "a": 0.0}, {"a": 0.0, "b": 1.0}]):
        path = tmp_path / f"{k}.jsonl"
        path.write_text(json.dumps({**base, "reward_components": order}) + "\n")
        ingest([path], tmp_path / f"o{k}")
    first, second = (read_table(tmp_path / f"o{k}" / "steps") for k in (0, 1))
    assert first.column("reward_components").to_pylist() == [[("a", 0.0), ("b", 1.0)]]
    assert first.column("reward_components").equals(second.column("reward_components"))
