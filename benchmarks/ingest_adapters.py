"""Benchmark the adapters: actions per second of `tracerl ingest` on OpenAI-chat, tau2 and
OpenTelemetry logs, with redaction and the record limits on (the defaults).

    .venv/bin/python benchmarks/ingest_adapters.py [--conversations 10000 100000]
                                                   [--formats openai-chat tau2 otel-genai]
                                                   [--distinct]

Each input is made once from the support-desk simulator (tracerl.envs.support_desk, seed
1) and cached under benchmarks/.out/ (git-ignored):
- openai-chat: its OpenAI-chat JSONL, one conversation per line;
- tau2: the same conversations as a tau2-bench results file (`info`, `tasks`,
  `simulations`, tool calls flat with `requestor`, tool messages carrying the call id);
- otel-genai: the same conversations as OTLP JSON Lines (one export request per
  conversation: a chat span per assistant turn with `gen_ai.input.messages` /
  `gen_ai.output.messages`, an `execute_tool` span per call with `gen_ai.tool.call.id`
  and its result).
--distinct: the same conversations with every message's text made unique (a few words
drawn at random, seed 1, appended to each text: no system prompt, tool result or reply
repeats), cached apart. The simulator repeats its texts heavily, and redaction and the
free-form columns do their work once per distinct text: this is the figure for logs that
do not repeat.
Each ingest runs in a fresh interpreter (`python -m tracerl ingest`, default workers:
one per core) one after the other; wall time is taken around the whole child, interpreter
start-up included. actions/s = step rows written / wall seconds. Printed beside it: the
CPU seconds of the child and its workers (rusage), and the whole process tree's peak
memory (the largest sum of PSS over the child and every descendant, sampled every 50 ms:
benchmarks/ingest.py's run_child). Where the time goes: run with --profile to print a
cProfile of one in-process ingest (workers=1) of each input.

Target (issue 19): >= 50,000 actions/s for each adapter on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks.ingest's run_child
OUT = ROOT / "benchmarks" / ".out"
TARGET = 50_000

_MAKE = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from benchmarks.ingest_adapters import make_inputs
make_inputs(int(sys.argv[1]), Path(sys.argv[2]), distinct=sys.argv[3] == "distinct")
"""


def make_inputs(n: int, folder: Path, distinct: bool = False) -> None:
    """The three inputs of n support-desk conversations (distinct: no text repeats)."""
    import orjson

    from tracerl.envs.support_desk import FixtureParams, chat, generate

    folder.mkdir(parents=True, exist_ok=True)
    episodes = generate(FixtureParams.from_dict({}), n=n, seed=1)
    records = list(chat.records(episodes, behavior_policy="support_desk_scripted_v1",
                                gamma=0.99))
    if distinct:
        _make_distinct(records)
    with open(folder / "chat.jsonl", "wb") as f:
        for r in records:
            f.write(orjson.dumps(r) + b"\n")
    with open(folder / "tau2.json", "wb") as f:
        f.write(b'{"info": {"git_commit": "bench", "agent_info": {"llm": "scripted"}, '
                b'"user_info": {"llm": "sim"}, "environment_info": {"domain_name": "desk"}}, '
                b'"tasks": [], "simulations": [\n')
        for k, r in enumerate(records):
            f.write((b",\n" if k else b"") + orjson.dumps(_tau2(r, k)))
        f.write(b"\n]}\n")
    with open(folder / "otel.jsonl", "wb") as f:
        for k, r in enumerate(records):
            f.write(orjson.dumps(_otlp(r, k)) + b"\n")


def _make_distinct(records: list[dict], seed: int = 1) -> None:
    """Append to every message's text four words drawn at random from 5,000 made-up ones
    (5,000^4 choices: no two texts are alike; a JSON object's text gets them as a "note"
    field, so it stays JSON), in place."""
    import numpy as np

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, size=int(rng.integers(3, 10))))
                  for _ in range(5000)]
    for record in records:
        for m in record["messages"]:
            text = m.get("content")
            if isinstance(text, str) and text:
                words = " ".join(vocabulary[w] for w in rng.integers(0, len(vocabulary), 4))
                value = _json_object(text)
                m["content"] = (json.dumps({**value, "note": words}) if value is not None
                                else f"{text} ({words})")  # a JSON tool result stays JSON


def _json_object(text: str) -> dict | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _tau2(record: dict, k: int) -> dict:
    messages = []
    for m in record["messages"]:
        if m["role"] == "system":
            continue
        out = {"role": m["role"], "content": m.get("content")}
        if m.get("tool_calls"):
            out["tool_calls"] = [{"id": c["id"], "name": c["function"]["name"],
                                  "arguments": json.loads(c["function"]["arguments"]),
                                  "requestor": "assistant"} for c in m["tool_calls"]]
        if m["role"] == "tool":
            out["id"] = m["tool_call_id"]
        messages.append(out)
    return {"id": f"sim-{k}", "task_id": record.get("task_id"), "trial": 0,
            "messages": messages, "reward_info": {"reward": record.get("reward")}}


