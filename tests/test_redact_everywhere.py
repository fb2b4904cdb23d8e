"""Redaction reaches every string of a step row, whatever holds it (structs, lists, lists of
structs such as observation.events, map keys), in every input format, and the summary
counts what was written.

The string leaves are found by walking the step schema's types, not listed by hand: a
field added to the schema later is filled with secrets by the native-JSONL test below and
must come out redacted, so a leaf the redactor skips fails the test."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracerl.data.ingest import ingest
from tracerl.data.redact import PATTERN_NAMES, SKIP_COLUMNS, Redactor
from tracerl.data.schema import JSON_TEXT_FIELDS, LINEAGE_FIELDS, LOGGED_FIELDS, STEP_SCHEMA

from .test_redact import SECRETS, _needle

# --- the schema's string leaves -----------------------------------------------------------
# A path is a tuple of steps: a field name, "[]" (every element of a list) or "{key}" (every
# key of a map).
LIST, KEY = "[]", "{key}"


def string_leaves(t: pa.DataType, path: tuple = ()) -> Iterator[tuple]:
    """Every path to a string inside a value of type t (any depth, any container)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        yield path
    elif pa.types.is_struct(t):
        for f in t:
            yield from string_leaves(f.type, (*path, f.name))
    elif pa.types.is_map(t):
        yield from string_leaves(t.key_type, (*path, KEY))
        yield from string_leaves(t.item_type, (*path, "{value}"))
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from string_leaves(t.value_type, (*path, LIST))
    else:
        assert t.num_fields == 0, f"the test does not know how to walk {t}"


def schema_leaves(fields: list[pa.Field]) -> list[tuple]:
    return [p for f in fields for p in string_leaves(f.type, (f.name,))]


def dotted(path: tuple) -> str:
    return ".".join(s for s in path if s not in (LIST, KEY))


def values_at(value: Any, path: tuple) -> Iterator[str]:
    """The strings at `path` in a row read back with to_pylist (maps are lists of pairs)."""
    if not path:
        if value is not None:
            yield value
        return
    step, rest = path[0], path[1:]
    if value is None:
        return
    if step == LIST:
        for v in value:
            yield from values_at(v, rest)
    elif step == KEY:
        for k, _ in value:
            yield from values_at(k, rest)
    else:
        yield from values_at(value[step], rest)


ALL_LEAVES = schema_leaves(list(STEP_SCHEMA))
LINEAGE = {f.name for f in LINEAGE_FIELDS}
# String leaves whose values the step schema validates against a closed vocabulary: a
# secret there rejects the record (its quarantined text is redacted instead).
VOCABULARY = {"action.type": "message", "split": "train", "observation.events.actor": "user",
              "observation.events.kind": "message"}
# Leaves that hold JSON (any value, stored as canonical JSON text).
JSON_LEAVES = JSON_TEXT_FIELDS | {"observation.events.arguments"}


def test_the_schema_walk_finds_the_nested_leaves():
    names = {dotted(p) for p in ALL_LEAVES}
    # the ones the reviewer found unredacted, and map keys
    assert {"observation.events.content", "observation.events.arguments",
            "reward_components"} <= names
    assert ("observation", "events", LIST, "content") in ALL_LEAVES
    assert ("reward_components", KEY) in ALL_LEAVES
    # every leaf the redactor skips is lineage or a closed vocabulary, nothing a log writes
    assert LINEAGE | set(VOCABULARY) >= SKIP_COLUMNS
    assert set(VOCABULARY) | JSON_LEAVES <= names


# --- secrets ------------------------------------------------------------------------------
PARAMS_PATTERN = ("employee_id", r"EMP-\d{6}")
# (type, text that holds it, what must never be written); one sample per entry
SAMPLES = [(k, s, _needle(s)) for k, v in SECRETS.items() for s in v] + [
    ("secret_value", None, "hunter2-sv"), (PARAMS_PATTERN[0], "EMP-314159", "EMP-314159")]


def redactor() -> Redactor:
    return Redactor(patterns=dict([PARAMS_PATTERN]))


def as_text(kind: str, secret: str | None, where: str) -> str:
    if kind == "secret_value":
        return f'at {where} {{"password": "hunter2-sv"}} ok'
    return f"at {where} {secret} ok"


