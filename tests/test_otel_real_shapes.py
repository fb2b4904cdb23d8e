"""OTel GenAI exports as real producers write them, each built in code as a small record
modelled on a real file (the comment over each names the repository and path): read end
to end with `--format auto`, nothing quarantined, every tool call answered once."""

from __future__ import annotations

import json

import pytest

from tests.adapter_helpers import calls_of, kv, messages_of, otel_rows


def _span(trace: str, sid: str, name: str, start: int, attrs: dict,
          parent: str | None = None, end: int | None = None) -> dict:
    span = {"traceId": trace, "spanId": sid, "name": name, "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end or start + 1000),
            "attributes": kv(attrs), "status": {"code": 1}}
    if parent:
        span["parentSpanId"] = parent
    return span


def _parts(role: str, *parts: dict, **extra) -> dict:
    return {"role": role, "parts": list(parts), **extra}


def _text(content: str) -> dict:
    return {"type": "text", "content": content}


# --- Google ADK (Go, in kagent): parallel calls and the `execute_tool (merged)` span ----------

# agentevals-dev/agentevals tests/fixtures/otlp/kagent/v1.0.0-alpha9/adk_go_1turn.json: a
# model call asks for two tools at once; ADK runs them (two `execute_tool <name>` spans) and
# records the merged function-response event as one more tool span, `execute_tool (merged)`
# (`gen_ai.tool.name` "(merged tools)", arguments "N/A"), here the parent of the two.
def test_adk_merged_tool_span_is_not_a_call_of_its_own(tmp_path):
    trace, conv = "87c6a986091561073755b87f921ed006", "01a11b07-98fc-7742-9303-5ffb53510cde"
    ids = {"gen_ai.conversation.id": conv, "a2a.task.id": "01a11b07-99f5"}
    user = _parts("user", _text("List the namespaces, then count the pods in kagent."))
    asked = _parts("assistant", _text("I'll list them."),
                   {"type": "tool_call", "id": "toolu_01Qm", "name": "k8s_get_resources",
                    "arguments": {"namespace": "kagent", "resource_type": "pod"}},
                   {"type": "tool_call", "id": "toolu_011m", "name": "k8s_get_resources",
                    "arguments": {"resource_type": "namespace"}})
    pods, namespaces = {"output": {"output": "kagent-controller Running\n"}}, \
        {"output": {"output": "agentevals Active\nkagent Active\n"}}
    answered = _parts("tool", {"type": "tool_call_response", "id": "toolu_01Qm",
                               "name": "k8s_get_resources", "response": pods},
                      {"type": "tool_call_response", "id": "toolu_011m",
                       "name": "k8s_get_resources", "response": namespaces})
    system = json.dumps([_text("You are a helpful assistant running on kagent.")])

    def generate(sid, start, inputs, output):
        return _span(trace, sid, "generate_content claude-haiku-4-5", start, {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": "claude-haiku-4-5", **ids,
            "gen_ai.system_instructions": system, "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps([output]),
            "gen_ai.usage.input_tokens": 14745, "gen_ai.usage.output_tokens": 139}, "agent")

    def tool(sid, call_id, args, response):
        return _span(trace, sid, "execute_tool k8s_get_resources", 3000, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "k8s_get_resources",
            "gcp.vertex.agent.tool_call_args": json.dumps(args), **ids,
            "gen_ai.tool.call.id": call_id,
            "gcp.vertex.agent.tool_response": json.dumps(response)}, "merged")

    merged_event = {"content": {"role": "user", "parts": [
        {"functionResponse": {"id": "toolu_01Qm", "name": "k8s_get_resources",
                              "response": pods}},
        {"functionResponse": {"id": "toolu_011m", "name": "k8s_get_resources",
                              "response": namespaces}}]}, "author": "adk_go_test"}
    spans = [
        _span(trace, "a2a", "a2a.request", 0, {"a2a.method": "SendMessage", **ids},
              end=10**6),
        generate("call1", 1000, [user], {**asked, "finish_reason": "tool_call"}),
        tool("tool1", "toolu_011m", {"resource_type": "namespace"}, namespaces),
        tool("tool2", "toolu_01Qm", {"namespace": "kagent", "resource_type": "pod"}, pods),
        _span(trace, "merged", "execute_tool (merged)", 2999, {
            **ids, "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "(merged tools)", "gen_ai.tool.description": "(merged tools)",
            "gcp.vertex.agent.tool_call_args": "N/A",
            "gcp.vertex.agent.tool_response": json.dumps(merged_event)}, "agent", end=5000),
        generate("call2", 6000, [user, asked, answered],
                 _parts("assistant", _text("There are 2 namespaces."), finish_reason="stop")),
        _span(trace, "agent", "invoke_agent adk_go_test", 500, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "adk_go_test",
            **ids}, "a2a", end=9000),
    ]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [
        {"scope": {"name": "gcp.vertex.agent"}, "spans": spans}]}]})
    assert calls_of(rows) == [
        ("k8s_get_resources", {"namespace": "kagent", "resource_type": "pod"},
         {"output": "kagent-controller Running\n"}, None),
        ("k8s_get_resources", {"resource_type": "namespace"},
         {"output": "agentevals Active\nkagent Active\n"}, None)]
    assert messages_of(rows) == ["There are 2 namespaces."]
    assert {r["episode_id"] for r in rows} == {conv}


