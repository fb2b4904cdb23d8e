"""OTel exports of the common instrumentations, each in its producer's own attributes (the
names from its published telemetry docs and source), read end to end: every tool call
answered by its tool span, nothing quarantined, the final answer kept.

OpenLLMetry / traceloop (`traceloop.span.kind = tool`, `traceloop.entity.*`), Logfire /
pydantic-ai (the `events` attribute, `running tool:` spans), the Vercel AI SDK (`ai.*`),
Google ADK (`call_llm`, `gcp.vertex.agent.*`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adapter_helpers import calls_of, kv, messages_of, otel_rows

TRACE = "cd" * 16


def _span(sid: str, name: str, start: int, attrs: dict, parent: str | None = None) -> dict:
    return {"traceId": TRACE, "spanId": sid, "parentSpanId": parent or "", "name": name,
            "startTimeUnixNano": str(start * 10**9), "endTimeUnixNano": str(start * 10**9 + 5),
            "attributes": kv(attrs)}


def _jaeger(spans: list[dict]) -> dict:
    """The same spans as Jaeger's query API answers them (tags typed, microseconds)."""
    def tag(kv):
        (kind, value), = kv["value"].items()
        return {"key": kv["key"], "type": "int64" if kind == "intValue" else "string",
                "value": int(value) if kind == "intValue" else value}
    return {"data": [{"traceID": TRACE, "processes": {"p1": {"serviceName": "svc"}}, "spans": [
        {"traceID": TRACE, "spanID": s["spanId"], "operationName": s["name"],
         "references": [{"refType": "CHILD_OF", "traceID": TRACE, "spanID": s["parentSpanId"]}]
         if s["parentSpanId"] else [], "startTime": int(s["startTimeUnixNano"]) // 1000,
         "duration": 1, "tags": [tag(kv) for kv in s["attributes"]], "logs": [],
         "processID": "p1"} for s in spans]}]}


