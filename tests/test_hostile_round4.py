"""Hostile input round 4 (issue 34), each class by its cases in tests/data/broken/
(make_corpus.py: `_round4_cases`, `_round4_refused`, `_params_cases`): unreadable
sub-folders, params alias bombs and duplicate keys, UTF-16/UTF-32 logs, compressed inputs
and decompression bombs, files skipped in a folder, named pipes."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.data.ingest import InputError, ingest
from tracerl.data.ingest.spool import text_encoding

from .test_redact_everywhere import _output_blobs

CORPUS = Path(__file__).parent / "data" / "broken"
REFUSED = json.loads((CORPUS / "refused.json").read_text())
MARKER = b"zqsecret"


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]


# --- UTF-16 / UTF-32 ----------------------------------------------------------------------

UTF_CASES = sorted(p.name for p in CORPUS.glob("utf*"))


@pytest.mark.parametrize("name", UTF_CASES)
def test_utf16_and_utf32_logs_are_decoded(tmp_path, name):
    """Each reads as its UTF-8 text reads (same records, rows, episodes); the bad line's
    secret is in no output byte, and no NUL either; the summary says how it was read."""
    data = (CORPUS / name).read_bytes()
    text = gzip.decompress(data) if name.endswith(".gz") else data
    encoding, bom = text_encoding(text[:4])
    plain = tmp_path / name.removesuffix(".gz").replace("utf", "plain-utf")
    plain.write_bytes(text[bom:].decode(encoding).encode())
    summary = ingest([CORPUS / name], tmp_path / "out", max_bad_fraction=1.0)
    same = ingest([plain], tmp_path / "plain", max_bad_fraction=1.0)
    assert summary.read > 0 and summary.rows > 0
    assert (summary.read, summary.accepted, summary.rows, summary.episodes) == (
        same.read, same.accepted, same.rows, same.episodes)
    assert summary.read_as == {str(CORPUS / name): summary.read_as[str(CORPUS / name)]}
    assert encoding.upper() in summary.read_as[str(CORPUS / name)]
    blob = _output_blobs(tmp_path / "out")
    assert MARKER not in blob.lower()
    texts = (tmp_path / "out" / "quarantine.jsonl").read_bytes() + orjson.dumps(
        pq.read_table(tmp_path / "out" / "steps").to_pylist())
    assert b"\\u0000" not in texts and b"\x00" not in texts
    table = pq.read_table(tmp_path / "out" / "steps")
    assert set(table.column("source_file").to_pylist()) == {str(CORPUS / name)}
    assert {q["source_file"] for q in _quarantine(tmp_path / "out")} <= {str(CORPUS / name)}


@pytest.mark.parametrize("head,expected", [
    (b"\xff\xfe{\x00", ("utf-16-le", 2)), (b"\xfe\xff\x00{", ("utf-16-be", 2)),
    (b"\xff\xfe\x00\x00", ("utf-32-le", 4)), (b"\x00\x00\xfe\xff", ("utf-32-be", 4)),
    (b"{\x00\"\x00", ("utf-16-le", 0)), (b"\x00{\x00\"", ("utf-16-be", 0)),
    (b"{\x00\x00\x00", ("utf-32-le", 0)), (b"\x00\x00\x00{", ("utf-32-be", 0)),
    (b'{"a"', None), (b"\xef\xbb\xbf{", None), (b"\x1f\x8b\x08\x00", None), (b"", None)])
def test_text_encoding_by_mark_or_zero_bytes(head, expected):
    assert text_encoding(head) == expected


def test_a_cut_utf16_unit_is_quarantined_not_decoded_away(tmp_path):
    """An odd last byte (a cut UTF-16 file) makes its line invalid UTF-8: quarantined
    naming the encoding problem, the lines before it accepted."""
    good = (CORPUS / "utf16le_steps.jsonl").read_bytes().rsplit(b"\n\x00", 2)[0]
    src = tmp_path / "cut.jsonl"
    src.write_bytes(good + b"\n\x00{\x00\"")
    summary = ingest([src], tmp_path / "out", max_bad_fraction=1.0)
    assert summary.quarantined == 1 and summary.accepted == summary.read - 1
    assert _quarantine(tmp_path / "out")[0]["field"] == "<encoding>"


# --- compressed inputs and decompression bombs ----------------------------------------------

@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_decompression_bomb_is_refused_by_name_with_its_limit(tmp_path, name):
    """Refused (exit 2) in one line naming the file and the limit, before it is read
    past a few MiB (memory stays bounded)."""
    case = REFUSED[name]
    result = CliRunner().invoke(app, ["ingest", str(CORPUS / name), "--out",
                                      str(tmp_path / "out"), "--format", case["format"]])
    assert result.exit_code == 2, result.output
    assert name in result.output and case["message"] in result.output
    assert "2,000 times" in result.output
    assert not (tmp_path / "out" / "ingest_summary.json").exists()


def test_a_bomb_in_a_pipe_or_beside_good_files_stops_the_run(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(CORPUS / "zst_steps.jsonl.zst", folder)
    shutil.copy(CORPUS / "bomb_steps.jsonl.xz", folder)
    with pytest.raises(InputError, match="bomb_steps.jsonl.xz: a decompression bomb"):
        ingest([folder], tmp_path / "out")


# --- folders: unreadable sub-folders, every skipped file named ----------------------------

def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(CORPUS / name, target, symlinks=True)
    return target


def test_an_unreadable_sub_folder_exits_2_naming_it(tmp_path, monkeypatch):
    """As root every folder can be listed, so the refusal is injected where the walk
    lists it (os.scandir, as os.walk calls it); see the next test for a real one."""
    folder = _copy("unreadable_subfolder", tmp_path)
    locked = folder / "locked"
    real = os.scandir

    def scandir(path=".", *args):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args)

    monkeypatch.setattr(os, "scandir", scandir)
    result = CliRunner().invoke(app, ["ingest", str(folder), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert str(locked) in result.output and "cannot be read" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists a folder of mode 000")
def test_an_unreadable_sub_folder_by_its_mode(tmp_path):
    folder = _copy("unreadable_subfolder", tmp_path)
    (folder / "locked").chmod(0)
    try:
        with pytest.raises(InputError, match="locked.*cannot be read"):
            ingest([folder], tmp_path / "o")
    finally:
        (folder / "locked").chmod(0o755)


def test_every_skipped_file_of_a_folder_is_named_in_the_summary(tmp_path):
    folder = _copy("skipped_files", tmp_path)
    _copy("unreadable_subfolder", tmp_path)  # what linked_folder points to
    summary = ingest([folder], tmp_path / "out")
    assert summary.files == [str(folder / "good.jsonl")] and summary.quarantined == 0
    skipped = json.loads((tmp_path / "out" / "ingest_summary.json").read_text())[
        "skipped_files"]
    assert set(skipped) == {str(folder / n) for n in (
        "notes.txt", "logs.tar.gz", "run.log.zst", "bundle.zip", "dangling.jsonl",
        "linked_folder")}
    assert "dangling symlink" in skipped[str(folder / "dangling.jsonl")]
    assert "(.zip)" in skipped[str(folder / "bundle.zip")]
    assert "compressed" in skipped[str(folder / "run.log.zst")]
    assert "not followed" in skipped[str(folder / "linked_folder")]
    assert "not a .json or .jsonl file" in skipped[str(folder / "notes.txt")]


def test_a_dangling_symlink_given_itself_is_named(tmp_path):
    folder = _copy("skipped_files", tmp_path)
    with pytest.raises(InputError, match="dangling symlink"):
        ingest([folder / "dangling.jsonl"], tmp_path / "out")


# --- named pipes --------------------------------------------------------------------------

def _feed(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("name", ["crlf.jsonl", "zst_steps.jsonl.zst",
                                  "utf16le_steps.jsonl.gz", "bom_gz_chat.jsonl.gz"])
def test_a_named_pipe_is_read_once(tmp_path, name):
    """A FIFO named anything (its bytes say whether they are compressed, and how the text
    is encoded) reads as the file would; its rows name the pipe."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = _feed(fifo, (CORPUS / name).read_bytes())
    summary = ingest([fifo], tmp_path / "out", max_bad_fraction=1.0)
    writer.join(5)
    same = ingest([CORPUS / name], tmp_path / "file", max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.rows) == (same.read, same.accepted,
                                                              same.rows)
    assert "a pipe, read once" in summary.read_as[str(fifo)]
    assert set(pq.read_table(tmp_path / "out" / "steps").column(
        "source_file").to_pylist()) == {str(fifo)}


