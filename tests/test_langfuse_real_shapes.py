"""Langfuse trace exports as real producers write them, each test a small trace modelled
on a real export (langfuse/langfuse, worker/src/__tests__/chatml/framework-traces/: traces
of the integration examples downloaded from Langfuse Cloud), built here in code."""

from __future__ import annotations

import json
from pathlib import Path

from tests.adapter_helpers import ingest_doc
from tracerl.data.formats import detect_format
from tracerl.data.ingest import ingest
from tracerl.io.fileio import read_table


def _obs(oid: str, trace: str, kind: str, name: str, second: int, parent: str | None = None,
         **fields) -> dict:
    at = f"2025-11-17T14:55:{second:02d}.000Z"
    return {"id": oid, "traceId": trace, "parentObservationId": parent, "type": kind,
            "name": name, "startTime": at, "endTime": at, "level": "DEFAULT",
            "statusMessage": None, "input": None, "output": None, "model": None,
            "usageDetails": {}, "metadata": "{}", **fields}


def _attrs(attributes: dict) -> str:
    return json.dumps({"attributes": attributes, "scope": {"name": "x", "attributes": {}}})


def _shape(rows: list[dict]) -> list[tuple]:
    return [(r["action"]["type"], r["call_id"], r["action"]["tool"],
             json.loads(r["action"]["arguments"]) if r["action"]["arguments"] else None,
             json.loads(r["observation"]["tool_result"])
             if r["observation"]["tool_result"] else None, r["action"]["content"])
            for r in rows]


def test_vercel_ai_sdk_tool_calls_as_the_generation_output(tmp_path):
    # vercel-aisdk-2025-11-17.trace.json (ai 5.0.76, generateText with a tool): Langfuse
    # makes `ai.response.toolCalls` the output of ai.generateText and its .doGenerate,
    # a bare list of {toolCallId, toolName, input (JSON text)}; the tool run is a TOOL
    # observation (ai.toolCall, its id in the metadata). The second step is the AI SDK's
    # prompt of the next call (content parts tool-call / tool-result{output{type, value}}).
    trace = "df41e597d0a85e0d7a6ae8ebfaa70aa0"
    calls = [{"toolCallId": "call_Dg", "toolName": "getWeather",
              "input": "{\"location\":\"San Francisco\"}"}]
    ask = [{"role": "user", "content": [{"type": "text", "text": "Weather in SF?"}]}]
    history = [*ask, {"role": "assistant", "content": [
        {"type": "tool-call", "toolCallId": "call_Dg", "toolName": "getWeather",
         "input": {"location": "San Francisco"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "call_Dg", "toolName": "getWeather",
             "output": {"type": "json", "value": {"temperature": 64}}}]}]
    observations = [
        _obs("root", trace, "GENERATION", "ai.generateText", 18, model="gpt-5",
             input=json.dumps({"prompt": "Weather in SF?"}), output="It is 64F.",
             metadata=_attrs({"ai.operationId": "ai.generateText"})),
        _obs("gen1", trace, "GENERATION", "ai.generateText.doGenerate", 19, "root",
             model="gpt-5", input=json.dumps(ask), output=json.dumps(calls),
             usageDetails={"input": 62, "output": 85, "total": 147},
             metadata=_attrs({"ai.operationId": "ai.generateText.doGenerate"})),
        _obs("tool", trace, "TOOL", "getWeather", 21, "root",
             input="{\"location\":\"San Francisco\"}",
             output="{\"location\":\"San Francisco\",\"temperature\":64}",
             metadata=_attrs({"ai.operationId": "ai.toolCall",
                              "ai.toolCall.name": "getWeather",
                              "ai.toolCall.id": "call_Dg"})),
        _obs("gen2", trace, "GENERATION", "ai.generateText.doGenerate", 22, "root",
             model="gpt-5", input=json.dumps(history), output="It is 64F.")]
    doc = {"trace": {"id": trace, "name": "ai.generateText", "scores": [
        {"name": "hallucination", "value": 0, "dataType": "NUMERIC"}],
        "observations": [dict(o, input=None, output=None) for o in observations]},
        "observations": observations}
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", doc)
    assert (summary.accepted, quarantine) == (1, [])
    assert _shape(rows) == [
        ("tool_call", "call_Dg", "getWeather", {"location": "San Francisco"},
         {"location": "San Francisco", "temperature": 64}, None),
        ("message", None, None, None, None, "It is 64F.")]
    assert rows[-1]["reward"] == 0.0 and summary.notes.get("results_without_call") is None


def test_koog_tool_calls_as_json_text_in_the_content(tmp_path):
    # koog-2025-08-26.trace.json (JetBrains Koog 0.3.0, OpenAI gpt-4o): a GENERATION's
    # output is one assistant message per call whose `content` is the JSON text of an
    # OpenAI tool_calls list; the next call's input repeats them as `tool` messages, each
    # followed by its result (a `tool` message without tool_call_id); the tool runs are
    # SPANs `tool.<name>` with gen_ai.tool.name / gen_ai.tool.call.id; two AGENT levels.
    trace = "dff173a675b759ce1b70e522b27d6846"

    def koog_call(cid: str, name: str) -> str:
        return json.dumps([{"function": {"name": name, "arguments": "{\"name\": \"Bob\"}"},
                            "id": cid, "type": "function"}])

    ask = [{"role": "system", "content": "You are a nice and polite assistant."},
           {"role": "user", "content": "Greet and say goodbye to Bob."}]
    hello, bye = koog_call("call_n2", "HelloTool"), koog_call("call_dO", "ByeTool")
    observations = [
        _obs("agent", trace, "AGENT", "agent.f9f7", 0,
             metadata=_attrs({"gen_ai.operation.name": "create_agent"})),
        _obs("run", trace, "AGENT", "run.6f8d", 0, "agent",
             metadata=_attrs({"gen_ai.operation.name": "invoke_agent",
                              "gen_ai.agent.id": "f9f7"})),
        _obs("node1", trace, "SPAN", "node.nodeCallLLM", 1, "run"),
        _obs("gen1", trace, "GENERATION", "llm.chat", 1, "node1", model="gpt-4o",
             input=json.dumps(ask),
             output=json.dumps([{"content": hello, "role": "assistant",
                                 "finish_reason": "tool_calls"},
                                {"role": "assistant", "content": bye}])),
        _obs("node2", trace, "SPAN", "node.nodeExecuteTool", 2, "run"),
        *[_obs(f"t{k}", trace, "SPAN", f"tool.{name}", 2, "node2",
               input="{\"name\":\"Bob\"}", output=result,
               metadata=_attrs({"gen_ai.tool.name": name, "gen_ai.tool.call.id": cid,
                                "input.value": "{\"name\":\"Bob\"}",
                                "output.value": result}))
          for k, (name, cid, result) in enumerate([("HelloTool", "call_n2", "Hello Bob!"),
                                                   ("ByeTool", "call_dO", "Bye Bob!")])],
        _obs("node3", trace, "SPAN", "node.nodeSendToolResult", 3, "run"),
        _obs("gen2", trace, "GENERATION", "llm.chat", 3, "node3", model="gpt-4o",
             input=json.dumps([*ask, {"content": hello, "role": "tool"},
                               {"role": "tool", "content": "Hello Bob!"},
                               {"content": bye, "role": "tool"},
                               {"role": "tool", "content": "Bye Bob!"}]),
             output=json.dumps([{"content": "Hello Bob! And, bye Bob!",
                                 "role": "assistant"}]))]
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", {"trace": {"id": trace},
                                                                  "observations": observations})
    assert (summary.accepted, quarantine) == (1, [])
    assert _shape(rows) == [
        ("tool_call", "call_n2", "HelloTool", {"name": "Bob"}, "Hello Bob!", None),
        ("tool_call", "call_dO", "ByeTool", {"name": "Bob"}, "Bye Bob!", None),
        ("message", None, None, None, None, "Hello Bob! And, bye Bob!")]
    assert rows[0]["turn"] == rows[1]["turn"]  # one model call made both
    assert not summary.notes.get("results_without_call")
    assert all(not r["observation"]["events"] for r in rows[1:])


