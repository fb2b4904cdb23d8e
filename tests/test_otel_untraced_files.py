"""Files of one input that hold spans without a trace id are read together
(otel_links.UNTRACED), as one read of them joins those spans into one trace `""`; the
scan counts each key once however the file is cut into pieces."""

from __future__ import annotations

import json

import pytest

from tests.test_otel_speed import _conversation
from tracerl.data.formats.otel_genai import links as otel_links
from tracerl.data.ingest.run import linked_groups


def _export(spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def _files(tmp_path):
    traced = [_conversation(n, 3) for n in range(4)]
    untraced = _conversation(9, 2)
    for s in untraced:
        s["traceId"] = ""
    texts = {"a.json": [*traced[0], *untraced[:2]], "b.json": traced[1],
             "c.json": [*traced[2], *untraced[2:]], "d.json": traced[3]}
    paths = []
    for name, spans in texts.items():
        (tmp_path / name).write_text(_export(spans) + "\n")
        paths.append(tmp_path / name)
    return paths


@pytest.mark.parametrize("chunk", [8 << 20, 997])  # whole, or in pieces a key may cut
def test_files_with_untraced_spans_are_one_group(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(otel_links, "_CHUNK", chunk)
    paths = _files(tmp_path)
    assert [otel_links.UNTRACED in otel_links.link_keys(p) for p in paths] == \
        [True, False, True, False]
    assert linked_groups(paths, otel_links.link_keys) == [[0, 2], [1], [3]]