def as_json(kind: str, secret: str | None, where: str) -> dict:
    """A JSON object holding the secret three levels down."""
    if kind == "secret_value":
        return {"where": where, "deep": [{"x": {"password": "hunter2-sv"}}]}
    return {"where": where, "deep": [{"x": {"text": as_text(kind, secret, where)}}]}


def test_every_pattern_type_has_a_sample():
    assert {k for k, _, _ in SAMPLES} == set(PATTERN_NAMES) | {PARAMS_PATTERN[0]}


# --- Redactor.table over a table that has a secret in every string leaf -------------------
def _fill(t: pa.DataType, path: str, text: str) -> Any:
    """A Python value of type t with `text` in every string leaf (two list elements, so
    offsets matter)."""
    if pa.types.is_string(t):
        return text
    if pa.types.is_struct(t):
        return {f.name: _fill(f.type, f"{path}.{f.name}", text) for f in t}
    if pa.types.is_map(t):
        return [(_fill(t.key_type, path, text), _fill(t.item_type, path, text)),
                (_fill(t.key_type, path, text) + " again", _fill(t.item_type, path, text))]
    if pa.types.is_list(t):
        return [_fill(t.value_type, path, text), None, _fill(t.value_type, path, text)]
    if pa.types.is_boolean(t):
        return True
    if pa.types.is_integer(t):
        return 1
    return 0.5


@pytest.mark.parametrize("kind,secret,needle", SAMPLES, ids=[f"{k}{i}" for i, (k, _, _)
                                                             in enumerate(SAMPLES)])
def test_table_redacts_every_string_leaf_of_the_schema(kind, secret, needle):
    text = as_text(kind, secret, "leaf")
    row = {f.name: _fill(f.type, f.name, text) for f in STEP_SCHEMA}
    # a null row in between, and the table sliced: validity and offsets must survive
    empty = {f.name: _fill(f.type, f.name, "x") if not f.nullable else None
             for f in STEP_SCHEMA}
    table = pa.Table.from_pylist([row, empty, row, row], schema=STEP_SCHEMA).slice(1)
    new, counts = redactor().table(table)
    new.validate(full=True)
    assert new.schema == table.schema and new.num_rows == 3
    rows = new.to_pylist()
    assert rows[0] == table.slice(0, 1).to_pylist()[0]  # nothing to redact there
    expected = 0
    for path in ALL_LEAVES:
        for r in rows[1:]:
            values = list(values_at(r[path[0]], path[1:]))
            assert values, path
            for v in values:
                if dotted(path) in SKIP_COLUMNS:
                    assert v == text
                else:
                    assert needle not in v and f"[REDACTED:{kind}" in v, (path, v)
                    expected += 1
    assert counts == {kind: expected}
    # the untouched parts are as they were
    for name in ("t", "reward", "done", "schema_version"):
        assert new.column(name).equals(table.column(name))


# --- generic nesting, nulls and slices, against a reference redacted value by value -------
DEEP = pa.list_(pa.struct([
    pa.field("a", pa.string()),
    pa.field("b", pa.list_(pa.map_(pa.string(), pa.struct([
        pa.field("c", pa.large_list(pa.large_string())),
        pa.field("d", pa.dictionary(pa.int32(), pa.string())),
        pa.field("n", pa.int64())])))),
    pa.field("e", pa.list_(pa.string(), 2)),
]))


def _reference(value: Any, r: Redactor, counts: Counter) -> Any:
    if isinstance(value, str):
        new, c = r.text(value)
        counts.update(c)
        return new
    if isinstance(value, list):
        return [_reference(v, r, counts) for v in value]
    if isinstance(value, tuple):
        return tuple(_reference(v, r, counts) for v in value)
    if isinstance(value, dict):
        return {k: _reference(v, r, counts) for k, v in value.items()}
    return value


def test_any_nesting_keeps_nulls_offsets_and_counts():
    mail, key = "a.b@example.com", SECRETS["api_key"][0]
    inner = {"c": [f"to {mail}", None, "plain"], "d": f"key {key}", "n": 3}
    values = [
        None,
        [],
        [{"a": f"mail {mail}", "b": [[(f"k {mail}", inner), ("k2", None)], None, []],
          "e": [f"x {key}", None]}, None, {"a": None, "b": None, "e": None}],
        [{"a": "nothing", "b": [[("k", {"c": None, "d": None, "n": None})]],
          "e": ["y", "z"]}],
        [{"a": f"again {mail}", "b": None, "e": None}],
    ]
    whole = pa.array(values, type=DEEP)
    r = Redactor()
    for column in (whole, whole.slice(2), whole.slice(1, 3), whole.slice(3, 1)):
        table = pa.table({"deep": column})
        new, counts = r.table(table)
        new.validate(full=True)
        expected_counts: Counter = Counter()
        expected = _reference(column.to_pylist(), r, expected_counts)
        assert new.column("deep").to_pylist() == expected
        assert new.column("deep").type == DEEP
        assert counts == expected_counts
        got = orjson.dumps(new.to_pylist())
        assert mail.encode() not in got and key.encode() not in got


