"""OpenAI-chat shapes real producers write that the first reader missed, each built in
code from the public file or documentation it names: a LangChain message dump saved as a
bare JSON list, a logged chat completion call (`{request, response}`), OpenPipe's request
log export (`{input, output, tags}`, tool call ids left empty)."""

from __future__ import annotations

import json
from pathlib import Path

from tracerl.data.formats import detect_format
from tracerl.data.ingest import ingest
from tracerl.io.fileio import read_table


def _ingest(tmp_path: Path, path: Path):
    out = tmp_path / "out"
    summary = ingest([path], out, max_bad_fraction=1.0)
    rows = read_table(out / "steps").to_pylist() if summary.rows else []
    quarantine = [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]
    assert summary.read == summary.accepted + summary.quarantined
    return summary, rows, quarantine


def _call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def test_a_langchain_message_dump_as_a_bare_list_is_one_conversation(tmp_path):
    """Model dumps (`[m.model_dump() for m in state["messages"]]`): `type` human | ai |
    tool, no `role`. Read as one conversation, not each message as a record of its own
    (which quarantined all of them)."""
    messages = [
        {"type": "human", "content": "hi", "id": "1", "additional_kwargs": {}},
        {"type": "ai", "content": "", "id": "run-1",
         "tool_calls": [{"name": "search", "args": {"q": "x"}, "id": "call_a",
                         "type": "tool_call"}],
         "additional_kwargs": {"tool_calls": [_call("call_a", "search", '{"q": "x"}')]},
         "response_metadata": {"finish_reason": "tool_calls"},
         "usage_metadata": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}},
        {"type": "tool", "content": "result", "name": "search", "tool_call_id": "call_a",
         "id": "2", "status": "success"},
        {"type": "ai", "content": "done", "id": "run-2"}]
    path = tmp_path / "lc.json"
    path.write_text(json.dumps(messages))
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    assert [(r["action"]["type"], r["action"]["tool"], r["call_id"]) for r in rows] == [
        ("tool_call", "search", "call_a"), ("message", None, None)]
    assert json.loads(rows[0]["observation"]["tool_result"]) == "result"
    assert rows[0]["state"]["user_goal"] == "hi"


def test_a_logged_chat_completion_call(tmp_path):
    """`{"timestamp", "request": <create params>, "response": <ChatCompletion>}` per line,
    as hand-rolled call loggers and gateways write (e.g. sco3/noveum-ai-gateway
    docs/logs.md): the request's messages, then the first choice's message."""
    line = {"timestamp": 1733000000.5,
            "request": {"model": "gpt-4o", "temperature": 0,
                        "messages": [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "Weather in Paris?"}],
                        "tools": [{"type": "function",
                                   "function": {"name": "weather", "parameters": {}}}]},
            "response": {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
                         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                             "role": "assistant", "content": None, "refusal": None,
                             "tool_calls": [_call("call_1", "weather", '{"city": "Paris"}')]}}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 3}}}
    path = tmp_path / "openai_calls.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert detect_format(path) == "openai-chat"
    summary, rows, _ = _ingest(tmp_path, path)
    assert (summary.accepted, len(rows)) == (1, 1)
    assert (rows[0]["action"]["tool"], json.loads(rows[0]["action"]["arguments"])) == (
        "weather", {"city": "Paris"})
    assert rows[0]["state"]["available_tools"] == ["weather"]
    assert rows[0]["state"]["user_goal"] == "Weather in Paris?"
    episode = json.loads(rows[0]["extra"])["episode"]
    assert episode["timestamp"] == 1733000000.5
    assert episode["request"] == {"model": "gpt-4o", "temperature": 0}
    assert episode["response"]["usage"] == {"prompt_tokens": 5, "completion_tokens": 3}