def test_langchain_js_tool_message_with_the_tool_name_as_role(tmp_path):
    # langgraph-js-2025-10-30.trace.json (langfuse-langchain 4.3.0, LangGraph JS
    # createAgent, gpt-5-mini): the GENERATION input is OpenAI-style, but the handler
    # writes a ToolMessage as {content, additional_kwargs, role: <tool name>} with no
    # tool_call_id; the tool node is a SPAN `tools` whose output is LangChain-serialized
    # messages; there is no TOOL observation. Before: the result was lost.
    trace = "2c1581dd9cecdafb6ca091b83d7ea99a"
    ask = {"content": "What's the weather in San Francisco?", "role": "user"}
    call = {"content": "", "role": "assistant", "tool_calls": [
        {"id": "call_VE", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"San Francisco\"}"}}]}
    tool_message = {"lc": 1, "type": "constructor",
                    "id": ["langchain_core", "messages", "ToolMessage"],
                    "kwargs": {"status": "success", "content": "Always sunny.",
                               "tool_call_id": "call_VE", "name": "get_weather"}}
    observations = [
        _obs("graph", trace, "SPAN", "LangGraph", 41),
        _obs("node1", trace, "SPAN", "model_request", 41, "graph"),
        _obs("gen1", trace, "GENERATION", "ChatOpenAI", 42, "node1",
             model="gpt-5-mini-2025-08-07", input=json.dumps([ask]),
             output=json.dumps(call)),
        _obs("tools", trace, "SPAN", "tools", 43, "graph",
             output=json.dumps({"messages": [tool_message]})),
        _obs("node2", trace, "SPAN", "model_request", 44, "graph"),
        _obs("gen2", trace, "GENERATION", "ChatOpenAI", 45, "node2",
             model="gpt-5-mini-2025-08-07",
             input=json.dumps([ask, call, {"content": "Always sunny.",
                                           "additional_kwargs": {},
                                           "role": "get_weather"}]),
             output=json.dumps({"content": "It's sunny.", "role": "assistant"}))]
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", {
        "trace": {"id": trace, "name": "LangGraph"}, "observations": observations})
    assert (summary.accepted, quarantine) == (1, [])
    assert _shape(rows) == [
        ("tool_call", "call_VE", "get_weather", {"city": "San Francisco"}, "Always sunny.",
         ""),
        ("message", None, None, None, None, "It's sunny.")]