@pytest.mark.parametrize("chunks", [3, 40])
def test_a_table_in_chunks_is_redacted_chunk_by_chunk(chunks):
    """Tables concatenated record by record (the adapters' fallback) come in many chunks."""
    text = as_text("email", SECRETS["email"][0], "chunk")
    row = {f.name: _fill(f.type, f.name, text) for f in STEP_SCHEMA}
    plain = {f.name: _fill(f.type, f.name, "plain") for f in STEP_SCHEMA}
    table = pa.concat_tables([pa.Table.from_pylist([row if i % 2 else plain],
                                                   schema=STEP_SCHEMA) for i in range(chunks)])
    new, counts = Redactor().table(table)
    new.validate(full=True)
    whole, whole_counts = Redactor().table(table.combine_chunks())
    assert new.to_pylist() == whole.to_pylist() and counts == whole_counts
    assert not [v for r in new.to_pylist() for p in ALL_LEAVES if dotted(p) not in SKIP_COLUMNS
                for v in values_at(r[p[0]], p[1:]) if SECRETS["email"][0] in v]
    assert counts["email"] == (chunks // 2) * sum(
        1 for p in ALL_LEAVES if dotted(p) not in SKIP_COLUMNS
        for _ in values_at(row[p[0]], p[1:]))


class _Note(pa.ExtensionType):
    def __init__(self) -> None:
        super().__init__(pa.list_(pa.string_view()), "tracerl.test.note")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):  # noqa: ANN001, ANN206
        return cls()


def test_string_views_and_extension_types_are_walked_too():
    mail = "a.b@example.com"
    storage = pa.array([[f"to {mail}", None], None, ["plain"]], type=pa.list_(pa.string_view()))
    column = pa.ExtensionArray.from_storage(_Note(), storage)
    new, counts = Redactor().table(pa.table({"note": column}))
    assert counts == {"email": 1} and new.column("note").type == _Note()
    got = new.column("note").chunk(0).storage.to_pylist()
    assert got[1:] == [None, ["plain"]] and got[0][1] is None
    assert got[0][0].startswith("to [REDACTED:email:")


def test_values_hidden_under_a_null_slot_are_not_counted():
    """A list slot that is null may still point at values; Parquet does not write them, and
    the summary does not count them."""
    values = pa.array(["a@example.com", "b@example.com", "c@example.com"])
    offsets = pa.array([0, 1, 2, 3], type=pa.int32())
    lists = pa.ListArray.from_arrays(offsets, values, mask=pa.array([False, True, False]))
    new, counts = Redactor().table(pa.table({"l": lists}))
    assert counts == {"email": 2}
    assert new.column("l").to_pylist()[1] is None


def test_a_container_the_redactor_cannot_walk_is_refused_not_skipped():
    union = pa.UnionArray.from_sparse(pa.array([0, 1], type=pa.int8()),
                                      [pa.array(["a@example.com", "x"]), pa.array([1, 2])])
    with pytest.raises(TypeError, match="cannot redact"):
        Redactor().table(pa.table({"u": union}))


# --- end to end: every format, every pattern, every kind of location -----------------------
def _native_record(i: int, kind: str, secret: str | None) -> dict:
    """A native step record with the secret in every string leaf of the logged fields (a
    closed-vocabulary leaf gets a valid word), in JSON leaves three levels down, and in an
    unknown field (kept under `extra`)."""
    def fill(t: pa.DataType, path: str) -> Any:
        if path in VOCABULARY:
            return VOCABULARY[path]
        if path in JSON_LEAVES:
            return as_json(kind, secret, path)
        if pa.types.is_string(t):
            return as_text(kind, secret, path)
        if pa.types.is_struct(t):
            return {f.name: fill(f.type, f"{path}.{f.name}") for f in t}
        if pa.types.is_map(t):
            return {as_text(kind, secret, path): 0.5}
        if pa.types.is_list(t):
            return [fill(t.value_type, path), fill(t.value_type, path)]
        assert t.num_fields == 0, t
        return True if pa.types.is_boolean(t) else 0 if pa.types.is_integer(t) else -0.5

    record = {f.name: fill(f.type, f.name) for f in LOGGED_FIELDS}
    record.update(episode_id=f"ep{i} {as_text(kind, secret, 'episode_id')}", t=0, done=True)
    record["unknown_note"] = as_text(kind, secret, "unknown")
    return record


