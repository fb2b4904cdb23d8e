"""The OpenTelemetry adapter's shard hook (read_otel(shard=(k, n))) and what its speed-ups
must not change: shards are contiguous slices of the unsharded records and adapt only
their own; an input that re-sends the history reads as the same input written without a
shared prefix; ties in time follow the file; one unreadable span's episode is quarantined
alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adapter_helpers import kv
from tracerl.data.formats import ReadOptions
from tracerl.data.formats.otel_genai import read as otel
from tracerl.data.formats.otel_genai import span_io
from tracerl.data.formats.otel_genai.read import read_otel
from tracerl.data.ingest import ingest
from tracerl.data.ingest.limits import Limits
from tracerl.io.fileio import read_table


def _span(trace: str, sid: str, name: str, start: int, attrs: dict,
          parent: str | None = None, events: list | None = None) -> dict:
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent or "", "name": name,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 5),
            "attributes": kv(attrs), "events": events or []}


def _text(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _conversation(n: int, turns: int, apart: bool = False) -> list[dict]:
    """One conversation: an agent span, `turns` chat spans each calling `lookup` (the
    last one answers), each re-sending the whole history, and a tool span per call;
    apart: each input written with other separators than the last (no shared prefix)."""
    trace = f"{n:032x}"
    history = [_text("system", "help"), _text("user", f"question {n}")]
    spans = [_span(trace, f"a{n}", "invoke_agent desk", n * 1000, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "desk"}, events=[
        {"name": "gen_ai.evaluation.result", "timeUnixNano": str(n * 1000 + 999),
         "attributes": kv({"gen_ai.evaluation.name": "solved",
                           "gen_ai.evaluation.score.value": float(n % 2)})}])]
    t = n * 1000 + 1
    for k in range(turns):
        last = k == turns - 1
        out = _text("assistant", "done") if last else {"role": "assistant", "parts": [
            {"type": "tool_call", "id": f"call_{k}", "name": "lookup",
             "arguments": {"q": k}}]}
        spans.append(_span(trace, f"c{n}-{k}", "chat m", t, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
            "gen_ai.input.messages": json.dumps(history, separators=(
                ",  " if apart and k % 2 else ", ", ": ")),
            "gen_ai.output.messages": json.dumps([out])}, f"a{n}"))
        t += 10
        history = [*history, out]
        if not last:
            spans.append(_span(trace, f"t{n}-{k}", "execute_tool lookup", t, {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": f"call_{k}", "gen_ai.tool.call.result": f"r{k}"},
                f"a{n}"))
            t += 10
            history.append({"role": "tool", "parts": [
                {"type": "tool_call_response", "id": f"call_{k}", "response": f"r{k}"}]})
    return spans


def _file(tmp_path: Path, conversations: int = 7, apart: bool = False) -> Path:
    lines = [json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": _conversation(
        n, 1 + n % 4, apart)}]}]}) for n in range(conversations)]
    lines.insert(3, "not json {")  # a line that cannot be read: a record of its own
    plumbing = _span("f" * 32, "h1", "GET /", 5, {"http.method": "GET"})
    lines.append(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [plumbing]}]}]}))
    path = tmp_path / ("spans-apart.jsonl" if apart else "spans.jsonl")
    path.write_text("\n".join(lines) + "\n")
    return path


def _records(path: Path, **kw) -> list[tuple]:
    return [(r.number, r.pointer, r.rows, r.row_pointers,
             None if r.error is None else (r.error.where, r.error.reason), r.episode_id,
             r.text, r.notes, r.is_record)
            for r in read_otel(path, Limits(), ReadOptions(), **kw)]


def test_read_otel_checks_its_shard_and_is_not_split_by_default():
    # the slices cost more than they save while each repeats the load (see the otel_genai package)
    from tracerl.data.ingest.run import shardable

    assert not shardable("otel-genai")
    for bad in [(2, 2), (-1, 2), (0, 0)]:
        with pytest.raises(ValueError, match="shard"):
            list(read_otel(Path("unused.jsonl"), shard=bad))


@pytest.mark.parametrize("parts", [1, 2, 3, 5, 12])
def test_shards_are_contiguous_slices_of_the_unsharded_records(tmp_path, parts):
    path = _file(tmp_path)
    whole = _records(path)
    episodes = [r for r in whole if r[5] is not None]
    assert len(episodes) == 7 and whole[0][4] is not None  # the unreadable line
    assert any(r[7] and r[7].get("traces_without_genai_spans") == 1 for r in whole)
    shards = [_records(path, shard=(k, parts)) for k in range(parts)]
    assert [r for shard in shards for r in shard] == whole
    for shard in shards[1:]:  # the file's own records (a bad line, notes) are shard 0's
        assert all(r[5] is not None for r in shard)
    if parts == 2:
        assert all(shards)  # the work is split, not all in one shard


def test_a_shard_adapts_only_its_own_conversations(tmp_path, monkeypatch):
    path = _file(tmp_path)
    made: list[str] = []
    real = otel.model_call

    def counted(span, *args):
        made.append(span.span_id)
        return real(span, *args)

    monkeypatch.setattr(otel, "model_call", counted)
    list(read_otel(path))
    everything = sorted(made)
    made.clear()
    first = [r.episode_id for r in read_otel(path, shard=(0, 2)) if r.is_record and r.rows]
    in_first = sorted(made)
    made.clear()
    list(read_otel(path, shard=(1, 2)))
    assert first and in_first and made
    assert sorted(in_first + made) == everything  # each model call made by one shard only


def test_later_inputs_read_from_their_end_give_what_the_whole_input_gives(tmp_path,
                                                                          monkeypatch):
    """A later call's input is parsed only after its last assistant message (from the
    end of the text): the rows are those of the same file read with every input parsed
    whole, and those of inputs written with other separators."""
    path, apart = _file(tmp_path), _file(tmp_path, apart=True)
    whole = _records(path)  # (these inputs are short: parsed whole)
    monkeypatch.setattr(span_io, "_WHOLE_BYTES", 0)
    grown: list[bool] = []  # which later inputs were delimited after the earlier one's
    real = span_io._TextMessages._grown

    def counted(self, text):
        out = real(self, text)
        grown.append(out is not None)
        return out

    monkeypatch.setattr(span_io._TextMessages, "_grown", counted)
    a = _records(path)
    assert a == whole and any(grown)
    grown.clear()
    assert [r[2] for r in _records(apart)] == [r[2] for r in a] and any(r[2] for r in a)
    assert grown and not any(grown)  # other separators: no shared prefix, each whole
    monkeypatch.setattr(span_io._TextMessages, "of",
                        classmethod(lambda cls, text, prior=None: None))
    assert _records(path) == a
    rows = [row for r in a for row in r[2]]
    assert [row["action"]["tool"] for row in rows[:4]] == [None, "lookup", None, "lookup"]
    assert rows[1]["observation"]["tool_result"] == "r0"


def test_inputs_orjson_refuses_are_not_read_from_their_end(monkeypatch):
    monkeypatch.setattr(span_io, "_WHOLE_BYTES", 0)  # (short texts are parsed whole)
    for text in ['[{"role": "user", "content": "x"}, 2e308]', '[-1E+400]',
                 "[" + "1" * 400 + "]", '["\ud800"]', "[1, 2"]:
        assert span_io._TextMessages.of(text) is None
    ok = span_io._TextMessages.of('[{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]')
    assert ok is not None and ok.after_last_assistant() == [{"role": "tool"}]


@pytest.mark.parametrize(("earlier", "later"), [
    ('[{"a": 1}]', '[{"a": 1}, {"b": 2}]'),
    ('[{"a": 1}] \n', '[{"a": 1} ,\n{"b": [2, {}]}, 3]\n'),
    ('[{"a": 1}]', '[{"a": 1}]'),
    ('[{"a": 1}]', '[{"a": 1} ]  '),
    ('[{"a": 1}]', '[{"a": 1}] x'),
    ('[{"a": 1}]', '[{"a": 1}, ]'),
    ('[{"a": 1}]', '[{"a": 1}, 2e308]'),
    ('[{"a": 1}]', '[{"a": 1}, "\ud800"]'),
    ('[{"a": 1}]', '[{"a": 1}, ' + "[" * 600 + "]" * 600 + "]"),
    ('[1]', '[12e300]'),
    ('[1]', '[1' + "0" * 300 + "]"),
    ('[{"a": 1}]', '[{"a": 2}, {"b": 2}]'),
    ('[]', '[{"a": 1}]'),
])
def test_a_later_input_delimited_after_an_earlier_one_is_delimited_as_a_whole(
        monkeypatch, earlier, later):
    monkeypatch.setattr(span_io, "_WHOLE_BYTES", 0)
    prior = span_io._TextMessages.of(earlier)
    assert prior is not None
    alone, after = span_io._TextMessages.of(later), span_io._TextMessages.of(later, prior)
    assert (alone is None) == (after is None)
    if alone is not None:
        assert [bytes(e) for e in after.elements] == [bytes(e) for e in alone.elements]
        assert after.brackets == alone.brackets and after.text == later


def test_turns_that_start_and_end_together_follow_the_file(tmp_path):
    trace = "ab" * 16
    spans = [_span(trace, f"s{k}", "chat m", 100, {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": json.dumps([_text("assistant", f"turn {k}")])})
        for k in (3, 1, 2)]
    path = tmp_path / "ties.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    (record,) = [r for r in read_otel(path) if r.is_record]
    assert [row["action"]["content"] for row in record.rows] == ["turn 3", "turn 1", "turn 2"]


def test_an_unreadable_output_or_a_tool_before_the_first_call_costs_one_episode(tmp_path):
    bad = _span("cd" * 16, "x1", "chat m", 1, {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": json.dumps([{"role": "bogus", "parts": []}])})
    early_tool = _span("ef" * 16, "t0", "execute_tool lookup", 1, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.result": "r"})
    late_call = _span("ef" * 16, "c0", "chat m", 9, {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([_text("user", "hi")]),
        "gen_ai.output.messages": json.dumps([_text("assistant", "hello")])})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        *_conversation(1, 2), bad, early_tool, late_call]}]}]}))
    summary = ingest([path], tmp_path / "out", max_bad_fraction=1.0)
    assert (summary.read, summary.accepted, summary.quarantined) == (3, 2, 1)
    quarantine = [json.loads(x) for x in (tmp_path / "out" / "quarantine.jsonl")
                  .read_text().splitlines()]
    assert len(quarantine) == 1 and "unknown role 'bogus'" in quarantine[0]["reason"]
    rows = read_table(tmp_path / "out" / "steps").to_pylist()
    early = [r for r in rows if r["episode_id"] == "ef" * 16]
    assert [r["action"]["type"] for r in early] == ["tool_call", "message"]
    assert early[1]["observation"]["events"] is None and early[1]["action"]["content"] == \
        "hello"


def test_digits_int_cannot_read_are_no_count_and_no_index(tmp_path):
    # "²" is a digit to str.isdigit but not to int(): each was a crash of the whole file
    counts = _span("ab" * 16, "s1", "chat m", 1, {
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "\u00b2",
        "gen_ai.usage.output_tokens": "7",
        "gen_ai.output.messages": json.dumps([_text("assistant", "hi")])})
    indexed = _span("cd" * 16, "s2", "chat m", 1, {
        "gen_ai.operation.name": "chat", "gen_ai.prompt.\u00b2.content": "x",
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "question",
        "gen_ai.completion.0.content": "answer",
        "gen_ai.completion.0.tool_calls.\u00b2.name": "y"})
    path = tmp_path / "digits.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [counts,
                                                                               indexed]}]}]}))
    first, second = [r for r in read_otel(path) if r.is_record]
    assert first.error is None and second.error is None
    assert (first.rows[0]["episode"]["prompt_tokens"],
            first.rows[0]["episode"]["completion_tokens"]) == (None, 7)
    assert [(r["action"]["type"], r["action"]["content"]) for r in second.rows] == [
        ("message", "answer")]
    assert second.rows[0]["state"]["user_goal"] == "question"
