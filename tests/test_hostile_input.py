"""Hostile input never crashes ingest: the broken-input corpus (one file per failure
kind, tests/data/broken/expected.json), exit statuses, and property-based tests."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.data.formats import detect_format
from tracerl.data.ingest import ingest
from tracerl.data.ingest.limits import Limits
from tracerl.envs.calculator.logs import log_records

CORPUS = Path(__file__).parent / "data" / "broken"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())
GOOD = [orjson.dumps(r) for r in log_records("good_coverage", 3, seed=3, test_fraction=0.2)]


def _params(tmp: Path, **ingest_knobs) -> Path:
    path = tmp / "params.yaml"
    path.write_text("ingest:\n" + "".join(f"  {k}: {v}\n" for k, v in ingest_knobs.items()))
    return path


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]


# tau2_* files are tau2-bench results (a record is a simulation), chat_* openai-chat
# conversations (a record is a line), anthropic_/atif_/claude_/langfuse_/otel_ their
# formats; bom_* (a byte-order mark on every format and wrapper) and dup_* (a folder: one
# episode id in two files of two formats) are read with --format auto; the rest are native
# JSONL steps
FORMAT_OF_PREFIX = {"tau2_": "tau2", "chat_": "openai-chat", "anthropic_": "anthropic",
                    "atif_": "atif", "claude_": "claude-code", "langfuse_": "langfuse",
                    "otel_": "otel-genai", "bom_": "auto", "dup_": "auto", "utf": "auto",
                    "zst_": "auto", "bz2_": "auto", "xz_": "auto", "unreadable_": "auto",
                    "skipped_": "auto"}
REFUSED = json.loads((CORPUS / "refused.json").read_text())  # inputs refused whole (exit 2)


def _format(name: str) -> str:
    return next((f for p, f in FORMAT_OF_PREFIX.items() if name.startswith(p)), "jsonl")


def test_corpus_has_one_file_per_kind():
    assert {p.name for p in CORPUS.iterdir() if p.name.endswith((
        ".jsonl", ".json", ".gz", ".zst", ".bz2", ".xz")) and p.name not in (
            "expected.json", "refused.json") or p.is_dir()} == set(EXPECTED) | set(REFUSED)


@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED) if _format(n) not in
                                  ("jsonl", "auto") and "empty" not in n
                                  and "bom_only" not in n])
def test_corpus_adapter_files_are_detected_as_their_format(name):
    """--format auto reads each adapter file with its adapter (a cut .gz by what is
    intact of it)."""
    assert detect_format(CORPUS / name) == _format(name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_input_is_quarantined_with_its_reason(tmp_path, name):
    """Every failure kind, in every format: the bad record is one quarantine line naming
    its record, field and reason; read = accepted + quarantined; exit 0 or 1."""
    out = tmp_path / "out"
    params = _params(tmp_path, max_record_bytes=100_000)
    # an unknown field is kept under `extra` by default (schema v2); --strict rejects it
    strict = ["--strict"] if name == "unknown_field.jsonl" else []
    result = CliRunner().invoke(app, ["ingest", str(CORPUS / name), "--out", str(out),
                                      "--params", str(params), "--format", _format(name),
                                      *strict])
    assert result.exit_code in (0, 1), result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit), result.exception
    summary = json.loads((out / "ingest_summary.json").read_text())
    assert summary["read"] == summary["accepted"] + summary["quarantined"]
    rejects = _quarantine(out)
    assert len(rejects) == summary["quarantined"]
    for want in EXPECTED[name]:
        hits = [r for r in rejects if r["source_record"] == want["line"]
                and r["field"] == want["field"] and want["reason"] in r["reason"]]
        assert hits, (want, rejects)
    if name != "truncated.jsonl.gz":  # there the cut also leaves its episode without a
        # done step, so that episode's intact steps go too
        assert len(rejects) == len(EXPECTED[name]), rejects  # the good records all pass


@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED) if n.startswith("bom_")
                                  and n != "bom_only.jsonl"])
def test_a_byte_order_mark_is_not_data(tmp_path, name):
    """A file (plain or .gz) that starts with a UTF-8 byte-order mark reads every record
    it would read without one, in every format (a JSON list of conversations with one was
    read as nothing, and a single conversation quarantined as invalid JSON)."""
    summary = ingest([CORPUS / name], tmp_path / "out")
    assert summary.read > 0 and summary.quarantined == 0 and summary.rows > 0, summary
    plain = tmp_path / name.replace(".gz", "")
    data = (CORPUS / name).read_bytes()
    plain.write_bytes((gzip.decompress(data) if name.endswith(".gz") else data)[3:])
    without = ingest([plain], tmp_path / "plain")
    assert (summary.read, summary.rows, summary.episodes) == (without.read, without.rows,
                                                               without.episodes)


def test_one_episode_in_two_formats_is_quarantined_on_every_side(tmp_path):
    """An episode id in two input files (here an OpenAI-chat conversation and native steps)
    is one inconsistent episode: every copy goes to quarantine, so no file wins by input
    order, and the summary's episode count is the table's."""
    from tracerl.io.fileio import read_table

    summary = ingest([CORPUS / "dup_across_formats"], tmp_path / "out")
    table = read_table(tmp_path / "out" / "steps")
    assert summary.episodes == len(set(table.column("episode_id").to_pylist())) == 1
    assert "chat-0" not in table.column("episode_id").to_pylist()
    assert summary.read == summary.accepted + summary.quarantined == 3


@pytest.mark.integration
def test_no_traceback_and_documented_status_from_a_real_process(tmp_path):
    """The whole corpus in one run, as a user would: exit 1 (over the threshold), one
    summary line, no traceback."""
    params = _params(tmp_path, max_record_bytes=100_000)
    files = [str(CORPUS / name) for name in sorted(EXPECTED)]  # every format, detected
    run = subprocess.run([sys.executable, "-m", "tracerl", "ingest", *files, "--out",
                          str(tmp_path / "out"), "--params", str(params)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    summary = json.loads((tmp_path / "out" / "ingest_summary.json").read_text())
    assert summary["read"] == summary["accepted"] + summary["quarantined"]


def test_unreadable_input_exits_2(tmp_path):
    not_gzip = tmp_path / "x.jsonl.gz"
    not_gzip.write_bytes(b"plain text\n")
    runner = CliRunner()
    for target in [tmp_path / "missing.jsonl", not_gzip]:
        result = runner.invoke(app, ["ingest", str(target), "--out", str(tmp_path / "o")])
        assert result.exit_code == 2, result.output
        assert target.name in result.output


def test_internal_error_on_one_record_exits_3_and_keeps_the_others(tmp_path, monkeypatch):
    """A record that makes the parser raise (a bug, injected here) is quarantined as an
    internal error; every other record is still ingested, and the status is 3."""
    import tracerl.data.ingest.limits as limits

    real = limits.parse_batch

    def flaky(lines, source_file, first_line, raw=None, **kw):
        if any(b"POISON" in line for line in lines):
            raise TypeError("injected bug")
        return real(lines, source_file, first_line, raw, **kw)

    monkeypatch.setattr(limits, "parse_batch", flaky)
    src = tmp_path / "s.jsonl"
    poison = orjson.loads(GOOD[0])
    poison["task"] = "POISON"
    src.write_bytes(b"\n".join([*GOOD, orjson.dumps(poison)]) + b"\n")
    result = CliRunner().invoke(app, ["ingest", str(src), "--out", str(tmp_path / "o"),
                                      "--workers", "1"])
    assert result.exit_code == 3, result.output
    summary = json.loads((tmp_path / "o" / "ingest_summary.json").read_text())
    assert summary["accepted"] == len(GOOD)
    assert summary["internal_errors"] == 1
    assert _quarantine(tmp_path / "o")[0]["field"] == "<internal>"


def test_oversize_line_is_never_loaded(tmp_path):
    """A line far over the limit is rejected from newline positions alone; the lines
    around it keep their numbers (plain and gzip)."""
    big = b'{"episode_id": "' + b"x" * 3_000_000 + b'"}'
    data = b"\n".join([*GOOD[:4], big, *GOOD[4:]]) + b"\n"
    for name, payload in [("a.jsonl", data), ("a.jsonl.gz", gzip.compress(data))]:
        src = tmp_path / name
        src.write_bytes(payload)
        summary = ingest([src], tmp_path / f"out-{name}", batch_lines=3, workers=1,
                         limits=Limits(max_record_bytes=1_000_000, batch_bytes=2000))
        assert summary.read == len(GOOD) + 1
        assert summary.accepted == len(GOOD)
        (reject,) = _quarantine(tmp_path / f"out-{name}")
        assert reject["source_record"] == 5
        assert f"{len(big):,} bytes" in reject["reason"]
        assert len(reject["raw"]) < 300


def test_same_file_by_two_spellings_is_read_once(tmp_path, monkeypatch):
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"\n".join(GOOD) + b"\n")
    monkeypatch.chdir(tmp_path)
    summary = ingest(["s.jsonl", str(src), f"../{tmp_path.name}/./s.jsonl",
                      tmp_path], tmp_path / "out")
    assert summary.read == len(GOOD)
    assert summary.quarantined == 0


def test_second_ingest_into_the_same_folder_refuses(tmp_path):
    import fcntl

    from tracerl.data.ingest import InputError

    src = tmp_path / "s.jsonl"
    src.write_bytes(b"\n".join(GOOD) + b"\n")
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".ingest.lock", "a+") as held:  # what a running ingest holds
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(InputError, match="another ingest"):
            ingest([src], out)
    assert ingest([src], out).accepted == len(GOOD)


# --- property-based ---------------------------------------------------------------------

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_value = st.recursive(json_leaf, lambda c: st.one_of(
    st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)),
    max_leaves=30)
FIELDS = ["episode_id", "t", "task", "state", "action", "observation", "reward", "done",
          "split", "metadata", "action_logprobs", "reward_components", "extra"]


def _dumps(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()  # integers of any size


@st.composite
def mutated_record(draw) -> bytes:
    """A good record with fields replaced by arbitrary JSON, removed, or the bytes cut,
    flipped or wrapped in deep nesting."""
    record = orjson.loads(draw(st.sampled_from(GOOD)))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3)):
        if draw(st.booleans()):
            record[name] = draw(json_value)
        else:
            record.pop(name, None)
    kind = draw(st.sampled_from(["json", "json", "cut", "bytes", "deep", "nan"]))
    if kind == "deep":
        depth = draw(st.integers(1, 1500))
        record["action"] = {"type": "tool_call", "tool": "add",
                            "arguments": "@@DEEP@@"}
        return _dumps(record).replace(b'"@@DEEP@@"', b"[" * depth + b"]" * depth)
    text = _dumps(record)
    if kind == "cut":
        return text[:draw(st.integers(0, len(text)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(max_size=6)).replace(b"\n", b"") + text[at:]
    if kind == "nan":
        return text.replace(b'"reward":-0.02', b'"reward":' + draw(
            st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e999"])))
    return text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(GOOD), mutated_record()), min_size=1, max_size=25),
       st.integers(1, 7), st.booleans())
def test_any_mix_of_records_adds_up(lines, batch_lines, gz):
    data = b"\n".join(lines) + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / ("in.jsonl.gz" if gz else "in.jsonl")
        src.write_bytes(gzip.compress(data) if gz else data)
        summary = ingest([src], Path(tmp) / "out", batch_lines=batch_lines, workers=1,
                         limits=Limits(max_record_bytes=4000, max_depth=40, batch_bytes=3000))
        records = [x for x in data.split(b"\n")
                   if x.strip() and x.strip() != b"\xef\xbb\xbf"]
        assert summary.read == summary.accepted + summary.quarantined
        assert summary.read <= len(records)
        assert summary.internal_errors == 0
        quarantine = (Path(tmp) / "out" / "quarantine.jsonl").read_bytes().splitlines()
        assert len(quarantine) == summary.quarantined
        numbers = [orjson.loads(q)["source_record"] for q in quarantine]
        assert all(1 <= n <= len(lines) for n in numbers)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3000), st.sampled_from(["[", "{\"a\":"]))
def test_any_nesting_depth_is_accepted_or_quarantined(depth, opener):
    close = "]" if opener == "[" else "}"
    record = orjson.loads(GOOD[0])
    record["action"]["arguments"] = "@@"
    line = orjson.dumps(record).replace(b'"@@"', (opener * depth + "1" + close * depth).encode())
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_bytes(line + b"\n")
        summary = ingest([src], Path(tmp) / "out", workers=1)
        assert summary.read == 1 == summary.accepted + summary.quarantined
        if depth + 2 > 64:
            (reject,) = _quarantine(Path(tmp) / "out")
            assert "nested" in reject["reason"]


def test_many_small_files_become_few_parts(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    records = list(log_records("good_coverage", 300, seed=4, test_fraction=0.2))
    for k in range(300):  # one episode per file
        (folder / f"ep-{k:04d}.jsonl").write_bytes(
            b"\n".join(orjson.dumps(r) for r in records[4 * k:4 * k + 4]) + b"\n")
    summary = ingest([folder], tmp_path / "out", batch_lines=1000, workers=1)
    assert summary.accepted == 1200 and summary.episodes == 300
    parts = sorted((tmp_path / "out" / "steps").glob("*.parquet"))
    assert len(parts) <= 6, len(parts)
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "steps")
    assert table.column("source_record").to_pylist()[:5] == [1, 2, 3, 4, 1]


def test_packed_small_files_keep_the_lineage_of_rejects(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for k in range(40):
        lines = list(GOOD[:4])
        if k % 7 == 3:
            lines.insert(k % 4, b"not json")
        prefix = b"\xef\xbb\xbf" if k % 5 == 0 else b""
        (folder / f"f{k:02d}.jsonl").write_bytes(prefix + b"\n".join(lines) + b"\n")
    summary = ingest([folder], tmp_path / "out", batch_lines=1000, workers=1,
                     max_bad_fraction=1.0)
    rejects = _quarantine(tmp_path / "out")
    bad = [(r["source_file"], r["source_record"]) for r in rejects if r["field"] == "<record>"]
    assert bad == [(str(folder / f"f{k:02d}.jsonl"), k % 4 + 1) for k in range(40) if k % 7 == 3]
    assert summary.read == summary.accepted + summary.quarantined == 40 * 4 + len(bad)


def test_unusable_arguments_exit_2(tmp_path):
    src = CORPUS / "crlf.jsonl"
    a_file = tmp_path / "taken"
    a_file.write_text("")
    runner = CliRunner()
    for args in (["--out", str(a_file)], ["--out", str(tmp_path / "o"), "--batch-lines", "0"],
                 ["--out", str(tmp_path / "o"), "--max-bad-fraction", "2"],
                 ["--out", str(tmp_path / "o"), "--workers", "-1"]):
        result = runner.invoke(app, ["ingest", str(src), *args])
        assert result.exit_code == 2, (args, result.output)


@pytest.mark.parametrize("gz", [False, True])
def test_batches_cut_by_bytes_keep_every_line_number(tmp_path, gz):
    data = b"\n".join(GOOD) + b"\n"
    src = tmp_path / ("in.jsonl.gz" if gz else "in.jsonl")
    src.write_bytes(gzip.compress(data) if gz else data)
    one = ingest([src], tmp_path / "one", workers=1)
    cut = ingest([src], tmp_path / "cut", workers=1, batch_lines=5,
                 limits=Limits(batch_bytes=1500))
    assert one.accepted == cut.accepted == len(GOOD)
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "cut" / "steps").column("source_record").to_pylist() \
        == list(range(1, len(GOOD) + 1))


def test_internal_error_in_an_adapted_record_costs_that_record_only(tmp_path, monkeypatch):
    """An adapter's format takes the same retry: the record whose parse raises is
    quarantined as <internal>, the others are ingested."""
    import tracerl.data.ingest.run as run

    real = run.parse_adapted

    def flaky(records, source_file, **kw):
        if any(any(r.get("task") == "POISON" for r in rec.rows) for rec in records):
            raise TypeError("injected bug")
        return real(records, source_file, **kw)

    monkeypatch.setattr(run, "parse_adapted", flaky)
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(c) + "\n" for c in [
        {"messages": chat}, {"messages": chat, "task_id": "POISON"}, {"messages": chat}]))
    summary = ingest([src], tmp_path / "o", fmt="openai-chat", max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.internal_errors) == (3, 2, 1)
    [q] = _quarantine(tmp_path / "o")
    assert q["field"] == "<internal>" and q["source_record"] == 2


# --- property-based, through the adapters ----------------------------------------------

CHAT = {"id": "chat", "task_id": "t1", "trial": 0, "reward": 1.0, "messages": [
    {"role": "user", "content": "Cancel order 7."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "cancel_order", "arguments": '{"order_id": 7}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"status": "cancelled"}'},
    {"role": "assistant", "content": "Done."}]}
SIMULATION = {"id": "sim", "task_id": "t1", "trial": 0, "messages": [
    {"role": "user", "content": "Cancel order 7."},
    {"role": "assistant", "content": None, "usage": {"prompt_tokens": 5},
     "tool_calls": [{"id": "c1", "name": "cancel_order", "arguments": {"order_id": 7}}]},
    {"role": "tool", "id": "c1", "content": '{"status": "cancelled"}'},
    {"role": "assistant", "content": "Done."}], "reward_info": {"reward": 1.0}}


@st.composite
def mutated_adapter_record(draw, good: dict, number: int) -> bytes:
    """A good conversation or simulation (its own id) with fields or messages replaced by
    arbitrary JSON or removed, or its text cut, flipped, deeply nested, padded past the
    size limit, or given NaN."""
    record = json.loads(json.dumps(good))
    record["id"] = f"{good['id']}-{number}"
    for name in draw(st.lists(st.sampled_from([*record, "reward_info", "usage"]),
                              max_size=3)):
        if draw(st.booleans()):
            record[name] = draw(json_value)
        else:
            record.pop(name, None)
    for _ in range(draw(st.integers(0, 2))):
        messages = record.get("messages")
        if isinstance(messages, list) and messages:
            at = draw(st.integers(0, len(messages) - 1))
            messages[at] = draw(st.one_of(json_value, st.fixed_dictionaries(
                {"role": st.sampled_from(["assistant", "tool", "user", 3, None])},
                optional={"content": json_value, "tool_calls": json_value,
                          "tool_call_id": json_value, "id": json_value})))
    text = _dumps(record)
    kind = draw(st.sampled_from(["json", "json", "cut", "bytes", "deep", "deep_in_text",
                                 "big", "nan"]))
    if kind == "deep_in_text":  # JSON nested inside a string: tool arguments, a result
        depth = draw(st.integers(1, 1500))
        nested = json.dumps("[" * depth + "]" * depth).encode()
        return text.replace(b'"{\\"order_id\\": 7}"', nested).replace(
            b'"{\\"status\\": \\"cancelled\\"}"', nested)
    if kind == "deep":
        depth = draw(st.integers(1, 1500))
        return text.replace(b'"Done."', b"[" * depth + b"]" * depth, 1)
    if kind == "cut":
        return text[:draw(st.integers(0, len(text)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(max_size=6)).replace(b"\n", b"") + text[at:]
    if kind == "big":
        return text.replace(b'"Done."', b'"' + b"x" * 5000 + b'"', 1)
    if kind == "nan":
        return text.replace(b"1.0", draw(st.sampled_from([b"NaN", b"-Infinity", b"1e999"])),
                            1)
    return text


def _run_adapter_ingest(src: Path, fmt: str) -> tuple[int, dict | None, str]:
    """Through the CLI as a user runs it: (exit status, summary if written, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        params = _params(Path(tmp), max_record_bytes=4000, max_depth=40,
                         max_bad_fraction=0.01)
        out = Path(tmp) / "out"
        result = CliRunner().invoke(app, ["ingest", str(src), "--out", str(out), "--format",
                                          fmt, "--params", str(params), "--workers", "1"])
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            result.exception
        summary_path = out / "ingest_summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
        if summary is not None:
            quarantine = (out / "quarantine.jsonl").read_bytes().splitlines()
            assert len(quarantine) == summary["quarantined"]
            assert all(orjson.loads(q)["source_record"] >= 1 for q in quarantine)
        return result.exit_code, summary, result.output


@pytest.mark.parametrize("first", [b"{", b"["])
def test_a_jsonl_whose_first_line_is_a_lone_bracket_keeps_the_records_after_it(tmp_path,
                                                                             first):
    """Found by the test below: a .jsonl whose first line is a lone `{` (a broken record)
    was read as one pretty-printed "document", rejected whole, its valid conversations
    with it (or, after `[`, the file refused). It is lines: the bracket is quarantined,
    the conversations read. A pretty-printed document named .jsonl stays one document."""
    chat = _dumps({**CHAT, "id": "chat-1"})
    src = tmp_path / "in.jsonl"
    src.write_bytes(first + b"\n" + chat + b"\n")
    summary = ingest([src], tmp_path / "out", fmt="openai-chat", workers=1,
                     max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 1, 1)
    pretty = tmp_path / "pretty.jsonl"
    pretty.write_text(json.dumps([{**CHAT, "id": "p1"}, {**CHAT, "id": "p2"}], indent=2))
    summary = ingest([pretty], tmp_path / "out2", fmt="openai-chat", workers=1)
    assert (summary.read, summary.accepted, summary.quarantined) == (2, 2, 0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 12), st.booleans(), st.integers(0, 3), st.booleans())
