"""OpenInference spans as Phoenix exports them, read by the otel-genai format, built here
in code after the writers (Arize-ai/openinference: the semantic conventions,
python/openinference-semantic-conventions/src/openinference/semconv/trace/__init__.py
(`openinference.span.kind` AGENT | LLM | TOOL | CHAIN, `llm.input_messages.N.message.*`,
`llm.output_messages.N.message.tool_calls.M.tool_call.function.*`, `tool.name`,
`input.value` / `output.value`, `llm.model_name`, `agent.name`); Arize-ai/phoenix's span
JSON: `{name, context: {trace_id, span_id}, span_kind, parent_id, start_time, end_time,
status_code, attributes}` with the attributes nested by namespace). An agent's spans (a
sub-agent's) are an episode of their own. Each test recomputes the counts from the raw
file with the stdlib and compares them with the step table."""

from __future__ import annotations

import json

from tests.format_helpers import ingest_detected, step_counts

TRACE = "6c2b9a0e4f1d4b7a9c3e5f7a1b2c4d6e"


def _span(sid: str, parent: str | None, name: str, kind: str, start: int,
          attributes: dict) -> dict:
    return {"name": name, "context": {"trace_id": TRACE, "span_id": sid},
            "span_kind": kind, "parent_id": parent,
            "start_time": f"2025-06-01T10:00:{start:02d}.000000+00:00",
            "end_time": f"2025-06-01T10:00:{start + 1:02d}.000000+00:00",
            "status_code": "OK", "status_message": "", "events": [],
            "attributes": {"openinference": {"span": {"kind": kind}}, **attributes}}


def _llm(sid: str, parent: str, start: int, user: str, calls: list[tuple[str, str, dict]],
         text: str = "") -> dict:
    out = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = [{"tool_call": {"id": cid, "function": {
            "name": name, "arguments": json.dumps(args)}}} for cid, name, args in calls]
    return _span(sid, parent, "ChatCompletion", "LLM", start, {
        "llm": {"model_name": "gpt-4o-2024-08-06", "invocation_parameters": "{}",
                "input_messages": [{"message": {"role": "system", "content": "Be brief."}},
                                   {"message": {"role": "user", "content": user}}],
                "output_messages": [{"message": out}],
                "token_count": {"prompt": 300, "completion": 20, "total": 320}}})


def _tool(sid: str, parent: str, start: int, name: str, args: dict, result: str) -> dict:
    return _span(sid, parent, name, "TOOL", start, {
        "tool": {"name": name}, "input": {"value": json.dumps(args),
                                          "mime_type": "application/json"},
        "output": {"value": result, "mime_type": "text/plain"}})


def _phoenix_export() -> list[dict]:
    return [
        _span("a1", None, "orchestrator", "AGENT", 0, {
            "agent": {"name": "orchestrator"}, "input": {"value": "Plan a trip to Rome"}}),
        _llm("l1", "a1", 1, "Plan a trip to Rome",
             [("call_r", "researcher", {"task": "Find hotels in Rome"})]),
        _span("a2", "a1", "researcher", "AGENT", 2, {"agent": {"name": "researcher"}}),
        _llm("l2", "a2", 3, "Find hotels in Rome",
             [("call_s1", "web_search", {"q": "Rome hotels"}),
              ("call_s2", "web_search", {"q": "Rome hostels"})]),
        _tool("t1", "a2", 4, "web_search", {"q": "Rome hotels"}, "Hotel Artemide"),
        {**_tool("t2", "a2", 5, "web_search", {"q": "Rome hostels"}, "The Beehive"),
         "status_code": "ERROR", "status_message": "rate limited"},
        _llm("l3", "a2", 6, "Find hotels in Rome", [], "Hotel Artemide or The Beehive."),
        _tool("t3", "a1", 7, "researcher", {"task": "Find hotels in Rome"},
              "Hotel Artemide or The Beehive."),
        _llm("l4", "a1", 8, "Plan a trip to Rome", [], "Stay at Hotel Artemide.")]