def _otlp(record: dict, k: int) -> dict:
    trace = f"{k:032x}"
    spans, history, t = [], [], 1_000_000_000 * k
    turn = 0

    def attr(key: str, value: object) -> dict:
        return {"key": key, "value": {"stringValue": value if isinstance(value, str)
                                      else json.dumps(value)}}

    def parts(m: dict) -> dict:
        out = []
        if m.get("content"):
            out.append({"type": "text", "content": m["content"]})
        for c in m.get("tool_calls") or []:
            out.append({"type": "tool_call", "id": c["id"], "name": c["function"]["name"],
                        "arguments": json.loads(c["function"]["arguments"])})
        if m["role"] == "tool":
            return {"role": "tool", "parts": [{"type": "tool_call_response",
                                               "id": m["tool_call_id"],
                                               "response": m["content"]}]}
        return {"role": m["role"], "parts": out}

    for m in record["messages"]:
        if m["role"] == "assistant":
            turn += 1
            spans.append({"traceId": trace, "spanId": f"{k:08x}{turn:08x}", "name": "chat m",
                          "startTimeUnixNano": str(t), "endTimeUnixNano": str(t + 10),
                          "attributes": [attr("gen_ai.operation.name", "chat"),
                                         attr("gen_ai.request.model", "m"),
                                         attr("gen_ai.input.messages", history),
                                         attr("gen_ai.output.messages", [parts(m)])]})
            t += 20
            for c in m.get("tool_calls") or []:
                spans.append({"traceId": trace, "spanId": f"{k:08x}{turn:04x}{len(spans):04x}",
                              "name": f"execute_tool {c['function']['name']}",
                              "startTimeUnixNano": str(t), "endTimeUnixNano": str(t + 5),
                              "attributes": [attr("gen_ai.operation.name", "execute_tool"),
                                             attr("gen_ai.tool.name", c["function"]["name"]),
                                             attr("gen_ai.tool.call.id", c["id"])]})
                t += 10
        history = [*history, parts(m)][-6:]  # a bounded window, as exporters truncate
    return {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "desk"}}]},
        "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}


def run(path: Path, fmt: str):
    """(the child's run: wall and CPU seconds, tree peak PSS; the ingest summary)."""
    from benchmarks.ingest import run_child

    out = OUT / f"adapters_run_{fmt}"
    child = run_child(fmt, [sys.executable, "-m", "tracerl", "ingest", str(path), "--out",
                            str(out), "--format", fmt])
    if child.returncode not in (0, 1):
        raise SystemExit(f"ingest failed ({child.returncode}): {child.stderr[-2000:]}")
    return child, json.loads((out / "ingest_summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--formats", nargs="+", default=["openai-chat", "tau2", "otel-genai"])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--distinct", action="store_true",
                    help="inputs whose texts never repeat (see the module)")
    args = ap.parse_args(argv)
    files = {"openai-chat": "chat.jsonl", "tau2": "tau2.json", "otel-genai": "otel.jsonl"}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
          f"{os.getloadavg()[0]:.1f} at start; target >= {TARGET:,} actions/s")
    print(f"{'input':<32} {'records':>9} {'actions':>10} {'seconds':>8} {'cpu s':>7} "
          f"{'tree peak':>10} {'actions/s':>10}  target")
    ok = True
    for n in args.conversations:
        folder = OUT / f"adapters_{n}{'_distinct' if args.distinct else ''}"
        if not (folder / "otel.jsonl").is_file():
            subprocess.run([sys.executable, "-c", _MAKE.format(root=str(ROOT)), str(n),
                            str(folder), "distinct" if args.distinct else "repeating"],
                           check=True, cwd=ROOT)
        for fmt in args.formats:
            path = folder / files[fmt]
            child, summary = run(path, fmt)
            rate = summary["rows"] / child.seconds
            ok &= rate >= TARGET
            label = f"{fmt} x {n:,}{' distinct' if args.distinct else ''}"
            print(f"{label:<32} {summary['read']:>9,} "
                  f"{summary['rows']:>10,} {child.seconds:>8.2f} {child.cpu_seconds:>7.2f} "
                  f"{child.peak_bytes / 2**20:>7,.0f} MiB {rate:>10,.0f}  "
                  f"{'PASS' if rate >= TARGET else 'FAIL'}"
                  + ("" if summary["quarantined"] == 0 else
                     f"  ({summary['quarantined']} quarantined)"))
            if args.profile:
                _profile(path, fmt)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0 if ok else 1


def _profile(path: Path, fmt: str) -> None:
    code = ("import cProfile, pstats, sys; from pathlib import Path; "
            "from tracerl.data.ingest import ingest; "
            f"cProfile.run(\"ingest([Path({str(path)!r})], {str(OUT / 'prof_out')!r}, "
            f"fmt={fmt!r}, workers=1)\", {str(OUT / 'prof.bin')!r}); "
            f"pstats.Stats({str(OUT / 'prof.bin')!r}).sort_stats('tottime').print_stats(15)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


if __name__ == "__main__":
    sys.exit(main())
