"""What the adapter tests share: ingest files (or one document written for the test) and
read back what came out, and OTLP attribute lists built from a dict."""

from __future__ import annotations

import json
from pathlib import Path

from tracerl.data.formats import detect_format
from tracerl.data.ingest import ingest
from tracerl.io.fileio import read_table


def ingest_files(tmp_path: Path, *paths: Path, **kw):
    """Ingest `paths` into `tmp_path/out` (keywords go to `ingest`: max_bad_fraction, fmt,
    ...): the summary, the step rows as dicts, the quarantined records."""
    out = tmp_path / "out"
    summary = ingest(list(paths), out, **kw)
    rows = read_table(out / "steps").to_pylist() if summary.rows else []
    quarantine = [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]
    assert summary.read == summary.accepted + summary.quarantined
    return summary, rows, quarantine


def ingest_doc(tmp_path: Path, detected: str, doc: dict, name: str = "trace.json", **kw):
    """Write `doc` as JSON to `tmp_path/name` (making `tmp_path`), check that format
    detection names it `detected`, and ingest it as `ingest_files` does."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    assert detect_format(path) == detected
    return ingest_files(tmp_path, path, **kw)


def otel_rows(tmp_path: Path, doc: dict, name: str = "trace.json") -> list[dict]:
    """The step rows of one OTel trace document read clean: detected as otel-genai, one
    episode accepted, nothing quarantined (with max_bad_fraction 1.0, so that a quarantined
    record fails here, not in the run)."""
    summary, rows, quarantine = ingest_doc(tmp_path, "otel-genai", doc, name,
                                           max_bad_fraction=1.0)
    assert not quarantine and summary.accepted == 1
    return rows


def kv(attrs: dict) -> list[dict]:
    """OTLP attributes (`[{"key": k, "value": {"<type>Value": ...}}]`) of a dict: a str a
    stringValue, a bool a boolValue, an int an intValue (its decimal text), a float a
    doubleValue, a list of strs an arrayValue of stringValues, anything else (messages,
    a list of parts) a stringValue of its JSON, as GenAI instrumentations write them."""
    def value(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
        return {"stringValue": v if isinstance(v, str) else json.dumps(v)}
    return [{"key": k, "value": value(v)} for k, v in attrs.items()]


def calls_of(rows: list[dict]) -> list[tuple]:
    """Each tool-call row's (tool, arguments, tool_result, error), the JSON parsed."""
    return [(r["action"]["tool"], json.loads(r["action"]["arguments"] or "null"),
             json.loads(r["observation"]["tool_result"] or "null"), r["observation"]["error"])
            for r in rows if r["action"]["type"] == "tool_call"]


def messages_of(rows: list[dict]) -> list[str]:
    """Each message row's content."""
    return [r["action"]["content"] for r in rows if r["action"]["type"] == "message"]
