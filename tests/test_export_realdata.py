"""Every real export under ../shared/realdata/ (every adapter's format: tau2, Anthropic,
ATIF, Claude Code, Langfuse, OTel GenAI) goes ingest -> relabel -> export into records of
the TRL / OpenAI / KTO / PRM shapes, with every logged agent step in its conversation:
the conversation is built on the step schema, not on one adapter."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.export_checks import check_export_folder
from tracerl.config.export import Export
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.export.run import export_dataset
from tracerl.io.fileio import read_table

REAL = Path(__file__).resolve().parents[2] / "shared" / "realdata"
if not REAL.is_dir():
    REAL = Path("/work/shared/realdata")
FILES = sorted(p for p in REAL.rglob("*") if p.is_file() and p.name.endswith((".json", ".jsonl"))
               ) if REAL.is_dir() else []
pytestmark = pytest.mark.skipif(not FILES, reason="../shared/realdata is not here")


@pytest.mark.parametrize("raw", FILES, ids=lambda p: str(p.relative_to(REAL)))
def test_every_real_log_exports_every_agent_step(tmp_path, raw):
    summary = ingest([raw], tmp_path / "ingested", fmt="auto")
    assert summary.quarantined == 0, summary.to_dict()
    if summary.rows == 0:  # e.g. a Claude Code compaction agent: no step of the agent's
        pytest.skip(f"{raw.name}: no agent step ({summary.notes})")
    steps = relabel(read_table(tmp_path / "ingested" / "steps"),
                    ["tau2_outcome@1", "tool_error_penalty@1"],
                    {"task_success": 1.0, "tool_error_penalty": 0.0})
    # Every episode and every step: nothing filtered, so the counts are the table's.
    config = Export(out="unused", sft={"episodes": "all", "weight": "none"})
    export_dataset(steps, tmp_path / "export", config, process={"tool_error_penalty": 0.0},
                   outcome="task_success")
    records = check_export_folder(tmp_path / "export")

    rows = steps.select(["episode_id", "t", "turn", "action"]).to_pylist()
    episodes = {r["episode_id"] for r in rows}
    calls = sum(r["action"]["type"] == "tool_call" for r in rows)
    # One assistant message per turn; a row without a turn is its own.
    turns = len({(r["episode_id"], r["turn"]) for r in rows if r["turn"] is not None}) + sum(
        r["turn"] is None for r in rows)

    sft = [r for split in records["sft"].values() for r in split]
    assert sorted(r["provenance"]["episode_id"] for r in sft) == sorted(episodes)
    assistant = [m for r in sft for m in r["messages"] if m["role"] == "assistant"]
    assert len(assistant) == turns
    assert sum(len(m.get("tool_calls") or []) for m in assistant) == calls
    # Provenance: every exported step is a row of the table, each row exported once.
    exported = Counter((r["provenance"]["episode_id"], s["t"])
                       for r in sft for s in r["provenance"]["steps"])
    assert exported == Counter((r["episode_id"], r["t"]) for r in rows)
    # KTO: one record per turn with something before it (an opening greeting has no prompt).
    kto = sum(len(split) for split in records.get("kto", {}).values())
    assert kto == turns - sum(r["messages"][0]["role"] == "assistant" for r in sft)
    prm = [r for split in records["prm"].values() for r in split]
    assert sum(len(r["labels"]) for r in prm) == turns
