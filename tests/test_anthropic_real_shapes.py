"""Anthropic Messages API responses as the API and its SDKs' recorded fixtures show them,
each shape built here in code from a real one (the source is named at each test)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.adapter_helpers import ingest_files
from tracerl.data.formats import detect_format


def _sse(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events))
    return path


def _start(msg_id: str) -> dict:
    return {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant",
        "model": "claude-3-7-sonnet-20250219", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 450, "output_tokens": 1}}}


def _delta(index: int, partial: str) -> dict:
    return {"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial}}


# anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/
# incomplete_partial_json_response.txt: a stream cut by max_tokens in the middle of a
# tool_use's input_json_delta pieces (and tool_use_invalid_json_response.txt: the pieces
# end as JSON that does not parse). Before: orjson raised out of the adapter, the whole
# ingest stopped with an internal error (exit 3). After: the call is kept, its arguments
# the text the model wrote (a JSON string), its id in extra.tool_input_not_json.
def test_a_stream_cut_inside_a_tool_input_keeps_the_call(tmp_path):
    path = _sse(tmp_path / "incomplete_partial_json_response.txt", [
        _start("msg_01UdjYBBipA9omjYhicnevgq"),
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "I'll create the file."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_01EK", "name": "make_file", "input": {}}},
        _delta(1, ""), _delta(1, '{"filename": "taxes.txt'),
        _delta(1, '", "lines_of_text": [\n"# GUIDE",\n'),
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens",
                                            "stop_sequence": None},
         "usage": {"output_tokens": 124}},
        {"type": "message_stop"}])
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    [row] = rows
    assert (row["action"]["type"], row["action"]["tool"], row["call_id"]) == (
        "tool_call", "make_file", "toolu_01EK")
    assert json.loads(row["action"]["arguments"]) == \
        '{"filename": "taxes.txt", "lines_of_text": [\n"# GUIDE",\n'
    extra = json.loads(row["extra"])
    assert extra["tool_input_not_json"] == ["toolu_01EK"]
    assert extra["stop_reason"] == "max_tokens"


# Server tools' results answer their server_tool_use by `tool_use_id`, and a failed search
# is `{type: web_search_tool_result_error, error_code}` (the Messages API's web search
# tool; litellm's test "Simulating actual Anthropic API response with web search" has the
# same response). Before: the result's id was read from `id` (absent), so it answered the
# first open call by order, and an error was a result like any other.
def test_server_tool_results_match_by_tool_use_id_and_errors_are_errors(tmp_path):
    path = tmp_path / "search.json"
    path.write_text(json.dumps({
        "id": "msg_web_search_test", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-20250514", "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 20,
                  "server_tool_use": {"web_search_requests": 2}},
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
             "input": {"query": "elephant weight"}},
            {"type": "server_tool_use", "id": "srvtoolu_02", "name": "web_search",
             "input": {"query": "elephant height"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_02",
             "content": {"type": "web_search_tool_result_error",
                         "error_code": "max_uses_exceeded"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
                {"type": "web_search_result", "url": "https://example.com/elephants",
                 "title": "African Elephant Facts", "encrypted_content": "Eq8B",
                 "page_age": "2024-01-15"}]},
            {"type": "text", "text": "About 6,000 kg.", "citations": [
                {"type": "web_search_result_location", "url": "https://example.com/elephants",
                 "title": "African Elephant Facts", "encrypted_index": "Eo8B",
                 "cited_text": "Adult African elephants weigh"}]}]}))
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    by_id = {r["call_id"]: r["observation"] for r in rows}
    assert by_id["srvtoolu_02"]["error"] == "max_uses_exceeded"
    assert by_id["srvtoolu_01"]["error"] is None
    assert json.loads(by_id["srvtoolu_01"]["tool_result"])[0]["title"] == \
        "African Elephant Facts"


# anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/
# server_tool_result_response.txt: a streamed response whose code_execution_tool_result
# answers a server_tool_use the response does not hold (as a response that continues a
# `pause_turn` does: the call was in the request). Before: the record was quarantined
# ("tool result for call id ... which no earlier tool call has"). After: an environment
# event, counted.
def test_a_server_tool_result_without_its_call_is_an_event(tmp_path):
    path = _sse(tmp_path / "server_tool_result_response.txt", [
        _start("msg_server_tool_result_test"),
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "server_tool_use", "id": "svu_web_001", "name": "web_search",
            "input": {}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "tu_client_001", "name": "ask_internal_tool",
            "caller": {"type": "direct"}, "input": {}}},
        _delta(1, '{"query":"test"}'),
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": "svu_web_001", "content": [
                {"type": "web_search_result", "url": "https://example.com",
                 "title": "Example Result", "encrypted_content": "enc_abc123",
                 "page_age": None}]}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": {
            "type": "code_execution_tool_result", "tool_use_id": "svu_code_001",
            "content": {"type": "code_execution_result", "return_code": 0,
                        "stdout": "hello", "stderr": "", "content": []}}},
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                            "stop_sequence": None},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"}])
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    assert summary.notes["results_without_call"] == 1
    web, client = rows
    assert (web["call_id"], client["call_id"]) == ("svu_web_001", "tu_client_001")
    assert json.loads(web["observation"]["tool_result"])[0]["url"] == "https://example.com"
    assert client["observation"]["tool_result"] is None
    assert json.loads(client["action"]["arguments"]) == {"query": "test"}
    [event] = client["observation"]["events"]
    assert (event["actor"], event["kind"], event["call_id"]) == (
        "environment", "tool_result", "svu_code_001")


# claude-trace (badlogic/lemmy apps/claude-trace/src/interceptor.ts) logs each call Claude
# Code makes as one line of .claude-trace/log-<time>.jsonl: {request: {timestamp, method,
# url, headers, body}, response: {timestamp, status_code, headers, body | body_raw},
# logged_at}; a streamed response (Claude Code streams) is `body_raw`, the event stream as
# text; a request whose response never came is written at exit with `response: null`;
# with --include-all-requests other endpoints (count_tokens) are logged too. Before: a
# streamed line was quarantined ("unknown role None"), so was the orphaned request, an
# error response and a count_tokens call.
def _trace_request(url: str = "https://api.anthropic.com/v1/messages?beta=true") -> dict:
    return {"timestamp": 1752000000.1, "method": "POST", "url": url,
            "headers": {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-...abcd"},
            "body": {"model": "claude-sonnet-4-20250514", "max_tokens": 32000,
                     "stream": True,
                     "system": [{"type": "text", "cache_control": {"type": "ephemeral"},
                                 "text": "You are Claude Code, Anthropic's official CLI."}],
                     "tools": [{"name": "Bash", "description": "Run a command",
                                "input_schema": {"type": "object"}}],
                     "messages": [
                         {"role": "user", "content": [{"type": "text", "text": "list"}]},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": "toolu_01", "name": "Bash",
                              "input": {"command": "ls"}}]},
                         {"role": "user", "content": [
                             {"tool_use_id": "toolu_01", "type": "tool_result",
                              "content": "a\nb", "is_error": False}]}]}}


def test_claude_trace_logs(tmp_path):
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [
        {**_start("msg_01X"), "message": {**_start("msg_01X")["message"],
                                          "model": "claude-sonnet-4-20250514"}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Two files."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 6}},
        {"type": "message_stop"}])
    lines = [
        {"request": _trace_request(), "response": {
            "timestamp": 1752000003.2, "status_code": 200,
            "headers": {"content-type": "text/event-stream; charset=utf-8"},
            "body_raw": stream}, "logged_at": "2025-07-08T18:40:03.300Z"},
        {"request": _trace_request("https://api.anthropic.com/v1/messages/count_tokens"),
         "response": {"timestamp": 1752000003.5, "status_code": 200,
                      "headers": {"content-type": "application/json"},
                      "body": {"input_tokens": 14213}},
         "logged_at": "2025-07-08T18:40:03.600Z"},
        {"request": _trace_request(), "response": {
            "timestamp": 1752000005.0, "status_code": 529,
            "headers": {"content-type": "application/json"},
            "body": {"type": "error", "error": {"type": "overloaded_error",
                                                "message": "Overloaded"}}},
         "logged_at": "2025-07-08T18:40:05.300Z"},
        {"request": _trace_request(), "response": None,
         "note": "ORPHANED_REQUEST - No matching response received",
         "logged_at": "2025-07-08T18:40:09.300Z"}]
    path = tmp_path / ".claude-trace" / "log-2025-07-08-18-40-00.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (3, 2, 1)
    assert summary.notes["calls_to_other_endpoints"] == 1
    assert quarantine[0]["source_record"] == 3
    assert quarantine[0]["reason"] == "the API call failed: overloaded_error, Overloaded"
    streamed = [r for r in rows if r["episode_id"].endswith(":1")]
    assert [(r["action"]["type"], r["action"]["content"] or r["action"]["tool"])
            for r in streamed] == [("tool_call", "Bash"), ("message", "Two files.")]
    assert json.loads(streamed[0]["observation"]["tool_result"]) == "a\nb"
    assert streamed[0]["state"]["available_tools"] == ["Bash"]
    orphan = [r for r in rows if r["episode_id"].endswith(":4")]
    assert [(r["action"]["tool"], json.loads(r["observation"]["tool_result"]))
            for r in orphan] == [("Bash", "a\nb")]


# anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/fallback_response.txt: a
# refused turn retried on another model is one message whose `fallback` block
# ({from: {model}, to: {model}, trigger}) separates the two models' blocks; message.model
# stays the first. Before: the row's behavior_policy was the model that refused.
def test_a_refusal_fallback_block_names_the_turns_model(tmp_path):
    path = _sse(tmp_path / "fallback_response.txt", [
        {"type": "message_start", "message": {
            "id": "msg_01FallbackModelRelabel000001", "type": "message", "role": "assistant",
            "content": [], "model": "claude-opus-4-7", "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "fallback", "from": {"model": "claude-opus-4-7"},
            "to": {"model": "claude-sonnet-4-5"},
            "trigger": {"type": "refusal", "category": None}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "Hello there!"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 8}},
        {"type": "message_stop"}])
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    [row] = rows
    assert row["action"]["content"] == "Hello there!"
    assert row["metadata"]["behavior_policy"] == "claude-sonnet-4-5"
    assert json.loads(row["extra"])["fallback"] == {
        "from": "claude-opus-4-7", "to": "claude-sonnet-4-5", "trigger": "refusal"}


# The Messages API's streaming errors: an `event: error` with {type: error, error: {type:
# overloaded_error, message}} may arrive mid-stream (the streaming docs' "Error events").
# Before: the event was ignored, the partial turn looked complete.
def test_a_stream_error_event_is_kept_and_named(tmp_path):
    overloaded = {"type": "error", "error": {"type": "overloaded_error",
                                             "message": "Overloaded"}}
    cut = _sse(tmp_path / "cut.txt", [
        _start("msg_cut"), {"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Partial"}}, overloaded])
    summary, rows, quarantine = ingest_files(tmp_path, cut)
    assert (summary.read, summary.accepted, quarantine) == (1, 1, [])
    [row] = rows
    assert row["action"]["content"] == "Partial"
    assert json.loads(row["extra"])["stream_error"]["type"] == "overloaded_error"
    from tracerl.data.formats import AdapterError
    from tracerl.data.formats.anthropic.read import stream_message
    try:  # a stream that is only an error (read with --format anthropic): named
        stream_message([overloaded], "/")
    except AdapterError as exc:
        assert "the stream is an API error: overloaded_error, Overloaded" in str(exc)
    else:
        raise AssertionError("an error-only stream is no message")


# A refused turn (stop_reason "refusal") names its policy area in stop_details
# ({type: refusal, category, explanation, ...}: anthropics/anthropic-sdk-python
# tests/lib/test_refusal_fallback_streaming.py refusal_delta). Before: stop_details was
# dropped from the row's extra even when it was not null.
def test_a_refusals_stop_details_are_kept(tmp_path):
    path = _sse(tmp_path / "refusal.txt", [
        _start("msg_a"), {"type": "content_block_start", "index": 0,
                          "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "I can"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {
            "stop_reason": "refusal", "stop_sequence": None, "stop_details": {
                "type": "refusal", "category": "cyber", "explanation": None}},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"}])
    _, rows, quarantine = ingest_files(tmp_path, path)
    extra = json.loads(rows[0]["extra"])
    assert quarantine == [] and extra["stop_reason"] == "refusal"
    assert extra["stop_details"]["category"] == "cyber"


def test_a_stream_that_is_only_an_error_event_is_detected_and_named(tmp_path):
    # An SSE body that is one `error` event (overloaded before message_start), as
    # Anthropic-compatible clients' tests record it (e.g. `event: error` / `data: {"type":
    # "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` in
    # provider adapters' httpx.MockTransport fixtures); also the error as a JSON body, and
    # as a list of events. Before: the text stream was detected as native JSONL (two bad
    # lines), the body as native JSONL (no episode_id), the list as OpenAI chat.
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    stream = tmp_path / "stream.txt"
    stream.write_text(f"event: error\ndata: {json.dumps(error)}\n\n")
    body = tmp_path / "body.json"
    body.write_text(json.dumps({**error, "request_id": "req_011CS"}))
    events = tmp_path / "events.json"
    events.write_text(json.dumps([error]))
    for path, where in ((stream, "/0/0"), (body, "/type"), (events, "/0/type")):
        assert detect_format(path) == "anthropic"
        summary, _, quarantine = ingest_files(tmp_path, path)
        assert (summary.read, summary.quarantined) == (1, 1)
        assert quarantine[0]["field"] == where
        assert "overloaded_error, Overloaded" in quarantine[0]["reason"]


def _weather_call(message_id: str, model: str, input_tokens: int, output_tokens: int
                  ) -> dict:
    """A Messages response that calls get_weather for Paris (as a batch's output holds)."""
    return {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                         "input": {"city": "Paris"}}],
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def test_bedrock_batch_inference_output_lines(tmp_path):
    # Amazon Bedrock batch inference output (`<input>.jsonl.out`, docs.aws.amazon.com
    # bedrock/latest/userguide/batch-inference-results.html): `{recordId, modelInput,
    # modelOutput}`, an InvokeModel body (anthropic_version, no model) and its Messages
    # response (`msg_bdrk_…`); a failed record has `error: {errorCode, errorMessage}` in
    # place of modelOutput. Before: detected as native JSONL, every line quarantined.
    request = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024,
               "messages": [{"role": "user", "content": [{"type": "text", "text": "Paris?"}]}],
               "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}
    response = _weather_call("msg_bdrk_01", "claude-3-5-sonnet-20240620", 12, 25)
    path = tmp_path / "prompts.jsonl.out"
    path.write_text(json.dumps({"recordId": "CALL0000001", "modelInput": request,
                                "modelOutput": response}) + "\n"
                    + json.dumps({"recordId": "CALL0000002", "modelInput": request,
                                  "error": {"errorCode": 400, "errorMessage": "bad"}}) + "\n")
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    assert [(r["episode_id"], r["action"]["type"], r["call_id"], r["action"]["tool"])
            for r in rows] == [("CALL0000001", "tool_call", "toolu_1", "get_weather")]
    assert rows[0]["state"]["available_tools"] == ["get_weather"]
    assert rows[0]["episode"]["prompt_tokens"] == 12
    assert (quarantine[0]["field"], quarantine[0]["reason"]) == (
        "/error", "the batch record 'CALL0000002' did not run: 400, bad")


