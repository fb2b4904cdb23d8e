"""A large OpenTelemetry JSON Lines file read in jobs of its lines (run._adapt_jobs,
otel.read_lines): batches whose spans share no trace or conversation id are jobs of their
own, batches that share one are read together; the coordinator orders and numbers the
jobs' records as one read of the file does, so the outputs are byte for byte those of
the file read as one job, with one worker or two.

A file is read as one job when it is no larger than `batch_bytes` (the default 8 MiB
here), in jobs of lines when it is larger: the tests compare the two by that knob alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_otel_speed import _conversation, _span, _text
from tracerl.data.formats.otel_genai import links as otel_links
from tracerl.data.formats.otel_genai.read import read_lines, read_otel
from tracerl.data.ingest import ingest
from tracerl.data.ingest.limits import Limits, plan_guarded
from tracerl.data.ingest.run import _adapt_jobs

SMALL = Limits(batch_bytes=4096)  # a batch is a line or two of these files


def _line(spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def _with_conversation(spans: list[dict], cid: str) -> list[dict]:
    for s in spans:
        s["attributes"].append({"key": "gen_ai.conversation.id",
                                "value": {"stringValue": cid}})
    return spans


def _broken(n: int) -> list[dict]:
    """A conversation whose one model call's output is not a message (quarantined)."""
    return [_span(f"{n:032x}", f"b{n}", "chat m", n * 1000, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps([_text("user", "hi")]),
        "gen_ai.output.messages": json.dumps([{"role": "bogus", "parts": []}])})]


