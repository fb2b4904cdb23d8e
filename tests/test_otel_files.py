"""OpenTelemetry spans across files, and the Python SDK's console exporter.

- The collector's file exporter rotates (`rotation: max_megabytes / max_days /
  max_backups`: `traces.json` goes on, the full file is renamed `traces-<time>.json`), so
  one trace's spans can be in two or three files. The OTel files of one input are read as
  one: a trace cut at a span boundary reads as the same episode as the uncut file; each
  record names its own file (and line); files given as separate inputs stay separate (an
  episode in two of them is quarantined, as any episode id in two input files is).
- `ConsoleSpanExporter` writes each span as `span.to_json()` (indented JSON) and a newline:
  JSON values one after another, each over many lines. They read as the same spans as
  OTLP JSON Lines; a value cut midway is quarantined on its own line and the rest read.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tests.test_otel_speed import _conversation
from tracerl.data.formats import detect_format
from tracerl.data.formats.otel_genai.read import read_otel
from tracerl.data.ingest import ingest
from tracerl.data.ingest.limits import Limits
from tracerl.io.fileio import read_table

SOURCE_COLUMNS = ("source_file", "source_record", "source_pointer")


def _export(spans: list[dict]) -> str:
    """One OTLP JSON export (a line of the collector's file exporter)."""
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "desk"}}]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]})


def _conversations(n: int = 6) -> list[list[dict]]:
    return [_conversation(k, 1 + k % 4) for k in range(n)]


def _episodes(out: Path) -> list[dict]:
    """The step table without where the rows came from, in episode and step order."""
    table = read_table(out / "steps")
    table = table.drop_columns([c for c in SOURCE_COLUMNS if c in table.column_names])
    table = table.sort_by([("episode_id", "ascending"), ("t", "ascending")])
    return table.to_pylist()


