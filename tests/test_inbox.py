"""Incremental ingestion: each inbox file's content is ingested once, into a partition of
its own that is never rewritten."""

from __future__ import annotations

from tests.inbox_logs import inbox_log
from tracerl.data.inbox import (
    add_partitions,
    land,
    load_manifest,
    new_files,
    save_manifest,
    scan,
)
from tracerl.io.fileio import read_table

DATASETS = ["good_coverage", "no_mul_support"]


def _log(path, prefix, seed=1):
    return inbox_log(path, prefix, seed=seed)


def _night(inbox, landed, manifest_path):
    found, skipped = scan(inbox, DATASETS, "good_coverage")
    manifest = load_manifest(manifest_path)
    new, seen = new_files(found, manifest)
    for f in new:
        entry = land(f, landed, batch_lines=1000, max_bad_fraction=0.01)
        manifest[entry["sha256"]] = entry
    save_manifest(manifest_path, manifest)
    return new, seen, skipped


def test_each_content_lands_once_in_its_own_partition(tmp_path):
    inbox, landed, manifest = tmp_path / "inbox", tmp_path / "landed", tmp_path / "m.json"
    rows_a = _log(inbox / "a.jsonl", "night-a")
    _log(inbox / "no_mul_support" / "b.jsonl", "night-b", seed=2)
    (inbox / "notes.txt").write_text("not a log")
    (inbox / "other").mkdir()
    _log(inbox / "other" / "c.jsonl", "night-c")

    new, seen, skipped = _night(inbox, landed, manifest)
    assert sorted(f.dataset for f in new) == DATASETS and not seen
    assert any("notes.txt" in s for s in skipped) and any("unknown dataset" in s for s in skipped)
    part_a = landed / "good_coverage" / new[0].partition if new[0].dataset == "good_coverage" \
        else landed / "good_coverage" / new[1].partition
    assert read_table(part_a / "steps").num_rows == rows_a
    stamp = {p: p.stat().st_mtime_ns for p in landed.rglob("*.parquet")}

    # A re-run, and the same bytes re-dropped under another name: nothing lands twice.
    (inbox / "a-again.jsonl").write_bytes((inbox / "a.jsonl").read_bytes())
    new, seen, _ = _night(inbox, landed, manifest)
    assert not new and len(seen) == 3

    # One new file: only it lands; old partitions are not rewritten.
    _log(inbox / "d.jsonl", "night-d", seed=3)
    new, _, _ = _night(inbox, landed, manifest)
    assert [f.path for f in new] == [str(inbox / "d.jsonl")]
    assert all(p.stat().st_mtime_ns == t for p, t in stamp.items())
    assert len(load_manifest(manifest)) == 3

    steps = tmp_path / "steps"
    steps.mkdir()
    added = add_partitions(landed, "good_coverage", steps)
    assert added["files"] == 2 and added["rows"] == read_table(steps).num_rows


def test_a_file_with_too_many_bad_records_is_rejected_and_remembered(tmp_path):
    inbox, landed, manifest = tmp_path / "inbox", tmp_path / "landed", tmp_path / "m.json"
    inbox.mkdir()
    (inbox / "bad.jsonl").write_text("garbage\n" * 10)
    new, _, _ = _night(inbox, landed, manifest)
    entry = next(iter(load_manifest(manifest).values()))
    # a file of no known format is refused once (one quarantined record), not line by line
    assert entry["status"] == "rejected" and entry["quarantined"] == 1
    assert not (landed / "good_coverage").exists() or not any(
        (landed / "good_coverage").iterdir())
    assert not _night(inbox, landed, manifest)[0]  # not retried