def test_generation_input_as_the_observed_functions_arguments(tmp_path):
    # llamaindex-2025-06-05.trace.json (OpenInference llama_index 4.3.0 via langfuse-sdk
    # 3.0.0): the GENERATION `OpenAI.complete` has input {"args": ["What is Langfuse?"]}
    # (its input.value), output the text; the Python SDK's @observe records a function's
    # input the same way ({args, kwargs}). Before: the prompt was lost (no user goal).
    trace = "12ea412956f99347b0503c1144acd0ec"
    doc = {"trace": {"id": trace, "name": "llama-index-trace", "userId": "user_123",
                     "tags": ["llama-index", "rag"]},
           "observations": [
               _obs("root", trace, "SPAN", "llama-index-trace", 52),
               _obs("gen", trace, "GENERATION", "OpenAI.complete", 53, "root",
                    model="gpt-4o", input="{\"args\": [\"What is Langfuse?\"]}",
                    output="Langfuse is an LLM engineering platform.",
                    metadata=_attrs({"openinference.span.kind": "LLM",
                                     "llm.prompts": "[\"What is Langfuse?\"]"})),
               _obs("gen2", trace, "GENERATION", "call", 54, model="gpt-4o",
                    input={"args": [[{"role": "user", "content": "Hi?"}]],
                           "kwargs": {"temperature": 0}},
                    output="Hello.")]}
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", doc)
    assert (summary.accepted, quarantine) == (1, [])
    assert [r["action"]["content"] for r in rows] == [
        "Langfuse is an LLM engineering platform.", "Hello."]
    assert rows[0]["state"]["user_goal"] == "What is Langfuse?"
    assert [(e["actor"], e["content"]) for e in rows[0]["observation"]["events"]] == [
        ("user", "Hi?")]  # the next call's prompt, from its {args: [[messages]]}


def test_agno_message_reprs_fall_back_to_the_openinference_attributes(tmp_path):
    # agno-2025-06-11.trace.json (openinference.instrumentation.agno 0.1.4): a GENERATION's
    # input is {"messages": [<each Message's repr() text>], "tools": [...]}, its output a
    # chat completion; the messages are also in llm.input_messages.* attributes. Before:
    # no input message was read (the user's question lost).
    trace = "080130871f53145aecf7c29d5dfb6e4c"
    question = "What is currently trending on Twitter?"
    calls = [{"id": "call_Vy", "type": "function", "function": {
        "name": "duckduckgo_search", "arguments": "{\"query\":\"trending\"}"}}]

    def completion(message: dict) -> str:
        return json.dumps({"id": "chatcmpl-x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None, **message}}]})

    observations = [
        _obs("run", trace, "AGENT", "Agent.run", 32),
        _obs("gen1", trace, "GENERATION", "OpenAIChat.invoke", 33, "run",
             model="gpt-4o-mini",
             input=json.dumps({"messages": [
                 "role='system' content='Use markdown.' name=None tool_call_id=None",
                 f"role='user' content='{question}' name=None tool_call_id=None"],
                 "tools": []}),
             output=completion({"tool_calls": calls}),
             metadata=_attrs({"openinference.span.kind": "LLM",
                              "llm.input_messages.0.message.role": "system",
                              "llm.input_messages.0.message.content": "Use markdown.",
                              "llm.input_messages.1.message.role": "user",
                              "llm.input_messages.1.message.content": question})),
        _obs("tool", trace, "TOOL", "duckduckgo_search", 34, "run",
             input="{\"query\":\"trending\"}", output="[{\"title\": \"Explore\"}]"),
        _obs("gen2", trace, "GENERATION", "OpenAIChat.invoke", 35, "run",
             model="gpt-4o-mini", input=json.dumps({"messages": ["role='user' ..."]}),
             output=completion({"content": "Visit Twitter Explore."}))]
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", {"trace": {"id": trace},
                                                                  "observations": observations})
    assert (summary.accepted, quarantine) == (1, [])
    assert rows[0]["state"]["user_goal"] == question
    assert _shape(rows) == [
        ("tool_call", "call_Vy", "duckduckgo_search", {"query": "trending"},
         [{"title": "Explore"}], None),
        ("message", None, None, None, None, "Visit Twitter Explore.")]


