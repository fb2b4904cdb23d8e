"""What an exported file must be, checked from the published formats (TRL dataset formats,
the OpenAI fine-tuning chat format), not from tracerl's code: the tests' own reading.

Also an oracle that rebuilds a tau2 simulation's conversation straight from the raw JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROLES = {"system", "user", "assistant", "tool"}
# The keys an OpenAI fine-tuning chat message may carry (role-specific subsets below).
OPENAI_KEYS = {"system": {"role", "content", "name"}, "user": {"role", "content", "name"},
               "assistant": {"role", "content", "tool_calls", "weight", "name"},
               "tool": {"role", "content", "tool_call_id"}}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


_VALID_SCHEMAS: set[str] = set()


def _check_schema(schema: Any) -> None:
    """Draft 2020-12's metaschema check of `schema`, once per distinct schema: every record
    of an export repeats its tools, and the check is ~2 ms each (minutes per pipeline)."""
    from jsonschema import Draft202012Validator

    key = json.dumps(schema, sort_keys=True)
    if key not in _VALID_SCHEMAS:
        Draft202012Validator.check_schema(schema)
        _VALID_SCHEMAS.add(key)


def check_tools(tools: Any, where: str, messages: list[dict] = ()) -> None:
    """`tools`: OpenAI-style function definitions whose `parameters` is a valid JSON schema
    of an object; present (a non-empty list) whenever the conversation calls a tool, and
    naming every tool it calls."""
    called = {c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    if tools is None:
        assert not called, f"{where}: tools null, yet the conversation calls {sorted(called)}"
        return
    assert isinstance(tools, list) and tools, f"{where}: tools {tools!r:.80}"
    names = []
    for tool in tools:
        assert tool["type"] == "function", where
        function = tool["function"]
        assert isinstance(function["name"], str) and function["name"], where
        _check_schema(function["parameters"])
        assert function["parameters"]["type"] == "object", where
        names.append(function["name"])
    assert len(set(names)) == len(names), f"{where}: a tool listed twice"
    assert called <= set(names), f"{where}: calls {sorted(called - set(names))} not in tools"


def check_provenance(record: dict, where: str) -> None:
    prov = record.get("provenance")
    assert isinstance(prov, dict), f"{where}: no provenance"
    assert isinstance(prov.get("episode_id"), str) and prov["episode_id"], where
    assert prov.get("split") in ("train", "validation", "test"), where
    assert prov.get("steps"), f"{where}: provenance names no step"
    for step in prov["steps"]:
        assert isinstance(step["t"], int) and step["t"] >= 0, where
        assert "source_pointer" in step and "source_file" in step, where
        assert isinstance(step["source_record"], int), where


def check_trl_conversation(messages: list[dict], where: str, *, arguments: type = dict,
                           complete: bool = True) -> None:
    """TRL conversational + tool calling: roles, content on every message, tool calls
    `{type: function, function: {name, arguments}}`, each tool message answering a call
    of the assistant message right before its block, by id."""
    assert isinstance(messages, list) and messages, f"{where}: no messages"
    open_calls: dict[str, str] = {}
    answered: set[str] = set()
    for k, m in enumerate(messages):
        at = f"{where}: message {k}"
        assert m.get("role") in ROLES, f"{at}: role {m.get('role')!r}"
        assert "content" in m, f"{at}: no content key (TRL reads role and content)"
        if m["role"] == "assistant":
            assert set(open_calls) == answered, \
                f"{at}: calls {sorted(set(open_calls) - answered)} not answered"
            open_calls, answered = {}, set()
            for c in m.get("tool_calls") or []:
                assert c["type"] == "function", at
                assert isinstance(c["id"], str) and c["id"], at
                assert isinstance(c["function"]["name"], str) and c["function"]["name"], at
                assert isinstance(c["function"]["arguments"], arguments), at
                assert c["id"] not in open_calls, f"{at}: call id {c['id']} twice"
                open_calls[c["id"]] = c["function"]["name"]
            assert m["content"] is not None or m.get("tool_calls"), f"{at}: empty assistant"
        elif m["role"] == "tool":
            assert isinstance(m["content"], str), at
            assert m["tool_call_id"] in open_calls, f"{at}: answers no call of the turn"
            assert m["tool_call_id"] not in answered, f"{at}: a second answer"
            if "name" in m:
                assert m["name"] == open_calls[m["tool_call_id"]], at
            assert k > 0 and messages[k - 1]["role"] in ("assistant", "tool"), \
                f"{at}: a tool message not right after its call"
            answered.add(m["tool_call_id"])
        else:
            assert isinstance(m["content"], str), at
    if complete:
        assert messages[-1]["role"] == "assistant", f"{where}: does not end with the agent"


def check_sft_record(record: dict, where: str) -> None:
    assert set(record) == {"messages", "tools", "provenance"}, f"{where}: keys {set(record)}"
    check_trl_conversation(record["messages"], where)
    check_tools(record["tools"], where, record["messages"])
    for m in record["messages"]:
        if m["role"] == "assistant":
            assert m["weight"] in (0.0, 1.0), where
    assert any(m.get("weight") == 1.0 for m in record["messages"]), f"{where}: nothing trained"
    check_provenance(record, where)


def check_openai_record(record: dict, where: str) -> None:
    assert set(record) <= {"messages", "tools", "parallel_tool_calls", "provenance"}, where
    messages = record["messages"]
    check_trl_conversation(messages, where, arguments=str)
    for k, m in enumerate(messages):
        assert set(m) <= OPENAI_KEYS[m["role"]], f"{where}: message {k} keys {set(m)}"
        if m["role"] == "assistant":
            assert m["weight"] in (0, 1) and type(m["weight"]) is int, where
            for c in m.get("tool_calls") or []:
                json.loads(c["function"]["arguments"])  # a JSON string
    check_tools(record.get("tools"), where, messages)
    check_provenance(record, where)


def check_kto_record(record: dict, where: str) -> None:
    assert {"prompt", "completion", "label"} <= set(record), where
    assert isinstance(record["label"], bool), where
    check_trl_conversation(record["prompt"] + record["completion"], where)
    check_tools(record["tools"], where, record["prompt"] + record["completion"])
    assert len(record["completion"]) == 1 and record["completion"][0]["role"] == "assistant"
    check_provenance(record, where)


def check_prm_record(record: dict, where: str) -> None:
    assert isinstance(record["prompt"], str), where
    assert all(isinstance(c, str) and c for c in record["completions"]), where
    assert len(record["labels"]) == len(record["completions"]) > 0, where
    assert all(isinstance(v, bool) for v in record["labels"]), where
    check_provenance(record, where)


def check_weighted_record(record: dict, where: str) -> None:
    """A weighted conversation: the SFT shape (TRL conversational) whose every assistant
    message carries a credit `weight` >= 0, and beside the messages one `credit` entry per
    assistant message (its index, the same weight, the advantage under the logging policy
    inside its interval, support and flags; tracerl.rl.credit), provenance naming each."""
    assert set(record) == {"messages", "tools", "credit", "provenance"}, \
        f"{where}: keys {set(record)}"
    messages = record["messages"]
    check_trl_conversation(messages, where)
    check_tools(record["tools"], where, messages)
    assistant = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
    assert [c["message"] for c in record["credit"]] == assistant, where
    for c in record["credit"]:
        at = f"{where}: message {c['message']}"
        weight = messages[c["message"]]["weight"]
        assert isinstance(weight, float) and weight >= 0.0 and weight == c["weight"], at
        low, high = c["advantage_ci"]
        if low is None or high is None:
            assert "no_interval" in c["flags"], at
        else:
            assert low - 1e-9 <= c["advantage"] <= high + 1e-9, at
        assert c["n"] >= 1 and c["n_state"] >= c["n"], at
        assert 0.0 <= c["behavior_prob"] <= 1.0, at
        assert c["steps"] and all(set(f) <= set(c["flags"]) for f in
                                  (s["flags"] for s in c["steps"])), at
    steps = [s["t"] for c in record["credit"] for s in c["steps"]]
    assert steps == [s["t"] for s in record["provenance"]["steps"]], where
    assert [s["message"] for s in record["provenance"]["steps"]] == [
        c["message"] for c in record["credit"] for _ in c["steps"]], where
    check_provenance(record, where)


def check_pair_record(record: dict, where: str) -> None:
    """TRL conversational preference: prompt, chosen, rejected (one assistant message each),
    the chosen side's Q interval above the rejected side's."""
    assert {"prompt", "chosen", "rejected"} <= set(record), where
    for side in ("chosen", "rejected"):
        assert len(record[side]) == 1 and record[side][0]["role"] == "assistant", where
        check_trl_conversation(record["prompt"] + record[side], f"{where} ({side})")
        check_tools(record["tools"], where, record["prompt"] + record[side])
    credit = record["credit"]
    assert credit["chosen"]["q_ci"][0] > credit["rejected"]["q_ci"][1], where
    assert credit["chosen"]["action"] != credit["rejected"]["action"], where
    check_provenance(record, where)
    assert record["provenance"]["chosen"]["steps"], where


def check_openai_pair_record(record: dict, where: str) -> None:
    """OpenAI preference fine-tuning: input.messages, preferred_output and
    non_preferred_output (one assistant message each, arguments as JSON strings)."""
    assert {"input", "preferred_output", "non_preferred_output"} <= set(record), where
    assert set(record["input"]) <= {"messages", "tools", "parallel_tool_calls"}, where
    for side in ("preferred_output", "non_preferred_output"):
        assert len(record[side]) == 1 and record[side][0]["role"] == "assistant", where
        check_trl_conversation(record["input"]["messages"] + record[side], f"{where} {side}",
                               arguments=str)
        check_tools(record["input"].get("tools"), where, record["input"]["messages"])
    check_provenance(record, where)


CHECKS = {"sft": check_sft_record, "sft_openai": check_openai_record, "kto": check_kto_record,
          "prm": check_prm_record, "weighted": check_weighted_record,
          "pairs": check_pair_record, "pairs_openai": check_openai_pair_record}


def check_export_folder(folder: Path) -> dict[str, dict[str, list[dict]]]:
    """Every JSONL file of one dataset's export checked; {format: {split: records}}. No
    file is empty (`datasets.load_dataset("json")` fails on one): a split without records
    has no file, and the manifest names it under `not_written`."""
    out: dict[str, dict[str, list[dict]]] = {}
    manifest = json.loads((folder / "manifest.json").read_text())
    for path in folder.rglob("*"):
        assert not path.is_file() or path.stat().st_size > 0, f"{path}: an empty file"
    for fmt, check in CHECKS.items():
        for path in sorted((folder / fmt).glob("*.jsonl")):
            assert f"{fmt}/{path.name}" not in manifest["not_written"], path
            records = read_jsonl(path)
            if fmt in EXPANDED and records and "messages" in records[0]:
                _expanded(out, fmt, path, records)
                continue
            for i, record in enumerate(records):
                check(record, f"{path}:{i + 1}")
                assert record["provenance"]["split"] == path.stem, f"{path}:{i + 1}"
            out.setdefault(fmt, {})[path.stem] = records
    return out


def _expanded(out: dict, fmt: str, path: Path, records: list[dict]) -> None:
    """A per-conversation file (kto/, pairs/ with `records: conversation`): each record a
    TRL conversation with its tools and provenance, whose expansion (tracerl.export.expand)
    gives records of the published format, checked as such; found[fmt] holds those."""
    from tracerl.export import expand

    for i, record in enumerate(records):
        where = f"{path}:{i + 1}"
        messages = [{k: v for k, v in m.items() if k != "label"} for m in record["messages"]]
        check_trl_conversation(messages, where)
        check_tools(record["tools"], where, messages)
        check_provenance(record, where)
        if fmt == "kto":
            assert all(isinstance(m["label"], bool) for m in record["messages"]
                       if m["role"] == "assistant"), where
            shapes = {"kto": expand.kto_examples(record)}
        else:
            assert record["pairs"], f"{where}: a conversation without pairs"
            shapes = {"pairs": expand.pair_examples(record),
                      "pairs_openai": expand.pair_examples(record, openai=True)}
        for name, examples in shapes.items():
            assert examples, f"{where}: no {name} example"
            for j, example in enumerate(examples):
                CHECKS[name](example, f"{where} {name} example {j}")
                assert example["provenance"]["split"] == path.stem, where
            out.setdefault(name, {}).setdefault(path.stem, []).extend(examples)


EXPANDED = ("kto", "pairs")


# --- an oracle: a tau2 simulation's conversation from its raw JSON ------------------------
def _json_or_text(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def tau2_expected(sim: dict, redact=lambda s: s) -> list[dict]:
    """The messages the agent had, read from the raw simulation: system/user messages, the
    agent's messages and calls, the results of its calls; the user's own tool calls and
    their results are left out; nothing after the agent's last message."""
    out, user_calls = [], set()
    for m in sim["messages"]:
        if m["role"] == "assistant":
            out.append({"role": "assistant", "content": redact(m.get("content")),
                        "tool_calls": [(c["id"], c["name"], c.get("arguments") or {})
                                       for c in m.get("tool_calls") or []]})
        elif m["role"] in ("user", "system"):
            if m.get("content") is not None or not m.get("tool_calls"):
                out.append({"role": m["role"], "content": redact(m.get("content") or "")})
            user_calls |= {c["id"] for c in m.get("tool_calls") or []}
        elif m["role"] == "tool" and m["id"] not in user_calls:
            out.append({"role": "tool", "tool_call_id": m["id"],
                        "content": _json_or_text(redact(m.get("content") or ""))})
    last = max(i for i, m in enumerate(out) if m["role"] == "assistant")
    return out[:last + 1]


def assert_same_conversation(exported: list[dict], expected: list[dict], where: str,
                             redact=lambda v: v) -> None:
    assert [m["role"] for m in exported] == [m["role"] for m in expected], where
    for k, (got, want) in enumerate(zip(exported, expected, strict=True)):
        at = f"{where}: message {k}"
        if want["role"] == "assistant":
            assert got["content"] == want["content"], at
            calls = [(c["id"], c["function"]["name"], c["function"]["arguments"])
                     for c in got.get("tool_calls") or []]
            assert calls == [(i, n, redact(a)) for i, n, a in want["tool_calls"]], at
        elif want["role"] == "tool":
            assert got["tool_call_id"] == want["tool_call_id"], at
            assert _json_or_text(got["content"]) == want["content"], at
        else:
            assert got["content"] == want["content"], at
