"""Every real export under ../shared/realdata/ ingests with --format auto: nothing
quarantined, and the tool calls, tool results and assistant turns in the step table are
the ones a plain reading of the raw JSON (stdlib `json`, nothing of the adapters) counts.

The counting rules here are the formats' own, written from their documentation:
tool calls are the calls an assistant message / agent step / model output makes, results
are those calls answered in the log, message rows are assistant turns that make no call.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tracerl.data.ingest import ingest
from tracerl.io.fileio import read_table

REAL = Path(__file__).resolve().parents[2] / "shared" / "realdata"
if not REAL.is_dir():
    REAL = Path("/work/shared/realdata")
FILES = sorted(p for p in REAL.rglob("*") if p.is_file() and p.name.endswith((".json", ".jsonl"))
               ) if REAL.is_dir() else []
pytestmark = pytest.mark.skipif(not FILES, reason="../shared/realdata is not here")


def _loads(value, depth: int = 3):
    for _ in range(depth):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError:
            break
    return value


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# --- expected counts, per format: (tool calls, answered calls, turns without a call) ----

def _tau2(path: Path) -> tuple[int, int, int]:
    doc = json.loads(path.read_text())
    calls = answered = messages = 0
    for sim in doc["simulations"]:
        agent_ids = set()
        for m in sim["messages"]:
            if m["role"] == "assistant":
                n = len(m.get("tool_calls") or [])
                calls += n
                messages += n == 0
                agent_ids |= {c["id"] for c in m.get("tool_calls") or []}
            elif m["role"] == "tool" and m["id"] in agent_ids:
                answered += 1
    return calls, answered, messages


def _anthropic(path: Path) -> tuple[int, int, int]:
    body = json.loads(json.loads(path.read_text())["body"])
    calls = sum(b["type"] == "tool_use" for b in body["content"])
    return calls, 0, int(calls == 0)  # a response alone: no result recorded


def _atif(path: Path) -> tuple[int, int, int]:
    calls = answered = messages = 0
    for traj in json.loads(path.read_text()):
        for step in traj["steps"]:
            if step["source"] != "agent":
                continue
            n = len(step.get("tool_calls") or [])
            calls += n
            messages += n == 0
            answered += sum(r.get("source_call_id") is not None
                            for r in (step.get("observation") or {}).get("results") or [])
    return calls, answered, messages


def _abandoned(lines: list[dict]) -> set[str]:
    """The uuids of the lines on abandoned branches of a Claude Code session. A session is
    a tree (`parentUuid`; a compact_boundary's parent in `logicalParentUuid`); a rewind
    (the user edits or retries a prompt) writes a new child of an earlier line: of the
    children of one line in one thread that continue the conversation (a user prompt, an
    assistant reply; not tool results, system or injected lines, nor the other lines of
    the same API response), the last written is live and the others, with every line
    below them, are abandoned."""
    by_uuid = {x["uuid"]: x for x in lines if isinstance(x.get("uuid"), str)}

    def thread(x: dict) -> tuple:
        return x.get("sessionId"), x.get("isSidechain") is True, x.get("agentId")

    def turn(x: dict) -> str | None:  # which reply or prompt a continuing line is
        message = x.get("message") if isinstance(x.get("message"), dict) else {}
        if x.get("isMeta") or x.get("isApiErrorMessage"):
            return None
        if x.get("type") == "assistant" and message.get("model") != "<synthetic>":
            return message.get("id") or x["uuid"]
        content = message.get("content")
        if x.get("type") == "user" and not (isinstance(content, list) and content and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content)):
            return x["uuid"]
        return None

    children: dict[str, list[dict]] = {}
    for x in by_uuid.values():
        parent = by_uuid.get(x.get("parentUuid") or x.get("logicalParentUuid"))
        if parent is not None and thread(parent) == thread(x) and turn(x) is not None:
            children.setdefault(parent["uuid"], []).append(x)
    abandoned = set()
    for kids in children.values():
        live = turn(kids[-1])  # dicts keep file order
        abandoned |= {k["uuid"] for k in kids if turn(k) != live}
    for x in by_uuid.values():  # file order: a parent comes before its children
        if (x.get("parentUuid") or x.get("logicalParentUuid")) in abandoned:
            abandoned.add(x["uuid"])
    return abandoned


def _claude_code(path: Path) -> tuple[int, int, int]:
    uses: dict[str, list[str]] = {}  # message id -> its tool_use ids
    results = set()
    lines = _lines(path)
    abandoned = _abandoned(lines)
    for line in lines:
        if line.get("uuid") in abandoned:
            continue
        message = line.get("message")
        if line.get("type") == "assistant" and message.get("model") != "<synthetic>":
            ids = uses.setdefault(message["id"], [])
            ids += [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        elif line.get("type") == "user" and isinstance(message.get("content"), list):
            results |= {b["tool_use_id"] for b in message["content"]
                        if b.get("type") == "tool_result"}
    calls = [i for ids in uses.values() for i in ids]
    return len(calls), len(set(calls) & results), sum(not ids for ids in uses.values())


def _walk(value):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            yield v
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _is_call(d: dict) -> bool:
    return (d.get("type") in ("tool_use", "tool_call", "function_call")
            or "function_call" in d
            or (isinstance(d.get("function"), dict) and "arguments" in d["function"]))


def _langfuse(path: Path) -> tuple[int, int, int]:
    doc = json.loads(path.read_text())
    observations = sorted(doc["observations"], key=lambda o: o["startTime"])
    calls = messages = 0
    call_names: list[str] = []
    for o in observations:
        if o["type"] != "GENERATION":
            continue
        found = [d for d in _walk(_loads(o.get("output"))) if _is_call(d)]
        calls += len(found)
        messages += not found
        for d in found:
            inner = d.get("function_call") if isinstance(d.get("function_call"), dict) else d
            name = inner.get("name") or (d.get("function") or {}).get("name")
            call_names.append(name)
    # answered: a TOOL observation (or a span named after the call) with an output, or a
    # later model input holding the result
    runs = Counter(o["name"].removeprefix("running tool: ").removeprefix("execute_tool ")
                   for o in observations
                   if (o["type"] == "TOOL" or (o["type"] == "SPAN" and o["name"] in call_names))
                   and _loads(o.get("output")) not in (None, {}, "", []))
    fed_back = Counter()
    for o in observations:
        if o["type"] == "GENERATION":
            for d in _walk(_loads(o.get("input"))):
                if "function_response" in d:
                    fed_back[d["function_response"]["name"]] += 1
    answered = 0
    for name in call_names:
        if runs[name] or fed_back[name]:
            answered += 1
            if runs[name]:
                runs[name] -= 1
            else:
                fed_back[name] -= 1
    return calls, answered, messages


def _tags(span: dict) -> dict:
    return {t["key"]: t["value"] for t in span["tags"]}


def _otel(path: Path) -> tuple[int, int, int]:
    spans = [s for trace in json.loads(path.read_text())["data"] for s in trace["spans"]]
    calls, messages, answered_ids = [], 0, set()
    for s in spans:
        tags = _tags(s)
        out = []
        if "gen_ai.output.messages" in tags:
            out = [p["id"] for m in json.loads(tags["gen_ai.output.messages"])
                   for p in m["parts"] if p["type"] == "tool_call"]
        elif any(k.startswith("gen_ai.completion.") for k in tags):
            out = [v for k, v in tags.items() if k.startswith("gen_ai.completion.")
                   and k.endswith(".id") and ".tool_calls." in k]
        else:
            continue
        calls += out
        messages += not out
        if "gen_ai.input.messages" in tags:
            answered_ids |= {p["id"] for m in json.loads(tags["gen_ai.input.messages"])
                             for p in m["parts"] if p["type"] == "tool_call_response"}
        answered_ids |= {v for k, v in tags.items() if k.startswith("gen_ai.prompt.")
                         and k.endswith(".tool_call_id")}
    for s in spans:
        tags = _tags(s)
        if tags.get("gen_ai.operation.name") == "execute_tool" \
                and tags.get("gen_ai.tool.call.result"):
            answered_ids.add(tags.get("gen_ai.tool.call.id") or next(
                (c for c in calls if c not in answered_ids), None))
    return len(calls), len(set(calls) & answered_ids), messages


COUNTERS = {"tau2-bench": _tau2, "anthropic-messages": _anthropic, "atif": _atif,
            "claude-code-jsonl": _claude_code, "langfuse-export": _langfuse,
            "otel-genai": _otel}
FORMATS = {"tau2-bench": "tau2", "anthropic-messages": "anthropic", "atif": "atif",
           "claude-code-jsonl": "claude-code", "langfuse-export": "langfuse",
           "otel-genai": "otel-genai"}


def _kind(path: Path) -> str:
    return path.relative_to(REAL).parts[0]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REAL)))
def test_every_real_export_ingests_with_the_counts_of_its_raw_json(tmp_path, path):
    summary = ingest([path], tmp_path / "out")  # --format auto
    assert summary.formats == {str(path): FORMATS[_kind(path)]}
    assert summary.quarantined == 0 and summary.read == summary.accepted, \
        (tmp_path / "out" / "quarantine.jsonl").read_text()[:2000]
    if path.name.startswith("agent-acompact"):  # Claude Code's compaction summariser
        assert summary.read == 0 and summary.notes == {"compaction_agents_skipped": 1}
        return
    rows = read_table(tmp_path / "out" / "steps").to_pylist()
    calls, answered, messages = COUNTERS[_kind(path)](path)
    assert sum(r["action"]["type"] == "tool_call" for r in rows) == calls
    assert sum(r["action"]["type"] == "message" for r in rows) == messages
    assert sum(r["action"]["type"] == "tool_call" and (
        r["observation"]["tool_result"] is not None or r["observation"]["error"] is not None)
        for r in rows) == answered
    assert summary.rows == len(rows) == calls + messages
    for episode in {r["episode_id"] for r in rows}:  # t counts 0, 1, ...; the last is done
        mine = sorted((r for r in rows if r["episode_id"] == episode), key=lambda r: r["t"])
        assert [r["t"] for r in mine] == list(range(len(mine)))
        assert [r["done"] for r in mine] == [False] * (len(mine) - 1) + [True]


def test_the_shared_tau2_sample_ingests_exactly(tmp_path):
    files = sorted((REAL / "tau2-bench").glob("*.json"))
    summary = ingest(files, tmp_path / "out")
    assert (summary.read, summary.accepted, summary.quarantined, summary.episodes) == \
        (40, 40, 0, 40)


def test_real_quirks_are_kept_and_counted(tmp_path):
    """ATIF's converter reuses `call_1` in every step: kept, matched within the step,
    counted; Claude Code's non-turn lines are counted, not quarantined."""
    atif = REAL / "atif" / "agenttuning_os_sample_atif.json"
    summary = ingest([atif], tmp_path / "a")
    trajectories = json.loads(atif.read_text())
    first_uses = sum(any(s.get("tool_calls") for s in t["steps"]) for t in trajectories)
    calls = sum(len(s.get("tool_calls") or []) for t in trajectories for s in t["steps"])
    assert summary.reused_call_ids == calls - first_uses
    rows = read_table(tmp_path / "a" / "steps").to_pylist()
    by_episode = {}
    for t in trajectories:  # each result went to its own step's call
        results = [r["content"] for s in t["steps"] if s["source"] == "agent"
                   for r in (s.get("observation") or {}).get("results") or []]
        by_episode[t["trajectory_id"]] = results
    for episode, results in by_episode.items():
        stored = [json.loads(r["observation"]["tool_result"]) for r in rows
                  if r["episode_id"] == episode and r["action"]["type"] == "tool_call"]
        assert len(stored) == len(results)
    session = REAL / "claude-code-jsonl" / "short.jsonl"
    summary = ingest([session], tmp_path / "c")
    kinds = Counter(line["type"] for line in _lines(session))
    assert summary.notes["skipped_progress_lines"] == kinds["progress"]
    assert summary.notes["skipped_file-history-snapshot_lines"] == kinds["file-history-snapshot"]