# --- Latitude telemetry (TypeScript SDK) -----------------------------------------------------

# latitude-dev/latitude-llm, the TypeScript SDK's rendering-spans test fixture
# (LATITUDE_RENDERING_SPANS): `gen_ai.operation.name` "completion" model spans with typed
# parts, the system prompt as `gen_ai.system.instructions` (a dot, not the convention's
# underscore), and a tool span whose operation is `tool`, with its result in
# `gen_ai.tool.result.value` / `.is_error`.
def _latitude(final_call: bool, is_error: bool = False) -> dict:
    trace = "0af7651916cd43dd8448eb211c80319c"
    user = _parts("user", _text("What is the weather in Barcelona?"))
    asked = _parts("assistant", _text("I will use the get_weather tool."),
                   {"type": "tool_call", "id": "fake-tool-call-id-1", "name": "get_weather",
                    "arguments": {"location": "Barcelona"}})
    result = '{"weather":"SUNNY","confidence":0.95}'
    answered = _parts("tool", {"type": "tool_call_response", "id": "fake-tool-call-id-1",
                               "response": result,
                               "_provider_metadata": {"toolName": "get_weather",
                                                      "isError": is_error}})

    def completion(sid, start, inputs, output, finish):
        return _span(trace, sid, "openai / gpt-4o", start, {
            "latitude.type": "completion", "gen_ai.operation.name": "completion",
            "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
            "gen_ai.request.temperature": 0.5,
            "gen_ai.system.instructions": json.dumps([
                {**_text("Think step by step about the user question:"),
                 "_provider_metadata": {"_known_fields": {"messageIndex": 0}}}]),
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps([output]),
            "gen_ai.usage.input_tokens": 57, "gen_ai.usage.output_tokens": 19,
            "gen_ai.response.model": "gpt-4o", "gen_ai.response.finish_reasons": [finish]},
            "prompt")

    spans = [
        completion("c1", 1000, [user], asked, "tool_calls"),
        _span(trace, "tool", "get_weather", 2000, {
            "latitude.type": "tool", "gen_ai.operation.name": "tool",
            "gen_ai.tool.name": "get_weather", "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": "fake-tool-call-id-1",
            "gen_ai.tool.call.arguments": '{"location":"Barcelona"}',
            "gen_ai.tool.result.value": result, "gen_ai.tool.result.is_error": is_error},
            "prompt"),
        _span(trace, "prompt", "prompt-fake-document-uuid", 0, {
            "latitude.type": "prompt",
            "gen_ai.request.parameters": '{"question":"What is the weather in Barcelona?"}'},
            end=10**6),
    ]
    if final_call:
        spans.insert(2, completion("c2", 3000, [user, asked, answered],
                                   _parts("assistant", _text("It is sunny.")), "stop"))
    return {"resourceSpans": [{"scopeSpans": [
        {"scope": {"name": "so.latitude.instrumentation.latitude"}, "spans": spans}]}]}


