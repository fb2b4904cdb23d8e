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
- `Redactor.table(pa.Table)`: every string (and list-of-string) column of a step table;
  a vectorised pre-filter picks the few rows that may hold a secret, only those are
  rewritten in Python.
Each returns the new value and a Counter of matches per type.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# name -> (regex, RE2 pre-filter that matches at least every text the regex matches).
# A group named `s` is the secret part; without it the whole match is. Order matters:
# url_password before email (user:pass@host), private keys and JWTs before api keys.
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
                r"sk-|[sr]k_|gh[pousr]_|github_pat_|glpat-|AIza|xox[abprs]-|hf_|SG\."),
    "secret_value": (r"(?i)(?:^|[{,\s])\"(?:" + _SECRET_KEYS + r")\"\s*:\s*"
                     r"(?:\"(?P<s>(?:[^\"\\]|\\.)*)\"|(?P<n>-?\d[\d.eE+-]*))",
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
            group = "s" if "s" in regex.groupindex and m.group("s") is not None else (
                "n" if "n" in regex.groupindex and m.group("n") is not None else 0)
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
        """A string array with every text redacted (rows without a candidate untouched)."""
        counts: Counter = Counter()
        if not self.enabled or len(values) == 0:
            return values, counts
        if self._prefilter:
            hit = pc.fill_null(pc.match_substring_regex(values, self._prefilter), False)
            rows = pc.indices_nonzero(hit).to_pylist()
        else:
            rows = [i for i in range(len(values)) if values[i].is_valid]
        if not rows:
            return values, counts
        py = values.to_pylist()
        changed = False
        for i in rows:
            new, c = self.text(py[i])
            if c:
                py[i] = new
                counts.update(c)
                changed = True
        return (pa.array(py, type=values.type) if changed else values), counts

    def table(self, table: pa.Table) -> tuple[pa.Table, Counter]:
        """Every string and list-of-string column, at any struct depth, except lineage."""
        counts: Counter = Counter()
        if not self.enabled or table.num_rows == 0:
            return table, counts
        if self._prefilter and not self._any_candidate(table):
            return table, counts  # the common case: one regex pass over all the text
        columns = []
        for f in table.schema:
            column = table.column(f.name).combine_chunks()
            new, c = self._redact_column(column, f.name)
            counts.update(c)
            columns.append(new)
        if not counts:
            return table, counts
        return pa.Table.from_arrays(columns, schema=table.schema), counts

    def _any_candidate(self, table: pa.Table) -> bool:
        """Whether any text of the table may hold a secret (one pass, one compile)."""
        leaves: list[pa.Array] = []
        for f in table.schema:
            for chunk in table.column(f.name).chunks:
                _text_leaves(chunk, f.name, leaves)
        if not leaves:
            return False
        hits = pc.match_substring_regex(pa.concat_arrays(leaves), self._prefilter)
        return bool(pc.any(hits).as_py())

    def _redact_column(self, column: pa.Array, name: str) -> tuple[pa.Array, Counter]:
        if name in SKIP_COLUMNS:
            return column, Counter()
        t = column.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return self.array(column)
        if pa.types.is_list(t) and pa.types.is_string(t.value_type):
            values, c = self.array(column.values)
            if not c:
                return column, c
            offsets = column.offsets
            if column.offset:  # a slice: rebase onto its own values
                values = values.slice(offsets[0].as_py())
                offsets = pc.subtract(offsets, offsets[0])
            return pa.ListArray.from_arrays(offsets, values, mask=column.is_null(),
                                            type=t), c
        if pa.types.is_struct(t):
            counts: Counter = Counter()
            children = []
            for child_field, child in zip(t, column.flatten(), strict=True):
                new, c = self._redact_column(child, f"{name}.{child_field.name}")
                counts.update(c)
                children.append(new)
            if not counts:
                return column, counts
            return pa.StructArray.from_arrays(children, fields=list(t),
                                              mask=column.is_null()), counts
        return column, Counter()


def _text_leaves(column: pa.Array, name: str, into: list[pa.Array]) -> None:
    """The string arrays inside a column (a plain function: a recursive closure would be a
    reference cycle holding a batch's text until the cyclic GC runs)."""
    t = column.type
    if name in SKIP_COLUMNS:
        return
    if pa.types.is_string(t):
        into.append(column)
    elif pa.types.is_list(t) and pa.types.is_string(t.value_type):
        into.append(column.flatten())
    elif pa.types.is_struct(t):
        for child_field, child in zip(t, column.flatten(), strict=True):
            _text_leaves(child, f"{name}.{child_field.name}", into)


DEFAULT = Redactor()
