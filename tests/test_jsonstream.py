"""Streaming a large JSON object: members and array elements equal json.loads of the whole
document, whatever the chunk size (1 byte splits every escape and quote)."""

from __future__ import annotations

import json
import random

import pytest

from tracerl.adapters.jsonstream import stream_object
from tracerl.ingest.reader import InputError

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
        assert list(items) == doc["simulations"]
        assert header == {"info": doc["info"], "tasks": doc["tasks"]}


@pytest.mark.parametrize(("text", "words"), [
    ('[{"simulations": []}]', "not a JSON object"),
    ('{"info": {}}', "no top-level `simulations`"),
    ('{"simulations": [{"a": 1}, {"a": ]}', "ends before"),
    ('{"simulations": [{"a": 1}, {"a": }]}', "element 1"),
])
def test_what_is_not_a_results_object_is_an_input_error(tmp_path, text, words):
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(InputError, match=words):
        _, items = stream_object(path, "simulations")
        list(items)