@pytest.mark.integration
def test_process_substitution_from_a_shell(tmp_path):
    """`tracerl ingest <(zcat x.gz) <(cat y)` as a user types it."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    out = tmp_path / "out"
    command = (f"{sys.executable} -m tracerl ingest <(zcat {CORPUS / 'bom_gz_chat.jsonl.gz'}) "
               f"<(cat {CORPUS / 'crlf.jsonl'}) --out {out}")
    run = subprocess.run([bash, "-c", command], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    summary = json.loads((out / "ingest_summary.json").read_text())
    assert len(summary["files"]) == 2 and summary["accepted"] == summary["read"] > 0
    assert all(v == "a pipe, read once" for v in summary["read_as"].values())


# --- params: alias bombs, duplicate keys ----------------------------------------------------

PARAMS_CASES = {
    "params_alias_bomb.yaml": "an alias bomb", "params_merge_bomb.yaml": "an alias bomb",
    "params_list_anchor_bomb.yaml": "an alias bomb",
    "params_recursive_alias.yaml": "a recursive alias",
    "params_deep.yaml": "nested more than 64 levels",
    "params_duplicate_key.yaml": "line 5: the key 'redact' is given twice in one mapping "
                                 "(first on line 3)",
    "params_duplicate_flow_key.yaml": "the key 'strict' is given twice",
}


def test_every_params_case_is_listed():
    assert {p.name for p in CORPUS.glob("params_*.yaml")} == set(PARAMS_CASES)


@pytest.mark.parametrize("name", sorted(PARAMS_CASES))
def test_a_params_file_is_refused_in_one_line(tmp_path, name):
    result = CliRunner().invoke(app, ["ingest", str(CORPUS / "crlf.jsonl"), "--out",
                                      str(tmp_path / "o"), "--params", str(CORPUS / name)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and PARAMS_CASES[name] in lines[0], lines
    assert not (tmp_path / "o").exists()


@pytest.mark.integration
def test_an_alias_bomb_is_refused_in_bounded_time_and_memory(tmp_path):
    """A real process: the billion laughs, ten levels, refused in seconds and little memory
    (it ran past 60 s and 2.6 GB)."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text((CORPUS / "params_alias_bomb.yaml").read_text()
                    + "l10: &l10 [" + ", ".join(["*l9"] * 9) + "]\n")
    # The child's own peak (VmHWM after resetting it): ru_maxrss of a forked child starts
    # at its parent's resident size, a pytest worker's hundreds of MB.
    code = ("import re, sys; from tracerl.config.schema import load_config\n"
            "open('/proc/self/clear_refs', 'w').write('5')\n"
            "try:\n    load_config(sys.argv[1])\nexcept Exception as e: print(e)\n"
            "print(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read())[1])")
    run = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True,
                         text=True, timeout=30)
    message, peak_kb = run.stdout.strip().splitlines()
    assert "an alias bomb" in message
    assert int(peak_kb) < 400_000


