"""Google ADK sessions, eval sets and eval set results as ADK writes them, built here in
code after the writer (google/adk-python: src/google/adk/sessions/session.py, events/
event.py; evaluation/eval_set.py, eval_case.py (IntermediateData, InvocationEvents),
eval_result.py; the API server's camelCase aliases). Each test recomputes the counts from
the raw file with the stdlib and compares them with the step table."""

from __future__ import annotations

import json

from tests.format_helpers import ingest_detected, step_counts


def _call(cid: str, name: str, args: dict) -> dict:
    return {"functionCall": {"id": cid, "name": name, "args": args}}


def _response(cid: str, name: str, response: dict) -> dict:
    return {"functionResponse": {"id": cid, "name": name, "response": response}}


def _event(eid: str, author: str, role: str, parts: list[dict], **more) -> dict:
    return {"id": eid, "invocationId": "e-1f2a", "author": author, "timestamp": 1.7e9,
            "content": {"role": role, "parts": parts},
            "actions": {"stateDelta": {}, "artifactDelta": {}, "requestedAuthConfigs": {}},
            **more}


def _raw_counts(events: list[dict]) -> tuple[int, int, int]:
    """(function calls, function responses, model events with text and no call)."""
    final = [e for e in events if not e.get("partial")]
    parts = [(e, p) for e in final for p in e["content"]["parts"]]
    calls = sum("functionCall" in p for _, p in parts)
    responses = sum("functionResponse" in p for _, p in parts)
    texts = sum(e["author"] != "user" and e["content"]["role"] == "model"
                and not any("functionCall" in p for p in e["content"]["parts"])
                and any("text" in p and not p.get("thought") for p in e["content"]["parts"])
                for e in final)
    return calls, responses, texts


def test_session_from_the_api_server(tmp_path):
    usage = {"promptTokenCount": 900, "candidatesTokenCount": 40, "totalTokenCount": 940}
    events = [
        _event("ev1", "user", "user", [{"text": "Weather in Paris and Rome?"}]),
        _event("ev2", "weather_agent", "model", [
            {"text": "Checking both.", "thought": True},
            _call("adk-1", "get_weather", {"city": "Paris"}),
            _call("adk-2", "get_weather", {"city": "Rome"})],
            usageMetadata=usage, modelVersion="gemini-2.0-flash-001"),
        _event("ev3", "weather_agent", "user", [
            _response("adk-1", "get_weather", {"status": "success", "report": "Sunny"}),
            _response("adk-2", "get_weather", {"status": "error",
                                               "error_message": "no data"})]),
        _event("ev4", "weather_agent", "model", [{"text": "Paris is"}], partial=True),
        _event("ev5", "weather_agent", "model", [{"text": "Paris is sunny; Rome unknown."}],
               usageMetadata=usage, modelVersion="gemini-2.0-flash-001")]
    doc = {"id": "c6f0b1c2", "appName": "weather", "userId": "u1", "state": {},
           "events": events, "lastUpdateTime": 1.7e9}
    path = tmp_path / "session.json"
    path.write_text(json.dumps(doc))
    summary, rows, quarantine = ingest_detected(tmp_path, "google-adk", path)
    assert not quarantine and summary.accepted == 1
    calls, responses, texts = _raw_counts(json.loads(path.read_text())["events"])
    assert step_counts(rows) == (calls, responses, texts) == (2, 2, 1)
    assert [(r["turn"], r["call_index"], r["call_id"]) for r in rows] == [
        (0, 0, "adk-1"), (0, 1, "adk-2"), (1, None, None)]
    assert json.loads(rows[0]["observation"]["tool_result"])["report"] == "Sunny"
    assert rows[0]["metadata"]["behavior_policy"] == "gemini-2.0-flash-001"
    assert json.loads(rows[0]["extra"])["reasoning"] == "Checking both."
    assert rows[0]["episode"]["prompt_tokens"] == 1800
    assert rows[0]["state"]["user_goal"] == "Weather in Paris and Rome?"
    assert {r["episode_id"] for r in rows} == {"c6f0b1c2"}


def test_eval_set_with_intermediate_data(tmp_path):
    def invocation(n: int, city: str) -> dict:
        return {"invocation_id": f"inv-{n}",
                "user_content": {"role": "user", "parts": [{"text": f"Weather in {city}?"}]},
                "final_response": {"role": "model", "parts": [{"text": f"{city}: sunny"}]},
                "intermediate_data": {"tool_uses": [{"id": f"t{n}", "name": "get_weather",
                                                     "args": {"city": city}}],
                                      "tool_responses": [{"id": f"t{n}", "name":
                                                          "get_weather", "response":
                                                          {"report": "sunny"}}],
                                      "intermediate_responses": []},
                "creation_timestamp": 1.7e9}
    doc = {"eval_set_id": "weather_set", "name": "weather_set", "eval_cases": [
        {"eval_id": "case_a", "conversation": [invocation(1, "Paris"), invocation(2, "Rome")],
         "session_input": {"app_name": "weather", "user_id": "u1", "state": {}}},
        {"eval_id": "case_b", "conversation": [invocation(3, "Oslo")]}]}
    path = tmp_path / "weather.evalset.json"
    path.write_text(json.dumps(doc, indent=2))
    summary, rows, quarantine = ingest_detected(tmp_path, "google-adk", path)
    assert not quarantine and summary.accepted == 2
    raw = json.loads(path.read_text())["eval_cases"]
    invocations = [i for c in raw for i in c["conversation"]]
    calls = sum(len(i["intermediate_data"]["tool_uses"]) for i in invocations)
    finals = sum(i.get("final_response") is not None for i in invocations)
    assert step_counts(rows) == (calls, calls, finals) == (3, 3, 3)
    assert sorted({r["episode_id"] for r in rows}) == ["weather_set/case_a",
                                                       "weather_set/case_b"]


