"""tracerl ingest: counts add up, reasons name record and field, exit status follows
max_bad_fraction, outputs are atomic and deterministic."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import orjson
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.data.ingest import InputError, ingest
from tracerl.data.schema import STEP_SCHEMA, row_to_record
from tracerl.envs.calculator.logs import log_records


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return list(log_records("good_coverage", 60, seed=7, test_fraction=0.2))


def _write(path: Path, lines: list[str | bytes]) -> Path:
    data = b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)
    path.write_bytes(data)
    return path


def _dump(record: dict) -> str:
    return orjson.dumps(record).decode()


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]


def _episode(records: list[dict], k: int) -> list[dict]:
    ids = list(dict.fromkeys(r["episode_id"] for r in records))
    return [copy.deepcopy(r) for r in records if r["episode_id"] == ids[k]]


@pytest.mark.integration
def test_clean_file_round_trips_jsonl_to_parquet(tmp_path, records):
    src = _write(tmp_path / "steps.jsonl", [_dump(r) for r in records])
    summary = ingest([src], tmp_path / "out", batch_lines=37)
    assert (summary.read, summary.accepted, summary.quarantined) == (len(records),) * 2 + (0,)
    table = ds.dataset(tmp_path / "out" / "steps", format="parquet").to_table()
    assert table.schema.remove_metadata() == STEP_SCHEMA.remove_metadata()
    back = [row_to_record(r) for r in table.to_pylist()]
    assert back == records  # every field, in order, after JSONL -> Parquet -> rows
    assert table.column("source_record").to_pylist() == list(range(1, len(records) + 1))
    assert summary.episodes == len({r["episode_id"] for r in records})


@pytest.mark.integration
def test_mixed_good_and_broken_lines(tmp_path, records):
    good = [_dump(r) for r in records]
    base = records[0]
    broken = {
        # line content -> (field named in quarantine)
        "{not json": "<record>",
        _dump({k: v for k, v in base.items() if k != "t"} | {"episode_id": "x1"}): "t",
        _dump(base | {"episode_id": "x2", "t": "0"}): "t",
        _dump(base | {"episode_id": "x3", "reward": "high"}): "reward",
        _dump(base | {"episode_id": "x4", "split": "holdout"}): "split",
        _dump(base | {"episode_id": "x5", "action": {**base["action"], "type": "dance"}}):
            "action.type",
        _dump(base | {"episode_id": "x6", "surprise": 1}): "surprise",
        _dump(base | {"episode_id": "x7", "state": {**base["state"], "mood": "ok"}}): "state.mood",
        _dump(base | {"episode_id": "x8", "done": "yes"}): "done",
        _dump(base | {"episode_id": "x9", "action_logprobs": 0.5}): "action_logprobs",
        "[1, 2, 3]": "<record>",
        _dump(base | {"episode_id": ""}): "episode_id",
    }
    lines = good[:10] + list(broken) + [""] + good[10:]  # a blank line is not a record
    src = _write(tmp_path / "mixed.jsonl", lines)
    # strict: unknown fields (surprise, state.mood) are rejected, not kept under `extra`
    summary = ingest([src], tmp_path / "out", batch_lines=16, max_bad_fraction=0.5,
                     strict=True)

    assert summary.read == len(good) + len(broken)
    assert summary.accepted + summary.quarantined == summary.read
    assert summary.quarantined == len(broken)
    quarantined = _quarantine(tmp_path / "out")
    by_line = {q["source_record"]: q for q in quarantined}
    for offset, (text, field) in enumerate(broken.items()):
        q = by_line[11 + offset]  # the broken lines are lines 11.. of the file
        assert q["source_file"] == str(src)
        assert q["field"] == field, q
        assert q["raw"] == text
        assert q["reason"]
    summary_file = json.loads((tmp_path / "out" / "ingest_summary.json").read_text())
    assert summary_file["read"] == summary_file["accepted"] + summary_file["quarantined"]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("break_episode", "field", "words"),
    [
        (lambda ep: ep + [ep[1]], "t", "more than once"),  # duplicate (episode_id, t)
        (lambda ep: [ep[0]] + ep[2:], "t", "missing t=1"),  # a gap
        (lambda ep: ep[:-1], "done", "no step with done"),  # never finishes
        (lambda ep: [ep[0] | {"done": True}] + ep[1:], "done", "after done"),
    ],
)
def test_inconsistent_episodes_are_quarantined_whole(tmp_path, records, break_episode, field,
                                                     words):
    victim = _episode(records, 3)
    others = [r for r in records if r["episode_id"] != victim[0]["episode_id"]]
    bad = break_episode(victim)
    src = _write(tmp_path / "e.jsonl", [_dump(r) for r in others[:9] + bad + others[9:]])
    summary = ingest([src], tmp_path / "out", batch_lines=5, max_bad_fraction=1.0)
    quarantined = _quarantine(tmp_path / "out")
    assert len(quarantined) == len(bad) == summary.quarantined
    assert summary.accepted == len(others)
    assert {q["source_record"] for q in quarantined} == set(range(10, 10 + len(bad)))
    for q in quarantined:
        assert q["field"] == field and words in q["reason"]
        assert victim[0]["episode_id"] in q["reason"]
        assert json.loads(q["raw"])["episode_id"] == victim[0]["episode_id"]
    kept = ds.dataset(tmp_path / "out" / "steps", format="parquet").to_table()
    assert victim[0]["episode_id"] not in set(kept.column("episode_id").to_pylist())


def test_episode_split_across_files_and_gzip_and_folders(tmp_path, records):
    folder = tmp_path / "logs"
    (folder / "day2").mkdir(parents=True)
    half = len(records) // 2 + 1  # splits an episode between the two files
    _write(folder / "a.jsonl", [_dump(r) for r in records[:half]])
    with gzip.open(folder / "day2" / "b.jsonl.gz", "wb") as f:
        f.write(b"".join(orjson.dumps(r) + b"\n" for r in records[half:]))
    (folder / "notes.txt").write_text("not a log")
    summary = ingest([folder], tmp_path / "out")
    assert (summary.accepted, summary.quarantined) == (len(records), 0)
    assert summary.files == [str(folder / "a.jsonl"), str(folder / "day2" / "b.jsonl.gz")]


def test_counts_and_exit_status_follow_max_bad_fraction(tmp_path, records):
    lines = [_dump(r) for r in records[:96]] + ["oops"]  # 24 whole episodes + 1 bad line
    src = _write(tmp_path / "s.jsonl", lines)
    runner = CliRunner()
    ok = runner.invoke(app, ["ingest", str(src), "--out", str(tmp_path / "a"),
                             "--max-bad-fraction", "0.011"])  # 1/97 = 0.0103
    assert ok.exit_code == 0, ok.output
    assert "read 97, accepted 96, quarantined 1" in ok.output
    strict = runner.invoke(app, ["ingest", str(src), "--out", str(tmp_path / "b"),
                                 "--max-bad-fraction", "0.01"])
    assert strict.exit_code == 1
    assert "FAILED" in strict.output and "quarantined 1" in strict.output
    missing = runner.invoke(app, ["ingest", str(tmp_path / "nope.jsonl"), "--out",
                                  str(tmp_path / "c")])
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output


def test_max_bad_fraction_default_comes_from_params(tmp_path, records, monkeypatch):
    src = _write(tmp_path / "s.jsonl", [_dump(r) for r in records[:9]] + ["oops"])
    (tmp_path / "params.yaml").write_text("ingest:\n  max_bad_fraction: 0.2\n")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(app, ["ingest", str(src), "--out", "o"]).exit_code == 0
    (tmp_path / "params.yaml").write_text("ingest:\n  max_bad_fraction: 0.05\n")
    assert CliRunner().invoke(app, ["ingest", str(src), "--out", "o"]).exit_code == 1


@pytest.mark.integration
def test_outputs_are_deterministic(tmp_path, records):
    src = _write(tmp_path / "s.jsonl", [_dump(r) for r in records] + ["bad"])
    ingest([src], tmp_path / "one", batch_lines=50)
    ingest([src], tmp_path / "two", batch_lines=50)
    for name in ["quarantine.jsonl", "ingest_summary.json", "steps/part-00000.parquet"]:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


@pytest.mark.integration
def test_worker_processes_give_identical_outputs(tmp_path, records):
    lines = [_dump(r) for r in records]
    src = _write(tmp_path / "s.jsonl", lines[:100] + ["bad", _dump({"t": 1})] + lines[100:])
    ingest([src], tmp_path / "one", batch_lines=23, workers=1)
    ingest([src], tmp_path / "two", batch_lines=23, workers=2)
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*")
                   if p.is_file())
    assert len(files) > 5
    for rel in files:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes()


def test_failed_run_leaves_previous_outputs_untouched(tmp_path, records):
    src = _write(tmp_path / "s.jsonl", [_dump(r) for r in records])
    ingest([src], tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    corrupt = tmp_path / "broken.jsonl.gz"  # not gzip at all: unreadable input
    corrupt.write_bytes(b"{\"episode_id\": \"plain text, not gzip\"}\n" * 50)
    with pytest.raises(InputError, match="broken.jsonl.gz"):
        ingest([src, corrupt], tmp_path / "out")
    after = {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in (tmp_path / "out").iterdir()
                if p.name.startswith(".") and p.name != ".ingest.lock"]


@pytest.mark.integration
def test_parquet_part_is_readable_alone(tmp_path, records):
    src = _write(tmp_path / "s.jsonl", [_dump(r) for r in records])
    ingest([src], tmp_path / "out", batch_lines=100)
    part = pq.read_table(tmp_path / "out" / "steps" / "part-00000.parquet")
    assert part.num_rows == 100


def test_a_byte_order_mark_is_not_data(tmp_path, records):
    src = tmp_path / "bom.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + b"".join(orjson.dumps(r) + b"\n" for r in records))
    summary = ingest([src], tmp_path / "out")
    assert (summary.accepted, summary.quarantined) == (len(records), 0)


def test_an_episode_that_lost_a_record_says_which_one(tmp_path, records):
    victim = _episode(records, 0)
    broken = victim[0] | {"state": [1, 2]}
    rest = [r for r in records if r["episode_id"] != victim[0]["episode_id"]]
    src = _write(tmp_path / "s.jsonl", [_dump(r) for r in [broken, *victim[1:], *rest]])
    ingest([src], tmp_path / "out", max_bad_fraction=1.0)
    quarantined = _quarantine(tmp_path / "out")
    assert quarantined[0]["source_record"] == 1 and quarantined[0]["field"] == "state"
    for q in quarantined[1:len(victim)]:
        assert f"{src}:1 was rejected (state)" in q["reason"], q