def _native_rejected(i: int, kind: str, secret: str | None) -> list[bytes]:
    """Lines quarantined: a secret in a closed-vocabulary leaf, and a line that is not JSON."""
    bad = _native_record(i, kind, secret)
    bad["episode_id"] = f"bad{i}"
    bad["action"]["type"] = as_text(kind, secret, "action.type")
    return [orjson.dumps(bad),
            b'{"broken": ' + json.dumps(as_text(kind, secret, "broken"))[:-1].encode()]


def _chat(i: int, kind: str, secret: str | None) -> dict:
    text = lambda where: as_text(kind, secret, where)  # noqa: E731
    call_id = f"c{i} {text('call_id')}"
    return {"id": f"chat{i}", "task_id": text("task"), "note": text("unknown record field"),
            "reward": {"reward": 1.0, text("component"): 0.5},
            "messages": [
                {"role": "system", "content": text("system")},
                {"role": "user", "content": text("first user message")},
                {"role": "assistant", "content": text("assistant"), "mood": text("unknown"),
                 "tool_calls": [{"id": call_id, "type": "function", "function": {
                     "name": "lookup", "arguments": json.dumps(as_json(kind, secret, "args"))}}]},
                {"role": "tool", "tool_call_id": call_id,
                 "content": json.dumps(as_json(kind, secret, "result"))},
                {"role": "user", "content": f"It's {text('user event')}."},
                {"role": "assistant", "content": text("done")}]}


def _chat_rejected(i: int, kind: str, secret: str | None) -> dict:
    """A tool result that answers no call, its id holding the secret (named in the reason)."""
    return {"id": f"chatbad{i}", "messages": [
        {"role": "user", "content": as_text(kind, secret, "rejected")},
        {"role": "tool", "tool_call_id": as_text(kind, secret, "id"), "content": "x"}]}


def _simulation(i: int, kind: str, secret: str | None) -> dict:
    text = lambda where: as_text(kind, secret, where)  # noqa: E731
    return {"id": f"sim{i}", "task_id": text("task"), "trial": 0,
            "termination_reason": text("termination"), "note": text("unknown sim field"),
            "reward_info": {"reward": 1.0, "reward_breakdown": {text("component"): 0.5}},
            "messages": [
                {"role": "user", "content": text("first user message")},
                {"role": "assistant", "content": text("assistant"), "turn_idx": text("unknown"),
                 "tool_calls": [{"id": f"a{i}", "name": "lookup",
                                 "arguments": as_json(kind, secret, "args")}]},
                {"role": "tool", "id": f"a{i}",
                 "content": json.dumps(as_json(kind, secret, "result"))},
                {"role": "user", "content": f"It's {text('user event')}.",
                 "tool_calls": [{"id": f"u{i}", "name": "toggle", "requestor": "user",
                                 "arguments": as_json(kind, secret, "user args")}]},
                {"role": "tool", "id": f"u{i}", "content": text("user tool result")},
                {"role": "assistant", "content": text("done")}]}


def _simulation_rejected(i: int, kind: str, secret: str | None) -> dict:
    """A tool message answering no call, its id holding the secret (named in the reason)."""
    return {"id": f"simbad{i}", "note": as_text(kind, secret, "rejected"), "messages": [
        {"role": "user", "content": as_text(kind, secret, "rejected")},
        {"role": "tool", "id": as_text(kind, secret, "id"), "content": "x"}]}