def test_latitude_tool_span_answers_its_call(tmp_path):
    for final_call in (True, False):  # the result from the tool span alone, too
        rows = otel_rows(tmp_path / str(final_call), _latitude(final_call))
        assert calls_of(rows) == [("get_weather", {"location": "Barcelona"},
                                   {"weather": "SUNNY", "confidence": 0.95}, None)]
        assert messages_of(rows) == (["It is sunny."] if final_call else [])
        history = json.loads(rows[0]["state"]["conversation_history"])
        assert [(m["actor"], m["content"]) for m in history] == [
            ("system", "Think step by step about the user question:"),
            ("user", "What is the weather in Barcelona?")]


def test_latitude_tool_error_flag(tmp_path):
    rows = otel_rows(tmp_path, _latitude(False, is_error=True))
    (_, _, _, error), = calls_of(rows)
    assert error


# --- Google ADK (Python 2.10), schema v2, content as events only ----------------------------

def _any(v):
    """A value as OTLP's AnyValue, objects as kvlists (as the SDK's log exporter writes
    them)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_any(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any(x)} for k, x in v.items()]}}
    return {"stringValue": v}


# agentevals-dev/agentevals tests/fixtures/otlp/adk_py/v2_event_only/S6a.json (an ADK
# recording): `call_llm` around `generate_content <model>`, which holds no content; the
# content is a `gen_ai.client.inference.operation.details` log record (`eventName`, no
# body, no timeUnixNano) whose attributes are kvlists, the system prompt among them. The
# tool raises: error status, `gen_ai.tool.call.id` and the response are ADK's placeholder
# "<not specified>".
def test_adk_event_only_content_and_a_tool_that_raised(tmp_path):
    trace, conv = "ef5a5f3923797e8392b099d0ba1ae4b8", "sess-S6a-v2_event_only"
    system = 'Answer stock questions using tools.\n\nYou are an agent named "stock_agent".'
    failed = {"message": "ValueError: ticker not found: XYZ", "code": 2}
    spans = [
        _span(trace, "generate", "generate_content gemini-2.5-flash", 1200, {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": "gemini-2.5-flash", "gen_ai.agent.name": "stock_agent",
            "gen_ai.conversation.id": conv, "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 18, "gen_ai.usage.output_tokens": 6}, "call_llm"),
        {**_span(trace, "tool", "execute_tool get_stock_price", 3000, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_stock_price",
            "gen_ai.tool.type": "FunctionTool", "error.type": "ValueError",
            "gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.llm_response": "{}",
            "gcp.vertex.agent.tool_call_args": '{"ticker": "XYZ"}',
            "gen_ai.tool.call.id": "<not specified>",
            "gcp.vertex.agent.tool_response": '{"result": "<not specified>"}'}, "agent"),
         "status": failed, "events": [{"timeUnixNano": "3500", "name": "exception",
                                       "attributes": kv({"exception.type": "ValueError"})}]},
        _span(trace, "call_llm", "call_llm", 1000, {
            "gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.5-flash",
            "gcp.vertex.agent.session_id": conv,
            "gcp.vertex.agent.llm_request": json.dumps({
                "model": "gemini-2.5-flash", "config": {"system_instruction": system},
                "contents": [{"parts": [{"text": "What is the price of XYZ?"}],
                              "role": "user"}]}),
            "gcp.vertex.agent.llm_response": json.dumps({"content": {"parts": [
                {"function_call": {"args": {"ticker": "XYZ"}, "name": "get_stock_price"}}],
                "role": "model"}, "finish_reason": "STOP"}),
            "gen_ai.usage.input_tokens": 18, "gen_ai.usage.output_tokens": 6}, "agent",
            end=4000),
        {**_span(trace, "agent", "invoke_agent stock_agent", 500, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "stock_agent",
            "gen_ai.conversation.id": conv}, "workflow", end=5000), "status": failed},
        {**_span(trace, "workflow", "invoke_workflow stock_agent", 0, {
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.conversation.id": conv},
            end=6000), "status": failed},
    ]
    details = {
        "gen_ai.agent.name": "stock_agent", "gen_ai.conversation.id": conv,
        "gen_ai.usage.input_tokens": 18, "gen_ai.usage.output_tokens": 6,
        "gen_ai.input.messages": [{"role": "user", "parts": [
            {"content": "What is the price of XYZ?", "type": "text"}]}],
        "gen_ai.system_instructions": [{"content": system, "type": "text"}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [
            {"id": "get_stock_price_0", "name": "get_stock_price",
             "arguments": {"ticker": "XYZ"}, "type": "tool_call"}], "finish_reason": "stop"}]}
    log = {"attributes": [{"key": k, "value": _any(v)} for k, v in details.items()],
           "flags": 3, "traceId": trace, "spanId": "generate",
           "observedTimeUnixNano": "1300",
           "eventName": "gen_ai.client.inference.operation.details"}
    rows = otel_rows(tmp_path, {
        "resourceSpans": [{"scopeSpans": [{"scope": {"name": "gcp.vertex.agent"},
                                           "spans": spans}]}],
        "resourceLogs": [{"scopeLogs": [{"scope": {"name": "gcp.vertex.agent"},
                                         "logRecords": [log]}]}]})
    (name, args, result, error), = calls_of(rows)
    assert (name, args, result) == ("get_stock_price", {"ticker": "XYZ"}, None)
    assert "ticker not found" in error
    assert rows[0]["call_id"] == "get_stock_price_0"
    history = json.loads(rows[0]["state"]["conversation_history"])
    assert [(m["actor"], m["content"]) for m in history] == [
        ("system", system), ("user", "What is the price of XYZ?")]


# --- Strands Agents, legacy conventions: span events holding Bedrock Converse blocks ---------

# strands-agents/sdk-python src/strands/telemetry/tracer.py (the legacy conventions, its
# default): `chat` spans carry `gen_ai.system.message` / `gen_ai.user.message` /
# `gen_ai.assistant.message` / `gen_ai.tool.message` events whose `content` is the JSON of
# Bedrock Converse blocks ({text}, {toolUse}, {toolResult}) and a `gen_ai.choice` event
# whose `message` is the answer's blocks; `execute_tool <name>` spans hold the arguments in
# a `gen_ai.tool.message` event and the result blocks in a `gen_ai.choice` event;
# `execute_event_loop_cycle` spans wrap each cycle (their own choice event repeats it).
def _strands(second_cycle: bool, status: str = "success") -> dict:
    trace = "f4cf2a05ed08d95e68042022f5395afe"

    def ev(name, t, **attrs):
        return {"name": name, "timeUnixNano": str(t), "attributes": kv(attrs)}

    user = json.dumps([{"text": "What is the weather in Paris?"}])
    asked = json.dumps([{"text": "Let me check."}, {"toolUse": {
        "toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}])
    answered = json.dumps([{"toolResult": {"toolUseId": "tooluse_1", "status": status,
                                           "content": [{"text": "sunny, 21C"}]}}])
    system = json.dumps([{"text": "You are a weather bot."}])
    common = {"gen_ai.system": "strands-agents", "gen_ai.agent.name": "Strands Agents"}

    def span(sid, parent, name, start, end, attrs, events):
        return {**_span(trace, sid, name, start, attrs | common, parent, end),
                "events": events}

    def chat(sid, parent, start, history, answer, finish):
        return span(sid, parent, "chat", start, start + 20, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4",
            "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 9},
            [ev("gen_ai.system.message", start, content=system),
             *(ev(name, start, content=c) for name, c in history),
             ev("gen_ai.choice", start + 19, finish_reason=finish, message=answer)])

    spans = [
        span("agent", None, "invoke_agent Strands Agents", 0, 100, {
            "gen_ai.operation.name": "invoke_agent"}, [
            ev("gen_ai.user.message", 1, content=user),
            ev("gen_ai.choice", 99, message="It is sunny.\n", finish_reason="end_turn")]),
        span("cycle1", "agent", "execute_event_loop_cycle", 2, 50, {
            "gen_ai.operation.name": "execute_event_loop_cycle"}, [
            ev("gen_ai.user.message", 2, content=user),
            ev("gen_ai.choice", 49, message=asked, **{"tool.result": answered})]),
        chat("chat1", "cycle1", 3, [("gen_ai.user.message", user)], asked, "tool_use"),
        {**span("tool", "cycle1", "execute_tool get_weather", 31, 48, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "tooluse_1", "gen_ai.tool.status": status}, [
            ev("gen_ai.tool.message", 31, role="tool", content='{"city": "Paris"}',
               id="tooluse_1"),
            ev("gen_ai.choice", 47, message=json.dumps([{"text": "sunny, 21C"}]),
               id="tooluse_1")]),
         "status": {"code": 2, "message": "sunny, 21C"} if status == "error" else {"code": 1}},
    ]
    if second_cycle:
        spans += [
            span("cycle2", "agent", "execute_event_loop_cycle", 51, 99, {
                "gen_ai.operation.name": "execute_event_loop_cycle"}, []),
            chat("chat2", "cycle2", 52, [("gen_ai.user.message", user),
                                         ("gen_ai.assistant.message", asked),
                                         ("gen_ai.tool.message", answered)],
                 json.dumps([{"text": "It is sunny."}]), "end_turn")]
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "strands.telemetry.tracer"},
                                               "spans": spans}]}]}


def test_strands_legacy_events_with_bedrock_blocks(tmp_path):
    for second in (True, False):  # the result from the tool span's events alone, too
        rows = otel_rows(tmp_path / str(second), _strands(second))
        assert calls_of(rows) == [("get_weather", {"city": "Paris"}, "sunny, 21C", None)]
        assert rows[0]["action"]["content"] == "Let me check."
        assert messages_of(rows) == (["It is sunny."] if second else [])
        history = json.loads(rows[0]["state"]["conversation_history"])
        assert [(m["actor"], m["content"]) for m in history] == [
            ("system", "You are a weather bot."), ("user", "What is the weather in Paris?")]


def test_strands_tool_error_status(tmp_path):
    rows = otel_rows(tmp_path, _strands(True, status="error"))
    (_, _, result, error), = calls_of(rows)
    assert result == "sunny, 21C" and error


# --- OpenLLMetry's Bedrock Converse spans, three generations ---------------------------------

# traceloop/openllmetry packages/opentelemetry-instrumentation-bedrock/.../span_utils.py
# (set_converse_input_prompt_span_attributes, set_converse_response_span_attributes), as
# it was written over time: (1) indexed, `gen_ai.prompt.N.content` the JSON of the
# message's Converse blocks and `gen_ai.completion.N.content` each answer block's text (a
# toolUse block leaves nothing); (2) `gen_ai.input.messages` of `{role, content: <the
# blocks' JSON>}`; (3) typed parts, a tool_call_response's `response` the JSON of the
# result's blocks. In (1) and (2) the tool call is only in the next call's input.
@pytest.mark.parametrize("generation", ["indexed", "content_json", "parts"])
@pytest.mark.parametrize("long_input", [False, True])
def test_openllmetry_bedrock_converse(tmp_path, generation, long_input):
    trace = "ab" * 16
    question = "What is the weather in Paris?" + (" Please." * 2000 if long_input else "")
    user = [{"text": question}]
    asked = [{"text": "Let me check."}, {"toolUse": {
        "toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}]
    answered = [{"toolResult": {"toolUseId": "tooluse_1", "status": "success",
                                "content": [{"text": "sunny"}]}}]
    system = "You are a weather bot."

    def parts(blocks):
        out = []
        for b in blocks:
            if "text" in b:
                out.append({"type": "text", "content": b["text"]})
            elif "toolUse" in b:
                u = b["toolUse"]
                out.append({"type": "tool_call", "name": u["name"], "id": u["toolUseId"],
                            "arguments": u["input"]})
            else:
                r = b["toolResult"]
                out.append({"type": "tool_call_response", "id": r["toolUseId"],
                            "response": json.dumps(r["content"])})
        return out

    def attrs(history, answer, calls):
        a = {"gen_ai.system": "bedrock", "gen_ai.request.model": "anthropic.claude-3-haiku",
             "llm.request.type": "chat", "gen_ai.usage.input_tokens": 10,
             "gen_ai.usage.output_tokens": 5}
        if generation == "indexed":
            a |= {"gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": system}
            for n, (role, blocks) in enumerate(history, 1):
                a |= {f"gen_ai.prompt.{n}.role": role,
                      f"gen_ai.prompt.{n}.content": json.dumps(blocks)}
            a |= {"gen_ai.completion.0.role": "assistant",
                  "gen_ai.completion.0.content": answer}
        elif generation == "content_json":
            a["gen_ai.input.messages"] = json.dumps(
                [{"role": "system", "content": system}]
                + [{"role": role, "content": json.dumps(blocks)} for role, blocks in history])
            a["gen_ai.output.messages"] = json.dumps([{"role": "assistant",
                                                       "content": answer}])
        else:
            a["gen_ai.system_instructions"] = json.dumps([{"type": "text",
                                                           "content": system}])
            a["gen_ai.input.messages"] = json.dumps(
                [{"role": role, "parts": parts(blocks)} for role, blocks in history])
            a["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts(
                [{"text": answer}, *(asked[1:] if calls else [])])}])
        return a

    spans = [
        _span(trace, "root", "weather.workflow", 0, {"traceloop.span.kind": "workflow"},
              end=1000),
        _span(trace, "c1", "bedrock.converse", 100, attrs([("user", user)], "Let me check.",
                                                           True), "root"),
        _span(trace, "c2", "bedrock.converse", 300, attrs(
            [("user", user), ("assistant", asked), ("user", answered)], "It is sunny.",
            False), "root"),
    ]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [
        {"scope": {"name": "opentelemetry.instrumentation.bedrock"}, "spans": spans}]}]})
    assert calls_of(rows) == [("get_weather", {"city": "Paris"}, "sunny", None)]
    assert [r["action"]["content"] for r in rows] == ["Let me check.", "It is sunny."]
    history = json.loads(rows[0]["state"]["conversation_history"])
    assert [(m["actor"], m["content"]) for m in history] == [
        ("system", system), ("user", question)]


# --- Spring AI (Micrometer observations through the OTel bridge) -----------------------------

# spring-projects/spring-ai DefaultChatModelObservationConvention /
# DefaultToolCallingObservationConvention, its reference docs' observability tables: the
# chat model span `chat <model>` holds no content (Spring AI logs it, if anything); a tool
# span is `tool_call <name>` with `gen_ai.operation.name` "framework", `spring.ai.kind`
# "tool_call", `spring.ai.tool.definition.name` and, with tool content on,
# `spring.ai.tool.call.arguments` / `.result`. Tools run between two chat spans, siblings
# under the `spring_ai chat_client` span.
def test_spring_ai_tool_call_spans(tmp_path):
    trace = "12" * 16

    def chat(sid, start, finish):
        return _span(trace, sid, "chat gpt-4o", start, {
            "gen_ai.operation.name": "chat", "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 50,
            "gen_ai.usage.output_tokens": 10, "gen_ai.response.finish_reasons": [finish],
            "spring.ai.kind": "chat_model"}, "client")

    def tool(sid, start, city, result):
        return _span(trace, sid, "tool_call get_weather", start, {
            "gen_ai.operation.name": "framework", "gen_ai.system": "spring_ai",
            "spring.ai.kind": "tool_call", "spring.ai.tool.definition.name": "get_weather",
            "spring.ai.tool.call.arguments": json.dumps({"city": city}),
            "spring.ai.tool.call.result": result}, "client")

    spans = [
        _span(trace, "client", "spring_ai chat_client", 0, {
            "gen_ai.operation.name": "framework", "gen_ai.system": "spring_ai",
            "spring.ai.kind": "chat_client"}, end=10**6),
        chat("c1", 1000, "TOOL_CALLS"), tool("t1", 5000, "Paris", '"sunny"'),
        tool("t2", 5001, "Rome", '"rain"'), chat("c2", 9000, "STOP")]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert calls_of(rows) == [("get_weather", {"city": "Paris"}, '"sunny"', None),
                              ("get_weather", {"city": "Rome"}, '"rain"', None)]
    assert [r["action"]["type"] for r in rows] == ["tool_call", "tool_call", "message"]


# Spring AI's content, where it is on the span: a content filter's `gen_ai.prompt` /
# `gen_ai.completion` plain text (as the Langfuse guide for Spring AI sets them), and the
# 1.0 milestones' `gen_ai.content.prompt` / `.completion` events holding string arrays.
def test_spring_ai_prompt_and_completion_texts(tmp_path):
    trace = "12" * 16
    texts = {"arrayValue": {"values": [{"stringValue": "Weather in Paris?"}]}}
    answer = {"arrayValue": {"values": [{"stringValue": "Sunny in Paris."}]}}
    spans = [
        _span(trace, "c1", "chat gpt-4o", 1000, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt": "Weather in Paris?"}),
        _span(trace, "t1", "tool_call get_weather", 2000, {
            "gen_ai.operation.name": "framework", "spring.ai.kind": "tool_call",
            "spring.ai.tool.definition.name": "get_weather",
            "spring.ai.tool.call.arguments": '{"city": "Paris"}',
            "spring.ai.tool.call.result": '"sunny"'}),
        {**_span(trace, "c2", "chat gpt-4o", 3000, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}),
         "events": [{"name": "gen_ai.content.prompt", "timeUnixNano": "3000", "attributes": [
             {"key": "gen_ai.prompt", "value": texts}]},
            {"name": "gen_ai.content.completion", "timeUnixNano": "3500", "attributes": [
                {"key": "gen_ai.completion", "value": answer}]}]},
    ]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert calls_of(rows) == [("get_weather", {"city": "Paris"}, '"sunny"', None)]
    assert messages_of(rows) == ["Sunny in Paris."]
    assert rows[0]["state"]["user_goal"] == "Weather in Paris?"


# --- Claude Code's tracing, through kagent's Collector recipe --------------------------------

# agentevals-dev/agentevals tests/fixtures/otlp/kagent/v1.0.0-alpha9/claude_recipe_2turn.json
# (a recording; kagent's transform/claude_code recipe adds the gen_ai attributes):
# `claude_code.llm_request` model calls without content (usage, finish reasons), and per
# tool a `claude_code.tool` span (execute_tool, gen_ai.tool.name, gen_ai.tool.call.id;
# a Bash call's output in a `tool.output` event) around `claude_code.tool.blocked_on_user`
# and `claude_code.tool.execution` (same call id, no tool name; a failed call's error
# status is only there). Each tool starts while its model call's span is still open.
def test_claude_code_recipe_spans(tmp_path):
    trace = "43a0de1d38d205a54cb9f72a355c4110"
    resource = {"gen_ai.agent.name": "claude-test", "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-haiku-4-5", "session.id": "aa3151c4"}

    def span(sid, parent, name, start, end, attrs, **more):
        return {**_span(trace, sid, name, start, resource | attrs, parent, end), **more}

    def llm(sid, start, end, finish):
        return span(sid, "inter", "claude_code.llm_request", start, end, {
            "span.type": "llm_request", "gen_ai.operation.name": "chat",
            "gen_ai.response.finish_reasons": [finish], "gen_ai.usage.input_tokens": 23040,
            "gen_ai.usage.output_tokens": 212}, events=[{
                "name": "gen_ai.request.attempt", "timeUnixNano": str(start + 1),
                "attributes": kv({"attempt": 1})}])

    def tool(sid, start, end, name, call_id, failed=False, events=()):
        ids = {"tool_use_id": call_id, "gen_ai.tool.call.id": call_id}
        return [
            span(sid, "inter", "claude_code.tool", start, end, {
                "span.type": "tool", "tool_name": name, **ids,
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
                events=list(events)),
            span(sid + "b", sid, "claude_code.tool.blocked_on_user", start, start + 2, {
                "span.type": "tool.blocked_on_user", "decision": "unknown"}),
            span(sid + "x", sid, "claude_code.tool.execution", start + 3, end - 1, {
                "span.type": "tool.execution", **ids, "success": not failed},
                status={"code": 2, "message": "Shell command failed"} if failed
                else {"code": 1})]

    output = {"name": "tool.output", "timeUnixNano": "6334", "attributes": kv({
        "bash_command": "kubectl get pods", "output": "kubectl: command not found\n0"})}
    spans = [
        span("inter", None, "claude_code.interaction", 1000, 9000, {
            "span.type": "interaction", "user_prompt": "<REDACTED>"}),
        llm("l1", 1370, 4070, "tool_use"),
        *tool("t1", 4054, 4060, "ToolSearch", "toolu_01Q6"),
        llm("l2", 4085, 6323, "tool_use"),
        *tool("t2", 5846, 5886, "Bash", "toolu_01VN", failed=True),
        *tool("t3", 6315, 6334, "Bash", "toolu_01Er", events=[output]),
        llm("l3", 6400, 8000, "end_turn")]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [
        {"scope": {"name": "com.anthropic.claude_code.tracing"}, "spans": spans}]}]})
    assert [(name, result, error) for name, _, result, error in calls_of(rows)] == [
        ("ToolSearch", None, None), ("Bash", None, "Shell command failed"),
        ("Bash", "kubectl: command not found\n0", None)]
    assert [r["action"]["type"] for r in rows] == ["tool_call"] * 3 + ["message"]


# --- LiteLLM's OTel callback -----------------------------------------------------------------

# Grace/genai-interlingua, its demo samples generated from testdata/*/in.json ("captured
# from the real libraries"), the LiteLLM one: `litellm_request` writes
# `gen_ai.output.messages` as one assistant message with no parts, and the call only in
# the older indexed `gen_ai.completion.0.function_call.{name, arguments}` (the first call,
# no id); a `raw_gen_ai_request` child holds the provider's request and response as Python
# reprs.
def test_litellm_empty_output_message_and_indexed_function_call(tmp_path):
    trace = "89443148be1f25c7347a6825210c17cd"
    messages = [{"role": "system", "parts": [{"type": "text", "content": "Be a support agent."}]},
                {"role": "user", "parts": [{"type": "text", "content": "Where is A-1187?"}]}]
    spans = [
        _span(trace, "req", "litellm_request", 1000, {
            "gen_ai.request.model": "gpt-4o-mini", "llm.request.type": "completion",
            "gen_ai.system": "openai", "gen_ai.usage.input_tokens": 412,
            "gen_ai.usage.output_tokens": 27, "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [],
                                                   "finish_reason": "tool_calls"}]),
            "gen_ai.response.finish_reasons": '["tool_calls"]',
            "gen_ai.completion.0.function_call.arguments": '{"order_id": "A-1187"}',
            "gen_ai.completion.0.function_call.name": "lookup_order"}, end=5000),
        _span(trace, "raw", "raw_gen_ai_request", 1100, {
            "llm.openai.messages": "[{'role': 'user', 'content': 'Where is A-1187?'}]",
            "llm.openai.choices": "[{'finish_reason': 'tool_calls'}]"}, "req", end=4900),
    ]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "litellm"},
                                                                   "spans": spans}]}]})
    assert calls_of(rows) == [("lookup_order", {"order_id": "A-1187"}, None, None)]


# --- Braintrust's OTel spans -----------------------------------------------------------------

# Grace/genai-interlingua demo samples, the Braintrust capture (braintrust-python-otel
# 0.37): the model call's messages only in `braintrust.input_json` / `.output_json`
# (OpenAI chat messages), its kind in `braintrust.span_attributes` ({"type": "llm"}); a
# traced tool is {"type": "tool"} with its arguments and return value in the same keys.
def test_braintrust_llm_and_tool_spans(tmp_path):
    trace = "6d063eab821e3b0554ca3f58087069cd"
    system = {"role": "system", "content": "You are a support agent."}
    user = {"role": "user", "content": "Where is order A-1187?"}
    asked = {"content": None, "refusal": None, "role": "assistant", "function_call": None,
             "tool_calls": [{"id": "call_9RtYbK2mXqLp", "type": "function", "function": {
                 "arguments": '{"order_id": "A-1187"}', "name": "lookup_order"}}]}
    answered = {"role": "tool", "tool_call_id": "call_9RtYbK2mXqLp", "content": "in transit"}

    def llm(sid, start, inputs, output):
        return _span(trace, sid, "support_triage", start, {
            "braintrust.input_json": json.dumps(inputs),
            "braintrust.output_json": json.dumps(output),
            "braintrust.metrics": '{"prompt_tokens": 412, "completion_tokens": 27}',
            "braintrust.span_attributes": '{"type": "llm", "name": "support_triage"}',
            "gen_ai.request.model": "gpt-4o-mini"}, "root")

    spans = [
        _span(trace, "root", "agent", 0, {
            "braintrust.span_attributes": '{"type": "task", "name": "agent"}'}, end=10**6),
        llm("c1", 1000, [system, user], [asked]),
        _span(trace, "t1", "lookup_order", 2000, {
            "braintrust.input_json": '{"order_id": "A-1187"}',
            "braintrust.output_json": '"in transit"',
            "braintrust.span_attributes": '{"type": "tool", "name": "lookup_order"}'},
            "root"),
        llm("c2", 3000, [system, user, asked, answered],
            [{"role": "assistant", "content": "It is in transit."}]),
    ]
    rows = otel_rows(tmp_path, {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert calls_of(rows) == [("lookup_order", {"order_id": "A-1187"}, "in transit", None)]
    assert messages_of(rows) == ["It is in transit."]