def test_blob_storage_export_of_enriched_observations(tmp_path):
    # Langfuse's scheduled blob storage export, observations_v2/ as JSONL (field names
    # from langfuse.com/docs/api-and-data-platform/features/blob-storage-export-fields):
    # snake_case fields, `provided_model_name`, timestamps "YYYY-MM-DD HH:MM:SS.ffffff",
    # the trace context (trace_name, user_id, session_id, tags) on every observation.
    # Before: detected as OTel spans (trace_id, name) and no tool call read.
    def row(oid: str, trace: str, kind: str, name: str, second: int, **fields) -> dict:
        return {"id": oid, "trace_id": trace, "project_id": "p", "environment": "default",
                "type": kind, "parent_observation_id": None, "name": name,
                "start_time": f"2026-05-29 13:46:{second:02d}.963000",
                "end_time": f"2026-05-29 13:46:{second:02d}.999000", "metadata": {},
                "level": "DEFAULT", "status_message": None, "input": None, "output": None,
                "provided_model_name": None, "usage_details": {}, "cost_details": {},
                "trace_name": "weather-agent", "user_id": "u1", "session_id": "s1",
                "tags": ["prod"], **fields}

    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]}
    ask = [{"role": "user", "content": "Weather in Rome?"}]
    rows_in = []
    for trace in ("t1", "t2"):
        rows_in += [
            row(f"{trace}-g1", trace, "GENERATION", "chat", 19, provided_model_name="gpt-4o",
                input=json.dumps(ask), output=json.dumps(call),
                usage_details={"input": 10, "output": 5}),
            row(f"{trace}-t", trace, "TOOL", "get_weather", 20,
                input="{\"city\": \"Rome\"}", output="21C"),
            row(f"{trace}-g2", trace, "GENERATION", "chat", 21, provided_model_name="gpt-4o",
                input=json.dumps([*ask, call, {"role": "tool", "tool_call_id": "c1",
                                               "content": "21C"}]), output="Rome: 21C.")]
    rows_in.sort(key=lambda r: r["start_time"])
    path = tmp_path / "observations_v2" / "export.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows_in))
    assert detect_format(path) == "langfuse"
    out = tmp_path / "out"
    summary = ingest([path], out)
    rows = read_table(out / "steps").to_pylist()
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 2, 0)
    for trace in ("t1", "t2"):
        mine = [r for r in rows if r["episode_id"] == trace]
        assert _shape(mine) == [("tool_call", "c1", "get_weather", {"city": "Rome"}, "21C",
                                 None),
                                ("message", None, None, None, None, "Rome: 21C.")]
        assert {r["task"] for r in mine} == {"weather-agent"}
        assert mine[0]["episode"]["agent_model"] == "gpt-4o"
        assert json.loads(mine[-1]["extra"])["episode"]["tags"] == ["prod"]


def test_v4_observations_api_rows_carry_their_trace(tmp_path):
    # The v4 read API has no trace entity: GET /api/public/v2/observations rows carry
    # traceName / userId / sessionId / tags, input/output as JSON text, the model as
    # providedModelName (rows as in a LangfuseReader test of a project that reads both
    # API generations, "shaped exactly as the SDK's generated client documents them").
    # Before: the trace's name, user, session and the model were lost.
    context = {"userId": "u-1", "sessionId": "sess-1", "tags": ["golden"],
               "traceName": "answer_question", "environment": "production"}
    doc = {"data": [
        {"id": "root1", "traceId": "t1", "type": "SPAN", "name": "answer_question",
         "startTime": "2026-06-04T11:59:59.000Z", "endTime": "2026-06-04T12:00:04.000Z",
         "parentObservationId": None, "input": "{\"question\": \"why?\"}",
         "output": "{\"text\": \"ok\"}", **context},
        {"id": "o1", "traceId": "t1", "type": "GENERATION", "name": "answer",
         "startTime": "2026-06-04T12:00:00.000Z", "endTime": "2026-06-04T12:00:03.000Z",
         "parentObservationId": "root1",
         "input": "[{\"role\": \"user\", \"content\": \"why?\"}]", "output": "{\"text\": \"ok\"}",
         "providedModelName": "claude-sonnet-4", "usageDetails": {"input": 100, "output": 20},
         "totalCost": 0.004, **context}], "meta": {"cursor": None}}
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", doc)
    assert (summary.accepted, quarantine) == (1, [])
    assert [(r["task"], r["action"]["content"]) for r in rows] == [("answer_question", "ok")]
    assert rows[0]["episode"]["agent_model"] == "claude-sonnet-4"
    assert json.loads(rows[0]["extra"])["episode"]["tags"] == ["golden"]


