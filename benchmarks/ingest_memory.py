"""Peak memory of `tracerl ingest`, whole process tree, on hostile sizes.

    .venv/bin/python benchmarks/ingest_memory.py [--gb 2.0] [--line-mb 500] [--check]
        [--inputs native long-line tau2 chat chat-document]

Five inputs (all by default), made once under benchmarks/.out/ (git-ignored):
- native: a JSONL file of --gb GB (copies of benchmarks/ingest.py's 1,000,000-step file,
  each with its own episode ids, so every record is valid and accepted);
- long-line: a native file with one --line-mb MB line between good records (rejected,
  never loaded);
- tau2: a tau2-bench results document whose simulations hold one of --line-mb MB between
  good ones (rejected without being held whole: read by tracerl.data.formats.common.jsonstream);
- chat: an openai-chat JSONL file with one --line-mb MB conversation between good ones;
- chat-document: the same conversations as one JSON list (streamed element by element).
The ingest runs in a child; this process samples the memory of the child and every
descendant (parser workers, resource tracker) every 50 ms and reports the
largest sums of PSS (proportional set size: a page shared by n processes counts 1/n in
each, so the sum is the tree's real footprint) and of RSS (counts shared pages once per
process: an over-statement). Target: PSS sum < 1.5 GB (1.5e9 bytes) on both; --check
exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / ".out"
SOURCE = OUT / "calculator_good_coverage_1000000steps_seed0.jsonl"
TARGET = 1.5e9
PREFIX = b'"episode_id":"good_coverage-'


def make_big(gb: float) -> Path:
    path = OUT / f"ingest_memory_{gb:g}GB.jsonl"
    if path.is_file():
        return path
    if not SOURCE.is_file():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ingest.py"), "--steps",
                        "1000000"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    tmp = path.with_suffix(".tmp")
    written, copy = 0, 0
    with open(tmp, "wb") as out:
        while written < gb * 1e9:
            with open(SOURCE, "rb") as src:
                tail = b""
                while chunk := src.read(8 << 20):
                    chunk = tail + chunk
                    cut = chunk.rfind(b"\n") + 1
                    chunk, tail = chunk[:cut], chunk[cut:]
                    data = chunk.replace(PREFIX, b'"episode_id":"c%d-good_coverage-' % copy)
                    out.write(data)
                    written += len(data)
            copy += 1
    tmp.rename(path)
    return path


def make_long_line(mb: int) -> Path:
    path = OUT / f"ingest_memory_line_{mb}MB.jsonl"
    if path.is_file():
        return path
    with open(SOURCE, "rb") as src:
        good = [src.readline() for _ in range(8)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.writelines(good[:4])
        out.write(b'{"episode_id":"huge","t":0,"task":"')
        block = b"a" * (1 << 20)
        for _ in range(mb):
            out.write(block)
        out.write(b'"}\n')
        out.writelines(good[4:])
    tmp.rename(path)
    return path


def _good_simulation(i: int) -> dict:
    return {"id": f"sim-{i}", "task_id": "t1", "trial": 0, "messages": [
        {"role": "user", "content": "Cancel order 7, please."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "name": "cancel_order", "arguments": {"order_id": 7},
             "requestor": "assistant"}]},
        {"role": "tool", "id": "c1", "content": '{"status": "cancelled"}'},
        {"role": "assistant", "content": "Order 7 is cancelled."}],
        "reward_info": {"reward": 1.0}}


def _good_conversation(i: int) -> dict:
    return {"id": f"chat-{i}", "reward": 1.0, "messages": [
        {"role": "user", "content": "Cancel order 7, please."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "cancel_order", "arguments": '{"order_id": 7}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "cancelled"}'},
        {"role": "assistant", "content": "Order 7 is cancelled."}]}


def _write_huge_record(out, head: bytes, mb: int, tail: bytes) -> None:
    """head + mb MiB of "a" + tail, written a block at a time."""
    out.write(head)
    block = b"a" * (1 << 20)
    for _ in range(mb):
        out.write(block)
    out.write(tail)


def make_tau2(mb: int) -> Path:
    path = OUT / f"ingest_memory_tau2_{mb}MB.json"
    if path.is_file():
        return path
    good = [json.dumps(_good_simulation(i)).encode() for i in range(8)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.write(b'{"timestamp": "2026-01-01T00:00:00", "info": {"git_commit": "abc", '
                  b'"environment_info": {"domain_name": "retail"}}, "tasks": [{"id": "t1"}], '
                  b'"simulations": [\n' + b",\n".join(good[:4]) + b",\n")
        _write_huge_record(out, b'{"id": "huge", "task_id": "t1", "messages": [{"role": '
                                b'"user", "content": "', mb, b'"}]},\n')
        out.write(b",\n".join(good[4:]) + b"\n]}\n")
    tmp.rename(path)
    return path


def make_chat(mb: int) -> Path:
    path = OUT / f"ingest_memory_chat_{mb}MB.jsonl"
    if path.is_file():
        return path
    good = [json.dumps(_good_conversation(i)).encode() + b"\n" for i in range(8)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.writelines(good[:4])
        _write_huge_record(out, b'{"id": "huge", "messages": [{"role": "user", "content": "',
                           mb, b'"}]}\n')
        out.writelines(good[4:])
    tmp.rename(path)
    return path


def make_chat_document(mb: int) -> Path:
    path = OUT / f"ingest_memory_chat_document_{mb}MB.json"
    if path.is_file():
        return path
    good = [json.dumps(_good_conversation(i)).encode() for i in range(8)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.write(b"[\n" + b",\n".join(good[:4]) + b",\n")
        _write_huge_record(out, b'{"id": "huge", "messages": [{"role": "user", "content": "',
                           mb, b'"}]},\n')
        out.write(b",\n".join(good[4:]) + b"\n]\n")
    tmp.rename(path)
    return path


def measure(path: Path) -> dict:
    out = OUT / "ingest_memory_run"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tracerl", "ingest", str(path), "--out",
                             str(out), "--max-bad-fraction", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    peak, peak_procs, peak_rss = 0, 0, 0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            pss = rss = 0
            for p in tree:
                with contextlib.suppress(psutil.Error):
                    info = p.memory_full_info()
                    pss += info.pss
                    rss += info.rss
            if pss > peak:
                peak, peak_procs = pss, len(tree)
            peak_rss = max(peak_rss, rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    return {"file": path.name, "bytes": path.stat().st_size, "seconds":
            round(time.perf_counter() - t0, 1), "peak_tree_pss_bytes": peak,
            "peak_tree_rss_bytes": peak_rss,
            "processes_at_peak": peak_procs, "exit": proc.returncode,
            "summary": stdout.strip().splitlines()[-1:] or stderr.strip().splitlines()[-1:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--line-mb", type=int, default=500)
    parser.add_argument("--check", action="store_true")
    inputs = ["native", "long-line", "tau2", "chat", "chat-document"]
    parser.add_argument("--inputs", nargs="+", default=inputs, choices=inputs)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    makers = {"native": lambda: make_big(args.gb),
              "long-line": lambda: make_long_line(args.line_mb),
              "tau2": lambda: make_tau2(args.line_mb), "chat": lambda: make_chat(args.line_mb),
              "chat-document": lambda: make_chat_document(args.line_mb)}
    results = [measure(makers[name]()) for name in args.inputs]
    ok = True
    for r in results:
        passed = r["peak_tree_pss_bytes"] < TARGET and r["exit"] in (0, 1)
        ok &= passed
        print(f"{r['file']:34s} {r['bytes'] / 1e9:5.2f} GB {r['seconds']:6.1f} s  peak tree "
              f"PSS {r['peak_tree_pss_bytes'] / 1e9:4.2f} GB, RSS "
              f"{r['peak_tree_rss_bytes'] / 1e9:4.2f} GB ({r['processes_at_peak']} processes) "
              f"exit {r['exit']}  {'PASS' if passed else 'FAIL'}")
        print(f"    {r['summary'][0] if r['summary'] else ''}")
    print(json.dumps(results, indent=1))
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
