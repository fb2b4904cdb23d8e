"""A process that only ingests starts without pandas (tracerl.io.lean): the `tracerl ingest`
command and its parser workers never import it, and pyarrow still converts to pandas
when asked outright afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.integration  # each test probes a fresh process

STEP = {"episode_id": "e", "t": 0, "action": {"type": "message", "content": "hi"},
        "done": True, "reward": 1.0}
CHAT = {"id": "c1", "messages": [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": "42"},
    {"role": "assistant", "content": "done"}], "reward": 1}

_PROBE = """
import sys
from pathlib import Path
from tracerl.io.lean import pyarrow_without_pandas
pyarrow_without_pandas()
from tracerl.data.ingest import ingest
s = ingest([Path(sys.argv[1])], sys.argv[2], fmt=sys.argv[3], workers=int(sys.argv[4]))
print("pandas imported:", "pandas" in sys.modules, "rows:", s.rows, flush=True)
import pyarrow as pa
print(type(pa.table({"a": [1]}).to_pandas()).__name__)
"""


def _probe(tmp_path: Path, path: Path, fmt: str, workers: int) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(path), str(tmp_path / "out"),
                           fmt, str(workers)], capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()


def test_native_ingest_with_workers_never_imports_pandas(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b"".join(orjson.dumps({**STEP, "episode_id": f"e{k}"}) + b"\n"
                              for k in range(3000)))
    assert _probe(tmp_path, path, "jsonl", 2) == ["pandas imported: False rows: 3000",
                                                   "DataFrame"]


def test_adapted_ingest_never_imports_pandas(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(CHAT) + "\n")
    assert _probe(tmp_path, path, "openai-chat", 1) == ["pandas imported: False rows: 2",
                                                         "DataFrame"]


def test_the_ingest_command_reads_the_same_without_pandas(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(CHAT) + "\n")
    proc = subprocess.run([sys.executable, "-m", "tracerl", "ingest", str(path), "--out",
                           str(tmp_path / "out"), "--format", "openai-chat"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "ingest_summary.json").read_text())
    assert (summary["read"], summary["accepted"], summary["rows"]) == (1, 1, 2)
