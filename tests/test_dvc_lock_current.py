"""The committed dvc.lock files are current for the code and params: CI's `make run` must leave
`git status` clean, and a code change committed without re-running the pipeline (and
committing the lock) fails there only after setup. This catches it in `make test`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]

# DVC commands in the checkout itself (its lock, .dvc/tmp): on one xdist worker
pytestmark = pytest.mark.xdist_group("checkout_dvc")

CODE_PACKAGES = {"tracerl", "flows", "tasks"}


def _is_code(dep: str) -> bool:
    parts = [p for p in PurePosixPath(dep).parts if p not in ("..", ".")]
    return bool(parts) and parts[0] in CODE_PACKAGES


def _stale(status: dict) -> list[str]:
    """Stage: what changed, for code deps and params only (data deps and outputs are absent
    on a clone that has not run the pipeline; they are `make run`'s to produce)."""
    stale = []
    for stage, changes in status.items():
        for change in changes:
            if not isinstance(change, dict):
                continue
            for dep, state in change.get("changed deps", {}).items():
                if _is_code(dep):
                    stale.append(f"{stage}: {dep} {state}")
            for file, params in change.get("changed params", {}).items():
                stale.append(f"{stage}: params {file} {params}")
    return stale


@pytest.mark.integration
def test_committed_dvc_lock_matches_code_and_params() -> None:
    dvc = shutil.which("dvc", path=str(Path(sys.executable).parent))
    assert dvc, "dvc is not installed beside this interpreter"
    done = subprocess.run([dvc, "status", "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stale = _stale(json.loads(done.stdout or "{}"))
    assert not stale, ("dvc.lock is stale for code or params; run `make run` and commit the "
                       "dvc.lock files:\n" + "\n".join(stale))


def test_stale_reads_code_deps_and_params_only() -> None:
    status = {
        "ingest": [{"changed deps": {"tracerl/data/adapters": "modified",
                                     "data/raw": "deleted"}},
                   {"changed outs": {"data/ingested": "deleted"}}],
        "pipelines/tau2/dvc.yaml:train": [
            {"changed deps": {"../../flows/train.py": "modified"}},
            {"changed params": {"params.yaml": {"train.seed": "modified"}}}],
        "report": ["always changed"],
    }
    assert _stale(status) == [
        "ingest: tracerl/data/adapters modified",
        "pipelines/tau2/dvc.yaml:train: ../../flows/train.py modified",
        "pipelines/tau2/dvc.yaml:train: params params.yaml {'train.seed': 'modified'}",
    ]
