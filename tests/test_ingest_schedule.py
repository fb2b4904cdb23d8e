"""How the ingest runner shares its jobs between worker processes and itself
(tracerl.data.ingest.run._in_order, _adapt_jobs): every job once, results in job order,
a late-starting worker or a slow job leaving no process idle, and a large file cut into
jobs by its size alone (never by the worker count)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tracerl.data.ingest.limits import Limits
from tracerl.data.ingest.run import _adapt_jobs, _in_order, _job_bytes


def _slow(value: int, seconds: float) -> tuple[int, int]:
    time.sleep(seconds)
    return value, os.getpid()


@pytest.mark.integration
def test_every_task_once_in_order_and_both_processes_work():
    tasks = [(_slow, (k, 0.05), f"tag{k}") for k in range(16)]
    results = list(_in_order(iter(tasks), 2))
    assert [tag for _, tag in results] == [f"tag{k}" for k in range(16)]
    assert [value for (value, _), _ in results] == list(range(16))
    pids = [pid for (_, pid), _ in results]
    assert pids[-1] == os.getpid()  # the last task runs here: this process would only wait
    # the worker has two tasks queued from the start (one running, one waiting), however
    # late it starts; this process runs the rest as it finds the worker's queue full
    assert sum(pid != os.getpid() for pid in pids) >= 2


def test_one_process_runs_every_task_itself():
    results = list(_in_order(iter([(_slow, (k, 0.0), k) for k in range(3)]), 1))
    assert [(value, pid, tag) for (value, pid), tag in results] == [
        (k, os.getpid(), k) for k in range(3)]


def test_job_size_follows_the_file_alone():
    limits = Limits()
    assert 1 << 20 < _job_bytes(40 << 20, limits) < limits.batch_bytes  # ~16 jobs of 2.5 MB
    assert _job_bytes(10 << 20, limits) == 1 << 20  # not below 1 MB
    assert _job_bytes(10 << 30, limits) == limits.batch_bytes  # not above (memory)


def test_a_large_chat_file_gives_the_same_jobs_for_any_worker_count(tmp_path: Path):
    line = b'{"messages": [{"role": "user", "content": "' + b"x" * 4000 + b'"}]}\n'
    path = tmp_path / "chat.jsonl"
    path.write_bytes(line * 3000)  # 12 MB: over batch_bytes (8 MB), cut into 1 MB jobs
    files = [(path, "openai-chat")]
    one, two = ([(j.batch.first_line, j.bytes_done) for j in _adapt_jobs(files, 25_000, Limits(),
                                                                         workers)]
                for workers in (1, 2))
    assert one == two
    firsts = [first for first, _ in one]
    step = firsts[1] - firsts[0]
    assert firsts == list(range(1, 3001, step)) and len(line) * step >= 1 << 20  # ~1 MB each
    assert len(line) * (step - 1) < 1 << 20 and one[-1][1] == path.stat().st_size