def test_eval_set_result_rewards_and_invocation_events(tmp_path):
    actual = {"invocationId": "inv-1",
              "userContent": {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
              "finalResponse": {"role": "model", "parts": [{"text": "Sunny."}]},
              "intermediateData": {"invocationEvents": [
                  {"author": "weather_agent", "content": {"role": "model", "parts": [
                      _call("adk-9", "get_weather", {"city": "Paris"})]}},
                  {"author": "weather_agent", "content": {"role": "user", "parts": [
                      _response("adk-9", "get_weather", {"report": "Sunny"})]}}]}}
    doc = {"evalSetResultId": "weather_set_1700000000", "evalSetId": "weather_set",
           "evalCaseResults": [{
               "evalSetFile": "weather_set", "evalSetId": "weather_set", "evalId": "case_a",
               "finalEvalStatus": 2,
               "overallEvalMetricResults": [
                   {"metricName": "tool_trajectory_avg_score", "threshold": 1.0,
                    "score": 1.0, "evalStatus": 1},
                   {"metricName": "response_match_score", "threshold": 0.8, "score": 0.4,
                    "evalStatus": 2}],
               "evalMetricResultPerInvocation": [{"actualInvocation": actual,
                                                  "expectedInvocation": actual,
                                                  "evalMetricResults": []}],
               "sessionId": "s1", "userId": "u1"}],
           "creationTimestamp": 1.7e9}
    path = tmp_path / "weather_set_1700000000.evalset_result.json"
    path.write_text(json.dumps(doc))
    summary, rows, quarantine = ingest_detected(tmp_path, "google-adk", path)
    assert not quarantine and summary.accepted == 1
    assert step_counts(rows) == (1, 1, 1)
    assert rows[-1]["reward"] == 0.0  # failed
    assert dict(rows[-1]["reward_components"]) == {"response_match_score": 0.4,
                                                   "tool_trajectory_avg_score": 1.0}
    assert rows[-1]["episode_id"] == "weather_set_1700000000/case_a"


def test_multi_agent_session_is_one_episode_with_the_agent_per_step(tmp_path):
    # a coordinator hands the user over to sub-agents (src/google/adk/tools/
    # transfer_to_agent_tool.py: a `transfer_to_agent` function call and its response, the
    # `actions.transferToAgent` set; then the sub-agent's own events, `author` its name, in
    # the same session and invocation): one episode, each step's agent its `author`
    events = [
        _event("ev1", "user", "user", [{"text": "Book a flight, then a hotel."}]),
        _event("ev2", "coordinator", "model", [
            _call("adk-1", "transfer_to_agent", {"agent_name": "flight_agent"})]),
        _event("ev3", "coordinator", "user", [
            _response("adk-1", "transfer_to_agent", {"result": None})],
            actions={"stateDelta": {}, "artifactDelta": {}, "requestedAuthConfigs": {},
                     "transferToAgent": "flight_agent"}),
        _event("ev4", "flight_agent", "model", [
            _call("adk-2", "search_flights", {"to": "Rome"})], branch="coordinator.flight"),
        _event("ev5", "flight_agent", "user", [
            _response("adk-2", "search_flights", {"flights": ["AZ 201"]})]),
        _event("ev6", "flight_agent", "model", [
            _call("adk-3", "transfer_to_agent", {"agent_name": "hotel_agent"})]),
        _event("ev7", "flight_agent", "user", [
            _response("adk-3", "transfer_to_agent", {"result": None})]),
        _event("ev8", "hotel_agent", "model", [
            _call("adk-4", "book_hotel", {"city": "Rome"})]),
        _event("ev9", "hotel_agent", "user", [
            _response("adk-4", "book_hotel", {"booking": "H-9"})]),
        _event("ev10", "hotel_agent", "model", [{"text": "Flight AZ 201 and hotel H-9."}])]
    doc = {"id": "s-multi", "appName": "travel", "userId": "u1", "state": {},
           "events": events, "lastUpdateTime": 1.7e9}
    path = tmp_path / "session.json"
    path.write_text(json.dumps(doc))
    summary, rows, quarantine = ingest_detected(tmp_path, "google-adk", path)
    assert not quarantine and summary.accepted == 1
    raw = json.loads(path.read_text())["events"]
    assert step_counts(rows) == _raw_counts(raw) == (4, 4, 1)
    assert {r["episode_id"] for r in rows} == {"s-multi"}
    authors = [json.loads(r["extra"])["author"] for r in rows]
    assert authors == [e["author"] for e in raw if e["content"]["role"] == "model"]
    assert [r["action"]["tool"] for r in rows[:4]] == [
        "transfer_to_agent", "search_flights", "transfer_to_agent", "book_hotel"]