def test_any_mix_of_conversations_adds_up(data, n, gz, cut_gz, document):
    """JSONL (a line is a record) or one JSON document holding a list of conversations."""
    lines = [data.draw(st.one_of(st.just(_dumps({**CHAT, "id": f"chat-{k}"})),
                                 mutated_adapter_record(CHAT, k))) for k in range(n)]
    raw = (b"[" + b",\n".join(lines) + b"]") if document else b"\n".join(lines) + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / ("in.json" if document else "in.jsonl")
        src = src.with_name(src.name + ".gz") if gz else src
        payload = gzip.compress(raw, mtime=0) if gz else raw
        if gz and cut_gz:  # a truncated .gz: what is intact is read
            payload = payload[:max(10, len(payload) * cut_gz // 4)]
        src.write_bytes(payload)
        status, summary, output = _run_adapter_ingest(src, "openai-chat")
    assert "Traceback" not in output
    if status == 2 and (document or (gz and cut_gz)):  # brackets closing what never
        # opened, a .gz cut before any text (as native JSONL): the file is unreadable,
        assert src.name in output  # said in one line naming the file
        return
    assert status in (0, 1), output  # otherwise never unreadable as a whole
    assert summary["read"] == summary["accepted"] + summary["quarantined"]
    assert summary["internal_errors"] == 0
    # a .gz cut between two records is an entry of its own (the unreadable rest, of unknown
    # size: "gzip stream cut at the start of this line"), so one more than the records
    assert summary["read"] <= n + (1 if gz and cut_gz else 0)
    if not (gz and cut_gz) and not document:
        assert summary["read"] == len([x for x in lines if x.strip()])
    if not (gz and cut_gz) and document and all(map(_is_json, lines)):
        first = json.loads(lines[0])
        bare = isinstance(first, dict) and "role" in first  # the list is one conversation
        assert summary["read"] == (1 if bare else n)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(0, 10), st.booleans(),
       st.sampled_from(["whole", "whole", "cut", "cut_gz", "flip"]))
def test_any_mix_of_simulations_adds_up(data, n, gz, damage):
    sims = [data.draw(st.one_of(st.just(_dumps({**SIMULATION, "id": f"sim-{k}"})),
                                mutated_adapter_record(SIMULATION, k))) for k in range(n)]
    doc = (b'{"info": {"environment_info": {"domain_name": "retail"}}, "tasks": [], '
           b'"simulations": [' + b",\n".join(sims) + b"]}")
    if damage == "cut":
        doc = doc[:data.draw(st.integers(0, len(doc)))]
    elif damage == "flip":
        at = data.draw(st.integers(0, len(doc)))
        doc = doc[:at] + data.draw(st.binary(min_size=1, max_size=4)) + doc[at:]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / ("results.json.gz" if gz or damage == "cut_gz" else "results.json")
        payload = gzip.compress(doc, mtime=0) if src.name.endswith(".gz") else doc
        if damage == "cut_gz":
            payload = payload[:data.draw(st.integers(0, len(payload)))]
        src.write_bytes(payload)
        status, summary, output = _run_adapter_ingest(src, "tau2")
    assert "Traceback" not in output
    assert status in (0, 1, 2), output
    if status == 2:  # the document itself is unreadable (not an object, cut before the
        assert src.name in output  # simulations, ...): said in one line naming the file
        return
    assert summary["read"] == summary["accepted"] + summary["quarantined"]
    assert summary["internal_errors"] == 0
    if damage == "whole" and all(map(_is_json, sims)):
        # every simulation, whatever it holds, is one record: accepted or quarantined
        assert summary["read"] == n
    else:  # text that breaks the document's brackets merges what follows into one record
        assert summary["read"] <= max(n, 1)


def _is_json(text: bytes) -> bool:
    """JSON (NaN allowed) by the standard library: its brackets balance."""
    try:
        json.loads(text)
    except RecursionError:
        return True  # deeper than Python recurses: balanced all the same
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("fmt", ["openai-chat", "tau2"])
def test_a_tool_result_nested_too_deep_is_kept_as_its_text(tmp_path, fmt):
    """A tool result is JSON text the adapter parses when it can; nested beyond max_depth
    it stays the text it was (nothing lost, nothing recursed on), in both adapters."""
    deep = "[" * 100 + "]" * 100
    if fmt == "openai-chat":
        src = tmp_path / "c.jsonl"
        src.write_text(json.dumps({**CHAT, "messages": [
            *CHAT["messages"][:2], {"role": "tool", "tool_call_id": "c1", "content": deep}]})
            + "\n")
    else:
        src = tmp_path / "r.json"
        sim = {**SIMULATION, "messages": [*SIMULATION["messages"][:2],
                                          {"role": "tool", "id": "c1", "content": deep}]}
        src.write_text(json.dumps({"info": {}, "tasks": [], "simulations": [sim]}))
    summary = ingest([src], tmp_path / "out", fmt=fmt)
    assert (summary.read, summary.accepted) == (1, 1)
    import pyarrow.parquet as pq

    (row,) = pq.read_table(tmp_path / "out" / "steps").to_pylist()
    assert json.loads(row["observation"]["tool_result"]) == deep