def test_phoenix_export_agents_are_episodes(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in _phoenix_export()))
    summary, rows, quarantine = ingest_detected(tmp_path, "otel-genai", path)
    assert not quarantine
    raw = [json.loads(x) for x in path.read_text().splitlines()]

    def attrs(s: dict) -> dict:
        return s["attributes"]

    llm = [s for s in raw if s["span_kind"] == "LLM"]
    calls = sum(len(attrs(s)["llm"]["output_messages"][0]["message"].get("tool_calls", []))
                for s in llm)
    texts = sum(not attrs(s)["llm"]["output_messages"][0]["message"].get("tool_calls")
                for s in llm)
    tools = sum(s["span_kind"] == "TOOL" for s in raw)
    assert step_counts(rows) == (calls, tools, texts) == (3, 3, 2)
    by_episode: dict[str, list] = {}
    for r in rows:
        by_episode.setdefault(r["episode_id"], []).append(r)
    assert len(by_episode) == 2  # the orchestrator's and the researcher's
    researcher = next(v for k, v in by_episode.items() if "researcher" in k)
    assert [(r["turn"], r["call_index"]) for r in researcher] == [(0, 0), (0, 1), (1, None)]
    assert researcher[0]["metadata"]["behavior_policy"] == "gpt-4o-2024-08-06"
    assert researcher[1]["observation"]["error"] == "rate limited"


# The same agents as OTLP JSON (an OTel collector's file exporter, or Phoenix's OTLP
# endpoint): flat OpenInference attributes (`openinference.span.kind`,
# `llm.output_messages.0.message.tool_calls.0.tool_call.function.name`, ...), times in
# nanoseconds, an error as status code 2; CHAIN spans (a framework's wrappers) between an
# agent and its model calls are no turn and no episode.
def _flat(value: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, v in value.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{key}."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for k, x in enumerate(v):
                out.update(_flat(x, f"{prefix}{key}.{k}."))
        else:
            out[f"{prefix}{key}"] = v
    return out


def _otlp(phoenix: list[dict]) -> dict:
    from tests.adapter_helpers import kv

    def ns(text: str) -> str:
        second = int(text[17:19])
        return str(1_748_772_000_000_000_000 + second * 1_000_000_000)

    spans = []
    for s in phoenix:
        span = {"traceId": s["context"]["trace_id"], "spanId": s["context"]["span_id"].rjust(
                    16, "0"), "name": s["name"], "kind": 1,
                "startTimeUnixNano": ns(s["start_time"]), "endTimeUnixNano": ns(s["end_time"]),
                "attributes": kv(_flat(s["attributes"])),
                "status": {"code": 2, "message": s["status_message"]}
                if s["status_code"] == "ERROR" else {"code": 1}}
        if s["parent_id"]:
            span["parentSpanId"] = s["parent_id"].rjust(16, "0")
        spans.append(span)
    return {"resourceSpans": [{"resource": {"attributes": kv({"service.name": "trip"})},
                               "scopeSpans": [{"scope": {"name": "openinference"},
                                               "spans": spans}]}]}


def _with_chains(export: list[dict]) -> list[dict]:
    """A CHAIN span under each agent, the agent's LLM and TOOL spans under it."""
    chains = {s["context"]["span_id"]: f"c{s['context']['span_id']}" for s in export
              if s["span_kind"] == "AGENT"}
    out = []
    for s in export:
        if s["span_kind"] != "AGENT" and s["parent_id"] in chains:
            s = {**s, "parent_id": chains[s["parent_id"]]}
        out.append(s)
        if s["span_kind"] == "AGENT":
            sid = s["context"]["span_id"]
            out.append(_span(chains[sid], sid, "AgentExecutor", "CHAIN",
                             int(s["start_time"][17:19]), {"input": {"value": "{}"}}))
    return out


def test_otlp_openinference_agents_are_episodes_through_chain_spans(tmp_path):
    doc = _otlp(_with_chains(_phoenix_export()))
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(doc))
    summary, rows, quarantine = ingest_detected(tmp_path, "otel-genai", path)
    assert not quarantine
    raw = json.loads(path.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]

    def attr(s: dict, key: str):
        return next((a["value"].get("stringValue") for a in s["attributes"]
                     if a["key"] == key), None)

    kinds = [attr(s, "openinference.span.kind") for s in raw]
    assert kinds.count("CHAIN") == kinds.count("AGENT") == 2
    llm = [s for s, k in zip(raw, kinds, strict=True) if k == "LLM"]
    calls = sum(a["key"].endswith(".tool_call.function.name") for s in llm
                for a in s["attributes"])
    texts = sum(not any(".tool_calls." in a["key"] for a in s["attributes"]) for s in llm)
    assert step_counts(rows) == (calls, kinds.count("TOOL"), texts) == (3, 3, 2)
    by_episode: dict[str, list] = {}
    for r in rows:
        by_episode.setdefault(r["episode_id"], []).append(r)
    assert sorted(k.rsplit("/", 1)[-1] for k in by_episode) == ["orchestrator", "researcher"]
    researcher = next(v for k, v in by_episode.items() if k.endswith("/researcher"))
    assert [(r["turn"], r["call_index"]) for r in researcher] == [(0, 0), (0, 1), (1, None)]
    assert researcher[1]["observation"]["error"] == "rate limited"
    orchestrator = next(v for k, v in by_episode.items() if k.endswith("/orchestrator"))
    assert orchestrator[0]["action"]["tool"] == "researcher"
    assert json.loads(orchestrator[0]["observation"]["tool_result"]) == \
        "Hotel Artemide or The Beehive."


