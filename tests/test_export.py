"""The export stage's library (tracerl.export) on logs built so every answer is known: tau2
results files (parallel calls, tool errors, the user's replies and own tool calls, a
system message), OpenAI chat conversations and native JSONL, through the real ingest and
relabel. Files are checked against the published formats (tests/export_checks.py), the
conversations against the raw logs, the counts against the SWiRL filters recomputed here
from the raw JSON."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from tests.export_checks import (
    assert_same_conversation,
    check_export_folder,
    read_jsonl,
    tau2_expected,
)
from tracerl.config.export import Export
from tracerl.config.schema import ParamsError, validate_params
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.export.run import ExportError, export_dataset, load_tool_definitions
from tracerl.export.select import assign_splits
from tracerl.io.fileio import read_table

TAU2_VERIFIERS = ["tau2_outcome@1", "tool_error_penalty@1"]
TAU2_WEIGHTS = {"task_success": 1.0, "tool_error_penalty": 0.0}
PROCESS, OUTCOME = {"tool_error_penalty": 0.0}, "task_success"


# --- tau2 logs whose answers are known ----------------------------------------------------
def _call(cid: str, name: str, **arguments) -> dict:
    return {"id": cid, "name": name, "arguments": arguments, "requestor": "assistant"}


def _a(content=None, *calls) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": list(calls) or None}


def _u(content) -> dict:
    return {"role": "user", "content": content}


def _tool(cid: str, content, error: bool = False) -> dict:
    return {"role": "tool", "id": cid, "content": content, "requestor": "assistant",
            "error": error}


def _sim(sid: str, task: str, reward: float, messages: list[dict]) -> dict:
    return {"id": sid, "task_id": task, "trial": 0, "messages": messages,
            "reward_info": {"reward": reward}}


SIMS = [
    # task t1: a success with a system message, parallel calls and a closing user message
    _sim("s1", "t1", 1.0, [
        {"role": "system", "content": "You are the airline agent."},
        _a("Hi! How can I help?"), _u("Change my flight, id u1."),
        _a("Looking.", _call("c1", "get_user", user_id="u1"),
           _call("c2", "get_flights", date="2024-05-01")),
        _tool("c1", '{"name": "Ann", "reservations": ["R1"]}'), _tool("c2", "[1, 2]"),
        _a("Done, R1 moved."), _u("Thanks ###STOP###")]),
    # task t1: a failure after a tool error
    _sim("s2", "t1", 0.0, [
        _u("Cancel R9."), _a(None, _call("c1", "cancel", reservation_id="R9")),
        _tool("c1", "Error: not found", error=True), _a("Sorry, I could not."),
        _u("Bye")]),
    # task t2: a success with an erring step in the middle (weight 0, episode kept)
    _sim("s3", "t2", 1.0, [
        _u("Book a seat."), _a(None, _call("c1", "search", q="x")),
        _tool("c1", "Error: bad query", error=True), _a(None, _call("c2", "search", q="y")),
        _tool("c2", '{"seats": 3}'), _a("Booked.")]),
    # task t2: the user's own tool call (telecom style) between the agent's actions
    _sim("s4", "t2", 1.0, [
        _u("My phone is off."), _a("Please toggle airplane mode."),
        {"role": "user", "content": None, "tool_calls": [
            {"id": "u1", "name": "toggle_airplane", "arguments": {}, "requestor": "user"}]},
        {"role": "tool", "id": "u1", "content": "airplane off", "requestor": "user"},
        _u("Done it."), _a("Great, all set.")]),
    # task t3: a failure without errors, opened by the agent (no prompt for its first turn)
    _sim("s5", "t3", 0.0, [_a("Welcome."), _u("Refund please."), _a("No refunds.")]),
    # task t3: a success whose only step erred: nothing to train on
    _sim("s6", "t3", 1.0, [_u("Status?"), _a(None, _call("c1", "status")),
                           _tool("c1", "Error: down", error=True)]),
]


def tau2_file(path: Path, sims: list[dict]) -> Path:
    path.write_text(json.dumps({
        "info": {"git_commit": "abc", "agent_info": {"llm": "m"}, "user_info": {"llm": "u"},
                 "environment_info": {"domain_name": "airline", "tool_defs": None}},
        "tasks": [{"id": t} for t in sorted({s["task_id"] for s in sims})],
        "simulations": sims}))
    return path


def labelled_table(tmp: Path, raw: Path, fmt: str, verifiers: list[str], weights: dict):
    summary = ingest([raw], tmp / "ingested", fmt=fmt)
    assert summary.quarantined == 0, summary.to_dict()
    return relabel(read_table(tmp / "ingested" / "steps"), verifiers, weights)


def config(**kw) -> Export:
    return Export(out="unused", **kw)


@pytest.fixture(scope="module")
def tau2_export(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tau2")
    raw = tau2_file(tmp / "results.json", SIMS)
    steps = labelled_table(tmp, raw, "tau2", TAU2_VERIFIERS, TAU2_WEIGHTS)
    out = tmp / "export"
    manifest = export_dataset(steps, out, config(split_method="shuffle",
                                                 splits={"train": 0.34, "test": 0.66}),
                              process=PROCESS, outcome=OUTCOME)
    return raw, out, manifest, steps


def _raw_expectations(sims: list[dict]) -> dict:
    """The SWiRL filters recomputed from the raw JSON: an assistant message fails the
    process check when one of its calls came back an error; an episode succeeds when its
    reward is > 0."""
    out = {}
    for sim in sims:
        errors = {m["id"] for m in sim["messages"] if m["role"] == "tool" and m.get("error")}
        ok = [not any(c["id"] in errors for c in m.get("tool_calls") or [])
              for m in sim["messages"] if m["role"] == "assistant"]
        out[sim["id"]] = {"task": sim["task_id"], "success": sim["reward_info"]["reward"] > 0,
                          "ok": ok, "first_has_prompt": sim["messages"][0]["role"] != "assistant"}
    return out


def test_files_have_the_published_shapes_and_the_logged_conversations(tau2_export):
    raw, out, _, _ = tau2_export
    found = check_export_folder(out)
    sims = {s["id"]: s for s in json.loads(raw.read_text())["simulations"]}
    for fmt in ("sft", "sft_openai"):
        for records in found[fmt].values():
            for r in records:
                expected = tau2_expected(sims[r["provenance"]["episode_id"]])
                messages = r["messages"]
                if fmt == "sft_openai":  # the same conversation, arguments as JSON text
                    messages = [{**m, "tool_calls": [
                        {**c, "function": {**c["function"],
                                           "arguments": json.loads(c["function"]["arguments"])}}
                        for c in m["tool_calls"]]} if m.get("tool_calls") else m
                        for m in messages]
                assert_same_conversation(messages, expected, r["provenance"]["episode_id"])


def test_parallel_calls_are_one_assistant_message_and_user_tool_calls_are_left_out(
        tau2_export):
    _, out, manifest, _ = tau2_export
    records = {r["provenance"]["episode_id"]: r for path in (out / "sft").glob("*.jsonl")
               for r in read_jsonl(path)}
    s1 = records["s1"]["messages"]
    both = [m for m in s1 if m.get("tool_calls")]
    assert len(both) == 1 and [c["id"] for c in both[0]["tool_calls"]] == ["c1", "c2"]
    assert both[0]["content"] == "Looking."
    assert [m["role"] for m in s1][:3] == ["system", "assistant", "user"]
    assert s1[-1] == {"role": "assistant", "content": "Done, R1 moved.", "weight": 1.0}
    assert "airplane off" not in json.dumps(records["s4"])
    assert manifest["other_actor_events_not_exported"] == 2  # s4: the user's call and result


def test_counts_equal_the_filters_recomputed_from_the_raw_log(tau2_export):
    raw, out, manifest, _ = tau2_export
    want = _raw_expectations(json.loads(raw.read_text())["simulations"])
    found = check_export_folder(out)

    def ids(fmt):
        return sorted(r["provenance"]["episode_id"] for rs in found[fmt].values() for r in rs)

    sft = sorted(e for e, w in want.items() if w["success"] and any(w["ok"]))
    assert ids("sft") == ids("sft_openai") == sft == ["s1", "s3", "s4"]
    assert manifest["exports"]["sft"]["dropped_no_trained_message"] == 1  # s6
    weights = {r["provenance"]["episode_id"]: [m["weight"] for m in r["messages"]
                                               if m["role"] == "assistant"]
               for rs in found["sft_openai"].values() for r in rs}
    assert weights == {e: [int(v) for v in want[e]["ok"]] for e in sft}
    # KTO: every assistant turn with something before it, label = process and outcome
    kto = sorted((r["provenance"]["episode_id"], r["provenance"]["steps"][0]["t"],
                  r["label"]) for rs in found["kto"].values() for r in rs)
    expected_kto = []
    for e, w in want.items():
        rows = [r for r in read_table(out.parent / "ingested" / "steps").to_pylist()
                if r["episode_id"] == e]
        first_t = sorted({min(r["t"] for r in rows if r["turn"] == k)
                          for k in {r["turn"] for r in rows}})
        for k, (t, ok) in enumerate(zip(first_t, w["ok"], strict=True)):
            if k or w["first_has_prompt"]:
                expected_kto.append((e, t, ok and w["success"]))
    assert kto == sorted(expected_kto)
    assert manifest["exports"]["kto"]["skipped_empty_prompt"] == 1  # s5 opens with the agent
    prm = {r["provenance"]["episode_id"]: r["labels"] for rs in found["prm"].values()
           for r in rs}
    assert prm == {e: w["ok"] for e, w in want.items()}


def test_splits_keep_each_task_in_one_split(tau2_export):
    _, out, manifest, _ = tau2_export
    found = check_export_folder(out)
    split_of_task: dict[str, set] = {}
    for fmt in found.values():
        for split, records in fmt.items():
            for r in records:
                split_of_task.setdefault(r["provenance"]["task"], set()).add(split)
    assert all(len(s) == 1 for s in split_of_task.values()), split_of_task
    # shuffle: exact counts, 0.34 * 3 tasks -> 1 in train, 2 in test
    assert manifest["splits"]["tasks"] == {"train": 1, "test": 2}


def test_provenance_points_at_the_logged_action(tau2_export):
    raw, out, _, _ = tau2_export
    doc = json.loads(raw.read_text())
    for records in check_export_folder(out)["sft"].values():
        for r in records:
            for step in r["provenance"]["steps"]:
                node = doc
                for part in step["source_pointer"].strip("/").split("/"):
                    node = node[int(part)] if isinstance(node, list) else node[part]
                message = r["messages"][step["message"]]
                if "tool_calls" in step["source_pointer"]:
                    assert any(c["id"] == node["id"] and c["function"]["arguments"]
                               == node["arguments"] for c in message["tool_calls"])
                else:
                    assert node["role"] == "assistant" and node["content"] == message["content"]
                assert step["source_file"] == str(raw)


def test_parquet_holds_the_jsonl_records(tau2_export):
    _, out, _, _ = tau2_export
    manifest = json.loads((out / "manifest.json").read_text())
    for split in ("train", "test"):
        if f"sft/{split}.jsonl" in manifest["not_written"]:
            assert f"sft/{split}.parquet" in manifest["not_written"]
            assert not (out / "sft" / f"{split}.parquet").exists()
            continue
        rows = pq.read_table(out / "sft" / f"{split}.parquet").to_pylist()
        records = read_jsonl(out / "sft" / f"{split}.jsonl")
        assert len(rows) == len(records)
        for row, record in zip(rows, records, strict=True):
            assert row["provenance"] == record["provenance"]
            assert (json.loads(row["tools"]) if row["tools"] else None) == record["tools"]
            for got, want in zip(row["messages"], record["messages"], strict=True):
                got = {k: v for k, v in got.items() if v is not None or k == "content"}
                for c in got.get("tool_calls") or []:
                    c["function"]["arguments"] = json.loads(c["function"]["arguments"])
                assert got == want


def test_manifest_says_what_was_exported(tau2_export):
    _, out, manifest, steps = tau2_export
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["verifiers"]["verifier_version"] == [",".join(sorted(TAU2_VERIFIERS))]
    assert manifest["filters"] == {"process": PROCESS, "outcome": OUTCOME}
    assert manifest["source"]["rows"] == steps.num_rows and manifest["source"]["episodes"] == 6
    for rel, entry in manifest["files"].items():
        path = out / rel
        assert path.is_file()
        lines = pq.read_table(path).num_rows if rel.endswith(".parquet") else \
            len(path.read_bytes().splitlines())
        assert lines == entry["records"], rel


def test_same_input_same_bytes(tau2_export, tmp_path):
    _, out, _, steps = tau2_export
    again = tmp_path / "again"
    export_dataset(steps, again, config(split_method="shuffle",
                                        splits={"train": 0.34, "test": 0.66}),
                   process=PROCESS, outcome=OUTCOME)
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (out / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_the_real_tau2_logs_export_as_logged(tmp_path):
    real = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "tau2-bench"
    files = sorted(real.glob("*.json"))
    if len(files) != 2:
        pytest.skip(f"tau2-bench logs not found in {real}")
    from tracerl.data.redact import Redactor

    redactor = Redactor()

    def redact(value):
        return redactor.record(value)[0]

    for raw in files:
        steps = labelled_table(tmp_path / raw.stem, raw, "tau2",
                               ["tau2_outcome@1", "tool_error_penalty@1"], TAU2_WEIGHTS)
        out = tmp_path / raw.stem / "export"
        manifest = export_dataset(steps, out, config(), process=PROCESS, outcome=OUTCOME)
        sims = {s["id"]: s for s in json.loads(raw.read_text())["simulations"]}
        want = _raw_expectations(list(sims.values()))
        found = check_export_folder(out)
        exported = {r["provenance"]["episode_id"]: r for rs in found["sft"].values()
                    for r in rs}
        assert sorted(exported) == sorted(e for e, w in want.items()
                                          if w["success"] and any(w["ok"]))
        for e, r in exported.items():
            assert_same_conversation(r["messages"], tau2_expected(sims[e], redact), e, redact)
        assert sum(manifest["exports"]["prm"]["records"].values()) == len(sims) == 20


# --- other adapters -------------------------------------------------------------------------
def test_openai_chat_conversations_come_back_as_they_were_logged(tmp_path):
    conversation = {"id": "conv-1", "task_id": "refund", "reward": 1.0, "messages": [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": [{"type": "text", "text": "Refund order 7."}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "lookup",
                                                         "arguments": '{"order": 7}'}},
            {"id": "b", "type": "function", "function": {"name": "policy",
                                                         "arguments": '{"kind": "refund"}'}}]},
        {"role": "tool", "tool_call_id": "b", "content": "eligible"},
        {"role": "tool", "tool_call_id": "a", "content": '{"order": 7, "paid": 12}'},
        {"role": "assistant", "content": "Refunded."}]}
    raw = tmp_path / "chats.jsonl"
    raw.write_bytes(orjson.dumps(conversation) + b"\n")
    steps = labelled_table(tmp_path, raw, "openai-chat", TAU2_VERIFIERS, TAU2_WEIGHTS)
    out = tmp_path / "export"
    export_dataset(steps, out, config(splits={"train": 1.0}), process=PROCESS,
                   outcome=OUTCOME)
    [record] = check_export_folder(out)["sft_openai"]["train"]
    got = [{k: v for k, v in m.items() if k != "weight"} for m in record["messages"]]
    want = conversation["messages"]
    assert got[:2] == [want[0], {"role": "user", "content": "Refund order 7."}]
    assert got[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "lookup",
                                                     "arguments": '{"order":7}'}},
        {"id": "b", "type": "function", "function": {"name": "policy",
                                                     "arguments": '{"kind":"refund"}'}}]}
    # tool messages follow the calls' order (the log answered b first)
    assert got[3:5] == [{"role": "tool", "tool_call_id": "a", "content": '{"order":7,"paid":12}'},
                        {"role": "tool", "tool_call_id": "b", "content": "eligible"}]
    assert got[5] == want[5]


def test_native_jsonl_without_turns_or_call_ids(tmp_path):
    def step(t, tool, args, result, done=False, reward=None, error=None):
        return {"episode_id": "e1", "t": t, "task": "add",
                "state": {"user_goal": "Compute 2 + 3", "conversation_history": "",
                          "available_tools": ["x", "add", "final"]},
                "action": {"type": "tool_call", "tool": tool, "arguments": args},
                "observation": {"tool_result": result, "error": error},
                "reward": reward, "done": done}

    lines = [step(0, "x", {}, 2), step(1, "add", {"a": 2, "b": 3}, None, error="boom"),
             step(2, "add", {"a": 2, "b": 3}, 5),
             step(3, "final", {"answer": 5}, None, done=True, reward=1.0)]
    raw = tmp_path / "steps.jsonl"
    raw.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    steps = labelled_table(tmp_path, raw, "jsonl", TAU2_VERIFIERS, TAU2_WEIGHTS)
    out = tmp_path / "export"
    export_dataset(steps, out, config(splits={"train": 1.0}), process=PROCESS,
                   outcome=OUTCOME)
    [record] = check_export_folder(out)["sft"]["train"]
    messages = record["messages"]
    assert messages[0] == {"role": "user", "content": "Compute 2 + 3"}
    calls = [c for m in messages for c in m.get("tool_calls") or []]
    assert [c["id"] for c in calls] == ["call_0", "call_1", "call_2", "call_3"]
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["2", "boom", "5"]
    assert [m["weight"] for m in messages if m["role"] == "assistant"] == [1.0, 0.0, 1.0, 1.0]
    # The log offers x, add and final but keeps no definition: each one's parameters are
    # inferred from its logged calls, and its description says so.
    def inferred(name: str, n: int, parameters: dict) -> dict:
        return {"type": "function", "function": {
            "name": name, "description": f"Parameters inferred by tracerl from {n} logged "
                                         f"call{'s' if n > 1 else ''}; not the tool's own "
                                         "definition.", "parameters": parameters}}
    assert record["tools"] == [
        inferred("x", 1, {"type": "object", "properties": {}}),
        inferred("add", 2, {"type": "object", "properties": {"a": {"type": "integer"},
                                                             "b": {"type": "integer"}},
                            "required": ["a", "b"]}),
        inferred("final", 1, {"type": "object", "properties": {"answer": {"type": "integer"}},
                              "required": ["answer"]})]


def test_tool_definitions_replace_the_stubs(tmp_path, tau2_export):
    _, _, _, steps = tau2_export
    defs = tmp_path / "tools.json"
    defs.write_text(json.dumps([{"type": "function", "function": {
        "name": "get_user", "parameters": {"type": "object", "properties": {
            "user_id": {"type": "string"}}}}}, {"name": "cancel"}]))
    tools = load_tool_definitions(defs)
    export_dataset(steps, tmp_path / "out", config(splits={"train": 1.0}, formats=["sft"]),
                   process=PROCESS, outcome=OUTCOME, tool_definitions=tools)
    [first, *_] = read_jsonl(tmp_path / "out" / "sft" / "train.jsonl")
    # the tau2 log names no offered tools: every definition given, then the other logged
    # tools' inferred ones
    names = [t["function"]["name"] for t in first["tools"]]
    assert names[:2] == ["get_user", "cancel"] and names[2:] == sorted(names[2:])
    assert first["tools"][0]["function"]["parameters"]["properties"] == {
        "user_id": {"type": "string"}}
    assert all("inferred" in t["function"]["description"] for t in first["tools"][2:])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["tool_sources"]["get_user"] == "definition"
    assert manifest["tool_sources"][names[2]] == "inferred from logged calls"
    defs.write_text(json.dumps([{"function": {"description": "no name"}}]))
    with pytest.raises(ExportError, match="tool 0: expected an object with a function name"):
        load_tool_definitions(defs)


# --- splits and params ----------------------------------------------------------------------
def test_hash_split_is_stable_as_tasks_arrive():
    shares = {"train": 0.8, "validation": 0.1, "test": 0.1}
    before = assign_splits([f"task:{i}" for i in range(200)], shares, seed=3)
    after = assign_splits([f"task:{i}" for i in range(400)], shares, seed=3)
    assert all(after[k] == v for k, v in before.items())
    share = sum(v == "train" for v in after.values()) / 400
    assert 0.74 < share < 0.86
    assert assign_splits(list(before), shares, seed=4) != before


def test_shuffle_split_counts_are_exact():
    keys = [f"k{i}" for i in range(7)]
    got = assign_splits(keys, {"train": 0.6, "validation": 0.2, "test": 0.2}, 1, "shuffle")
    counts = {s: sum(v == s for v in got.values()) for s in ("train", "validation", "test")}
    # 4.2, 1.4, 1.4: floors 4, 1, 1; the key left goes to the largest remainder (the first)
    assert counts == {"train": 4, "validation": 2, "test": 1}


def test_export_params_are_checked():
    base = {"gamma": 1.0, "datasets": {"d": {}}, "validate": {"reward_min": 0, "reward_max": 1},
            "paths": {"ingested": "i", "labelled": "l", "reports": "r", "metrics": "m",
                      "plots": "p"},
            "relabel": {"verifiers": ["tool_error_penalty@1"],
                        "weights": {"tool_error_penalty": 1.0}},
            "coverage": {"featurizer": "dialogue"}}
    import tracerl.envs  # noqa: F401  (the dialogue featurizer)

    assert validate_params({**base, "export": {"out": "x"}}).export.sft.episodes == "outcome"
    with pytest.raises(ParamsError, match="shares must sum to 1"):
        validate_params({**base, "export": {"out": "x", "splits": {"train": 0.5}}})
    with pytest.raises(ParamsError, match=r"unknown key export.sft.episode \(did you mean"):
        validate_params({**base, "export": {"out": "x", "sft": {"episode": "all"}}})


def test_an_empty_table_writes_no_empty_file(tau2_export, tmp_path):
    # An empty JSONL file is no dataset (`datasets.load_dataset("json")` stops on it): a
    # split or format without records writes nothing, and the manifest says which and why.
    _, _, _, steps = tau2_export
    manifest = export_dataset(steps.slice(0, 0), tmp_path / "out", config(), process=PROCESS,
                              outcome=OUTCOME)
    assert manifest["source"] == {"rows": 0, "episodes": 0}
    assert manifest["files"] == {}
    assert "sft/train.jsonl" in manifest["not_written"]
    assert "sft/train.parquet" in manifest["not_written"]
    assert "no records" in manifest["not_written"]["kto/test.jsonl"]
    assert [p.name for p in (tmp_path / "out").rglob("*")] == ["manifest.json"]


def test_a_folder_that_is_not_an_export_is_never_replaced(tau2_export, tmp_path):
    _, _, _, steps = tau2_export
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("years of work")
    with pytest.raises(ExportError, match="holds files but no export manifest"):
        export_dataset(steps, tmp_path / "home", config(), process=PROCESS, outcome=OUTCOME)
    assert (tmp_path / "home" / "thesis.tex").read_text() == "years of work"
    export_dataset(steps, tmp_path / "out", config(), process=PROCESS, outcome=OUTCOME)
    export_dataset(steps, tmp_path / "out", config(), process=PROCESS, outcome=OUTCOME)


def test_cli_exports_a_table_and_refuses_bad_input(tau2_export, tmp_path):
    from typer.testing import CliRunner

    from tracerl.cli import app
    from tracerl.io.fileio import write_table

    _, out, _, table = tau2_export
    steps = tmp_path / "labelled"
    write_table(table, steps)
    params = tmp_path / "params.yaml"
    params.write_text("relabel:\n  verifiers: [tau2_outcome@1, tool_error_penalty@1]\n"
                      "  weights: {task_success: 1.0, tool_error_penalty: 0.0}\n"
                      "  filters: {process: {tool_error_penalty: 0.0}, outcome: task_success}\n"
                      "export:\n  out: ignored\n  split_method: shuffle\n"
                      "  splits: {train: 0.34, test: 0.66}\n")
    result = CliRunner().invoke(app, ["export", str(steps), "--out", str(tmp_path / "cli"),
                                      "--params", str(params)])
    assert result.exit_code == 0, result.output
    assert "manifest:" in result.output
    written = json.loads((out / "manifest.json").read_text())["files"]
    for rel in ("sft/train.jsonl", "sft_openai/test.jsonl", "kto/test.jsonl"):
        assert (rel in written) == (tmp_path / "cli" / rel).exists(), rel
        if rel in written:
            assert (tmp_path / "cli" / rel).read_bytes() == (out / rel).read_bytes(), rel
    params.write_text("export:\n  out: x\n  splits: {train: 0.5}\n")
    result = CliRunner().invoke(app, ["export", str(steps), "--out", str(tmp_path / "c2"),
                                      "--params", str(params)])
    assert result.exit_code == 2 and "shares must sum to 1" in result.output
    result = CliRunner().invoke(app, ["export", str(tmp_path / "nothing"), "--out",
                                      str(tmp_path / "c3")])
    assert result.exit_code == 2 and "no Parquet files" in result.output


def test_the_logs_tool_definitions_are_exported(tmp_path):
    # An OpenAI-chat log that carries its `tools`: the records hold those definitions
    # (the manifest says so); a tool called but not defined there is inferred.
    lookup = {"type": "function", "function": {
        "name": "lookup", "description": "Find an order.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                       "required": ["id"]}}}
    record = {"id": "c1", "tools": [lookup], "reward": 1.0, "messages": [
        {"role": "user", "content": "where is order 7?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "lookup", "arguments": '{"id": "7"}'}},
            {"id": "b", "type": "function",
             "function": {"name": "track", "arguments": '{"id": "7", "n": 2}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "shipped"},
        {"role": "tool", "tool_call_id": "b", "content": "in transit"},
        {"role": "assistant", "content": "It is in transit."}]}
    raw = tmp_path / "chat.jsonl"
    raw.write_bytes(orjson.dumps(record) + b"\n")
    steps = labelled_table(tmp_path, raw, "openai-chat", TAU2_VERIFIERS, TAU2_WEIGHTS)
    out = tmp_path / "export"
    manifest = export_dataset(steps, out, config(splits={"train": 1.0}, formats=["sft"],
                                                 sft={"episodes": "all", "weight": "none"}),
                              process=PROCESS, outcome=OUTCOME)
    [exported] = check_export_folder(out)["sft"]["train"]
    tools = {t["function"]["name"]: t for t in exported["tools"]}
    assert tools["lookup"] == lookup
    assert tools["track"]["function"]["parameters"]["properties"] == {
        "id": {"type": "string"}, "n": {"type": "integer"}}
    assert manifest["tool_sources"] == {"lookup": "definition from the log",
                                        "track": "inferred from logged calls"}