def _read(tmp_path: Path, spans: list[dict], container: str = "otlp"):
    return otel_rows(tmp_path, _jaeger(spans) if container == "jaeger" else
                     {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


# --- OpenLLMetry / traceloop -------------------------------------------------------------

def _indexed(prefix: str, message: dict) -> dict:
    """Generation 1's flat attributes of one message: `<prefix>.<key>`, and each tool call's
    fields as `<prefix>.tool_calls.<j>.<field>`."""
    attrs = {}
    for key, v in message.items():
        if key == "tool_calls":
            for j, c in enumerate(v):
                for f, x in c.items():
                    attrs[f"{prefix}.tool_calls.{j}.{f}"] = x
        else:
            attrs[f"{prefix}.{key}"] = v
    return attrs


def _openllmetry_chat(sid: str, start: int, prompt: list[dict], completion: dict) -> dict:
    attrs = {"llm.request.type": "chat", "gen_ai.system": "openai",
             "gen_ai.request.model": "gpt-4o"}
    for n, m in enumerate(prompt):
        attrs |= _indexed(f"gen_ai.prompt.{n}", m)
    attrs |= _indexed("gen_ai.completion.0", completion)
    return _span(sid, "openai.chat", start, attrs, "wf")


WEATHER_CALLS = [{"id": "call_1", "name": "get_weather", "arguments": '{"location": "Paris"}'},
                 {"id": "call_2", "name": "get_weather", "arguments": '{"location": "Rome"}'}]


@pytest.mark.parametrize("instrumented", ["tool decorator", "langchain tool"])
def test_openllmetry_tool_spans_answer_their_calls(tmp_path, instrumented):
    def tool(sid, start, city, result):
        if instrumented == "tool decorator":  # @tool: {args, kwargs}, json.dumps(return)
            entity_in = {"args": [], "kwargs": {"location": city}}
            entity_out = result
        else:  # the LangChain callback: {input_str, inputs, ...}, {output: ToolMessage}
            entity_in = {"input_str": json.dumps({"location": city}), "tags": [],
                         "metadata": {}, "inputs": {"location": city}, "kwargs": {}}
            entity_out = {"output": {"lc": 1, "type": "constructor", "id": [
                "langchain", "schema", "messages", "ToolMessage"], "kwargs": {
                "content": result, "type": "tool", "tool_call_id": "x"}}, "kwargs": {}}
        return _span(sid, "get_weather.tool", start, {
            "traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
            "traceloop.entity.input": json.dumps(entity_in),
            "traceloop.entity.output": json.dumps(entity_out)}, "wf")

    question = [{"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "Weather in Paris and Rome?"}]
    spans = [
        _span("wf", "weather.workflow", 0, {"traceloop.span.kind": "workflow",
                                            "traceloop.entity.name": "weather"}),
        _openllmetry_chat("c1", 1, question, {"role": "assistant",
                                              "finish_reason": "tool_calls",
                                              "tool_calls": WEATHER_CALLS}),
        tool("t1", 2, "Paris", "rainy"),
        tool("t2", 3, "Rome", "sunny"),
        _openllmetry_chat("c2", 4, [*question, {"role": "assistant",
                                                "tool_calls": WEATHER_CALLS},
                                    {"role": "tool", "tool_call_id": "call_1",
                                     "content": "rainy"},
                                    {"role": "tool", "tool_call_id": "call_2",
                                     "content": "sunny"}],
                          {"role": "assistant", "content": "Paris rainy, Rome sunny."}),
    ]
    rows = _read(tmp_path, spans)
    assert calls_of(rows) == [("get_weather", {"location": "Paris"}, "rainy", None),
                              ("get_weather", {"location": "Rome"}, "sunny", None)]
    assert messages_of(rows) == ["Paris rainy, Rome sunny."] and len(rows) == 3


# --- Logfire / pydantic-ai ---------------------------------------------------------------

@pytest.mark.parametrize("container", ["otlp", "jaeger"])
def test_logfire_events_attribute_and_running_tool_spans(tmp_path, container):
    call = {"id": "call_p", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    user = {"event.name": "gen_ai.user.message", "content": "Weather in Paris?",
            "role": "user", "gen_ai.system": "openai"}
    first = [{"event.name": "gen_ai.system.message", "content": "Be brief.",
              "role": "system"}, user,
             {"event.name": "gen_ai.choice", "index": 0,
              "message": {"role": "assistant", "tool_calls": [call]}}]
    second = [user, {"event.name": "gen_ai.assistant.message", "role": "assistant",
                     "tool_calls": [call]},
              {"event.name": "gen_ai.tool.message", "role": "tool", "id": "call_p",
               "name": "get_weather", "content": "rainy"},
              {"event.name": "gen_ai.choice", "index": 0,
               "message": {"role": "assistant", "content": "Rainy."}}]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o", "logfire.span_type": "span"}
    spans = [
        _span("ar", "agent run", 0, {"agent_name": "agent", "logfire.msg": "agent run"}),
        _span("c1", "chat gpt-4o", 1, {**chat, "events": json.dumps(first)}, "ar"),
        _span("t1", "running tool: get_weather", 2, {
            "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_p",
            "tool_arguments": '{"city": "Paris"}', "tool_response": "rainy",
            "logfire.msg": "running tool: get_weather"}, "ar"),
        _span("c2", "chat gpt-4o", 3, {**chat, "events": json.dumps(second)}, "ar"),
    ]
    rows = _read(tmp_path, spans, container)
    assert calls_of(rows) == [("get_weather", {"city": "Paris"}, "rainy", None)]
    assert messages_of(rows) == ["Rainy."] and len(rows) == 2
    assert rows[0]["state"]["user_goal"] == "Weather in Paris?"


# --- Vercel AI SDK -----------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v5", "v4"])
def test_vercel_ai_sdk_spans(tmp_path, version):
    args = {"city": "Paris"}
    if version == "v5":  # toolCalls[].input (object), tool-result `output: {type, value}`
        response_call = {"toolCallId": "call_v", "toolName": "get_weather", "input": args}
        prompt_call = {"type": "tool-call", "toolCallId": "call_v", "toolName": "get_weather",
                       "input": args}
        prompt_result = {"type": "tool-result", "toolCallId": "call_v",
                         "toolName": "get_weather", "output": {"type": "text",
                                                               "value": "rainy"}}
    else:  # toolCalls[].args (JSON text), tool-result `result`
        response_call = {"toolCallType": "function", "toolCallId": "call_v",
                         "toolName": "get_weather", "args": json.dumps(args)}
        prompt_call = {"type": "tool-call", "toolCallId": "call_v", "toolName": "get_weather",
                       "args": args}
        prompt_result = {"type": "tool-result", "toolCallId": "call_v",
                         "toolName": "get_weather", "result": "rainy"}
    question = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}]
    step = {"operation.name": "ai.generateText.doGenerate",
            "ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o",
            "ai.model.provider": "openai.chat", "gen_ai.system": "openai.chat",
            "gen_ai.request.model": "gpt-4o"}
    spans = [
        _span("g", "ai.generateText", 0, {"operation.name": "ai.generateText",
                                          "ai.operationId": "ai.generateText",
                                          "ai.prompt": '{"prompt": "Weather in Paris?"}',
                                          "ai.response.text": "Rainy."}),
        _span("s1", "ai.generateText.doGenerate", 1, {
            **step, "ai.prompt.messages": json.dumps(question),
            "ai.response.toolCalls": json.dumps([response_call]),
            "ai.response.finishReason": "tool-calls"}, "g"),
        _span("t", "ai.toolCall", 2, {
            "operation.name": "ai.toolCall", "ai.operationId": "ai.toolCall",
            "ai.toolCall.name": "get_weather", "ai.toolCall.id": "call_v",
            "ai.toolCall.args": json.dumps(args), "ai.toolCall.result": json.dumps("rainy")},
            "g"),
        _span("s2", "ai.generateText.doGenerate", 3, {
            **step, "ai.prompt.messages": json.dumps([
                *question, {"role": "assistant", "content": [prompt_call]},
                {"role": "tool", "content": [prompt_result]}]),
            "ai.response.text": "Rainy.", "ai.response.finishReason": "stop"}, "g"),
    ]
    rows = _read(tmp_path, spans)
    assert calls_of(rows) == [("get_weather", args, "rainy", None)]
    assert messages_of(rows) == ["Rainy."] and len(rows) == 2
    assert rows[0]["state"]["user_goal"] == "Weather in Paris?"


# --- Google ADK --------------------------------------------------------------------------

def _call_llm(sid: str, start: int, contents: list, content: dict, usage: bool) -> dict:
    attrs = {"gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.0-flash",
             "gcp.vertex.agent.invocation_id": "e-1", "gcp.vertex.agent.session_id": "s-1",
             "gcp.vertex.agent.llm_request": json.dumps({
                 "model": "gemini-2.0-flash", "contents": contents,
                 "config": {"system_instruction": "You tell the weather."}}),
             "gcp.vertex.agent.llm_response": json.dumps({"content": content})}
    if usage:
        attrs |= {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}
    return _span(sid, "call_llm", start, attrs, "ag")


@pytest.mark.parametrize("tool", ["function", "mcp", "mcp error"])
def test_google_adk_spans(tmp_path, tool):
    call = {"function_call": {"id": "adk-1", "name": "get_weather", "args": {"city": "Paris"}}}
    response = {"result": "rainy"} if tool == "function" else {
        "content": [{"type": "text", "text": "rainy"}], "isError": tool == "mcp error"}
    question = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    spans = [
        _span("ag", "invoke_agent weather_agent", 0, {"gen_ai.operation.name": "invoke_agent",
                                                      "gen_ai.agent.name": "weather_agent"}),
        _call_llm("l1", 1, [question], {"role": "model", "parts": [call]}, usage=True),
        _span("t", "execute_tool get_weather", 2, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "adk-1",
            "gcp.vertex.agent.tool_call_args": json.dumps({"city": "Paris"}),
            "gcp.vertex.agent.tool_response": json.dumps(response)}, "ag"),
        # the last model call has no usage attributes: it is still a model call
        _call_llm("l2", 3, [question, {"role": "model", "parts": [call]}, {
            "role": "user", "parts": [{"function_response": {
                "id": "adk-1", "name": "get_weather", "response": response}}]}],
            {"role": "model", "parts": [{"text": "Rainy."}]}, usage=False),
    ]
    rows = _read(tmp_path, spans)
    expected = {"function": {"result": "rainy"}, "mcp": "rainy", "mcp error": "rainy"}[tool]
    assert calls_of(rows) == [("get_weather", {"city": "Paris"}, expected,
                               "rainy" if tool == "mcp error" else None)]
    assert messages_of(rows) == ["Rainy."] and len(rows) == 2
    assert rows[0]["state"]["user_goal"] == "Weather in Paris?"


def test_vercel_generate_object_answer_is_the_object(tmp_path):
    step = {"ai.operationId": "ai.generateObject.doGenerate", "ai.model.id": "gpt-4o",
            "ai.prompt.messages": json.dumps([{"role": "user", "content": [
                {"type": "text", "text": "A city?"}]}]),
            "ai.response.object": json.dumps({"city": "Paris"})}
    rows = _read(tmp_path, [_span("g", "ai.generateObject", 0,
                                  {"ai.operationId": "ai.generateObject"}),
                            _span("s", "ai.generateObject.doGenerate", 1, step, "g")])
    assert calls_of(rows) == [] and messages_of(rows) == ['{"city": "Paris"}']