def _quarantine(out: Path) -> list[dict]:
    text = (out / "quarantine.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _whole(tmp_path: Path, conversations: list[list[dict]]) -> Path:
    path = tmp_path / "whole" / "traces.json"
    path.parent.mkdir()
    path.write_text("".join(_export(spans) + "\n" for spans in conversations))
    return path


def _rotated(folder: Path, conversations: list[list[dict]], cut: int,
             at: list[int], names: list[str], gz: set[int] = frozenset()) -> list[Path]:
    """The lines of `conversations` written over len(names) files in order, the
    conversation `cut`'s spans split at the span indices `at` (one export line per
    piece, each in the next file); the others go whole into the file their place falls
    in."""
    folder.mkdir(parents=True)
    lines: list[list[str]] = [[] for _ in names]
    for k, spans in enumerate(conversations):
        if k == cut:
            bounds = [0, *at, len(spans)]
            for piece in range(len(names)):
                lines[piece].append(_export(spans[bounds[piece]:bounds[piece + 1]]))
        else:
            lines[0 if k < cut else len(names) - 1].append(_export(spans))
    paths = []
    for piece, name in enumerate(names):
        data = "".join(line + "\n" for line in lines[piece]).encode()
        path = folder / (name + ".gz" if piece in gz else name)
        path.write_bytes(gzip.compress(data, mtime=0) if piece in gz else data)
        paths.append(path)
    return paths


ROTATED = ["traces-2026-01-01T00-00-00.000.json", "traces.json"]  # older first


def test_a_trace_cut_across_two_rotated_files_reads_as_the_uncut_file(tmp_path):
    conversations = _conversations()
    whole = ingest([_whole(tmp_path, conversations)], tmp_path / "out_whole")
    paths = _rotated(tmp_path / "rotated", conversations, cut=2, at=[3], names=ROTATED)
    joined = ingest([tmp_path / "rotated"], tmp_path / "out_rotated")
    assert whole.quarantined == joined.quarantined == 0
    assert (joined.read, joined.episodes, joined.rows) == (whole.read, whole.episodes,
                                                            whole.rows) == (6, 6, whole.rows)
    assert _episodes(tmp_path / "out_rotated") == _episodes(tmp_path / "out_whole")
    # each conversation is a record of the file its first row's span is in, numbered
    # among that file's; a row of a span in the other file says so in its pointer
    table = read_table(tmp_path / "out_rotated" / "steps")
    cut = table.filter(pc.equal(table["episode_id"], f"{2:032x}")).to_pylist()
    assert {r["source_file"] for r in cut} == {str(paths[0])}
    assert {r["source_record"] for r in cut} == {3}  # conversations 0, 1, then 2
    assert any(r["source_pointer"].startswith("traces.json#/lines/") for r in cut)
    assert any(r["source_pointer"].startswith("/lines/3/") for r in cut)
    later = table.filter(pc.equal(table["episode_id"], f"{4:032x}")).to_pylist()
    assert {(r["source_file"], r["source_record"]) for r in later} == {(str(paths[1]), 2)}
    assert all(r["source_pointer"].startswith("/lines/") for r in later)


def test_a_trace_cut_across_three_files_one_gzipped(tmp_path):
    conversations = _conversations()
    ingest([_whole(tmp_path, conversations)], tmp_path / "out_whole")
    names = ["traces-2026-01-01T00-00-00.000.json", "traces-2026-01-02T00-00-00.000.json",
             "traces.json"]
    _rotated(tmp_path / "rotated", conversations, cut=3, at=[2, 4], names=names, gz={1})
    summary = ingest([tmp_path / "rotated"], tmp_path / "out_rotated")
    assert summary.quarantined == 0 and summary.read == 6 and summary.episodes == 6
    assert _episodes(tmp_path / "out_rotated") == _episodes(tmp_path / "out_whole")


def test_files_given_as_separate_inputs_stay_separate(tmp_path):
    """Files are joined within one input (a folder); two files given one by one are two
    inputs, and an episode whose rows come from both is quarantined with the reason
    naming both files, as for any two input files."""
    conversations = _conversations()
    paths = _rotated(tmp_path / "rotated", conversations, cut=2, at=[3], names=ROTATED)
    summary = ingest(paths, tmp_path / "out")
    rejects = _quarantine(tmp_path / "out")
    assert {r["source_file"] for r in rejects} == {str(p) for p in paths}
    assert all("come from 2 input files" in r["reason"] and "given as one input, their "
               "folder" in r["reason"] for r in rejects)
    assert summary.episodes == 5  # the cut one is gone, the rest read
    assert summary.read == 7  # its two halves are a record of each file


def test_each_record_names_its_own_file_and_line(tmp_path):
    """In a joined read, a line that cannot be read is quarantined on its own file and
    line, and read = accepted + quarantined holds file by file."""
    conversations = _conversations()
    paths = _rotated(tmp_path / "rotated", conversations, cut=2, at=[3], names=ROTATED)
    with open(paths[1], "a") as f:
        f.write("not json {\n")  # line 5 of traces.json (after 2's second half, 3, 4, 5)
    summary = ingest([tmp_path / "rotated"], tmp_path / "out")
    rejects = _quarantine(tmp_path / "out")
    assert [(r["source_file"], r["source_record"]) for r in rejects] == [(str(paths[1]), 5)]
    assert summary.read == 7 and summary.quarantined == 1 and summary.episodes == 6
    table = read_table(tmp_path / "out" / "steps")
    for path, records in ((paths[0], 3), (paths[1], 4)):  # conversations 0-2; 3-5 + the line
        mine = table.filter(pc.equal(table["source_file"], str(path)))
        accepted = len(set(mine["source_record"].to_pylist()))
        quarantined = sum(r["source_file"] == str(path) for r in rejects)
        assert accepted + quarantined == records


def test_only_the_otel_reader_joins_files_and_never_in_slices(tmp_path):
    from tracerl.data.ingest.run import joins_files

    assert joins_files("otel-genai")
    assert joins_files("langfuse")  # (a trace's observations, row, scores: several files)
    assert not any(joins_files(f) for f in ("openai-chat", "tau2", "anthropic", "atif",
                                            "claude-code"))
    paths = _rotated(tmp_path / "rotated", _conversations(), cut=2, at=[3], names=ROTATED)
    with pytest.raises(ValueError, match="shard is for one file"):
        list(read_otel(paths, shard=(0, 2)))


def test_one_file_reads_as_it_does_alone(tmp_path):
    """A file in a folder of its own and the same file given itself: the same records
    (the joined read starts only at two files)."""
    path = _whole(tmp_path, _conversations())
    alone = [(r.number, r.row_pointers, r.source_file) for r in read_otel(path)]
    assert alone == [(r.number, r.row_pointers, r.source_file)
                     for r in read_otel([path])]
    ingest([path], tmp_path / "file")
    ingest([path.parent], tmp_path / "folder")
    for name in ("quarantine.jsonl", "ingest_summary.json"):
        assert (tmp_path / "file" / name).read_bytes() == \
            (tmp_path / "folder" / name).read_bytes()
    assert read_table(tmp_path / "file" / "steps") == read_table(tmp_path / "folder" / "steps")


# --- the console exporter ---------------------------------------------------------------

_EPOCH = datetime(2026, 3, 1, tzinfo=UTC).timestamp()


def _iso(ns: int) -> str:
    """As opentelemetry.sdk.util.ns_to_iso_str writes a time (microseconds, Z)."""
    return datetime.fromtimestamp(_EPOCH + ns / 1e9, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _plain(attributes: list[dict]) -> dict:
    out = {}
    for kv in attributes:
        value = kv["value"]
        kind, v = next(iter(value.items()))
        out[kv["key"]] = int(v) if kind == "intValue" else v
    return out


def _console(span: dict) -> dict:
    """An OTLP JSON span as ReadableSpan.to_json() writes it (opentelemetry-sdk)."""
    return {
        "name": span["name"],
        "context": {"trace_id": "0x" + span["traceId"],
                    "span_id": "0x" + span["spanId"].rjust(16, "0"), "trace_state": "[]"},
        "kind": "SpanKind.INTERNAL",
        "parent_id": "0x" + span["parentSpanId"].rjust(16, "0") if span["parentSpanId"]
        else None,
        "start_time": _iso(int(span["startTimeUnixNano"])),
        "end_time": _iso(int(span["endTimeUnixNano"])),
        "status": {"status_code": "UNSET"},
        "attributes": _plain(span["attributes"]),
        "events": [{"name": e["name"], "timestamp": _iso(int(e["timeUnixNano"])),
                    "attributes": _plain(e["attributes"])} for e in span["events"]],
        "links": [],
        "resource": {"attributes": {"service.name": "desk", "telemetry.sdk.language":
                                    "python"}, "schema_url": ""},
    }


def _console_conversations(n: int = 5) -> list[list[dict]]:
    """Conversations whose times are whole microseconds apart (what an ISO time keeps)."""
    out = []
    for spans in _conversations(n):
        for s in spans:
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                s[key] = str(int(s[key]) * 1000)
            for e in s["events"]:
                e["timeUnixNano"] = str(int(e["timeUnixNano"]) * 1000)
        out.append(spans)
    return out


def _console_text(conversations: list[list[dict]], indent: int = 4) -> str:
    # the exporter's formatter: span.to_json() + os.linesep, span after span
    return "".join(json.dumps(_console(s), indent=indent) + "\n"
                   for spans in conversations for s in spans)


def _same_but_latency(a: list[dict], b: list[dict]) -> None:
    """ISO times keep microseconds; the rest of each row is the same."""
    for row in (*a, *b):
        row["metadata"].pop("latency_ms", None)
    assert a == b


def test_console_exporter_output_reads_as_the_same_spans_as_otlp(tmp_path):
    conversations = _console_conversations()
    ingest([_whole(tmp_path, conversations)], tmp_path / "otlp")
    for indent in (4, 2, None):  # the default, a custom formatter's, one line each
        path = tmp_path / f"console{indent}.json"
        path.write_text(_console_text(conversations, indent))
        assert detect_format(path) == "otel-genai"
        summary = ingest([path], tmp_path / f"out{indent}")
        assert summary.quarantined == 0 and summary.episodes == 5 and summary.read == 5
        _same_but_latency(_episodes(tmp_path / f"out{indent}"), _episodes(tmp_path / "otlp"))
    # row pointers name the line each span's value starts on
    lines = (tmp_path / "console4.json").read_text().splitlines()
    for pointer in read_table(tmp_path / "out4" / "steps")["source_pointer"].to_pylist():
        assert pointer.startswith("/lines/")
        assert lines[int(pointer.split("/")[2].split("#")[0]) - 1] == "{"


def test_a_console_file_broken_midway_keeps_the_rest(tmp_path):
    """A span cut midway (its process killed; the next run appends) and text between the
    spans that is not JSON are records of their own, quarantined on the line they start
    on with why; every other span reads."""
    conversations = _console_conversations()
    lone = _conversation(9, 1)  # an agent span and one chat span: the cut one is the chat
    for s in lone:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            s[key] = str(int(s[key]) * 1000)
        s["events"] = []
    text = _console_text(conversations[:2])
    cut_line = text.count("\n") + 1
    chat = json.dumps(_console(lone[1]), indent=4)
    text += chat[:len(chat) // 2] + "\n"  # cut inside a string
    text += _console_text(conversations[2:3])
    junk_line = text.count("\n") + 1
    text += "exporting spans...\n" + _console_text(conversations[3:])
    path = tmp_path / "console.json"
    path.write_text(text)
    assert detect_format(path) == "otel-genai"
    summary = ingest([path], tmp_path / "out")
    rejects = _quarantine(tmp_path / "out")
    assert [(r["source_record"], r["field"]) for r in rejects] == [
        (cut_line, "<record>"), (junk_line, "<record>")]
    assert "is cut" in rejects[0]["reason"] and "line" in rejects[0]["reason"]
    assert "not an object or array" in rejects[1]["reason"]
    assert summary.episodes == 5  # the five whole conversations
    assert summary.read == summary.accepted + summary.quarantined


@pytest.mark.parametrize("shape", ["two_on_one_line", "unindented_over_the_limit"])
def test_a_document_that_is_not_values_one_after_another_stays_one_record(tmp_path, shape):
    """Values are numbered by the line they start on, so a file where two start on one
    line, or one unindented document over the size limit (its nested values start lines
    too), is not read as values one after another: it stays one document, quarantined
    with its reason, and every count adds up (never an accepted record left unwritten)."""
    conversation = {"messages": [{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": "hello"}]}
    path = tmp_path / "doc.json"
    if shape == "two_on_one_line":
        path.write_text(json.dumps(conversation) + json.dumps(conversation) + "\n")
        reason = "unexpected content after document"
    else:
        big = {"messages": [{"role": "user", "content": "x" * 70_000},
                            {"role": "assistant", "content": "y"}]}
        path.write_text(json.dumps(big, indent=0))
        reason = "over ingest.max_record_bytes"
    summary = ingest([path], tmp_path / "out", fmt="openai-chat", max_bad_fraction=1.0,
                     limits=Limits(max_record_bytes=65_536))
    rejects = _quarantine(tmp_path / "out")
    assert (summary.read, summary.accepted, summary.quarantined) == (1, 0, 1)
    assert [r["source_record"] for r in rejects] == [1] and reason in rejects[0]["reason"]


def test_a_cut_gzipped_console_file_reads_to_the_cut(tmp_path):
    conversations = _console_conversations(8)
    data = _console_text(conversations).encode()
    path = tmp_path / "console.json.gz"
    path.write_bytes(gzip.compress(data, mtime=0)[:-200])
    summary = ingest([path], tmp_path / "out")
    rejects = _quarantine(tmp_path / "out")
    assert rejects and rejects[-1]["field"] == "<file>" and "gzip" in rejects[-1]["reason"]
    assert summary.episodes >= 6


# --- only linked files are joined -------------------------------------------------------


def _three(folder: Path, conversations: list[list[dict]]) -> list[Path]:
    """a.json: conversations 0, 1 and the first half of 2; b.json: the rest of 2, and 3;
    c.json: 4 and 5 (no trace in common with the others)."""
    folder.mkdir(parents=True)
    lines = {"a.json": [_export(conversations[0]), _export(conversations[1]),
                        _export(conversations[2][:3])],
             "b.json": [_export(conversations[2][3:]), _export(conversations[3])],
             "c.json": [_export(conversations[4]), _export(conversations[5])]}
    for name, text in lines.items():
        (folder / name).write_text("".join(line + "\n" for line in text))
    return [folder / name for name in lines]


def _plan(paths: list[Path], workers: int = 2) -> list:
    from tracerl.data.ingest.limits import Limits
    from tracerl.data.ingest.run import _adapt_jobs

    return list(_adapt_jobs([(p, "otel-genai") for p in paths], 1000, Limits(), workers,
                            inputs=dict.fromkeys(paths, 0)))


def test_only_files_sharing_a_trace_are_joined(tmp_path):
    """Three files, two sharing a trace: two jobs (the two joined at the first's place,
    the third alone, so it reads in parallel and its spans are not held with theirs); the
    episodes are the uncut file's; the third file's rows are exactly those it has alone."""
    conversations = _conversations()
    paths = _three(tmp_path / "three", conversations)
    plan = _plan(paths)
    assert [(job.path, job.joined) for job in plan] == [
        (str(paths[0]), ((str(paths[0]), "a.json"), (str(paths[1]), "b.json"))),
        (str(paths[2]), None)]
    assert [job.number for job in plan] == [0, 1]
    assert plan[-1].bytes_done == sum(p.stat().st_size for p in paths)
    whole = ingest([_whole(tmp_path, conversations)], tmp_path / "out_whole")
    summary = ingest([tmp_path / "three"], tmp_path / "out")
    assert summary.quarantined == 0 and summary.read == whole.read == 6
    assert _episodes(tmp_path / "out") == _episodes(tmp_path / "out_whole")
    ingest([paths[2]], tmp_path / "out_c")
    table = read_table(tmp_path / "out" / "steps")
    assert table.filter(pc.equal(table["source_file"], str(paths[2]))) == \
        read_table(tmp_path / "out_c" / "steps")
    # the joined files' rows are the rows of those two files read as one (otelrot's join)
    ingest([paths[0].parent], tmp_path / "out_again")
    assert read_table(tmp_path / "out_again" / "steps") == table  # deterministic parts
    two = tmp_path / "two"
    two.mkdir()
    for p in paths[:2]:
        (two / p.name).write_bytes(p.read_bytes())
    ingest([two], tmp_path / "out_two")
    pair = read_table(tmp_path / "out_two" / "steps")
    mine = table.filter(pc.invert(pc.equal(table["source_file"], str(paths[2]))))
    assert mine.drop_columns(["source_file"]) == pair.drop_columns(["source_file"])


def test_a_shared_conversation_id_links_files_of_two_traces(tmp_path):
    """Two traces of one conversation (gen_ai.conversation.id, as an OTLP attribute in
    one file and a Jaeger tag in the other) in two files: one job, one episode."""
    from tracerl.data.formats.otel_genai.links import link_keys
    from tracerl.data.ingest.run import linked_groups

    folder = tmp_path / "conv"
    folder.mkdir()
    first = _conversation(1, 2)
    for span in first:
        span["attributes"].append({"key": "gen_ai.conversation.id",
                                   "value": {"stringValue": "conv-1"}})
    (folder / "a.json").write_text(_export(first) + "\n")
    (folder / "b.json").write_text(json.dumps({"data": [{"traceID": "77", "spans": [
        {"traceID": "77", "spanID": "s", "operationName": "chat", "tags": [
            {"key": "gen_ai.conversation.id", "type": "string", "value": "conv-1"}]}]}]}))
    (folder / "c.json").write_text(json.dumps({"name": "x", "context": {
        "trace_id": "0x" + f"{1:032x}"}, "attributes": {"gen_ai.conversation.id": "z"}}))
    assert link_keys(folder / "a.json") >= {"conv-1", f"{1:032x}"}
    assert link_keys(folder / "b.json") == {"conv-1", "77"}
    assert link_keys(folder / "c.json") == {"z", f"{1:032x}"}  # 0x taken off, as the reader
    assert linked_groups([folder / n for n in ("a.json", "b.json", "c.json")],
                         link_keys) == [[0, 1, 2]]
    assert linked_groups([folder / n for n in ("b.json", "c.json")], link_keys) == [[0], [1]]
    # an attribute written value first, a value with an escape
    (folder / "d.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "88", "spanId": "s", "attributes": [
            {"value": {"stringValue": "conv/\"2\""}, "key": "gen_ai.conversation.id"},
            {"key": "gen_ai.conversation.id", "value": {"stringValue": "conv-1"}}]}]}]}]}))
    assert link_keys(folder / "d.json") == {"88", 'conv/"2"', "conv-1"}


