"""Streaming a large JSON object: members and array elements equal json.loads of the whole
document, whatever the chunk size (1 byte splits every escape and quote)."""

from __future__ import annotations

import json
import random

import pytest

from tracerl.data.formats.common.jsonstream import stream_object
from tracerl.data.ingest.reader import InputError

TRICKY = [1, 2.5, None, True, 'a\\"b', "x\\\\", 'q"]},:[{', "é", "", "\\"]


def _value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(TRICKY)
    if r < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["k", 'a"b', "c\\", ":,", "simulations"]): _value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


@pytest.mark.parametrize("seed", range(15))
def test_stream_equals_whole_parse(tmp_path, seed):
    rng = random.Random(seed)
    doc = {"info": _value(rng), "simulations": [_value(rng) for _ in range(rng.randint(0, 6))],
           "tasks": _value(rng)}
    keys = list(doc)
    rng.shuffle(keys)
    path = tmp_path / "doc.json"
    path.write_text(json.dumps({k: doc[k] for k in keys}, indent=rng.choice([None, 1])))
    for chunk_bytes in (1, 3, 64, 1 << 20):
        header, items = stream_object(path, "simulations", chunk_bytes=chunk_bytes)
        assert [e.value for e in items] == doc["simulations"]
        assert header == {"info": doc["info"], "tasks": doc["tasks"]}


@pytest.mark.parametrize(("text", "words"), [
    ('[{"simulations": []}]', "not a JSON object"),
    ('{"info": {}}', "no top-level `simulations`"),
    ('{"info": {"a": ', "ends before"),
])
def test_what_is_not_a_results_object_is_an_input_error(tmp_path, text, words):
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(InputError, match=words):
        _, items = stream_object(path, "simulations")
        list(items)


@pytest.mark.parametrize(("text", "index", "field", "words"), [
    ('{"simulations": [{"a": 1}, {"a": ]}', 1, "<file>",
     "the ] at byte 33 closes the { at byte 27 inside this record"),
    ('{"simulations": [{"a": 1}, {"a": ], "b": 2}, {"a": 1}]}', 1, "<file>",
     "closes the { at byte 27 inside this record"),
    ('{"simulations": [{"a": 1}, {"a": 1}, {"a": ', 2, "<file>", "the file ends inside"),
    ('{"simulations": [{"a": 1}, {"a": }, {"a": 1}]}', 1, "<record>", "not valid JSON"),
    ('{"simulations": [{"a": 1}, {"a": NaN}, {"a": 1}]}', 1, "<record>", "NaN is not a JSON"),
])
def test_a_bad_element_is_rejected_alone(tmp_path, text, index, field, words):
    """One bad simulation does not make the file unreadable: the intact elements before
    (and after) it are read; it is rejected with a precise reason."""
    path = tmp_path / "doc.json"
    path.write_text(text)
    _, items = stream_object(path, "simulations")
    elements = list(items)
    assert elements[0].value == {"a": 1}
    (bad,) = [e for e in elements if e.rejected is not None]
    assert bad.index == index
    assert bad.rejected.field == field and words in bad.rejected.reason


def test_an_element_over_the_limit_is_rejected_and_not_kept(tmp_path):
    """An element over max_record_bytes is rejected with its size and a short head (the
    memory bound is measured by benchmarks/ingest_memory.py); its neighbours are read."""
    from tracerl.data.ingest.limits import Limits

    big = '{"id": "' + "x" * 50_000 + '"}'
    path = tmp_path / "doc.json"
    path.write_text('{"info": 1, "simulations": [{"a": 1}, ' + big + ', {"a": 2}]}')
    header, items = stream_object(path, "simulations", Limits(max_record_bytes=5_000),
                                  chunk_bytes=1000)
    elements = list(items)
    assert header == {"info": 1}
    assert [e.value for e in elements] == [{"a": 1}, None, {"a": 2}]
    assert elements[1].rejected.field == "<record>"
    assert f"{len(big) + 1:,} bytes" in elements[1].rejected.reason
    assert "max_record_bytes" in elements[1].rejected.reason
    assert len(elements[1].text) < 300