def test_blob_storage_legacy_export_folder_is_read_as_one(tmp_path):
    # The blob storage export's legacy mode writes traces/, observations/ and scores/
    # files per time window (columns as langfuse/langfuse selects them,
    # packages/shared/src/server/repositories/{traces,observations,scores}.ts:
    # get{Traces,Observations,Scores}ForBlobStorageExport); "legacy and enriched" mode
    # writes each observation twice, in observations/ and observations_v2/. The files of
    # one input that share a trace id are read as one: a trace cut across two windows is
    # one trace, an observation written twice is read once, the trace row gives the
    # trace's name, user, session, tags, its scores the reward components. Before:
    # traces/ was detected as native JSONL (every row quarantined: no episode_id),
    # scores/ as OpenTelemetry spans, and a trace in two files was quarantined twice
    # (duplicate (episode_id, t)).
    def at(second: int) -> str:
        return f"2026-05-29 13:46:{second:02d}.963000"

    root = tmp_path / "export" / "project-1"
    for name in ("traces", "observations", "scores"):
        (root / name).mkdir(parents=True)
    traces = [{"id": t, "timestamp": at(18), "name": "weather-agent", "environment": "default",
               "project_id": "project-1", "metadata": {}, "user_id": "u1", "session_id": "s1",
               "release": None, "version": None, "public": False, "bookmarked": False,
               "tags": ["prod"], "input": "\"Weather in Rome?\"", "output": "\"21C\"",
               "created_at": at(18), "updated_at": at(22)} for t in ("t1", "t2")]
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]}
    ask = [{"role": "user", "content": "Weather in Rome?"}]

    def obs(oid: str, trace: str, kind: str, second: int, **fields) -> dict:
        return {"id": oid, "trace_id": trace, "project_id": "project-1",
                "environment": "default", "type": kind, "parent_observation_id": None,
                "start_time": at(second), "end_time": at(second), "name": "chat",
                "metadata": {}, "level": "DEFAULT", "status_message": None, "version": None,
                "input": None, "output": None, "provided_model_name": None,
                "model_parameters": None, "usage_details": {}, "cost_details": {},
                "completion_start_time": None, "prompt_name": None, "prompt_version": None,
                **fields}

    observations = []
    for t in ("t1", "t2"):
        observations += [
            obs(f"{t}-g1", t, "GENERATION", 19, provided_model_name="gpt-4o",
                input=json.dumps(ask), output=json.dumps(call)),
            obs(f"{t}-tool", t, "TOOL", 20, name="get_weather", input="{\"city\": \"Rome\"}",
                output="21C"),
            obs(f"{t}-g2", t, "GENERATION", 21, provided_model_name="gpt-4o",
                input=json.dumps([*ask, call, {"role": "tool", "tool_call_id": "c1",
                                               "content": "21C"}]), output="Rome: 21C.")]
    scores = [{"id": f"s-{t}", "timestamp": at(23), "project_id": "project-1",
               "environment": "default", "trace_id": t, "observation_id": None,
               "session_id": None, "dataset_run_id": None, "name": "correct", "value": 1.0,
               "source": "API", "comment": None, "data_type": "NUMERIC", "string_value": None,
               "created_at": at(23), "updated_at": at(23)} for t in ("t1", "t2")]
    scores.append({**scores[0], "id": "s-cat", "name": "label", "value": 0,
                   "data_type": "CATEGORICAL", "string_value": "good"})
    scores.append({**scores[0], "id": "s-session", "trace_id": None, "session_id": "s1"})
    (root / "observations_v2").mkdir()
    enriched = [{**o, "trace_name": "weather-agent", "user_id": "u1"}
                for o in observations if o["trace_id"] == "t1"]
    files = {"traces/2026-05-29T14-00-00.jsonl": traces,
             "observations/2026-05-29T14-00-00.jsonl": observations[:4],  # t2's tool and
             "observations/2026-05-29T15-00-00.jsonl": observations[4:],  # answer: later
             "observations_v2/2026-05-29T14-00-00.jsonl": enriched,
             "scores/2026-05-29T14-00-00.jsonl": scores}
    for name, rows_in in files.items():
        path = root / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows_in))
        assert detect_format(path) == "langfuse", name
        alone = ingest([path], tmp_path / "alone" / name, max_bad_fraction=1.0)
        assert alone.read == alone.accepted + alone.quarantined
    (root / "traces" / "2026-05-29T15-00-00.json").write_text(json.dumps(traces))  # JSON
    assert detect_format(root / "traces" / "2026-05-29T15-00-00.json") == "langfuse"
    out = tmp_path / "out"
    summary = ingest([tmp_path / "export"], out)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 2, 0)
    assert summary.notes == {"repeated_observations": 3,  # t1's, in observations_v2/
                             "scores_apart_from_traces": 1}  # the session's score
    rows = read_table(out / "steps").to_pylist()
    for t in ("t1", "t2"):
        mine = [r for r in rows if r["episode_id"] == t]
        assert _shape(mine) == [("tool_call", "c1", "get_weather", {"city": "Rome"}, "21C",
                                 None),
                                ("message", None, None, None, None, "Rome: 21C.")]
        assert {r["task"] for r in mine} == {"weather-agent"}
        assert mine[-1]["reward"] == 1.0  # `correct`; the categorical `label` is not one
        assert mine[-1]["reward_components"] == [("correct", 1.0)]
        assert json.loads(mine[-1]["extra"])["episode"]["tags"] == ["prod"]
    t2 = [r for r in rows if r["episode_id"] == "t2"]
    assert t2[0]["source_file"].endswith("observations/2026-05-29T14-00-00.jsonl")
    assert t2[-1]["source_pointer"] == \
        "project-1/observations/2026-05-29T15-00-00.jsonl#/lines/2#output/0"


