"""What the tests of the new format packages (tracerl/data/formats/<name>/) share: ingest
files detected as one format, and the counts a test recomputes from the raw file."""

from __future__ import annotations

from pathlib import Path

from tests.adapter_helpers import ingest_files
from tracerl.data.formats import detect_format


def ingest_detected(tmp_path: Path, name: str, *paths: Path, **kw):
    """`ingest_files` of `paths`, each detected as format `name` (`--format auto`), with
    max_bad_fraction 1.0 so that a quarantined record shows in the test, not as a failed
    run."""
    for path in paths:
        assert detect_format(path) == name, path
    return ingest_files(tmp_path, *paths, **{"max_bad_fraction": 1.0, **kw})


def step_counts(rows: list[dict]) -> tuple[int, int, int]:
    """(tool-call rows, of them with a result, message rows) of a step table."""
    calls = [r for r in rows if r["action"]["type"] == "tool_call"]
    answered = [r for r in calls if r["observation"]["tool_result"] is not None
                or r["observation"]["error"] is not None]
    return len(calls), len(answered), sum(r["action"]["type"] == "message" for r in rows)