def test_a_key_cut_by_a_piece_or_in_a_gz_is_still_found(tmp_path, monkeypatch):
    from tracerl.data.formats.otel_genai import links as otel_links

    text = (_export(_conversation(3, 2)) + "\n").encode()
    plain, packed = tmp_path / "a.json", tmp_path / "b.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, mtime=0))
    at = text.index(b'"traceId"') + 5
    monkeypatch.setattr(otel_links, "_CHUNK", at)  # the first key is cut by the piece
    assert otel_links.link_keys(plain) == otel_links.link_keys(packed) == {f"{3:032x}"}
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed.read_bytes()[:-20])  # a cut .gz: what can be read is scanned
    assert otel_links.link_keys(cut) == {f"{3:032x}"}


def test_a_missed_link_is_the_quarantine_of_the_duplicate_with_its_hint(tmp_path,
                                                                       monkeypatch):
    """Were the scan to miss a link, the episode's two halves are quarantined, naming
    both files and the hint (never a silent loss of half an episode)."""
    from tracerl.data.formats.otel_genai import links as otel_links

    paths = _rotated(tmp_path / "rotated", _conversations(), cut=2, at=[3], names=ROTATED)
    monkeypatch.setattr(otel_links, "link_keys", lambda path: {str(path)})
    summary = ingest([tmp_path / "rotated"], tmp_path / "out")
    rejects = _quarantine(tmp_path / "out")
    assert {r["source_file"] for r in rejects} == {str(p) for p in paths}
    assert all("come from 2 input files" in r["reason"] and "name the same trace or "
               "conversation id" in r["reason"] for r in rejects)
    assert summary.episodes == 5 and summary.read == 7