def test_a_sub_agent_invoked_twice_is_two_episodes(tmp_path):
    # the orchestrator gives the researcher two tasks in one trace: two AGENT spans of one
    # name under the orchestrator's, each its own episode (in start order), never one
    # episode of two unrelated tasks; the orchestrator (top level) stays one episode
    spans = [
        _span("a1", None, "orchestrator", "AGENT", 0, {"agent": {"name": "orchestrator"}}),
        _llm("l1", "a1", 1, "Plan", [("c1", "researcher", {"task": "hotels"}),
                                      ("c2", "researcher", {"task": "food"})]),
        _span("a2", "a1", "researcher", "AGENT", 2, {"agent": {"name": "researcher"}}),
        _llm("l2", "a2", 3, "hotels", [("s1", "web_search", {"q": "hotels"})]),
        _tool("t0", "a2", 4, "web_search", {"q": "hotels"}, "Artemide"),
        _llm("l3", "a2", 5, "hotels", [], "Artemide"),
        _span("a3", "a1", "researcher", "AGENT", 6, {"agent": {"name": "researcher"}}),
        _llm("l4", "a3", 7, "food", [], "Carbonara"),
        _tool("t1", "a1", 8, "researcher", {"task": "hotels"}, "Artemide"),
        _tool("t2", "a1", 9, "researcher", {"task": "food"}, "Carbonara"),
        _llm("l5", "a1", 10, "Plan", [], "Done")]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in spans))
    summary, rows, quarantine = ingest_detected(tmp_path, "otel-genai", path)
    assert not quarantine
    raw = [json.loads(x) for x in path.read_text().splitlines()]
    agents = [s for s in raw if s["span_kind"] == "AGENT"]
    episodes: dict[str, list] = {}
    for r in rows:
        episodes.setdefault(r["episode_id"].rsplit("/", 1)[-1], []).append(r)
    assert len(episodes) == len(agents) == summary.accepted == 3
    assert {k: [(r["action"]["type"], r["action"]["tool"] or r["action"]["content"])
                for r in v] for k, v in episodes.items()} == {
        "orchestrator": [("tool_call", "researcher"), ("tool_call", "researcher"),
                         ("message", "Done")],
        "researcher#1": [("tool_call", "web_search"), ("message", "Artemide")],
        "researcher#2": [("message", "Carbonara")]}
    llm = [s for s in raw if s["span_kind"] == "LLM"]
    calls = sum(len(s["attributes"]["llm"]["output_messages"][0]["message"].get(
        "tool_calls", [])) for s in llm)
    assert step_counts(rows)[:2] == (calls, sum(s["span_kind"] == "TOOL" for s in raw))
