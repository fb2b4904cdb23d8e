"""What the tests of the new format packages (tracerl/data/formats/<name>/) share: ingest
a file with one package's reader, and the counts a test recomputes from the raw file."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.adapter_helpers import ingest_files


def ingest_with(tmp_path: Path, package: ModuleType, *paths: Path, **kw):
    """`ingest_files` of `paths` read by `package.read` (its NAME a format of the run), with
    max_bad_fraction 1.0 so that a quarantined record shows in the test, not as a failed
    run. Until the Format API registers the packages, the run's format lists are patched
    for the call."""
    import tracerl.data.ingest.run as run

    original = run.reader
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run, "FORMATS", (*run.FORMATS, package.NAME))
        mp.setattr(run, "RECORD_UNITS", {**run.RECORD_UNITS, package.NAME: package.UNIT})
        mp.setattr(run, "reader", lambda fmt: (package.read, package.UNIT)
                   if fmt == package.NAME else original(fmt))
        return ingest_files(tmp_path, *paths, fmt=package.NAME,
                            **{"max_bad_fraction": 1.0, **kw})


def step_counts(rows: list[dict]) -> tuple[int, int, int]:
    """(tool-call rows, of them with a result, message rows) of a step table."""
    calls = [r for r in rows if r["action"]["type"] == "tool_call"]
    answered = [r for r in calls if r["observation"]["tool_result"] is not None
                or r["observation"]["error"] is not None]
    return len(calls), len(answered), sum(r["action"]["type"] == "message" for r in rows)
