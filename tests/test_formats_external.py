"""Shapes real exporters write that the first adapters missed, each built from the
published format: Claude Code rewinds (a session is a uuid tree) and sub-agent meta
sidecars; Harbor job folders and ATIF continuations and error results; Anthropic Message
Batches results and bare SSE text; Langfuse public API lists and bare content-block
outputs; the OTel containers detect must know; default episode ids across folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adapter_helpers import ingest_files
from tracerl.data.formats import ReadOptions, detect_format, fallback_episode_id, reader


def _jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


# --- Claude Code: a session is a tree --------------------------------------------------

def _cc(kind: str, uuid: str, parent: str | None, content, msg_id: str | None = None,
        **kw) -> dict:
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=msg_id or f"msg_{uuid}", type="message", model="claude-x")
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
            "isSidechain": False, "timestamp": "2026-01-01T00:00:00Z", "message": message,
            **kw}


def _text(text: str) -> list:
    return [{"type": "text", "text": text}]


def _use(call_id: str, command: str) -> list:
    return [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}]


def _result(call_id: str, text: str) -> list:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": text}]


REWOUND = [
    _cc("user", "u1", None, "start"),
    _cc("assistant", "a1", "u1", _text("Ready")),
    # the first attempt: abandoned when the user edited the prompt
    _cc("user", "b1u", "a1", "First attempt"),
    _cc("assistant", "b1a", "b1u", _use("t_old", "rm -rf build")),
    _cc("user", "b1r", "b1a", _result("t_old", "removed")),
    _cc("assistant", "b1z", "b1r", _text("First answer")),
    # the edited prompt: a second child of a1, the live branch
    _cc("user", "b2u", "a1", "Second attempt"),
    # one API response over two lines (parallel calls), a hook's progress line, and
    # each result hanging off its own call's line
    _cc("assistant", "b2a", "b2u", _use("t1", "ls"), msg_id="msg_par"),
    _cc("assistant", "b2b", "b2a", _use("t2", "pwd"), msg_id="msg_par"),
    {"type": "progress", "uuid": "p1", "parentUuid": "b2a", "sessionId": "s1",
     "data": {"type": "hook_progress"}},
    _cc("user", "b2r2", "b2b", _result("t2", "/tmp")),
    _cc("user", "b2r1", "b2a", _result("t1", "a b")),
    _cc("assistant", "b2z", "b2r1", _text("Two files in /tmp.")),
    # a compaction: the boundary names its parent in logicalParentUuid
    {"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None,
     "logicalParentUuid": "b2z", "sessionId": "s1", "content": "Conversation compacted"},
    _cc("user", "cs", "cb", "Summary: listed files.", isCompactSummary=True),
    _cc("user", "p1u", "cs", "thanks"),
    _cc("assistant", "p1a", "p1u", _text("You are welcome.")),
]


def test_claude_code_a_rewind_leaves_the_abandoned_branch_out(tmp_path):
    path = _jsonl(tmp_path / "s1.jsonl", REWOUND)
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    assert [(r["action"]["type"], r["action"]["content"] or r["action"]["tool"]) for r in rows] \
        == [("message", "Ready"), ("tool_call", "Bash"), ("tool_call", "Bash"),
            ("message", "Two files in /tmp."), ("message", "You are welcome.")]
    assert [json.loads(r["observation"]["tool_result"]) for r in rows[1:3]] == ["a b", "/tmp"]
    assert "First" not in json.dumps(rows) and "t_old" not in json.dumps(rows)
    assert summary.notes["abandoned_branches"] == 1
    assert summary.notes["abandoned_branch_messages"] == 4


def test_claude_code_without_a_rewind_keeps_file_order_and_every_line(tmp_path):
    straight = [line for line in REWOUND if not line["uuid"].startswith("b1")]
    summary, rows, _ = ingest_files(tmp_path, _jsonl(tmp_path / "s1.jsonl", straight))
    assert len(rows) == 5 and "abandoned_branches" not in summary.notes


def test_claude_code_a_retried_reply_is_an_abandoned_branch(tmp_path):
    """An assistant reply of another API response beside the live one is a branch."""
    lines = [_cc("user", "u1", None, "go"),
             _cc("assistant", "x1", "u1", _text("old reply")),
             _cc("assistant", "x2", "u1", _text("new reply")),
             _cc("user", "u2", "x2", "ok"),
             _cc("assistant", "x3", "u2", _text("done"))]
    summary, rows, _ = ingest_files(tmp_path, _jsonl(tmp_path / "s1.jsonl", lines))
    assert [r["action"]["content"] for r in rows] == ["new reply", "done"]
    assert summary.notes["abandoned_branch_messages"] == 1


def test_claude_code_subagent_meta_sidecar_is_read_with_its_transcript(tmp_path):
    from tracerl.data.formats.claude_code.read import sidecars

    project = tmp_path / "-home-u-proj"
    _jsonl(project / "s1.jsonl", [
        _cc("user", "u1", None, "survey"),
        _cc("assistant", "a1", "u1", [{"type": "tool_use", "id": "toolu_T", "name": "Task",
                                       "input": {"prompt": "look"}}]),
        _cc("user", "u2", "a1", _result("toolu_T", "found"))])
    agent = _jsonl(project / "s1" / "subagents" / "agent-ab12.jsonl", [
        _cc("user", "w1", None, "look", isSidechain=True, agentId="ab12"),
        _cc("assistant", "w2", "w1", _text("found"), isSidechain=True, agentId="ab12")])
    meta = _json(agent.with_name("agent-ab12.meta.json"),
                 {"agentType": "general-purpose", "description": "Survey",
                  "toolUseId": "toolu_T"})
    assert sidecars(agent) == [meta]
    assert detect_format(meta) == "claude-code"
    summary, rows, quarantine = ingest_files(tmp_path, project)  # default max_bad_fraction
    assert (summary.read, summary.quarantined, quarantine) == (2, 0, [])
    done = next(r for r in rows if r["episode_id"] == "s1/agent-ab12" and r["done"])
    episode = json.loads(done["extra"])["episode"]
    assert (episode["parent_tool_use_id"], episode["agent_type"]) == ("toolu_T",
                                                                      "general-purpose")


# --- ATIF and Harbor folders --------------------------------------------------------------

def _atif(session: str | None, steps: list, **kw) -> dict:
    doc = {"schema_version": "ATIF-v1.8", "agent": {"name": "terminus-2", "version": "2"},
           "steps": steps, **kw}
    if session is not None:
        doc["session_id"] = session
    return doc


def _agent_step(n: int, call_id: str, command: str, result: dict | None = None) -> dict:
    step = {"step_id": n, "source": "agent", "message": f"step {n}", "tool_calls": [
        {"tool_call_id": call_id, "function_name": "bash", "arguments": {"cmd": command}}]}
    if result is not None:
        step["observation"] = {"results": [{"source_call_id": call_id, **result}]}
    return step


def test_atif_error_results_in_extra_are_the_tool_error(tmp_path):
    doc = _atif("s", [{"step_id": 1, "source": "user", "message": "go"},
                      _agent_step(2, "c1", "false", {"content": "exit 1",
                                                      "extra": {"is_error": True}}),
                      _agent_step(3, "c2", "true", {"content": "ok", "is_error": True}),
                      _agent_step(4, "c3", "echo", {"content": "fine"})])
    _, rows, _ = ingest_files(tmp_path, _json(tmp_path / "t.json", doc))
    assert [r["observation"]["error"] for r in rows[:3]] == ["exit 1", "ok", None]


def test_atif_a_continued_trajectory_is_one_episode(tmp_path):
    agent = tmp_path / "trial1" / "agent"
    first = _json(agent / "trajectory.json", _atif("sess-7", [
        {"step_id": 1, "source": "user", "message": "build it"},
        _agent_step(2, "c1", "ls", {"content": "Makefile"})],
        continued_trajectory_ref="trajectory.cont-1.json"))
    _json(agent / "trajectory.cont-1.json", _atif("sess-7", [
        {"step_id": 1, "source": "user", "message": "summary", "is_copied_context": True},
        {**_agent_step(2, "c1", "ls", {"content": "Makefile"}), "is_copied_context": True},
        _agent_step(3, "c9", "make", {"content": "ok"}),
        {"step_id": 4, "source": "agent", "message": "Done."}]))
    summary, rows, quarantine = ingest_files(tmp_path, tmp_path / "trial1")
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    assert {r["episode_id"] for r in rows} == {"sess-7"}
    assert [json.loads(r["action"]["arguments"] or "null") for r in rows] == [
        {"cmd": "ls"}, {"cmd": "make"}, None]
    assert [r["source_pointer"] for r in rows][1:] == [
        "/continued/1/steps/2/tool_calls/0", "/continued/1/steps/3"]
    assert summary.notes["continued_trajectories"] == 1
    assert first.with_name("trajectory.cont-1.json").as_posix() in " ".join(
        summary.sidecar_files)


def test_a_harbor_job_folder_ingests_at_the_default_bad_fraction(tmp_path):
    job = tmp_path / "jobs" / "2026-01-01__10-00-00"
    trial = job / "hello__AbC"
    _json(job / "config.json", {"job_name": "2026-01-01__10-00-00", "n_attempts": 1,
                                "agents": [{"name": "terminus-2"}]})
    _json(job / "result.json", {"id": "j", "n_total_trials": 1, "stats": {"n_trials": 1}})
    _json(trial / "config.json", {"trial_name": "hello__AbC", "task": {"path": "hello"}})
    _json(trial / "result.json", {"task_name": "hello",
                                  "verifier_result": {"rewards": {"reward": 1.0}}})
    _json(trial / "agent" / "episode-0" / "debug.json", {"model": "gpt-x", "messages": [
        {"role": "user", "content": "task"}]})
    _json(trial / "agent" / "trajectory.json", _atif("hello__AbC", [
        {"step_id": 1, "source": "user", "message": "task"},
        _agent_step(2, "c1", "echo hi > hello.txt", {"content": ""})]))
    summary, rows, quarantine = ingest_files(tmp_path, tmp_path / "jobs")
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    assert rows[-1]["reward"] == 1.0
    assert len(summary.sidecar_files) == 5


def test_default_episode_ids_follow_the_source_name(tmp_path):
    """Files with one name in two folders: the runner's source_name keeps them apart."""
    read_atif, _ = reader("atif")
    read_anthropic, _ = reader("anthropic")
    ids = []
    for task in ("taskA__1", "taskB__2"):
        path = _json(tmp_path / task / "agent" / "trajectory.json", _atif(None, [
            {"step_id": 1, "source": "user", "message": "go"},
            _agent_step(2, "c1", "ls", {"content": "x"})]))
        name = f"{task}/agent/trajectory.json"
        ids += [r.episode_id for r in read_atif(path, options=ReadOptions(source_name=name))]
        request = _json(tmp_path / task / "request.json", {"model": "claude-x", "system": "s",
                                                           "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
        ids += [r.episode_id for r in read_anthropic(
            request, options=ReadOptions(source_name=f"{task}/request.json"))]
    assert ids == ["taskA__1/agent/trajectory.json:1", "taskA__1/request.json:1",
                   "taskB__2/agent/trajectory.json:1", "taskB__2/request.json:1"]
    assert fallback_episode_id(Path("x/y.json"), 3) == "y.json:3"  # no source name



@pytest.mark.parametrize("given", ["folder", "files"])
def test_files_of_one_name_in_two_folders_ingest_apart(tmp_path, given):
    """Two chat logs named request.json (records without ids) in two folders, given as one
    folder or as two files: both accepted, their episodes named by the path under what was
    given (or under the files' common folder), never quarantined as duplicates."""
    logs = tmp_path / "logs"
    paths = [_json(logs / run / "request.json", {"model": "claude-x", "messages": [
        {"role": "user", "content": f"hi from {run}"},
        {"role": "assistant", "content": "hello"}]}) for run in ("run1", "run2")]
    inputs = [logs] if given == "folder" else paths
    summary, rows, quarantine = ingest_files(tmp_path, *inputs)
    assert quarantine == [] and summary.episodes == 2
    assert sorted({r["episode_id"] for r in rows}) == ["run1/request.json:1",
                                                       "run2/request.json:1"]

# --- Anthropic ------------------------------------------------------------------------

def _message(msg_id: str, content: list) -> dict:
    return {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-x",
            "content": content, "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def test_anthropic_message_batches_results(tmp_path):
    path = _jsonl(tmp_path / "results.jsonl", [
        {"custom_id": "req-1", "result": {"type": "succeeded", "message": _message(
            "msg_1", [{"type": "text", "text": "Checking."},
                      {"type": "tool_use", "id": "toolu_1", "name": "weather",
                       "input": {"city": "Rome"}}])}},
        {"custom_id": "req-2", "result": {"type": "errored", "error": {
            "type": "error", "error": {"type": "invalid_request_error",
                                       "message": "max_tokens: field required"}}}},
        {"custom_id": "req-3", "result": {"type": "expired"}},
        {"custom_id": "req-4", "params": {"model": "claude-x", "max_tokens": 64, "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}}])
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path, max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.quarantined) == (4, 2, 2)
    assert {r["episode_id"] for r in rows} == {"req-1", "req-4"}
    assert [r["action"]["tool"] for r in rows if r["episode_id"] == "req-1"] == ["weather"]
    reasons = [q["reason"] for q in quarantine]
    assert "'req-2' did not run: errored: invalid_request_error, max_tokens: field required" \
        in reasons[0]
    assert "'req-3' did not run: expired" in reasons[1]


def _sse(msg_id: str, text: str) -> str:
    events = [
        {"type": "message_start", "message": {"id": msg_id, "type": "message",
                                              "role": "assistant", "model": "claude-x",
                                              "content": [], "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                      "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                              "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": f"tu_{msg_id}", "name": "ls", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": "{\"path\": "}},
        {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": "\"/tmp\"}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 7}},
        {"type": "message_stop"}]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_anthropic_a_bare_sse_stream_saved_as_text(tmp_path):
    path = tmp_path / "stream.txt"
    path.write_text(_sse("msg_a", "Listing.") + _sse("msg_b", "Again."))
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (2, 2, [])
    assert [(r["episode_id"], r["action"]["tool"], json.loads(r["action"]["arguments"]))
            for r in rows] == [("stream.txt:1", "ls", {"path": "/tmp"}),
                               ("stream.txt:2", "ls", {"path": "/tmp"})]


# --- Langfuse -------------------------------------------------------------------------

def _obs(oid: str, trace: str, kind: str, name: str, start: int, **kw) -> dict:
    return {"id": oid, "traceId": trace, "type": kind, "name": name,
            "parentObservationId": None, "startTime": f"2026-01-01T00:00:{start:02d}Z",
            "endTime": f"2026-01-01T00:00:{start:02d}.5Z", "level": "DEFAULT", **kw}


def _call_and_answer(trace: str, start: int) -> list[dict]:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c-{trace}", "type": "function",
         "function": {"name": "weather", "arguments": "{\"city\": \"Rome\"}"}}]}
    question = [{"role": "user", "content": "weather?"}]
    return [_obs(f"g1-{trace}", trace, "GENERATION", "chat", start, input=question,
                 output=call),
            _obs(f"t-{trace}", trace, "TOOL", "weather", start + 1, input={"city": "Rome"},
                 output="21C"),
            _obs(f"g2-{trace}", trace, "GENERATION", "chat", start + 2,
                 input=[*question, call, {"role": "tool", "tool_call_id": f"c-{trace}",
                                          "content": "21C"}], output="Rome: 21C.")]


def test_langfuse_public_api_observation_list_is_grouped_by_trace(tmp_path):
    a, b = _call_and_answer("tr-a", 1), _call_and_answer("tr-b", 10)
    doc = {"data": [a[0], b[0], a[1], b[1], a[2], b[2]],
           "meta": {"page": 1, "limit": 50, "totalItems": 6, "totalPages": 1}}
    path = _json(tmp_path / "observations.json", doc)
    assert detect_format(path) == "langfuse"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (2, 2, [])
    for trace in ("tr-a", "tr-b"):
        mine = [r for r in rows if r["episode_id"] == trace]
        assert [r["action"]["type"] for r in mine] == ["tool_call", "message"]
        assert json.loads(mine[0]["observation"]["tool_result"]) == "21C"
    assert rows[0]["source_pointer"].startswith("/data/0")


def test_langfuse_a_trace_list_of_observation_ids_says_how_to_export(tmp_path):
    doc = {"data": [{"id": "tr-1", "timestamp": "2026-01-01T00:00:00Z", "name": "run",
                     "observations": ["o1", "o2"], "scores": ["s1"]}], "meta": {"page": 1}}
    path = _json(tmp_path / "traces.json", doc)
    assert detect_format(path) == "langfuse"
    summary, _, quarantine = ingest_files(tmp_path, path, max_bad_fraction=1.0)
    assert (summary.read, summary.quarantined) == (1, 1)
    assert "observations by id only" in quarantine[0]["reason"]
    assert "with their observations" in quarantine[0]["reason"]


def test_langfuse_generation_output_as_bare_content_blocks(tmp_path):
    observations = [
        _obs("g1", "tr", "GENERATION", "anthropic", 1,
             input={"system": "be brief", "messages": [{"role": "user", "content": "w?"}]},
             output=[{"type": "text", "text": "Checking."},
                     {"type": "tool_use", "id": "toolu_L", "name": "weather", "input": {}}]),
        _obs("t1", "tr", "TOOL", "weather", 2, input={}, output="sunny"),
        _obs("g2", "tr", "GENERATION", "anthropic", 3, input={"messages": []},
             output=[{"type": "text", "text": "Sunny."}])]
    path = _json(tmp_path / "t.json", {"trace": {"id": "tr", "name": "t"},
                                       "observations": observations})
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert quarantine == []
    assert [(r["action"]["type"], r["action"]["tool"] or r["action"]["content"])
            for r in rows] == [("tool_call", "weather"), ("message", "Sunny.")]
    assert json.loads(rows[0]["observation"]["tool_result"]) == "sunny"


# --- detection of OTel containers -----------------------------------------------------

def _otlp_span() -> dict:
    return {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "a000000000000001",
            "name": "chat m", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}


@pytest.mark.parametrize("container", ["jaeger_api_v3", "tempo_scope", "tempo_library"])
def test_detect_knows_the_otel_containers_of_trace_apis(tmp_path, container):
    if container == "jaeger_api_v3":
        doc = {"result": {"resourceSpans": [{"resource": {}, "scopeSpans": [
            {"spans": [_otlp_span()]}]}]}}
    else:
        key = "scopeSpans" if container == "tempo_scope" else "instrumentationLibrarySpans"
        doc = {"batches": [{"resource": {}, key: [{"spans": [_otlp_span()]}]}]}
    assert detect_format(_json(tmp_path / "trace.json", doc)) == "otel-genai"



def _attr(key: str, value) -> dict:
    return {"key": key, "value": {"stringValue": value if isinstance(value, str)
                                  else json.dumps(value)}}


@pytest.mark.parametrize("container", ["jaeger_api_v3", "tempo_scope", "tempo_library"])
def test_the_otel_containers_of_trace_apis_are_read(tmp_path, container):
    """A model call and its tool run, inside each trace API's container: one episode, the
    call answered by its tool span (detected and read with --format auto)."""
    trace = "5b8efff798038103d269b633813fc60c"
    call = {"traceId": trace, "spanId": "a000000000000002", "parentSpanId": "a000000000000001",
            "name": "chat m", "startTimeUnixNano": "10", "endTimeUnixNano": "20",
            "attributes": [_attr("gen_ai.operation.name", "chat"),
                           _attr("gen_ai.input.messages", [{"role": "user", "parts": [
                               {"type": "text", "content": "weather in Paris?"}]}]),
                           _attr("gen_ai.output.messages", [{"role": "assistant", "parts": [
                               {"type": "tool_call", "id": "c1", "name": "weather",
                                "arguments": {"city": "Paris"}}]}])]}
    tool = {"traceId": trace, "spanId": "a000000000000003", "parentSpanId": "a000000000000001",
            "name": "execute_tool weather", "startTimeUnixNano": "30", "endTimeUnixNano": "40",
            "attributes": [_attr("gen_ai.operation.name", "execute_tool"),
                           _attr("gen_ai.tool.name", "weather"),
                           _attr("gen_ai.tool.call.id", "c1"),
                           _attr("gen_ai.tool.call.result", "sunny")]}
    root = {"traceId": trace, "spanId": "a000000000000001", "name": "invoke_agent a",
            "startTimeUnixNano": "1", "endTimeUnixNano": "50",
            "attributes": [_attr("gen_ai.operation.name", "invoke_agent")]}
    key = "instrumentationLibrarySpans" if container == "tempo_library" else "scopeSpans"
    resource = [{"resource": {}, key: [{"spans": [root, call, tool]}]}]
    doc = ({"result": {"resourceSpans": resource}} if container == "jaeger_api_v3"
           else {"batches": resource})
    summary, rows, quarantine = ingest_files(tmp_path, _json(tmp_path / "trace.json", doc))
    assert quarantine == [] and summary.episodes == 1
    assert [(r["action"]["type"], r["action"]["tool"]) for r in rows] == [("tool_call",
                                                                           "weather")]
    assert json.loads(rows[0]["observation"]["tool_result"]) == "sunny"


def test_an_otel_document_with_no_span_is_refused_with_its_reason(tmp_path):
    """A whole document in OTel form that holds no span (an empty trace API answer, a
    wrong file) is one quarantined record naming what was looked for, never 0 read."""
    path = _json(tmp_path / "trace.json", {"batches": [], "note": "nothing"})
    summary, rows, quarantine = ingest_files(tmp_path, path, fmt="otel-genai")
    assert (summary.read, summary.quarantined, rows) == (1, 1, [])
    assert "not an OpenTelemetry export" in quarantine[0]["reason"], quarantine

def test_the_realdata_counter_sees_the_same_live_branch(tmp_path):
    """tests/test_realdata_ingest.py counts Claude Code sessions by its own reading of the
    tree: on a rewound session it leaves out the lines the adapter leaves out."""
    from tests.test_realdata_ingest import _abandoned, _claude_code

    path = _jsonl(tmp_path / "s1.jsonl", REWOUND)
    assert _abandoned(REWOUND) == {"b1u", "b1a", "b1r", "b1z"}
    assert _claude_code(path) == (2, 2, 3)


def test_claude_code_a_transcript_that_starts_mid_conversation_is_kept(tmp_path):
    """A result whose call is not in the file (the transcript starts after it) is an
    environment event, a second result for one call is left out: counted, not the
    whole session quarantined."""
    lines = [_cc("user", "r0", None, _result("toolu_before", "old output")),
             _cc("user", "u1", "r0", "run it"),
             _cc("assistant", "a1", "u1", _use("t1", "make")),
             _cc("user", "r1", "a1", _result("t1", "built")),
             _cc("user", "r1b", "r1", _result("t1", "built")),
             _cc("assistant", "a2", "r1b", _text("Built."))]
    summary, rows, quarantine = ingest_files(tmp_path, _jsonl(tmp_path / "s1.jsonl", lines))
    assert (summary.accepted, quarantine) == (1, [])
    assert [r["action"]["type"] for r in rows] == ["tool_call", "message"]
    assert json.loads(rows[0]["observation"]["tool_result"]) == "built"
    assert (summary.notes["results_without_call"], summary.notes["duplicate_tool_results"]) \
        == (1, 1)


@pytest.mark.parametrize("container", ["list", "jsonl"])
def test_langfuse_observations_on_their_own_are_grouped_by_trace(tmp_path, container):
    """An observations table exported as a JSON list or JSONL (no trace objects)."""
    a, b = _call_and_answer("tr-a", 1), _call_and_answer("tr-b", 10)
    observations = [a[0], b[0], a[1], b[1], a[2], b[2]]
    path = _json(tmp_path / "obs.json", observations) if container == "list" \
        else _jsonl(tmp_path / "obs.jsonl", observations)
    assert detect_format(path) == "langfuse"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (2, 2, [])
    assert [r["action"]["type"] for r in rows if r["episode_id"] == "tr-b"] == [
        "tool_call", "message"]