def test_public_api_score_list_and_inline_scores_of_each_data_type(tmp_path):
    # GET /api/public/v2/scores (`{data: [score], meta}`: traceId, observationId,
    # sessionId, dataType NUMERIC | BOOLEAN | CATEGORICAL, value, stringValue, source), and
    # a trace's inline `scores` (GET /api/public/traces/{id}) dumped by an SDK model
    # without aliases (`data_type`): numeric and boolean are reward components, a
    # categorical score's number is not. Before: the list was detected as OpenTelemetry
    # (traceId, name) and read as nothing; a snake_case categorical score was a component.
    score = {"id": "sc1", "traceId": "t1", "observationId": None, "sessionId": None,
             "name": "correct", "value": 1, "stringValue": None, "dataType": "NUMERIC",
             "source": "ANNOTATION", "timestamp": "2026-06-04T12:00:05.000Z",
             "environment": "default", "comment": None, "configId": None}
    doc = {"data": [score, {**score, "id": "sc2", "name": "label", "value": 2,
                            "stringValue": "good", "dataType": "CATEGORICAL"}],
           "meta": {"page": 1, "limit": 50, "totalItems": 2, "totalPages": 1}}
    path = tmp_path / "scores.json"
    path.write_text(json.dumps(doc))
    assert detect_format(path) == "langfuse"
    out = tmp_path / "out"
    summary = ingest([path], out)
    assert (summary.read, summary.quarantined) == (0, 0)
    assert summary.notes == {"scores_apart_from_traces": 2}

    trace = "t-scored"
    inline = [{"id": "a", "trace_id": trace, "name": "helpful", "value": 0.5,
               "data_type": "NUMERIC", "source": "EVAL"},
              {"id": "b", "trace_id": trace, "name": "resolved", "value": 1.0,
               "string_value": "True", "data_type": "BOOLEAN", "source": "API"},
              {"id": "c", "trace_id": trace, "name": "tone", "value": 3.0,
               "string_value": "friendly", "data_type": "CATEGORICAL", "source": "API"}]
    doc = {"id": trace, "timestamp": "2026-06-04T12:00:00.000Z", "name": "run",
           "session_id": "sess-9", "scores": inline, "observations": [
               _obs("g", trace, "GENERATION", "chat", 1,
                    input=json.dumps([{"role": "user", "content": "hi"}]), output="hello")]}
    (tmp_path / "inline").mkdir()
    summary, rows, quarantine = ingest_doc(tmp_path / "inline", "langfuse", doc)
    assert (summary.accepted, quarantine) == (1, [])
    assert rows[-1]["reward_components"] == [("helpful", 0.5), ("resolved", 1.0)]
    assert "sessionId" in json.loads(rows[-1]["extra"])["episode"]  # (its value redacted)


def _outputs(path: Path, out: Path, limits, workers: int = 1) -> dict[str, bytes]:
    summary = ingest([path], out, batch_lines=3, workers=workers, limits=limits,
                     max_bad_fraction=1.0)
    assert summary.read == summary.accepted + summary.quarantined
    return {p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_large_jsonl_of_observations_in_no_order_reads_as_one_job(tmp_path):
    # A JSON Lines file larger than ingest.batch_bytes is read in jobs of its lines; the
    # blob storage export (and the UI's observations export) writes a trace's
    # observations in no order, far apart. Before: each job grouped only its own lines,
    # so every trace cut across two jobs came out twice and both copies were quarantined
    # (duplicate (episode_id, t)). Now the batches that name one trace id are one job:
    # the output is byte for byte that of the file read as one job.
    from tracerl.data.ingest.limits import Limits

    def row(oid: str, trace: str, kind: str, second: int, **fields) -> dict:
        return {"id": oid, "trace_id": trace, "project_id": "p", "type": kind,
                "parent_observation_id": None, "name": "chat",
                "start_time": f"2026-05-29 13:{second // 60:02d}:{second % 60:02d}.000000",
                "end_time": f"2026-05-29 13:{second // 60:02d}:{second % 60:02d}.500000",
                "metadata": {}, "level": "DEFAULT", "input": None, "output": None,
                "provided_model_name": "gpt-4o", "usage_details": {}, **fields}

    lines = []
    for n in range(12):
        t, c = f"trace-{n:02d}", f"call-{n}"
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": c, "type": "function",
             "function": {"name": "lookup", "arguments": json.dumps({"n": n})}}]}
        ask = [{"role": "user", "content": f"look up {n}" + " pad" * 200}]
        lines.append((n, row(f"{t}-g1", t, "GENERATION", 3 * n, input=json.dumps(ask),
                             output=json.dumps(call))))
        lines.append((n + 5, row(f"{t}-tool", t, "TOOL", 3 * n + 1, name="lookup",
                                 input=json.dumps({"n": n}), output=f"result {n}")))
        lines.append((n + 9, row(f"{t}-g2", t, "GENERATION", 3 * n + 2, input=json.dumps(
            [*ask, call, {"role": "tool", "tool_call_id": c, "content": f"result {n}"}]),
            output=f"answer {n}")))
    lines.sort(key=lambda item: item[0])  # each trace's three lines far apart
    text = [json.dumps(r) for _, r in lines]
    text.insert(7, "{not json")
    text.insert(20, json.dumps({"id": "s1", "trace_id": "trace-03", "name": "ok",
                                "value": 1, "data_type": "NUMERIC", "source": "API"}))
    path = tmp_path / "observations.jsonl"
    path.write_text("\n".join(text) + "\n")
    assert path.stat().st_size > 4 * 4096
    one = _outputs(path, tmp_path / "one", Limits())
    cut = _outputs(path, tmp_path / "cut", Limits(batch_bytes=4096))
    assert cut == one
    assert _outputs(path, tmp_path / "two", Limits(batch_bytes=4096), workers=2) == one
    summary = json.loads(one["ingest_summary.json"])
    assert (summary["read"], summary["accepted"], summary["quarantined"]) == (13, 12, 1)
    assert summary["notes"] == {"scores_apart_from_traces": 1}
    rows = read_table(tmp_path / "one" / "steps").to_pylist()
    assert len({r["episode_id"] for r in rows}) == 12
    assert sorted(r["action"]["type"] for r in rows) == ["message"] * 12 + ["tool_call"] * 12


