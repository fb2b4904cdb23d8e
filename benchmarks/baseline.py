"""A benchmark's figures beside an earlier revision's, measured in the same run.

`checkout(rev)` gives a temporary `git worktree` of REV (removed afterwards), and
`measured(argv, tree)` runs a command with that tree first on PYTHONPATH (this venv: no
second install), returning its whole-process wall and CPU seconds and its peak RSS from
os.wait4 (the peak over its process tree when it starts no processes of its own).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    wall: float
    cpu: float
    peak_rss_bytes: int
    stdout: str


@contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """A detached worktree of `rev` in a temporary folder, removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="tracerl-baseline-"))
    tree = folder / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet",
                    str(tree), rev], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False)
        folder.rmdir() if folder.exists() and not any(folder.iterdir()) else None


def measured(argv: list[str], tree: Path = ROOT) -> Run:
    """Run argv in `tree` (its code first on PYTHONPATH); fails with the child's status."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE)
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} (in {tree}): exit status {code}")
    return Run(wall, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss) * 1024, out)