def _write_inputs(fmt: str, folder: Path) -> Path:
    if fmt == "jsonl":
        lines = []
        for i, (kind, secret, _) in enumerate(SAMPLES):
            lines.append(orjson.dumps(_native_record(i, kind, secret)))
            lines += _native_rejected(i, kind, secret)
        path = folder / "steps.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
    elif fmt == "openai-chat":
        path = folder / "chats.jsonl"
        path.write_text("".join(json.dumps(make(i, k, s)) + "\n"
                                for i, (k, s, _) in enumerate(SAMPLES)
                                for make in (_chat, _chat_rejected)))
    else:
        path = folder / "results.json"
        sims = [make(i, k, s) for i, (k, s, _) in enumerate(SAMPLES)
                for make in (_simulation, _simulation_rejected)]
        path.write_text(json.dumps({"info": {"git_commit": "abc"}, "tasks": [],
                                    "simulations": sims}))
    return path


# Where each format puts the secrets it was given (besides the quarantine): schema leaves.
EXPECTED_LOCATIONS = {
    "jsonl": None,  # every string leaf of the schema but lineage and vocabularies
    "openai-chat": {"action.content", "action.arguments", "observation.tool_result",
                    "observation.events.content", "state.user_goal",
                    "state.conversation_history", "extra", "reward_components", "task",
                    "call_id"},
    "tau2": {"action.content", "action.arguments", "observation.tool_result",
             "observation.events.content", "observation.events.arguments", "state.user_goal",
             "extra", "reward_components", "task", "episode.termination_reason"},
}


def _output_blobs(out: Path) -> bytes:
    """Every byte of every file under out, and the decoded values of the Parquet files."""
    texts = []
    for f in sorted(out.rglob("*")):
        if f.is_file():
            texts.append(f.read_bytes())
            if f.suffix == ".parquet":
                texts.append(orjson.dumps(pq.read_table(f).to_pylist()))
    return b"\n".join(texts)


@pytest.mark.parametrize("fmt", ["jsonl", "openai-chat", "tau2"])
def test_no_secret_in_any_output_byte_from_any_location(tmp_path, fmt):
    src = _write_inputs(fmt, tmp_path)
    out = tmp_path / "out"
    summary = ingest([src], out, fmt=fmt, workers=1, max_bad_fraction=1.0,
                     redactor=redactor())
    rejected_per_sample = 2 if fmt == "jsonl" else 1
    assert summary.quarantined == rejected_per_sample * len(SAMPLES), summary.quarantined_by_field
    assert summary.accepted == len(SAMPLES)

    blob = _output_blobs(out)
    for kind, _, needle in SAMPLES:
        for form in {needle, json.dumps(needle)[1:-1]}:  # raw, and as escaped in JSON
            assert form.encode() not in blob, (kind, needle)

    # each kind of location received each pattern type, and came out as its placeholder
    rows = pq.read_table(out / "steps").to_pylist()
    expected = EXPECTED_LOCATIONS[fmt] or {dotted(p) for p in schema_leaves(LOGGED_FIELDS)
                                           if dotted(p) not in VOCABULARY}
    assert expected <= {dotted(p) for p in ALL_LEAVES}
    by_leaf = {dotted(p): [v for r in rows for v in values_at(r[p[0]], p[1:])]
               for p in ALL_LEAVES}
    for kind, _, _ in SAMPLES:
        missing = [leaf for leaf in sorted(expected)
                   if not any(f"[REDACTED:{kind}:" in v for v in by_leaf[leaf])]
        assert not missing, (kind, missing)
    quarantine = [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]
    for kind, _, _ in SAMPLES:
        # native lines keep their text; an adapter's rejection its reason (quoting the id)
        assert any(f"[REDACTED:{kind}:" in q["raw"] + q["reason"] for q in quarantine), kind

    # the summary counts exactly the placeholders written
    written = Counter()
    for v in [v for values in by_leaf.values() for v in values] + [
            q[k] for q in quarantine for k in ("raw", "reason", "field")]:
        written.update(re.findall(r"\[REDACTED:([a-z_]+):", v))
    assert summary.redacted == dict(written)
    assert json.loads((out / "ingest_summary.json").read_text())["redacted"] == dict(written)


def _placeholders_written(out: Path) -> Counter:
    rows = pq.read_table(out / "steps").to_pylist()
    written: Counter = Counter()
    texts = [v for p in ALL_LEAVES for r in rows for v in values_at(r[p[0]], p[1:])]
    for line in (out / "quarantine.jsonl").read_text().splitlines():
        q = json.loads(line)
        texts += [q["raw"], q["reason"], q["field"]]
    for v in texts:
        written.update(re.findall(r"\[REDACTED:([a-z_]+):", v))
    return written