def test_ui_table_exports_of_traces_and_observations(tmp_path):
    # The UI's batch export of the traces and observations tables as JSONL / JSON
    # (langfuse/langfuse worker/src/features/database-read-stream/: getTraceStream rows
    # {id, timestamp, name, userId, sessionId, release, version, environment, tags,
    # bookmarked, public, input, output, metadata, comments} and a column per score
    # name, no project; getObservationStream rows: the observation in camelCase with
    # traceName, traceTags, traceTimestamp, userId). Before: the traces export was
    # detected as native JSONL (every row quarantined) and the observations' traceTags
    # were lost.
    trace = "t-ui"
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}}]}
    ask = [{"role": "user", "content": "find x"}]
    context = {"traceName": "support-bot", "traceTags": ["beta"],
               "traceTimestamp": "2026-06-01T10:00:00.000Z", "userId": "u7",
               "comments": [], "helpfulness": None}
    observations = [
        _obs("g1", trace, "GENERATION", "chat", 1, input=ask, output=call, **context),
        _obs("tool", trace, "TOOL", "search", 2, input={"q": "x"}, output="found",
             **context),
        _obs("g2", trace, "GENERATION", "chat", 3, output="x is here.", **context,
             **{"input": [*ask, call, {"role": "tool", "tool_call_id": "c1",
                                        "content": "found"}]})]
    folder = tmp_path / "ui"
    folder.mkdir()
    (folder / "observations.json").write_text(json.dumps(observations))
    row = {"id": trace, "timestamp": "2026-06-01T10:00:00.000Z", "name": "support-bot",
           "userId": "u7", "sessionId": "s7", "release": None, "version": None,
           "environment": "default", "tags": ["beta"], "bookmarked": False,
           "public": False, "input": "find x", "output": "x is here.", "metadata": {},
           "helpfulness": [0.5], "comments": []}
    traces = folder / "traces.jsonl"
    traces.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "t-other"}) + "\n")
    for path in (folder / "observations.json", traces):
        assert detect_format(path) == "langfuse"
    alone = ingest([traces], tmp_path / "alone")
    assert (alone.read, alone.quarantined, alone.notes) == (
        0, 0, {"trace_rows_without_observations": 2})
    out = tmp_path / "out"
    summary = ingest([folder], out)
    assert (summary.read, summary.accepted, summary.quarantined) == (1, 1, 0)
    assert summary.notes == {"trace_rows_without_observations": 1}  # t-other's
    rows = read_table(out / "steps").to_pylist()
    assert _shape(rows) == [("tool_call", "c1", "search", {"q": "x"}, "found", None),
                            ("message", None, None, None, None, "x is here.")]
    assert {r["task"] for r in rows} == {"support-bot"}
    assert json.loads(rows[-1]["extra"])["episode"]["tags"] == ["beta"]


def test_a_session_download_is_counted_not_quarantined(tmp_path):
    # The UI's "Download session as JSON" (langfuse/langfuse web/src/components/session/
    # index.tsx downloadSessionAsJson: the session, its traces, each with its comments,
    # the session's scores and comments; `session-<id>.json`): the traces carry no
    # observations, so no agent action. Before: detected as native JSONL, quarantined.
    doc = {"id": "sess-1", "createdAt": "2026-06-01T10:00:00.000Z", "projectId": "p",
           "bookmarked": False, "public": False, "environment": "default",
           "traces": [{"id": "t1", "name": "turn", "timestamp": "2026-06-01T10:00:00.000Z",
                       "userId": "u1", "scores": [], "comments": []}],
           "users": ["u1"], "totalCost": 0.01, "scores": [], "comments": []}
    path = tmp_path / "session-sess-1.json"
    path.write_text(json.dumps(doc))
    assert detect_format(path) == "langfuse"
    summary = ingest([path], tmp_path / "out")
    assert (summary.read, summary.quarantined, summary.notes) == (
        0, 0, {"sessions_without_observations": 1})