def test_openpipe_request_log_export(tmp_path):
    """OpenPipe's export (docs.openpipe.ai features/request-logs/exporting-logs, its
    example lines): `input` the request, `output` the completion, `tags`; its parallel
    tool calls both have the id ""."""
    lines = [
        {"input": {"model": "openpipe:test-tool-calls-ft",
                   "tools": [{"type": "function", "function": {
                       "name": "get_current_weather", "parameters": {"type": "object"},
                       "description": "Get the current weather in a given location"}}],
                   "messages": [{"role": "system",
                                 "content": "tell me the weather in SF and Orlando"}]},
         "output": {"id": "c7670af0", "model": "openpipe:test-tool-calls-ft",
                    "object": "chat.completion", "created": 1702666185703,
                    "usage": {"total_tokens": 106, "prompt_tokens": 47,
                              "completion_tokens": 59},
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": None, "tool_calls": [
                            _call("", "get_current_weather",
                                  '{"location": "San Francisco, CA", "unit": "celsius"}'),
                            _call("", "get_current_weather",
                                  '{"location": "Orlando, FL", "unit": "celsius"}')]}}]},
         "tags": {"prompt_id": "test_sync_tool_calls_ft", "$sdk": "python"}},
        {"input": {"model": "openpipe:test-content-ft",
                   "messages": [{"role": "system", "content": "count to 3"}]},
         "output": {"id": "47116eaa", "object": "chat.completion", "choices": [
             {"index": 0, "message": {"role": "assistant", "content": "1, 2, 3"},
              "finish_reason": "stop"}]},
         "tags": {"prompt_id": "test_sync_content_ft"}}]
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (2, 2, [])
    assert [(r["episode_id"], r["action"]["tool"]) for r in rows] == [
        ("export.jsonl:1", "get_current_weather"), ("export.jsonl:1", "get_current_weather"),
        ("export.jsonl:2", None)]
    assert [json.loads(r["action"]["arguments"])["location"] for r in rows[:2]] == [
        "San Francisco, CA", "Orlando, FL"]
    assert rows[2]["action"]["content"] == "1, 2, 3" and rows[2]["done"]
    assert json.loads(rows[1]["extra"])["episode"]["tags"]["prompt_id"] \
        == "test_sync_tool_calls_ft"


def test_conversational_prompt_completion_records(tmp_path):
    """TRL's conversational prompt-completion format (trl docs "dataset formats"; the
    shape huggingface/trl tests/test_data_utils.py builds) as the verifiers library's
    `vf-eval` writes its results: `prompt` and `completion` message lists, `reward`, the
    rubric's metric columns, `task`, `answer`. One conversation: prompt, then completion."""
    record = {"example_id": 0, "task": "math", "answer": "4", "reward": 1.0,
              "correct_answer_reward_func": 1.0, "info": {},
              "prompt": [{"role": "system", "content": "Use the python tool."},
                         {"role": "user", "content": "2+2?"}],
              "completion": [
                  {"role": "assistant", "content": None, "tool_calls": [
                      _call("call_0", "python", '{"code": "print(2+2)"}')]},
                  {"role": "tool", "tool_call_id": "call_0", "content": "4"},
                  {"role": "assistant", "content": "4"}]}
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.accepted, quarantine) == (1, [])
    assert [(r["action"]["tool"], r["action"]["content"]) for r in rows] == [
        ("python", None), (None, "4")]
    assert rows[0]["state"]["user_goal"] == "2+2?"
    assert json.loads(rows[0]["observation"]["tool_result"]) == "4"  # text stays text
    assert rows[1]["reward"] == 1.0
    episode = json.loads(rows[1]["extra"])["episode"]
    assert "prompt" not in episode and "completion" not in episode
    assert episode["answer"] == "4" and episode["task"] == "math"