@pytest.mark.parametrize("fmt", ["jsonl", "openai-chat", "tau2"])
def test_counts_stay_right_when_an_episode_is_dropped_after_redaction(tmp_path, fmt):
    """An episode broken as a whole (t twice; two records with one id) is redacted with its
    part, then moved to quarantine: the summary counts its placeholders once, where they
    are written."""
    kind, secret, needle = next(sample for sample in SAMPLES if sample[0] == "email")
    if fmt == "jsonl":
        good, dup = _native_record(0, kind, secret), _native_record(1, kind, secret)
        # t=0 twice (an id without the secret: a reason quoting a redacted id would copy
        # its placeholder, a secret redacted once but written twice)
        good["episode_id"] = dup["episode_id"] = "ep-dup"
        path = tmp_path / "steps.jsonl"
        path.write_bytes(orjson.dumps(good) + b"\n" + orjson.dumps(dup) + b"\n"
                         + orjson.dumps(_native_record(2, kind, secret)) + b"\n")
    elif fmt == "openai-chat":
        records = [_chat(i, kind, secret) for i in range(3)]
        records[1]["id"] = records[0]["id"]
        path = tmp_path / "chats.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in records))
    else:
        sims = [_simulation(i, kind, secret) for i in range(3)]
        sims[1]["id"] = sims[0]["id"]
        path = tmp_path / "results.json"
        path.write_text(json.dumps({"info": {}, "tasks": [], "simulations": sims}))
    out = tmp_path / "out"
    summary = ingest([path], out, fmt=fmt, workers=1, max_bad_fraction=1.0,
                     redactor=redactor())
    assert summary.quarantined == 2 and summary.episodes == 1
    assert needle.encode() not in _output_blobs(out)
    assert summary.redacted == dict(_placeholders_written(out)) != {}