def test_public_api_trace_and_observation_lists_read_together(tmp_path):
    # A project exported by the public API as two lists: GET /api/public/traces (each
    # trace's observations by id only, `meta` paging) and GET /api/public/observations
    # (shape of a self-hosted response quoted in the API docs of a Langfuse-compatible
    # server: legacy `usage`, `promptTokens`). Read together, the traces give the
    # episodes their name, user and tags; a listed trace whose observations are in
    # neither file is still quarantined saying how to export it. Before: every listed
    # trace was quarantined although its observations were in the input.
    trace, missing = "2b19f7aa", "no-obs"
    listed = {"id": trace, "timestamp": "2025-06-26T06:16:19.504Z", "name": "chat-run",
              "input": None, "output": None, "sessionId": None, "userId": "administrator",
              "metadata": None, "tags": ["demo"], "public": False,
              "htmlPath": f"/project/p/traces/{trace}", "latency": 12.77, "totalCost": 0,
              "observations": ["o1", "o2", "o3"], "scores": [], "bookmarked": False,
              "projectId": "p"}
    traces = {"data": [listed, {**listed, "id": missing, "observations": ["x9"]}],
              "meta": {"page": 1, "limit": 50, "totalItems": 2, "totalPages": 1}}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "lookup", "arguments": "{\"k\": 1}"}}]}
    ask = [{"role": "user", "content": "look up 1"}]
    usage = {"input": 13, "output": 5, "total": 18, "unit": "TOKENS"}
    observations = {"data": [
        _obs("o1", trace, "GENERATION", "chat", 1, input=ask, output=call, usage=usage,
             model="qwen3"),
        _obs("o2", trace, "TOOL", "lookup", 2, input={"k": 1}, output="one"),
        _obs("o3", trace, "GENERATION", "chat", 3, output="It is one.", usage=usage,
             model="qwen3", **{"input": [*ask, call, {"role": "tool", "tool_call_id": "c1",
                                                      "content": "one"}]})],
        "meta": {"page": 1, "limit": 50, "totalItems": 3, "totalPages": 1}}
    folder = tmp_path / "api"
    folder.mkdir()
    (folder / "traces.json").write_text(json.dumps(traces))
    (folder / "observations.json").write_text(json.dumps(observations))
    out = tmp_path / "out"
    summary = ingest([folder], out, max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    quarantine = [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["field"], q["source_record"]) for q in quarantine] == [
        ("/data/1/observations", 2)]
    assert "observations by id only" in quarantine[0]["reason"]
    rows = read_table(out / "steps").to_pylist()
    assert _shape(rows) == [("tool_call", "c1", "lookup", {"k": 1}, "one", None),
                            ("message", None, None, None, None, "It is one.")]
    assert {r["task"] for r in rows} == {"chat-run"}
    assert json.loads(rows[-1]["extra"])["episode"]["tags"] == ["demo"]
    assert rows[0]["episode"]["prompt_tokens"] == 26


def test_a_trace_with_full_details_dumped_without_aliases(tmp_path):
    # langfuse-python's API models (Fern: TraceWithFullDetails(Trace) with fields
    # html_path, total_cost, observations: list[ObservationsView], scores: list[Score],
    # aliased to camelCase) dumped without aliases (pydantic v2 model_dump()): snake_case
    # everywhere, the scores' `data_type` / `string_value`, the trace's `session_id` /
    # `user_id`. Before: a snake_case categorical score was taken for a numeric reward
    # component and the trace's session and user were lost.
    trace = "tr-snake"

    def obs(oid: str, kind: str, name: str, second: int, **fields) -> dict:
        return {"id": oid, "trace_id": trace, "type": kind, "name": name,
                "start_time": f"2026-01-01T00:00:0{second}Z",
                "end_time": f"2026-01-01T00:00:0{second}Z", "parent_observation_id": None,
                "level": "DEFAULT", "status_message": None, "model": None,
                "model_parameters": None, "input": None, "output": None,
                "usage_details": {}, "cost_details": {}, "metadata": None, **fields}

    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    ask = [{"role": "user", "content": "go"}]
    doc = {"id": trace, "timestamp": "2026-01-01T00:00:00Z", "name": "snake",
           "session_id": "s1", "user_id": "u1", "tags": ["x"],
           "html_path": f"/project/p/traces/{trace}", "latency": 1.0, "total_cost": 0.0,
           "observations": [
               obs("g1", "GENERATION", "chat", 1, model="gpt-4o", input=ask, output=call),
               obs("t", "TOOL", "f", 2, input={}, output="ok"),
               obs("g2", "GENERATION", "chat", 3, model="gpt-4o", output="done", input=[
                   *ask, call, {"role": "tool", "tool_call_id": "c1", "content": "ok"}])],
           "scores": [{"id": "s1", "trace_id": trace, "name": "pass", "value": 1.0,
                       "data_type": "BOOLEAN", "string_value": "True", "source": "API"},
                      {"id": "s2", "trace_id": trace, "name": "tone", "value": 2.0,
                       "data_type": "CATEGORICAL", "string_value": "calm", "source": "API"}]}
    summary, rows, quarantine = ingest_doc(tmp_path, "langfuse", doc)
    assert (summary.accepted, quarantine) == (1, [])
    assert _shape(rows) == [("tool_call", "c1", "f", {}, "ok", None),
                            ("message", None, None, None, None, "done")]
    assert (rows[-1]["reward"], rows[-1]["reward_components"]) == (1.0, [("pass", 1.0)])
    assert {"sessionId", "userId"} <= json.loads(rows[-1]["extra"])["episode"].keys()