def test_sharegpt_conversations(tmp_path):
    """`conversations` of OpenAI messages, and ShareGPT turns (`from`/`value`) with
    LLaMA-Factory's tool-calling turns (its docs' example, also the shape of
    Salesforce's APIGen-MT dataset): `function_call` holds JSON text of `{name,
    arguments}`, `observation` its result; `tools` is JSON text, `system` a string."""
    lines = [
        {"id": "x1", "conversations": [{"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": "hello"}]},
        {"conversations": [
            {"from": "human", "value": "What's the weather in Beijing?"},
            {"from": "function_call",
             "value": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Beijing\"}}"},
            {"from": "observation", "value": "{\"city\": \"Beijing\", \"temperature\": 18}"},
            {"from": "gpt", "value": "It's sunny in Beijing today, around 18°C."}],
         "system": "You are a weather bot.",
         "tools": "[{\"name\": \"get_weather\", \"description\": \"Look up weather\", "
                  "\"parameters\": {\"type\": \"object\"}}]"},
        {"conversations": [{"from": "human", "value": "x"},
                           {"from": "function_call", "value": "retrieve_table()"}]}]
    path = tmp_path / "sharegpt.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (3, 2, 1)
    assert quarantine[0]["field"] == "/conversations/1/value"  # not {name, arguments}
    assert [(r["episode_id"], r["action"]["tool"], r["action"]["content"]) for r in rows] == [
        ("x1", None, "hello"), ("sharegpt.jsonl:2", "get_weather", None),
        ("sharegpt.jsonl:2", None, "It's sunny in Beijing today, around 18°C.")]
    assert json.loads(rows[1]["action"]["arguments"]) == {"city": "Beijing"}
    assert json.loads(rows[1]["observation"]["tool_result"]) == {"city": "Beijing",
                                                                 "temperature": 18}
    assert rows[1]["state"]["available_tools"] == ["get_weather"]
    history = json.loads(rows[1]["state"]["conversation_history"])
    assert [(e["actor"], e["content"]) for e in history] == [
        ("system", "You are a weather bot."), ("user", "What's the weather in Beijing?")]


def test_langchain_messages_to_dict_history(tmp_path):
    """langchain_core.messages.messages_to_dict (`{"type": message.type, "data":
    message.model_dump()}`, langchain_core/messages/base.py), what FileChatMessageHistory
    and the other chat-history stores write: each message under `data`."""
    def lc(kind: str, **data) -> dict:
        return {"type": kind, "data": {"additional_kwargs": {}, "response_metadata": {},
                                       "type": kind, "name": None, "id": None, **data}}
    history = [
        lc("human", content="weather in SF?", example=False),
        lc("ai", content="", id="run-1", example=False, invalid_tool_calls=[],
           tool_calls=[{"name": "get_weather", "args": {"city": "SF"}, "id": "call_1",
                        "type": "tool_call"}], usage_metadata=None),
        lc("tool", content="foggy", name="get_weather", tool_call_id="call_1",
           artifact=None, status="success"),
        lc("ai", content="It's foggy.", id="run-2", tool_calls=[], invalid_tool_calls=[])]
    path = tmp_path / "history.json"
    path.write_text(json.dumps(history))
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    assert [(r["action"]["tool"], r["call_id"], r["action"]["content"]) for r in rows] == [
        ("get_weather", "call_1", ""), (None, None, "It's foggy.")]
    assert json.loads(rows[0]["observation"]["tool_result"]) == "foggy"
    assert rows[0]["state"]["user_goal"] == "weather in SF?"


def test_messages_kept_as_json_text(tmp_path):
    """Datasets whose columns are strings keep the message list as JSON text (the
    Agent-Ark/Toucan-1.5M dataset card: `messages`, `available_tools` of dtype string;
    also CoderForge-Preview's `messages` and `tools`): parsed, then read as usual, here
    with Qwen-Agent's legacy `function_call` / `function` messages."""
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Find the weather in Oslo."},
                {"role": "assistant", "content": "", "function_call": {
                    "name": "weather-get_forecast", "arguments": "{\"city\": \"Oslo\"}"}},
                {"role": "function", "name": "weather-get_forecast", "content": "rain"},
                {"role": "assistant", "content": "Rain in Oslo."}]
    record = {"uuid": "u-1", "subset_name": "single-turn-original",
              "messages": json.dumps(messages),
              "available_tools": json.dumps([{"name": "weather-get_forecast"}]),
              "tools": json.dumps([{"type": "function", "function": {
                  "name": "weather-get_forecast", "parameters": {}}}])}
    path = tmp_path / "toucan.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps({"messages": "[{\"role\""}) + "\n")
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    assert quarantine[0]["field"] == "/messages"  # text that is not JSON says so
    assert [(r["action"]["tool"], r["action"]["content"]) for r in rows] == [
        ("weather-get_forecast", ""), (None, "Rain in Oslo.")]
    assert json.loads(rows[0]["observation"]["tool_result"]) == "rain"
    assert rows[0]["state"]["available_tools"] == ["weather-get_forecast"]