# --- classes of secrets -------------------------------------------------------------------
# Each class by several forms a log may hold it in; every secret holds MARKER (any case), so
# "nothing of it was written" is one search. A class is fixed as a class: other inputs of
# the same class must come out redacted too (add them here).
MARKER = "zqsecret"
SECRET_CLASSES: dict[str, list[str]] = {
    "a name holding password/secret/token/api_key names a secret": [
        '{"new_password": "ZQsecret-np-1"}', '{"db_password": "ZQsecret-db-2"}',
        '{"aws_secret_access_key": "ZQsecret/aws+3"}', '{"clientSecret": "ZQsecret-cs-4"}',
        '{"X-Api-Key": "ZQsecret-xak-5"}', '{"GITHUB_TOKEN": "ZQsecret-gh-6"}',
        '{"stripeApiKey": "ZQsecret-sak-7"}', "{'smtp_password': 'ZQsecret-py-8'}",
        "mail_password: ZQsecret-yaml-9", "export REDIS_PASSWORD=ZQsecret-env-10",
        "app --db-password ZQsecret-cli-11", "app --api-key=ZQsecret-cli-12",
        '{\\"refresh_token\\": \\"ZQsecret-esc-13\\"}', "aws_secret_access_key = ZQsecret14",
        "HOST=db\\nDB_PASS=ZQsecret-15\\n"],
    "credentials in query strings and form bodies": [
        "https://api.example.com/v1/login?user=bob&password=ZQsecret-q1&lang=en",
        "https://example.com/cb#access_token=ZQsecret-q2&token_type=bearer",
        "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&sig=ZQsecret%2Bq3%3D",
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ZQsecretq4",
        "grant_type=password&username=bob&password=ZQsecret-q5&client_secret=ZQsecret-q6",
        "redirect=https%3A%2F%2Fx.example%2Fcb%3Fapi_key%3DZQsecret-q7",
        "https://maps.example.com/api?apiKey=ZQsecret-q8&q=paris"],
    "connection strings": [
        "Server=tcp:sql.example.com,1433;Initial Catalog=app;User ID=sa;"
        "Password=ZQsecret c1 !x;Encrypt=True;",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=ZQsecretc2+abc/def==;"
        "EndpointSuffix=core.windows.net",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=ZQsecretc3=",
        "Driver={ODBC Driver 18};Server=db;UID=app;PWD={ZQsecret;c4}",
        "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password=ZQsecret-c5;",
        "host=db port=5432 dbname=app user=app password=ZQsecret-c6 sslmode=require",
        "jdbc:mysql://db:3306/app?user=app&password=ZQsecret-c7",
        "mongodb+srv://app:ZQsecret-c8@cluster0.example.net/db"],
    "authorization headers, API-key headers and cookies": [
        "Authorization: Basic ZQsecretYm9iOmh1bnRlcjI=",
        "curl -H 'authorization: Token ZQsecret-h2' https://x.example",
        "X-Api-Key: ZQsecret-h3", '-H "x-api-key: ZQsecret-h4"',
        "Proxy-Authorization: Basic ZQsecrethunter5=",
        "Cookie: sessionid=ZQsecret-h6; csrftoken=ZQsecret-h7",
        "Ocp-Apim-Subscription-Key: ZQsecret-h8", "X-Auth-Token: ZQsecret-h9",
        'GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Digest username="bob", '
        'response="ZQsecret-h10"\r\n'],
    "webhook URLs": [
        "https://hooks.slack.com/services/T00000000/B00000000/ZQsecretSlackWebhook01",
        "https://discord.com/api/webhooks/123456789012345678/ZQsecret-discord-w2",
        "https://contoso.webhook.office.com/webhookb2/ZQsecret-teams@tenant/IncomingWebhook/a/b",
        "https://hooks.zapier.com/hooks/catch/123456/ZQsecretw4/",
        "https://chat.example.com/hooks/ZQsecretmattermost0005"],
    "passwords a command takes by a short flag": [
        "mysql -h db -u app -pZQsecret-m1 shop", "/usr/bin/mysqldump -uroot -p'ZQsecret-m2' app",
        "cd /srv && mariadb -u app -pZQsecret-m3 -e 'select 1'",
        "sshpass -p ZQsecret-s1 ssh ops@db.internal", "sshpass -pZQsecret-s2 scp a.txt h:",
        "redis-cli -h cache -p 6379 -a ZQsecret-r1 ping",
        "docker login -u bot -p ZQsecret-d1 registry.example.com",
        "helm registry login ghcr.io -u bot -p ZQsecret-d2",
        "curl -sS -u bob:ZQsecret-c1 https://api.example.com/v1",
        "curl --user bob:ZQsecret-c2 https://x.example", "curl --proxy-user p:ZQsecret-c3 x"],
    "provider tokens glued to a word": [
        "cache_ghp_ZQsecret0123456789abcdefghijklmnopqrst",
        "key-sk-proj-ZQsecret0123456789abcdef", "cfg.xoxb-ZQsecret-1234567890",
        "token_hf_ZQsecret0123456789abcdefghijklmnop", "AWS_KEY_AKIAZQSECRET01234567"],
}
# names and texts about secrets that are not secrets: kept as they are
NOT_SECRETS = [
    '{"prompt_tokens": 12, "completion_tokens": 30, "max_tokens": 256}',
    '{"password_length": 12, "token_count": 5, "secret_name": "prod-db"}',
    '{"token_type": "bearer", "llm.token_count.prompt": 7}',
    "SharedAccessKeyName=RootManageSharedAccessKey", "cost=3;tax=1", "keyboard=qwerty",
    "https://api.github.com/repos/o/r/hooks/12345678", "the passenger's boarding pass",
    "author: Jane", "Authorization required", "mul\\|1\\|1\\|-", "please reset my password",
    "tokens=123", "mysql -u root -p shop", "mkdir -p /srv/app", "ssh -p 2222 ops@db",
    "ls -a /tmp", "git commit -a -m 'fix login'", "curl -u bob https://x.example",
    "docker run -p 8080:80 nginx", "mysql shop; mkdir -p /tmp/x"]


def _php(text: str) -> str:
    """As PHP's json_encode and org.json write a JSON string: every `/` as `\\/`."""
    return json.dumps(text).replace("/", "\\/")