def test_merge_keys_may_override_and_plain_aliases_pass(tmp_path):
    from tracerl.config.params import load_yaml

    path = tmp_path / "p.yaml"
    path.write_text("base: &b {a: 1, b: 2}\nmine:\n  <<: *b\n  b: 3\nlist: [*b, *b]\n")
    assert load_yaml(path) == {"base": {"a": 1, "b": 2}, "mine": {"a": 1, "b": 3},
                               "list": [{"a": 1, "b": 2}] * 2}


# --- secrets cut by a truncation ------------------------------------------------------------

@pytest.mark.parametrize("at", [150, 185, 190, 195, 199])
def test_a_secret_cut_by_an_oversize_records_head_is_not_kept(tmp_path, at):
    """Quarantine keeps the first 200 bytes of a record over the size limit: an e-mail
    or key cut there matches no pattern, so the head's last word goes."""
    secret = "ann.lee.zqsecret@mail.example.net"
    line = ('{"episode_id": "' + "x" * (at - len('{"episode_id": "')) + " " + secret
            + '", "pad": "' + "y" * 3000 + '"}').encode()
    src = tmp_path / "big.jsonl"
    src.write_bytes(line + b"\n")
    params = tmp_path / "p.yaml"
    params.write_text("ingest:\n  max_record_bytes: 1000\n")
    result = CliRunner().invoke(app, ["ingest", str(src), "--out", str(tmp_path / "o"),
                                      "--params", str(params)])
    assert result.exit_code == 1, result.output
    assert MARKER not in _output_blobs(tmp_path / "o").lower()
    assert b"ann.lee" not in _output_blobs(tmp_path / "o")
