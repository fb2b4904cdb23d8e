"""The table path of redaction (`Redactor.table`: one gate over the distinct texts, rules
picked in RE2, containers rebuilt only where a text changed) against the rules it stands
for: every string comes out as `Redactor.text` makes it, counted once per row; text that
only looks like a secret costs nothing; the answer does not depend on what else is in the
batch."""

from __future__ import annotations

import itertools
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracerl.data.redact import Redactor

from .test_redact import SECRETS

# looks like a secret to a cheap test (a provider prefix inside a word, `@` without a
# domain, the `+` of a time zone, a URL without a password), is none
LOOK_ALIKES = ["support_desk-00000001", "task-runner", "disk-usage", "success@1",
               "@decorator", "2024-01-01T00:00:00+00:00", "v1.2+3", "http://example.com/a:b",
               "hooked on https", "eyJ", "a+1"]
# a phone number in other scripts' digits (Python's `\d`): Arabic-Indic, full-width
OTHER_DIGITS = ["+٩٧١ ٥٠ ١٢٣ ٤٥٦٧", "(４１５) ５５５-０１９９"]
SAMPLES = [s for kind in sorted(SECRETS) for s in SECRETS[kind]]
PIECES = [*SAMPLES, *LOOK_ALIKES, *OTHER_DIGITS, r"a\/b", r"\u0040", '{"password": "x"}',
          "plain", "", "é", "\n"]