def test_vertex_ai_batch_prediction_rows(tmp_path):
    # Vertex AI batch predictions for Claude (cloud.google.com/vertex-ai/generative-ai/
    # docs/partner-models/claude-batch: `{custom_id, request}` in, the output adds
    # `response` and `status`; a failed row has no response and a status message, as
    # RubyLLM's lib/ruby_llm/providers/vertexai/anthropic/batches.rb reads them).
    # Before: the episode was named `<file>:<n>`, not by its custom_id, and a failed row
    # was quarantined as having no agent action.
    request = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 50,
               "messages": [{"role": "user", "content": "Paris?"}]}
    response = _weather_call("msg_vrtx_01", "claude-3-5-haiku@20241022", 10, 5)
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({"custom_id": "request-1", "request": request,
                                "response": response, "status": ""}) + "\n"
                    + json.dumps({"custom_id": "request-2", "request": request,
                                  "response": None,
                                  "status": {"message": "Bad request"}}) + "\n")
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    assert [(r["episode_id"], r["call_id"], r["source_pointer"]) for r in rows] == [
        ("request-1", "toolu_1", "/response/content/0")]
    assert (quarantine[0]["field"], quarantine[0]["reason"]) == (
        "/status", "the batch request 'request-2' did not run: Bad request")


def test_an_error_event_before_the_first_message_of_a_saved_stream_is_a_record(tmp_path):
    # A text file of several saved streams (`curl -N ... >> log`) whose first call was
    # refused before its message started: that error event is a record of its own,
    # quarantined with its reason. Before: the events before the first message_start
    # were dropped, the failed call not counted at all.
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    start = _start("msg_2")
    text = [{"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "Hi"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 2}}, {"type": "message_stop"}]
    path = _sse(tmp_path / "streams.txt", [error, start, *text])
    assert detect_format(path) == "anthropic"
    summary, rows, quarantine = ingest_files(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    assert [r["action"]["content"] for r in rows] == ["Hi"]
    assert (quarantine[0]["source_record"], quarantine[0]["field"]) == (1, "/0/0")