def _go(text: str) -> str:
    """As Go's encoding/json writes a JSON string: `&`, `<`, `>` as \\u escapes."""
    return (json.dumps(text).replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e"))


def _class_cases() -> list[tuple[str, str]]:
    return [(name, text) for name, texts in SECRET_CLASSES.items() for text in texts]


@pytest.mark.parametrize("name,text", _class_cases(),
                         ids=[f"{n.split()[0]}-{i}" for i, (n, _) in enumerate(_class_cases())])
def test_each_class_of_secret_in_every_form_of_text(name, text):
    """Raw text, a JSON string holding it, the same with `\\/` (PHP) or `\\u0026` (Go)
    escapes, and a JSON object of it under a plain key: nothing of the secret is left,
    and JSON text stays valid JSON with everything else as it was."""
    r = Redactor()
    for form in (text, json.dumps(text), _php(text), _go(text),
                 orjson.dumps({"note": text, "n": 1}).decode()):
        new, counts = r.text(form)
        assert MARKER not in new.lower(), (form, new)
        assert counts and "[REDACTED:" in new
        if form is not text:
            json.loads(new)
    new, counts = r.record({"note": text, "deep": [{"x": text}]})
    assert MARKER not in orjson.dumps(new).decode().lower() and counts


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_names_about_secrets_and_counts_are_kept(text):
    r = Redactor()
    for form in (text, json.dumps(text)):
        assert r.text(form) == (form, Counter())


@pytest.mark.parametrize("key", ["new_password", "db_password", "aws_secret_access_key",
                                 "clientSecret", "x-api-key", "GITHUB_TOKEN", "id_token",
                                 "passphrase", "AccountKey", "privateKey", "Authorization",
                                 "smtpPass", "apiKey", "session_id", "csrftoken"])
def test_a_key_that_names_a_secret_hides_any_value(key):
    r = Redactor()
    for value in ("zqsecret-1", 20240607):
        record = {"outer": {key: value, "city": "Paris"}}
        new, counts = r.record(record)
        assert new["outer"][key].startswith("[REDACTED:secret_value:") and counts
        assert new["outer"]["city"] == "Paris"
        text, counts = r.text(orjson.dumps(record).decode())
        assert str(value) not in text and counts["secret_value"] == 1
        assert json.loads(text)["outer"]["city"] == "Paris"  # a number became a string


@pytest.mark.parametrize("key", ["prompt_tokens", "max_tokens", "token_count",
                                 "password_length", "secret_name", "SharedAccessKeyName",
                                 "author", "passenger", "keyboard", "primary_key", "tokenizer"])
def test_a_key_about_a_secret_keeps_its_value(key):
    record = {key: "kept-1", "n": {key: 7}}
    assert Redactor().record(record) == (record, Counter())
    text = orjson.dumps(record).decode()
    assert Redactor().text(text) == (text, Counter())


def test_every_class_through_ingest_and_quarantine(tmp_path):
    """The classes in a step's tool result (also as a PHP-escaped JSON body held in a
    string), and in quarantined lines written by PHP (`\\/`) and Go (`\\u0026`): no output
    byte holds any of them."""
    every = [t for texts in SECRET_CLASSES.values() for t in texts]
    lines = []
    for i, text in enumerate(every):
        record = _native_record(i, "email", "x@example.com")
        record["observation"]["tool_result"] = {"body": text, "php": _php(text)}
        record["state"]["user_goal"] = text
        lines.append(orjson.dumps(record))
    # not JSON (cut), as a PHP and a Go program would have written them
    lines.append(b'{"episode_id": "php", "note": ' + _php(" ".join(every)).encode())
    lines.append(b'{"episode_id": "go", "note": ' + _go(" ".join(every)).encode())
    src = tmp_path / "steps.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    summary = ingest([src], out, workers=1, max_bad_fraction=1.0)
    assert (summary.accepted, summary.quarantined) == (len(every), 2)
    blob = _output_blobs(out).lower()
    assert MARKER.encode() not in blob
    assert summary.redacted == dict(_placeholders_written(out))


CORPUS = Path(__file__).parent / "data" / "broken"
FORMAT_OF_PREFIX = {"tau2_": "tau2", "chat_": "openai-chat"}


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*secret_*")))
def test_the_secret_corpus_leaves_no_secret_in_any_output_byte(tmp_path, name):
    """tests/data/broken/*secret_*: a class of secret a file, in accepted steps and in
    quarantined lines written with PHP's and Go's escapes (make_corpus.py)."""
    fmt = next((f for p, f in FORMAT_OF_PREFIX.items() if name.startswith(p)), "jsonl")
    assert MARKER.encode() in (CORPUS / name).read_bytes().lower()
    out = tmp_path / "out"
    summary = ingest([CORPUS / name], out, fmt=fmt, workers=1, max_bad_fraction=1.0)
    assert summary.accepted and summary.quarantined
    assert MARKER.encode() not in _output_blobs(out).lower()
    assert summary.redacted == dict(_placeholders_written(out))