def _texts(n: int) -> list[str | None]:
    """Texts of one to three pieces, repeated (a batch repeats texts), some null."""
    combos = [" ".join(c) for c in itertools.combinations(PIECES, 2)][:n // 2]
    texts: list[str | None] = [*PIECES, *combos]
    return [None if i % 11 == 10 else texts[(i * 7) % len(texts)] for i in range(n)]


def _table(n: int) -> pa.Table:
    texts = _texts(n)
    events = pa.array([None if i % 5 == 0 else [{"kind": "tool", "content": texts[i]},
                                                {"kind": "user", "content": texts[-1 - i]}]
                       for i in range(n)],
                      pa.list_(pa.struct([("kind", pa.string()), ("content", pa.string())])))
    return pa.table({
        "a": pa.array(texts, pa.string()),
        "b": pa.array(texts[::-1], pa.large_string()),
        "c": pa.array(texts, pa.string()).dictionary_encode(),
        "s": pa.StructArray.from_arrays([pa.array(texts[3:] + texts[:3])], names=["x"],
                                        mask=pa.array([i % 4 == 0 for i in range(n)])),
        "e": events,
        "m": pa.array([[(t or "k", 1.0)] for t in texts], pa.map_(pa.string(), pa.float64())),
    })


@pytest.mark.parametrize("rows", [1, 7, 400])
def test_every_string_comes_out_as_text_makes_it_and_counts_once_a_row(rows):
    r = Redactor()
    table = _table(rows)
    new, counts = r.table(table)
    expected: Counter = Counter()

    def text(value):
        if value is None:
            return None
        out, c = r.text(value)
        expected.update(c)
        return out

    assert new.column("a").to_pylist() == [text(v) for v in table.column("a").to_pylist()]
    assert new.column("b").to_pylist() == [text(v) for v in table.column("b").to_pylist()]
    assert new.column("c").to_pylist() == [text(v) for v in table.column("c").to_pylist()]
    assert new.column("c").type == table.column("c").type
    old_s = table.column("s").combine_chunks()
    assert new.column("s").to_pylist() == [
        None if v is None else {"x": text(v["x"])} for v in old_s.to_pylist()]
    assert new.column("e").to_pylist() == [
        None if v is None else [{"kind": text(e["kind"]), "content": text(e["content"])}
                                for e in v] for v in table.column("e").to_pylist()]
    assert new.column("m").to_pylist() == [[(text(k), x) for k, x in v]
                                           for v in table.column("m").to_pylist()]
    assert counts == expected
    assert counts, "the samples hold secrets"


def test_look_alikes_are_not_looked_at_and_the_table_is_the_same_object():
    r = Redactor()
    gate = pc.match_substring_regex(pa.array(LOOK_ALIKES), r._prefilter).to_pylist()
    assert not any(gate), [t for t, g in zip(LOOK_ALIKES, gate, strict=True) if g]
    table = pa.table({"a": pa.array(LOOK_ALIKES * 3), "b": pa.array(LOOK_ALIKES * 3)})
    new, counts = r.table(table)
    assert new is table and not counts
    assert all(not r.text(t)[1] for t in LOOK_ALIKES)


def test_the_gate_holds_every_text_a_rule_rewrites():
    """The gate (tighter than the pre-filters) may only leave out text no rule changes."""
    r = Redactor(secret_keys=("pin",))
    texts = [t for t in {" ".join(c) for c in itertools.combinations(PIECES, 2)} | set(PIECES)
             if r.text(t)[1]]
    gate = pc.match_substring_regex(pa.array(texts), r._prefilter).to_pylist()
    assert all(gate), [t for t, g in zip(texts, gate, strict=True) if not g]


@pytest.mark.parametrize("phone", OTHER_DIGITS)
def test_a_phone_number_in_any_digits_whatever_else_is_in_the_batch(phone):
    """Alone, or among many texts that hold a secret, it is redacted, to the same bytes."""
    r = Redactor()
    alone, c_alone = r.table(pa.table({"a": [f"call {phone}"]}))
    crowd = [f"mail u{i}@example.com" for i in range(50)] + [f"call {phone}"]
    among, c_among = r.table(pa.table({"a": crowd}))
    assert c_alone == Counter({"phone": 1}) and c_among == Counter({"phone": 1, "email": 50})
    assert alone.column("a")[0] == among.column("a")[-1]
    assert alone.column("a")[0].as_py() == r.text(f"call {phone}")[0]
    assert phone not in alone.column("a")[0].as_py()


def _same_memory(a: pa.Array, b: pa.Array) -> bool:
    return [x and x.address for x in a.buffers()] == [x and x.address for x in b.buffers()]


def test_unchanged_columns_and_chunks_are_not_rebuilt():
    r = Redactor()
    clean = pa.chunked_array([["plain"] * 3, ["text"] * 2])
    dirty = pa.chunked_array([["plain"] * 3, ["x jane@example.org", "y"]])
    table = pa.table({"clean": clean, "dirty": dirty})
    new, counts = r.table(table)
    assert counts == Counter({"email": 1})
    assert all(_same_memory(new.column("clean").chunk(i), clean.chunk(i)) for i in (0, 1))
    assert _same_memory(new.column("dirty").chunk(0), dirty.chunk(0))
    assert not _same_memory(new.column("dirty").chunk(1), dirty.chunk(1))
    assert new.column("dirty").num_chunks == 2


def test_texts_of_one_batch_stay_apart():
    """Texts redacted in one batch: a secret is never made of the end of one row and the
    start of the next, an edge is an edge (`\\b`, look-behind), a NUL or a JSON escape
    changes nothing of that, counts stay per row."""
    r = Redactor()
    halves = ["mail jane.doe@exa", "mple.org now", "call +1 415", "555 0100 today",
              "x", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 end",
              "AKIAIOSFODNN7EXAMPLE", "glued xAKIAIOSFODNN7EXAMPLE", "a\0b jane@example.org",
              r"escaped jane@example.org\/x", "jane@example.org", "jane@example.org",
              "(415) 555-0199", "eyJ"]
    texts = [*halves, *(f"u{i}@example.com and +44 20 7946 0958" for i in range(30))]
    new, counts = r.table(pa.table({"a": texts}))
    expected: Counter = Counter()
    for t in texts:
        expected.update(r.text(t)[1])
    assert new.column("a").to_pylist() == [r.text(t)[0] for t in texts]
    assert counts == expected
    assert new.column("a")[0].as_py() == "mail jane.doe@exa"  # half an address is none
    assert new.column("a")[3].as_py() == "555 0100 today"


@pytest.mark.parametrize("batch", [1, 3, 40])
def test_a_params_pattern_is_a_python_regex_in_the_table_as_in_text(batch):
    """A params pattern is Python's regex (`\\d` reads any script's digits; a look-behind,
    which RE2 refuses, works): the table path gates and picks it as `text` does, alone
    in its text or beside a built-in secret, whatever else the batch holds."""
    redactor = Redactor(patterns={"ssn": r"\b\d{3}-\d{2}-\d{4}\b", "ref": r"(?<=ref=)\w+"})
    texts = ["ssn ٣٣٣-٢٢-٤٤٤٤", "mail bob@example.com ssn ٣٣٣-٢٢-٤٤٤٤", "ref=A1b2",
             "ssn 333-22-4444", "nothing"]
    column = [texts[i % len(texts)] for i in range(batch * len(texts))]
    out, counts = redactor.table(pa.table({"a": column}))
    assert out.column("a").to_pylist() == [redactor.text(t)[0] for t in column]
    assert "[REDACTED:ssn:" in redactor.text(texts[0])[0]
    assert "[REDACTED:ref:" in redactor.text(texts[2])[0]
    assert counts == sum((redactor.text(t)[1] for t in column), Counter())
