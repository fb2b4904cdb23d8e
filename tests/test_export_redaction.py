"""No secret that ingest redacted reaches an export: secrets of every built-in kind planted
in raw logs of each format (tau2, OpenAI chat, native JSONL), in every place an export
copies text from (system/user messages, assistant text, tool-call arguments, tool results,
errors, the goal, the task), then ingest -> relabel -> export of every format; not one
byte of a secret is in any file written, and the placeholders are there instead."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from tests.export_checks import check_export_folder
from tests.test_export import TAU2_VERIFIERS, TAU2_WEIGHTS, labelled_table, tau2_file
from tests.test_redact import SECRETS, _needle
from tracerl.config.export import Export
from tracerl.export.run import export_dataset

EVERY = [s for v in SECRETS.values() for s in v]


def _s(i: int) -> str:
    return EVERY[i % len(EVERY)]


def _tau2(path: Path) -> Path:
    sims = []
    for k in range(len(EVERY)):
        sims.append({"id": f"s{k}", "task_id": f"t{k % 3}", "trial": 0, "reward_info": {
            "reward": float(k % 2)}, "messages": [
            {"role": "system", "content": f"internal key {_s(k)}"},
            {"role": "user", "content": f"I am {_s(k + 1)}, help"},
            {"role": "assistant", "content": f"Checking {_s(k + 2)}", "tool_calls": [
                {"id": "c1", "name": "lookup", "requestor": "assistant",
                 "arguments": {"email": _s(k + 3), "password": f"hunter2-{k}"}}]},
            {"role": "tool", "id": "c1", "requestor": "assistant",
             "content": json.dumps({"token": _s(k + 4), "note": _s(k + 5)})},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c2", "name": "charge", "requestor": "assistant",
                 "arguments": {"card": "4111"}}]},
            {"role": "tool", "id": "c2", "requestor": "assistant", "error": True,
             "content": f"Error: denied for {_s(k + 6)}"},
            {"role": "user", "content": f"my key is {_s(k + 7)}"},
            {"role": "assistant", "content": f"Done {_s(k + 8)}"}]})
    return tau2_file(path, sims)


def _openai_chat(path: Path) -> Path:
    lines = []
    for k in range(len(EVERY)):
        lines.append(orjson.dumps({"id": f"c{k}", "task_id": f"t{k % 3}", "reward": 1.0,
                                   "messages": [
            {"role": "system", "content": f"api {_s(k)}"},
            {"role": "user", "content": [{"type": "text", "text": f"hi {_s(k + 1)}"}]},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "a", "type": "function", "function": {
                    "name": "find", "arguments": json.dumps({"q": _s(k + 2),
                                                             "api_key": _s(k + 3)})}}]},
            {"role": "tool", "tool_call_id": "a", "content": f"found {_s(k + 4)}"},
            {"role": "assistant", "content": f"here: {_s(k + 5)}"}]}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _native(path: Path) -> Path:
    lines = []
    for k in range(len(EVERY)):
        for t in range(2):
            lines.append(orjson.dumps({
                "episode_id": f"e{k}", "t": t, "task": f"t{k % 3}",
                "state": {"user_goal": f"goal {_s(k)}", "conversation_history": f"h {_s(k + 1)}",
                          "available_tools": ["lookup"]},
                "action": {"type": "tool_call", "tool": "lookup",
                           "arguments": {"secret": _s(k + 2), "q": f"x {_s(k + 3)}"}},
                "observation": {"tool_result": {"rows": [_s(k + 4)]},
                                "error": f"fail {_s(k + 5)}" if t == 0 else None},
                "reward": 1.0 if t == 1 else 0.0, "done": t == 1}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("fmt,make", [("tau2", _tau2), ("openai-chat", _openai_chat),
                                      ("jsonl", _native)])
def test_no_redacted_secret_reaches_any_export(tmp_path, fmt, make):
    raw = make(tmp_path / ("raw.jsonl" if fmt != "tau2" else "raw.json"))
    assert any(_needle(s).encode() in raw.read_bytes() for s in EVERY)
    steps = labelled_table(tmp_path, raw, fmt, TAU2_VERIFIERS, TAU2_WEIGHTS)
    out = tmp_path / "export"
    # every format, every episode: nothing filtered away before it could leak
    config = Export(out=str(out), splits={"train": 0.5, "test": 0.5},
                    sft={"episodes": "all", "weight": "none"})
    manifest = export_dataset(steps, out, config, process={"tool_error_penalty": 0.0},
                              outcome="task_success")
    check_export_folder(out)
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) == len(manifest["files"]) + 1  # and manifest.json
    # Parquet compresses its pages: its values are read back, not its bytes searched
    blob = b"".join(orjson.dumps(pq.read_table(p).to_pylist()) if p.suffix == ".parquet"
                    else p.read_bytes() for p in written)
    for secret in EVERY:
        assert _needle(secret).encode() not in blob, (fmt, secret)
    assert b"hunter2" not in blob  # a value under a secret key (tau2's arguments)
    text = "".join(p.read_text() for p in written if p.suffix == ".jsonl")
    kinds = {k for k in (*SECRETS, "secret_value") if f"[REDACTED:{k}:" in text}
    assert kinds >= set(SECRETS), kinds  # the text is there, as placeholders
    assert sum(manifest["exports"]["sft"]["records"].values()) == len(EVERY)
