"""Secrets and personal data out of ingested logs, before anything reaches a file.

A match becomes a typed placeholder, ``[REDACTED:<type>:<digest>]``. What it keeps: the
type, and a 12-hex-digit keyed digest (HMAC-SHA256 of type and secret, key from the
environment variable ``TRACERL_REDACT_KEY``, else a fixed default). Equal secrets stay
equal and different secrets stay different (collision odds 2^-48 per pair), so replay
keys (environment version, tool, canonical arguments) and episode ids keep their
identity; nothing else of the secret is kept. With the default key a low-entropy value
(a phone number) can be found again by trying every candidate: set TRACERL_REDACT_KEY
to a secret of your own, or `ingest.redact.keep_digest: false` for bare placeholders
(which do merge different secrets into one value).

Three entry points, so any input format can use the same rules:
- `Redactor.text(str)`: a raw line, a canonical JSON text, a quarantine reason.
- `Redactor.record(dict)`: a parsed JSON record; every string value at any depth, plus
  the whole value of a key that names a secret (``"password": …``).
- `Redactor.table(pa.Table)`: every string of a step table, whatever holds it (structs,
  lists, lists of structs such as `observation.events`, map keys and values, at any
  depth). The string arrays are reached through Arrow's children, one RE2 pass over each
  picks the few values that may hold a secret, only those are rewritten in Python, and
  the containers are rebuilt around the new strings with their validity and list lengths;
  no row is looped over in Python. A column type it cannot walk (a union holding text) is
  an error, never skipped.
Each returns the new value and a Counter of matches per type (what `table` counts is what
Parquet writes: a value under a null slot or outside a slice is neither rewritten nor
counted).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# name -> (regex, RE2 pre-filter that matches at least every text the regex matches).
# A group named `s` (or `e`, `n`) is the secret part; without it the whole match is.
# Order matters: url_password before email (user:pass@host), private keys and JWTs before
# api keys.
# Every repetition that could backtrack is bounded: hostile text cannot make them slow.
_SECRET_KEYS = (r"pass(?:word|wd)?|pwd|secret|client_secret|api[_-]?key|apikey|"
                r"access[_-]?token|refresh[_-]?token|auth[_-]?token|id[_-]?token|token|"
                r"authorization|private[_-]?key|x-api-key|cookie|set-cookie|session[_-]?id")
BUILTIN: dict[str, tuple[str, str]] = {
    "private_key": (r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[A-Za-z0-9+/=\\\s:,.-]{0,20000}",
                    r"PRIVATE KEY"),
    "jwt": (r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}", r"eyJ"),
    "bearer_token": (r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9\-._~+/]{8,}=*)", r"(?i)bearer"),
    "url_password": (r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^/\s:@\"'\\]{0,256}:"
                     r"(?P<s>[^/\s@\"'\\]{1,256})@",
                     r"://"),
    "aws_access_key": (r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b",
                       r"A[KSGIRN][IPDO]A"),
    "api_key": (r"\b(?:sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_-]{20,}"
                r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
                r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"
                r"|glpat-[A-Za-z0-9_-]{20,}"
                r"|AIza[0-9A-Za-z_-]{35}"
                r"|xox[abprs]-[A-Za-z0-9-]{10,}"
                r"|hf_[A-Za-z0-9]{30,}"
                r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})",
                r"sk-|[sr]k_(?:live|test)_|gh[pousr]_|github_pat_|glpat-|AIza|xox[abprs]-|hf_|SG\."),
    # `"password": "…"`, also as JSON text escaped inside a JSON string (`\"password\": \"…\"`,
    # backslashes `q` before each quote): a text field holding JSON, kept in `extra` or in
    # a quarantined line. An escaped value that itself holds an escaped quote is not matched.
    "secret_value": (r"(?i)(?:^|[{,\s])(?P<q>\\{1,15})?\"(?:" + _SECRET_KEYS
                     + r")(?(q)(?P=q))\"\s*:\s*"
                     r"(?:(?(q)(?P=q)\"(?P<e>(?:[^\"\\]|\\+[^\"\\]){0,4096}+)(?P=q)\""
                     r"|\"(?P<s>(?:[^\"\\]|\\.)*)\")|(?P<n>-?\d[\d.eE+-]*))",
                     r"(?i)pass|pwd|secret|key|token|auth|cookie|session"),
    "email": (r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}"
              r"\.[A-Za-z]{2,24}\b", r"@"),
    "phone": (r"(?:\+\d{1,3}[ .-]?(?:\(?\d{1,4}\)?[ .-]?){2,5}\d{2,4}"
              r"|\(\d{3}\)\s?\d{3}[ .-]\d{4}|\b\d{3}[.-]\d{3}[.-]\d{4})\b",
              r"\+\d|\d{3}\)?[ .-]?\d{3}[ .-]\d{4}"),
}
PATTERN_NAMES: tuple[str, ...] = tuple(BUILTIN)
_SECRET_KEY_RE = re.compile(rf"(?i)^(?:{_SECRET_KEYS})$")
_DEFAULT_KEY = b"tracerl-redact-v1"
# Columns never rewritten: lineage and the closed vocabularies of the step schema.
SKIP_COLUMNS = frozenset({"source_file", "action.type", "split"})
_MAX_CHUNKS = 16  # a column in more chunks is combined first (a regex pass costs a compile)


def _digest_key() -> bytes:
    return os.environ.get("TRACERL_REDACT_KEY", "").encode() or _DEFAULT_KEY


@dataclass
class Redactor:
    """Compiled redaction rules; pickles (it travels to ingest worker processes)."""

    off: Sequence[str] = ()
    patterns: Mapping[str, str] = field(default_factory=dict)  # extra: type -> regex
    secret_keys: Sequence[str] = ()
    keep_digest: bool = True
    enabled: bool = True

    def __post_init__(self) -> None:
        unknown = sorted(set(self.off) - set(BUILTIN))
        if unknown:
            raise ValueError(f"unknown redaction pattern(s) {unknown}; known: {PATTERN_NAMES}")
        rules = {k: v for k, v in BUILTIN.items() if k not in self.off}
        if self.secret_keys and "secret_value" in rules:
            extra = "|".join(re.escape(k) for k in self.secret_keys)
            regex, pre = rules["secret_value"]
            rules["secret_value"] = (regex.replace(_SECRET_KEYS, _SECRET_KEYS + "|" + extra),
                                     f"{pre}|{extra}")  # pre starts with (?i)
        for name, regex in self.patterns.items():
            rules[name] = (regex, regex)
        self._rules = [(name, re.compile(regex), re.compile(pre))
                       for name, (regex, pre) in rules.items()]
        self._prefilter = "|".join(f"(?:{pre})" for _, pre in rules.values()) or "a^"
        self._key_re = (re.compile(_SECRET_KEY_RE.pattern[:-2] + "|" + "|".join(
            re.escape(k) for k in self.secret_keys) + ")$", re.I)
            if self.secret_keys else _SECRET_KEY_RE)
        self._key = _digest_key()
        try:  # RE2 may refuse a params pattern (e.g. a look-behind): then check every row
            pc.match_substring_regex(pa.array(["x"]), self._prefilter)
        except pa.ArrowInvalid:
            self._prefilter = ""

    @classmethod
    def from_params(cls, redact: Mapping[str, Any] | None) -> Redactor:
        redact = dict(redact or {})
        return cls(off=tuple(redact.get("disable", ())), patterns=dict(redact.get("patterns", {})),
                   secret_keys=tuple(redact.get("secret_keys", ())),
                   keep_digest=bool(redact.get("keep_digest", True)),
                   enabled=bool(redact.get("enabled", True)))

    def __getstate__(self) -> dict:
        return {k: getattr(self, k) for k in ("off", "patterns", "secret_keys", "keep_digest",
                                              "enabled")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    # --- placeholders -----------------------------------------------------------------
    def placeholder(self, kind: str, secret: str) -> str:
        if not self.keep_digest:
            return f"[REDACTED:{kind}]"
        mac = hmac.new(self._key, f"{kind}\0{secret}".encode("utf-8", "surrogatepass"),
                       hashlib.sha256).hexdigest()[:12]
        return f"[REDACTED:{kind}:{mac}]"

    def _sub(self, kind: str, regex: re.Pattern, text: str, counts: Counter) -> str:
        def repl(m: re.Match) -> str:
            group = next((g for g in ("s", "e", "n")
                          if g in regex.groupindex and m.group(g) is not None), 0)
            secret = m.group(group)
            if "[REDACTED:" in secret:
                return m.group(0)  # already redacted by an earlier rule
            counts[kind] += 1
            start, end = m.span(group)
            whole = m.group(0)
            base = m.start(0)
            return whole[:start - base] + self.placeholder(kind, secret) + whole[end - base:]

        return regex.sub(repl, text)

    # --- entry points -----------------------------------------------------------------
    def text(self, text: str) -> tuple[str, Counter]:
        """Every pattern over a text (raw line, JSON text, message)."""
        counts: Counter = Counter()
        if not self.enabled or not text:
            return text, counts
        for kind, regex in self._candidates(text):
            text = self._sub(kind, regex, text, counts)
        return text, counts

    def _candidates(self, text: str) -> list[tuple[str, re.Pattern]]:
        """The rules whose cheap necessary condition holds for `text`: Python's re for a
        short text, RE2 (linear, C++) for a long one."""
        if len(text) < 65536:
            return [(kind, regex) for kind, regex, pre in self._rules if pre.search(text)]
        one = pa.array([text])
        found = []
        for kind, regex, pre in self._rules:
            try:
                hit = pc.match_substring_regex(one, pre.pattern)[0].as_py()
            except pa.ArrowInvalid:  # a params pattern RE2 cannot run
                hit = True
            if hit:
                found.append((kind, regex))
        return found

    def record(self, value: Any) -> tuple[Any, Counter]:
        """A parsed JSON value with every string redacted, and the value of every key that
        names a secret replaced whole (any JSON type). Iterative: any depth is safe."""
        counts: Counter = Counter()
        if not self.enabled:
            return value, counts
        root = [value]
        stack: list[tuple[Any, Any]] = [(root, 0)]
        while stack:
            holder, key = stack.pop()
            v = holder[key]
            if isinstance(v, str):
                holder[key], c = self.text(v)
                counts.update(c)
            elif isinstance(v, dict):
                new = dict(v)
                holder[key] = new
                for k, child in new.items():
                    if (isinstance(k, str) and child is not None and self._secret_key_on()
                            and self._key_re.match(k) and not isinstance(child, dict | list)
                            and not str(child).startswith("[REDACTED:")):
                        counts["secret_value"] += 1
                        new[k] = self.placeholder("secret_value", str(child))
                    else:
                        stack.append((new, k))
            elif isinstance(v, list):
                new_list = list(v)
                holder[key] = new_list
                stack.extend((new_list, i) for i in range(len(new_list)))
        return root[0], counts

    def _secret_key_on(self) -> bool:
        return "secret_value" not in self.off

    def array(self, values: pa.Array) -> tuple[pa.Array, Counter]:
        """A string array with every text redacted. One RE2 pass (over the distinct texts,
        when values repeat) picks the values that may hold a secret; each distinct one is
        rewritten in Python once, with only the rules whose RE2 pre-filter it matches, and
        written back in place (`replace_with_mask`); the rest of the array is not copied
        to Python."""
        counts: Counter = Counter()
        if not self.enabled or len(values) == 0 or values.null_count == len(values):
            return values, counts
        if self._prefilter:
            encoded = values.dictionary_encode()
            if len(encoded.dictionary) < len(values):  # repeated texts: test each once
                distinct = pc.match_substring_regex(encoded.dictionary, self._prefilter)
                hit = pc.fill_null(pc.take(distinct, encoded.indices), False)
            else:
                hit = pc.fill_null(pc.match_substring_regex(values, self._prefilter), False)
        else:
            hit = pc.is_valid(values)
        rows = pc.indices_nonzero(hit)
        if len(rows) == 0:
            return values, counts
        texts = values.take(rows).to_pylist()
        done: dict[str, tuple[str, Counter]] = {}
        todo = sorted({t for t in texts if t is not None})
        for text, rules in zip(todo, self._candidates_of(todo), strict=True):
            for kind, regex in rules:
                new_counts: Counter = Counter()
                text_new = self._sub(kind, regex, done[text][0] if text in done else text,
                                     new_counts)
                old_counts = done[text][1] if text in done else Counter()
                done[text] = (text_new, old_counts + new_counts)
        new_texts: list[str] = []
        changed = np.zeros(len(values), dtype=bool)
        for i, text in zip(rows.to_numpy(), texts, strict=True):
            if text is None or text not in done or not done[text][1]:
                continue
            new, c = done[text]
            new_texts.append(new)
            changed[i] = True
            counts.update(c)
        if not counts:
            return values, counts
        return pc.replace_with_mask(values, pa.array(changed),
                                    pa.array(new_texts, type=values.type)), counts

    def _candidates_of(self, texts: list[str]) -> list[list[tuple[str, re.Pattern]]]:
        """For each text, the rules whose pre-filter holds for it (what `_candidates`
        finds for one text): one RE2 pass per rule over all of them."""
        if len(texts) < 8:
            return [self._candidates(t) for t in texts]
        array = pa.array(texts, type=pa.large_string())
        hits = []
        for kind, regex, pre in self._rules:
            try:
                hit = pc.match_substring_regex(array, pre.pattern).to_numpy(
                    zero_copy_only=False)
            except pa.ArrowInvalid:  # a params pattern RE2 cannot run: Python decides
                hit = np.fromiter((pre.search(t) is not None for t in texts), dtype=bool,
                                  count=len(texts))
            hits.append((kind, regex, hit))
        return [[(kind, regex) for kind, regex, hit in hits if hit[j]]
                for j in range(len(texts))]

    def table(self, table: pa.Table) -> tuple[pa.Table, Counter]:
        """Every string of the table, at any depth of structs, lists, maps and their
        combinations (e.g. the list of event structs of `observation.events`, the keys of
        `reward_components`), except the lineage and closed-vocabulary SKIP_COLUMNS."""
        counts: Counter = Counter()
        if not self.enabled or table.num_rows == 0:
            return table, counts
        columns = []
        for f in table.schema:  # chunk by chunk: one regex pass over each text, no copy
            column = table.column(f.name)  # of a column that holds no secret
            if column.num_chunks > _MAX_CHUNKS:  # tables concatenated record by record
                column = pa.chunked_array([column.combine_chunks()], type=f.type)
            old = column.chunks
            chunks = [_rewrite(chunk, f.name, self.array, counts) for chunk in old]
            changed = any(a is not b for a, b in zip(chunks, old, strict=True))
            columns.append(pa.chunked_array(chunks, type=f.type) if changed else column)
        if not counts:
            return table, counts
        return pa.Table.from_arrays(columns, schema=table.schema), counts

    def placeholders(self, table: pa.Table) -> Counter:
        """The placeholders of each type in the table's text (what `table` counted for
        these rows): rows redacted, then dropped, are taken back out of a summary."""
        counts: Counter = Counter()
        if not self.enabled or table.num_rows == 0:
            return counts
        leaves: list[pa.Array] = []
        for f in table.schema:
            for chunk in table.column(f.name).chunks:
                text_leaves(chunk, f.name, leaves)
        kinds = [name for name, _, _ in self._rules]
        for leaf in leaves:
            for kind in kinds:
                n = pc.sum(pc.count_substring_regex(leaf, rf"\[REDACTED:{re.escape(kind)}[:\]]"))
                counts[kind] += n.as_py() or 0
        return +counts


# --- walking any Arrow type -------------------------------------------------------------
# A string leaf is reached through its containers' logical children: a struct's fields
# with the struct's own nulls applied, a list's (or map's) values that its non-null slots
# point at. A value Parquet would not write (under a null slot, outside a slice) is neither
# redacted nor counted. Rebuilt containers keep their length, validity and list lengths.

def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def holds_text(t: pa.DataType) -> bool:
    """Whether a value of type t can hold a string anywhere inside it."""
    if _is_text(t):
        return True
    if pa.types.is_dictionary(t):
        return holds_text(t.value_type)
    if isinstance(t, pa.BaseExtensionType):
        return holds_text(t.storage_type)
    return any(holds_text(t.field(i).type) for i in range(t.num_fields))


def _unsupported(t: pa.DataType, name: str) -> TypeError:
    return TypeError(f"{name}: cannot redact the strings inside a {t} column (no walk "
                     "defined for this Arrow type); refusing to write it unredacted")


def _list_parts(column: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    """A list or map array's logical values (only what its non-null slots point at, from
    its first slot on), the offsets into them, and its null mask (None without nulls)."""
    t = column.type
    offsets = column.offsets.to_numpy()
    lengths = np.diff(offsets)
    mask = column.is_null() if column.null_count else None
    if mask is not None:
        lengths = np.where(mask.to_numpy(zero_copy_only=False), 0, lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    if pa.types.is_map(t):
        full = pa.StructArray.from_arrays([column.keys, column.items],
                                          fields=[t.key_field, t.item_field])
        if mask is None:
            values = full.slice(offsets[0], offsets[-1] - offsets[0])
        else:  # the entries of the non-null slots, in order
            at = np.repeat(offsets[:-1] - starts[:-1], lengths) + np.arange(starts[-1])
            values = full.take(pa.array(at, type=pa.int64()))
    else:
        values = column.flatten()
    kind = pa.int64() if pa.types.is_large_list(t) else pa.int32()
    new_offsets = pa.array(starts, type=kind)
    return values, new_offsets, mask


def _children(column: pa.Array, name: str) -> list[tuple[pa.Array, str]]:
    """The logical children of a container, each with its dotted name."""
    t = column.type
    if pa.types.is_struct(t):
        return [(c, f"{name}.{t.field(i).name}") for i, c in enumerate(column.flatten())]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [(_list_parts(column)[0], name)]
    if pa.types.is_map(t):
        keys, items = _list_parts(column)[0].flatten()
        return [(keys, f"{name}.{t.key_field.name}"), (items, f"{name}.{t.item_field.name}")]
    raise _unsupported(t, name)


def text_leaves(column: pa.Array, name: str, into: list[pa.Array]) -> None:
    """The string arrays inside a column, at any depth, with nothing a null slot hides (a
    plain function: a recursive closure would be a reference cycle holding a batch's text
    until the cyclic GC runs)."""
    t = column.type
    if name in SKIP_COLUMNS or not holds_text(t):
        return
    if _is_text(t):
        into.append(column)
    elif pa.types.is_dictionary(t):
        into.append(column.dictionary_decode())
    elif isinstance(t, pa.BaseExtensionType):
        text_leaves(column.storage, name, into)
    elif pa.types.is_fixed_size_list(t):
        text_leaves(column.cast(pa.list_(t.value_field)), name, into)
    else:
        for child, child_name in _children(column, name):
            text_leaves(child, child_name, into)


def _rewrite(column: pa.Array, name: str, leaf: Callable[[pa.Array], tuple[pa.Array, Counter]],
             counts: Counter) -> pa.Array:
    """The column with `leaf` applied to every string array inside it; the same object
    when nothing changed."""
    t = column.type
    if name in SKIP_COLUMNS or not holds_text(t) or len(column) == 0:
        return column
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        new, c = leaf(column)
        counts.update(c)
        return new
    if pa.types.is_string_view(t) or pa.types.is_dictionary(t):
        plain = column.cast(pa.large_string()) if _is_text(t) else column.dictionary_decode()
        new = _rewrite(plain, name, leaf, counts)
        return column if new is plain else new.cast(t)
    if isinstance(t, pa.BaseExtensionType):
        storage = column.storage
        new = _rewrite(storage, name, leaf, counts)
        return column if new is storage else pa.ExtensionArray.from_storage(t, new)
    if pa.types.is_fixed_size_list(t):
        as_list = column.cast(pa.list_(t.value_field))
        new = _rewrite(as_list, name, leaf, counts)
        return column if new is as_list else new.cast(t)
    mask = column.is_null() if column.null_count else None
    if pa.types.is_struct(t):
        children = [(c, _rewrite(c, n, leaf, counts)) for c, n in _children(column, name)]
        if all(new is old for old, new in children):
            return column
        return pa.StructArray.from_arrays([new for _, new in children], fields=list(t),
                                          mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values, offsets, mask = _list_parts(column)
        new = _rewrite(values, name, leaf, counts)
        if new is values:
            return column
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(offsets, new, type=t, mask=mask)
    if pa.types.is_map(t):
        values, offsets, mask = _list_parts(column)
        keys, items = values.flatten()
        new_keys = _rewrite(keys, f"{name}.{t.key_field.name}", leaf, counts)
        new_items = _rewrite(items, f"{name}.{t.item_field.name}", leaf, counts)
        if new_keys is keys and new_items is items:
            return column
        return pa.MapArray.from_arrays(offsets, new_keys, new_items, type=t, mask=mask)
    raise _unsupported(t, name)


DEFAULT = Redactor()