def test_a_header_member_over_the_limit_makes_the_file_unreadable(tmp_path):
    """`info` or `tasks` is not a record: one over max_record_bytes cannot be quarantined,
    so the file is unreadable input (exit 2), said with the member's name."""
    from tracerl.data.ingest.limits import Limits

    path = tmp_path / "doc.json"
    path.write_text('{"tasks": ["' + "t" * 20_000 + '"], "simulations": [{"a": 1}]}')
    with pytest.raises(InputError, match="member 'tasks' is over ingest.max_record_bytes"):
        stream_object(path, "simulations", Limits(max_record_bytes=5_000), chunk_bytes=1000)


def test_an_empty_file_has_no_members_and_no_elements(tmp_path):
    for text in (b"", b"  \n", b"\xef\xbb\xbf\n"):
        path = tmp_path / "doc.json"
        path.write_bytes(text)
        header, items = stream_object(path, "simulations")
        assert (header, list(items)) == ({}, [])


def _elements(items):
    return [(e.index, e.value, e.skipped, e.text,
             None if e.rejected is None else (e.rejected.field, e.rejected.reason))
            for e in items]


@pytest.mark.parametrize("seed", range(12))
def test_indexed_elements_equal_a_second_scan(tmp_path, seed):
    """Elements read where the first pass noted them (plan_object) are those a second
    scan gives: blanks, an element over the size limit, invalid or too deep ones, a
    byte-order mark, every span."""
    from tracerl.data.formats.common.jsonstream import CHUNK_BYTES, _walk, plan_object
    from tracerl.data.ingest.limits import Limits

    rng = random.Random(seed)
    pieces = [json.dumps(_value(rng)) for _ in range(rng.randint(0, 8))]
    pieces += ["", "  ", '{"a": NaN}', "[" * 12 + "]" * 12, json.dumps({"big": "x" * 900}),
               '{"k": 1, }', '"tail"']
    rng.shuffle(pieces)
    body = (b"\xef\xbb\xbf" if seed % 2 else b"") + (
        '{"info": {"a": 1}, "simulations": [' + ",".join(pieces) + '], "tasks": []}').encode()
    path = tmp_path / "doc.json"
    path.write_bytes(body)
    limits = Limits(max_record_bytes=800, max_depth=8)
    plan = plan_object(path, "simulations", limits)
    assert plan.elements is not None
    size = len(body)
    spans = [None, (0, size // 2), (size // 2, None), (size // 3, 2 * size // 3)]
    for span in spans:
        scanned = [v for _, _, v in _walk(path, "simulations", CHUNK_BYTES, limits,
                                          items=True, span=span)]
        header, items = stream_object(path, "simulations", limits, span=span, plan=plan)
        assert _elements(items) == _elements(scanned)
        assert header == {"info": {"a": 1}, "tasks": []}


def test_a_file_cut_inside_the_array_is_scanned_again(tmp_path):
    from tracerl.data.formats.common.jsonstream import plan_object

    path = tmp_path / "cut.json"
    path.write_text('{"info": 1, "simulations": [{"a": 1}, {"b": ')
    assert plan_object(path, "simulations").elements is None
    header, items = stream_object(path, "simulations")
    out = list(items)
    assert header == {"info": 1} and out[0].value == {"a": 1}
    assert "the file ends" in out[1].rejected.reason


def test_a_closer_of_the_wrong_kind_ends_the_array_where_it_is(tmp_path):
    """The scanner's depth counts brackets of either kind: a `]` closing an element's `{`
    must not end that element there and split the rest of it at its commas into records."""
    from tracerl.data.formats.common.jsonstream import stream_array

    path = tmp_path / "list.json"
    path.write_text('[{"a": 1}, {], "x": 1, "y": 2, "z": 3}, {"a": 2}]')
    elements = list(stream_array(path))
    assert [e.value for e in elements[:1]] == [{"a": 1}]
    assert len(elements) == 2 and elements[1].rejected.field == "<file>"
    assert "the ] at byte 12 closes the { at byte 11" in elements[1].rejected.reason
    path.write_text('{"simulations": [{"a": 1}], "info": {"b": [1}}')
    with pytest.raises(InputError, match=r"the \} at byte 44 closes the \[ at byte 42"):
        stream_object(path, "simulations")