def _write(tmp_path: Path, lines: list[str], name: str = "traces.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _outputs(path: Path, out: Path, limits: Limits, workers: int = 1) -> dict[str, bytes]:
    ingest([path], out, fmt="otel-genai", batch_lines=7, workers=workers, limits=limits)
    files = {p.relative_to(out).as_posix(): p.read_bytes()
             for p in sorted(out.rglob("*")) if p.is_file()}
    assert files, "no output"
    return files


def _jobs(path: Path) -> list:
    return list(_adapt_jobs([(path, "otel-genai")], 7, SMALL, 2))


def _lines(job) -> set[int]:
    """The line numbers of a job's batches."""
    return {b.first_line + k for b in job.batch for k in range(len(b.read()[0]))}


def _same_as_one_job(tmp_path: Path, path: Path) -> dict[str, bytes]:
    one = _outputs(path, tmp_path / "one", Limits())
    cut = _outputs(path, tmp_path / "cut", SMALL)
    assert cut == one
    return cut


def test_neighbouring_lines_are_one_job_per_batch_and_read_as_one_job(tmp_path):
    lines = [_line(_conversation(n, 1 + n % 4)) for n in range(12)]
    path = _write(tmp_path, lines)
    batches = list(plan_guarded(path, 7, SMALL))
    jobs = _jobs(path)
    assert len(batches) > 4 and len(jobs) == len(batches)
    assert [job.lines for job in jobs] == [(k, len(jobs)) for k in range(len(jobs))]
    files = _same_as_one_job(tmp_path, path)
    summary = json.loads(files["ingest_summary.json"])
    assert (summary["read"], summary["episodes"]) == (12, 12)
    assert len([f for f in files if f.startswith("steps/")]) > 2  # parts cut as one read


def test_spans_of_one_trace_on_distant_lines_are_one_job_and_one_episode(tmp_path):
    lines = [_line(_conversation(n, 1 + n % 4)) for n in range(10)]
    far = _conversation(10, 3)
    lines.insert(1, _line(far[:2]))
    lines.append(_line(far[2:]))  # the same trace, the file's last line
    path = _write(tmp_path, lines)
    jobs = _jobs(path)
    first = next(job for job in jobs if job.batch[0].first_line <= 2)
    assert len(first.batch) == 2 and first.batch[-1].first_line + 1 > len(lines) - 1
    assert len(jobs) == len(list(plan_guarded(path, 7, SMALL))) - 1
    files = _same_as_one_job(tmp_path, path)
    summary = json.loads(files["ingest_summary.json"])
    assert (summary["read"], summary["episodes"], summary["quarantined"]) == (11, 11, 0)


def test_a_conversation_id_shared_by_two_traces_on_distant_lines_is_one_episode(tmp_path):
    lines = [_line(_conversation(n, 2)) for n in range(10)]
    lines[1] = _line(_with_conversation(_conversation(1, 2), "shared"))
    lines[8] = _line(_with_conversation(_conversation(8, 2), "shared"))
    path = _write(tmp_path, lines)
    assert otel_links.batch_keys(next(iter(plan_guarded(path, 7, SMALL)))) >= {f"{0:032x}"}
    joined = [job for job in _jobs(path) if len(job.batch) > 1]
    assert len(joined) == 1
    assert _lines(joined[0]) >= {2, 9} and not _lines(joined[0]) >= {5}
    files = _same_as_one_job(tmp_path, path)
    summary = json.loads(files["ingest_summary.json"])
    assert (summary["read"], summary["episodes"]) == (9, 9)


def test_a_later_line_with_an_earlier_conversation_is_numbered_and_ordered_as_one_read(
        tmp_path):
    """Conversations are records in time order: a job's conversations are not all after
    the earlier jobs'; the coordinator merges them (and their rejects) by place."""
    order = [5, 2, 9, 0, 7, 1, 8, 3, 6, 4]
    lines = [_line(_broken(n) if n in (3, 7) else _conversation(n, 1 + n % 3))
             for n in order]
    lines.insert(4, "not json {")
    lines.append('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "cut')
    path = _write(tmp_path, lines)
    files = _same_as_one_job(tmp_path, path)
    quarantine = [json.loads(x) for x in files["quarantine.jsonl"].splitlines()]
    lines_out = [q["source_record"] for q in quarantine if not q["raw"].startswith("record ")]
    assert lines_out == [5, 12]
    conversations = [q for q in quarantine if q["raw"].startswith("record ")]
    # conversations 3 and 7 are the 4th and 8th in time, wherever their lines are
    assert [q["source_record"] for q in conversations] == [4, 8]
    assert all(q["raw"].startswith(f"record {q['source_record']} at ") for q in conversations)
    summary = json.loads(files["ingest_summary.json"])
    assert (summary["read"], summary["quarantined"]) == (12, 4)


def test_a_cut_or_garbage_line_is_quarantined_with_its_line_number(tmp_path):
    lines = [_line(_conversation(n, 2)) for n in range(8)]
    lines.insert(3, "garbage, not json")
    lines.insert(6, '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "00')
    path = _write(tmp_path, lines)
    assert len(_jobs(path)) > 3
    files = _same_as_one_job(tmp_path, path)
    quarantine = [json.loads(x) for x in files["quarantine.jsonl"].splitlines()]
    assert [q["source_record"] for q in quarantine] == [4, 7]
    summary = json.loads(files["ingest_summary.json"])
    assert (summary["read"], summary["accepted"], summary["quarantined"]) == (10, 8, 2)


def test_one_worker_or_two_write_the_same_bytes(tmp_path):
    order = [3, 0, 6, 1, 8, 2, 7, 4, 9, 5, 11, 10]
    lines = [_line(_conversation(n, 1 + n % 4)) for n in order]
    lines.insert(2, "not json {")
    path = _write(tmp_path, lines)
    one = _outputs(path, tmp_path / "w1", SMALL, workers=1)
    two = _outputs(path, tmp_path / "w2", SMALL, workers=2)
    assert one == two


@pytest.mark.parametrize("cut", [1, 3])
def test_read_lines_gives_the_records_of_the_whole_read_by_place(tmp_path, cut):
    order = [4, 1, 3, 0, 2, 5]
    lines = [_line(_conversation(n, 2)) for n in order]
    lines.insert(2, "not json {")
    path = _write(tmp_path, lines)
    whole = list(read_otel(path))
    batches = list(plan_guarded(path, cut, Limits()))
    keyed = [kr for b in batches for kr in read_lines(path, b)]
    merged = [record for _, record in sorted(keyed, key=lambda kr: kr[0])]
    assert [_view(r, number=not r.rows) for r in merged if r.is_record] == \
        [_view(r, number=not r.rows) for r in whole if r.is_record]
    assert list(map(_view, read_otel(path, batch=batches))) == list(map(_view, whole))


def _view(r, number: bool = True) -> tuple:
    """A record's fields (an AdapterError compares by identity); its number only when
    asked (a job numbers its conversations from 1)."""
    return (r.number if number else None, r.pointer, r.rows, r.row_pointers,
            repr(r.error), r.episode_id, r.text, r.notes, r.is_record)


def test_a_cut_gz_file_reads_in_jobs_as_one_job(tmp_path):
    import gzip

    lines = [_line(_conversation(n, 1 + n % 3)) for n in range(10)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(data[: len(data) * 9 // 10])  # the stream cut short
    small = Limits(batch_bytes=1024)  # (a .gz is cut by its compressed size)
    assert len(list(_adapt_jobs([(path, "otel-genai")], 7, small, 2))) > 2
    one = _outputs(path, tmp_path / "one", Limits())
    cut = _outputs(path, tmp_path / "cut", small)
    assert cut == one
    assert json.loads(cut["ingest_summary.json"])["quarantined"] >= 1


def _untraced(spans: list[dict], missing: bool = False) -> list[dict]:
    """The spans with an empty trace id (missing: none at all)."""
    for s in spans:
        if missing:
            del s["traceId"]
        else:
            s["traceId"] = ""
    return spans


@pytest.mark.parametrize("workers", [1, 2])
def test_untraced_spans_on_distant_lines_read_as_one_read_does(tmp_path, workers):
    """One read joins every span without a trace id (and no conversation id) into one
    conversation `""` (its empty episode id quarantined once): the batches holding one
    are one job, not pieces of it apart."""
    lines = [_line(_conversation(n, 1 + n % 3)) for n in range(12)]
    far = _conversation(12, 3)
    lines[1] = _line(_untraced(far[:2]))
    lines[6] = _line(_untraced(far[2:4], missing=True))
    lines.append(_line(_untraced(far[4:])))
    path = _write(tmp_path, lines)
    joined = [job for job in _jobs(path) if len(job.batch) > 1]
    assert len(joined) == 1 and _lines(joined[0]) >= {2, 7, len(lines)}
    assert not _lines(joined[0]) >= {4}
    one = _outputs(path, tmp_path / "one", Limits())
    cut = _outputs(path, tmp_path / "cut", SMALL, workers=workers)
    assert cut == one
    summary = json.loads(cut["ingest_summary.json"])
    assert (summary["episodes"], summary["quarantined"]) == (10, 1)
    assert b"episode_id" in cut["quarantine.jsonl"]


def _batch_of(text: str, tmp_path: Path):
    path = _write(tmp_path, [text], name="one.jsonl")
    return next(iter(plan_guarded(path, 7, Limits())))


@pytest.mark.parametrize("value, untraced", [
    ({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "ab", "spanId": "1", "links": [{"traceId": "cd", "spanId": "2"}]}]}]}]},
     False),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"spanId": "1", "links": [{"traceId": "cd", "spanId": "2"}]}]}]}]}, True),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"name": "x", "startTimeUnixNano": "1"}]}]}]}, True),
    ({"data": [{"traceID": "ab", "spans": [{"traceID": "ab", "spanID": "1", "startTime": 1}]}]},
     False),
    ({"data": [{"traceID": "ab", "spans": [{"spanID": "1", "startTime": 1}]}]}, True),
    ({"data": [{"traceID": "ab", "spans": [{"traceID": "", "spanID": "1"}]}]}, True),
    ({"name": "x", "context": {"trace_id": "0xab", "span_id": "0x1"}, "start_time": "t"}, False),
    ({"name": "x", "context": {"trace_id": None, "span_id": "0x1"}, "start_time": "t"}, True),
])
def test_a_batch_with_a_span_without_a_trace_id_names_the_untraced_key(tmp_path, value,
                                                                       untraced):
    keys = otel_links.batch_keys(_batch_of(json.dumps(value), tmp_path))
    assert (otel_links.UNTRACED in keys) is untraced
