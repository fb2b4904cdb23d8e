"""OpenAI chat-completions conversations in: every accepted wrapper, the legacy function
form, parallel calls, and the quarantine reasons for a result with no call and for
malformed arguments."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests.adapter_helpers import ingest_files
from tracerl.data.formats import detect_format


def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


# A conversation: system prompt, user asks, the assistant calls two tools at once, both
# answer (in the other order), the assistant answers the user.
MESSAGES = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": None, "tool_calls": [
        call("c1", "weather", '{"city": "Paris"}'), call("c2", "weather", '{"city": "Rome"}')]},
    {"role": "tool", "tool_call_id": "c2", "content": '{"temp": 21}'},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "assistant", "content": [{"type": "text", "text": "Paris sunny, "},
                                      {"type": "text", "text": "Rome 21C."}]},
]


def _write(path: Path, value, jsonl: bool = False) -> Path:
    if jsonl:
        path.write_text("".join(json.dumps(v) + "\n" for v in value))
    else:
        path.write_text(json.dumps(value))
    return path


# every record read, whatever share of them is quarantined
_ingest = partial(ingest_files, max_bad_fraction=1.0)


def _check_conversation(rows: list[dict]) -> None:
    assert [(r["t"], r["turn"], r["call_index"], r["action"]["type"], r["action"]["tool"])
            for r in rows] == [(0, 0, 0, "tool_call", "weather"), (1, 0, 1, "tool_call", "weather"),
                               (2, 1, None, "message", None)]
    assert [json.loads(r["action"]["arguments"]) for r in rows[:2]] == [
        {"city": "Paris"}, {"city": "Rome"}]
    assert [r["call_id"] for r in rows[:2]] == ["c1", "c2"]
    # results matched by tool_call_id, whatever their order
    assert json.loads(rows[0]["observation"]["tool_result"]) == "sunny"
    assert json.loads(rows[1]["observation"]["tool_result"]) == {"temp": 21}
    assert rows[2]["action"]["content"] == "Paris sunny, Rome 21C."
    assert rows[2]["done"] and not rows[0]["done"] and not rows[1]["done"]
    assert rows[0]["state"]["user_goal"] == "Weather in Paris and Rome?"
    history = json.loads(rows[0]["state"]["conversation_history"])
    assert [(e["actor"], e["kind"]) for e in history] == [("system", "message"),
                                                           ("user", "message")]


@pytest.mark.parametrize("wrapper", ["bare list", "messages object", "list of records",
                                     "jsonl of records", "jsonl of bare lists", "traj"])
def test_every_accepted_wrapper(tmp_path, wrapper):
    record = {"messages": MESSAGES, "reward": 1.0, "task_id": 7, "trial": 2,
              "info": {"judge": "human"}}
    cases = {  # file name, content, JSONL?, conversations
        "bare list": ("c.json", MESSAGES, False, 1),
        "messages object": ("c.json", {"messages": MESSAGES}, False, 1),
        "list of records": ("c.json", [record, record | {"reward": 0.0}], False, 2),
        "jsonl of records": ("c.jsonl", [record, record | {"reward": 0.0}], True, 2),
        "jsonl of bare lists": ("c.jsonl", [MESSAGES, MESSAGES], True, 2),
        "traj": ("c.json", [{"traj": MESSAGES, "reward": 1.0}], False, 1),
    }
    name, value, jsonl, n = cases[wrapper]
    path = _write(tmp_path / name, value, jsonl)
    assert detect_format(path) == "openai-chat"
    summary, rows, quarantine = _ingest(tmp_path, path)  # format auto
    assert (summary.read, summary.accepted, summary.quarantined) == (n, n, 0)
    assert summary.episodes == n and summary.rows == 3 * n
    assert not quarantine
    _check_conversation(rows[:3])
    episodes = [r["episode_id"] for r in rows]
    assert len(set(episodes)) == n
    if wrapper in ("list of records", "jsonl of records"):
        done = [r for r in rows if r["done"]]
        assert [r["reward"] for r in done] == [1.0, 0.0]
        assert {r["task"] for r in rows} == {"7"} and rows[0]["episode"]["trial"] == 2
        assert json.loads(done[0]["extra"]) == {"episode": {"info": {"judge": "human"}}}
        pointer = "/1/messages/5" if wrapper == "list of records" else "/messages/5"
        assert done[1]["source_pointer"] == pointer and done[1]["source_record"] == 2


def test_legacy_function_call_form(tmp_path):
    messages = [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
        {"role": "function", "name": "add", "content": "5"},
        {"role": "assistant", "content": "5"},
    ]
    summary, rows, _ = _ingest(tmp_path, _write(tmp_path / "c.json", {"messages": messages}),
                               fmt="openai-chat")
    assert summary.accepted == 1
    assert [(r["action"]["type"], r["action"]["tool"]) for r in rows] == [
        ("tool_call", "add"), ("message", None)]
    assert json.loads(rows[0]["action"]["arguments"]) == {"a": 2, "b": 3}
    assert json.loads(rows[0]["observation"]["tool_result"]) == "5"
    assert rows[0]["source_pointer"] == "/messages/1/function_call"


def test_tool_message_with_no_matching_call_is_quarantined(tmp_path):
    broken = MESSAGES[:3] + [{"role": "tool", "tool_call_id": "zz", "content": "?"}]
    path = _write(tmp_path / "c.json", [{"messages": MESSAGES}, {"messages": broken}])
    summary, rows, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    assert len({r["episode_id"] for r in rows}) == 1
    [q] = quarantine
    assert q["source_record"] == 2 and q["field"] == "/1/messages/3"
    assert "'zz'" in q["reason"] and "no earlier tool call" in q["reason"]


def test_function_message_with_no_pending_call_is_quarantined(tmp_path):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                {"role": "function", "name": "add", "content": "5"}]
    summary, _, quarantine = _ingest(tmp_path, _write(tmp_path / "c.json", messages))
    assert (summary.read, summary.quarantined) == (1, 1)
    assert quarantine[0]["field"] == "/2" and "no earlier tool call" in quarantine[0]["reason"]


@pytest.mark.parametrize(("arguments", "words"), [
    ('{"city": "Par', "not valid JSON"),  # truncated
    ("city=Paris", "not valid JSON"),
])
def test_malformed_arguments_are_quarantined_with_the_reason(tmp_path, arguments, words):
    broken = [dict(m) for m in MESSAGES]
    broken[2] = {"role": "assistant", "content": None,
                 "tool_calls": [call("c1", "weather", '{"city": "Paris"}'),
                                call("c2", "weather", arguments)]}
    path = _write(tmp_path / "c.jsonl", [{"messages": MESSAGES}, {"messages": broken}],
                  jsonl=True)
    summary, _, quarantine = _ingest(tmp_path, path)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    [q] = quarantine
    assert q["source_record"] == 2  # the JSONL line
    assert q["field"] == "/messages/2/tool_calls/1/function/arguments"
    assert words in q["reason"] and arguments[:10] in q["reason"]


def test_a_line_that_is_not_json_is_quarantined_and_counted(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"messages": MESSAGES}) + "\n{broken\n")
    summary, _, quarantine = _ingest(tmp_path, path, fmt="openai-chat")
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    assert quarantine[0]["source_record"] == 2 and "not valid JSON" in quarantine[0]["reason"]


def test_offered_tools_and_unknown_message_fields_are_kept(tmp_path):
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    messages = [dict(m) for m in MESSAGES]
    messages[5] = messages[5] | {"refusal": None, "annotations": ["a"]}
    path = _write(tmp_path / "c.json", [{"messages": messages, "tools": tools}])
    _, rows, _ = _ingest(tmp_path, path)
    assert rows[0]["state"]["available_tools"] == ["weather"]
    # the done row keeps the definitions too (the exports' `tools`, tracerl.export.tools)
    assert json.loads(rows[2]["extra"]) == {"annotations": ["a"], "tool_definitions": tools}


@pytest.mark.parametrize(("content", "fmt"), [
    ({"info": {"judge": "x"}, "messages": MESSAGES}, "openai-chat"),
    ([{"info": {}, "reward": 1, "messages": MESSAGES}], "openai-chat"),
    ({"timestamp": "t", "info": {}, "tasks": [], "simulations": []}, "tau2"),
    ({"simulations": [{"messages": []}]}, "tau2"),
])
def test_format_detection(tmp_path, content, fmt):
    assert detect_format(_write(tmp_path / "f.json", content)) == fmt
