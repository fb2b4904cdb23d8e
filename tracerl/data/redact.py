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

The rules are classes of secrets, not lists of examples:
- a name that names a secret (`names_a_secret`: `password`, `new_password`,
  `aws_secret_access_key`, `GITHUB_TOKEN`, `x-api-key`, `AccountKey`, …) makes its value
  secret wherever a name meets a value: a JSON key (`secret_value`, also JSON escaped
  inside a JSON string), a parameter in a query string or form body, a command-line flag,
  an environment or YAML assignment, a header (`secret_param`), a pair of a connection
  string (`connection_string`: `Password=…;`, Azure `AccountKey=…`);
- credentials of HTTP authorization and cookie headers, whatever the scheme
  (`auth_header`: `Authorization: Basic …`), bearer tokens, passwords in URLs;
- webhook URLs, whose path is the credential (`webhook_url`: Slack, Discord, Teams, …);
- tokens of providers that mark them with a prefix (`api_key`, `aws_access_key`, JWTs,
  private keys), also glued to a word by `_` or `-` (`cache_ghp_…`);
- a password a command takes by a short flag that means a password to that command only
  (`cli_password`: `mysql -p<password>`, `sshpass -p`, `redis-cli -a`, `docker login -p`,
  `curl -u user:<password>`);
- e-mail addresses and phone numbers.
Text that hides characters behind JSON escapes (`\\/` as PHP and org.json write it,
`\\u0026` as Go does) is matched as what it means; a text where that finds a secret is
written in its unescaped form (the same JSON value).

Three entry points, so any input format can use the same rules:
- `Redactor.text(str)`: a raw line, a canonical JSON text, a quarantine reason.
- `Redactor.record(dict)`: a parsed JSON record; every string value at any depth, plus
  the whole value of a key that names a secret (``"password": …``).
- `Redactor.table(pa.Table)`: every string of a step table, whatever holds it (structs,
  lists, lists of structs such as `observation.events`, map keys and values, at any
  depth). The string arrays are reached through Arrow's children; their distinct texts
  (a system prompt or history that 500 rows repeat is one) go through one RE2 pass of a
  gate that picks the few that may hold a secret; those are matched against each rule's
  pre-filter in RE2 and rewritten in Python once each; the rows holding a changed text
  are written back in place, and only the containers around a changed array are rebuilt
  (validity and list lengths kept); no row is looped over in Python. The result does not
  depend on what else is in the batch. A column type it cannot walk (a union holding
  text) is an error, never skipped.
Each returns the new value and a Counter of matches per type (what `table` counts is what
Parquet writes: a value under a null slot or outside a slice is neither rewritten nor
counted).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# --- names that name a secret -----------------------------------------------------------
# A name is split into words at `_`, `-`, `.`, spaces and camelCase. It names a secret when
# a word is, or ends with, a secret word (`password` in `db_password`, `newPassword`,
# `dbpassword`; `token` in `GITHUB_TOKEN`, `csrftoken`; `apikey`), or a key word follows a
# qualifier (`aws_secret_access_key`, `x-api-key`, `AccountKey`) — unless a word after the
# secret word says the value is about the secret, not the secret (`password_length`,
# `token_count`, `SharedAccessKeyName`). Plurals are counts (`prompt_tokens`, `max_tokens`).
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SECRET_IN_WORD = ("password", "passwd", "passphrase", "passcode", "secret")
_SECRET_WORDS = frozenset({"pass", "pwd", "pw", "auth", "authorization", "credential",
                           "credentials", "creds", "cookie", "cookies"})
_SESSION_IDS = frozenset({"sessionid", "sessid", "jsessionid", "phpsessid"})
_KEY_QUALIFIERS = frozenset({"api", "access", "account", "private", "secret", "auth", "ssh",
                             "master", "signing", "encryption", "client", "license", "app",
                             "subscription", "shared", "session"})
_KEY_COMPOUNDS = tuple(sorted(q + "key" for q in _KEY_QUALIFIERS))
_NOT_SECRET_AFTER = frozenset({
    "name", "names", "type", "types", "kind", "count", "counts", "length", "len", "size",
    "id", "ids", "hint", "hints", "policy", "required", "enabled", "expiry", "expires",
    "expiration", "ttl", "at", "format", "file", "path", "url", "uri", "endpoint", "env",
    "var", "field", "header", "label", "limit", "budget", "usage", "version", "min", "max",
    "method", "scheme", "mode", "provider", "user", "username", "details", "info"})
# what a name must contain to be looked at (regex): the words above, cheaply
# (not `passenger`, `tokens`: plurals are counts) and the same for RE2, which has no
# look-ahead (a pre-filter may match more, never less)
_WORDS = (r"pass(?:w|phrase|code|\b|_)|pwd|pw\b|pw_|secret|token(?!s)|key|auth|credential|"
          r"creds|cookie|session|sessid|sig\b|signature")
_PRE_WORDS = _WORDS.replace("token(?!s)", "token(?:[^sS]|$)")


@lru_cache(maxsize=8192)
def names_a_secret(name: str, where: str = "key") -> bool:
    """Whether a name names a secret. `where`: "key" (a JSON or dict key), "text" (a name
    in free text: a flag, an assignment, a header) or "query" (a parameter of a query
    string, a cookie or a connection string, where `sig`, `signature` and a bare `key` do
    too). A session id is a secret as a key and in a query string, not in free text, where
    it is mostly an agent's own session (`session_id: …` in code)."""
    words = [w.lower() for w in _NAME_WORDS.findall(name)]
    if not words:
        return False
    if words[-2:] in (["session", "id"], ["session", "key"]) or words[-1] in _SESSION_IDS:
        return where != "text"
    last = -1
    for i, w in enumerate(words):
        if (w in _SECRET_WORDS or w.endswith("token") or w.endswith(_KEY_COMPOUNDS)
                or (w == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS)
                or (any(s in w for s in _SECRET_IN_WORD) and "secretar" not in w)
                or (where == "query" and (w in ("sig", "signature") or words == ["key"]))):
            last = i
    return last >= 0 and not _NOT_SECRET_AFTER.intersection(words[last + 1:])


# --- the rules ------------------------------------------------------------------------------
# name -> (regex, RE2 pre-filter that matches at least every text the regex matches).
# A group named in SECRET_GROUPS is the secret part; without one the whole match is. A rule
# in PICKERS decides from its match which parts are secret (a name is looked at).
# Order matters: url_password before email (user:pass@host), private keys and JWTs before
# api keys, JSON keys and headers before connection strings before free-text
# parameters.
# Every repetition that could backtrack is bounded: hostile text cannot make them slow.
SECRET_GROUPS = ("s", "e", "n", "u", "f", "w")
_NOT_GLUED = r"(?<![A-Za-z0-9])"  # a provider token may follow `_`, `-`, `.` or `/`
_NAME_CHARS = r"A-Za-z0-9_.\-"
_FREE_NAME = rf"[{_NAME_CHARS}]{{0,40}}(?:WORDS)[{_NAME_CHARS}]{{0,40}}"
_JSON_NAME = r"[^\"\\\r\n]{0,40}(?:WORDS)[^\"\\\r\n]{0,40}"
# a name starts a token: after a separator, a quote, an escape such as `\n` in JSON text,
# or `%26`/`%3F` (percent-encoded `&`/`?`); never inside a placeholder
_NAME_START = (r"(?:(?<=%26)|(?<=%3[Ff])|(?<=\\[nrt])|(?<![A-Za-z0-9_.\-%\\]))"
               r"(?<!REDACTED:)")
# a value holds `=` only at its end (base64 padding), and is never given back: a text of
# `a=a=a=…` costs a few steps per `=`, not a kilobyte
_PAIR = (r"[A-Za-z][A-Za-z0-9 _.\-]{0,40}=[ \t]{0,4}(?:\{[^}\r\n]{0,1024}\}|'[^'\r\n]{0,1024}'"
         r"|\"[^\"\r\n]{0,1024}\"|[^;\r\n\"'\\{=]{0,1024}+=*)")
_PAIR_PARTS = re.compile(r"(?P<k>[A-Za-z][A-Za-z0-9 _.\-]{0,40}?)[ \t]*=[ \t]{0,4}"
                         r"(?:\{(?P<b>[^}\r\n]{0,1024})\}|'(?P<q1>[^'\r\n]{0,1024})'"
                         r"|\"(?P<q2>[^\"\r\n]{0,1024})\"|(?P<v>[^;\r\n\"'\\{]{0,1024}))")
_API_KEYS = (r"sk-(?:proj-|ant-(?:api\d\d-|admin\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
             r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}"
             r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"
             r"|gl(?:pat|ptt|rt|dt|cbt|soat|ft|imt)-[A-Za-z0-9_-]{20,}"
             r"|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}"
             r"|xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"
             r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}"
             r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|do[por]_v1_[a-f0-9]{64}"
             r"|hv[sbr]\.[A-Za-z0-9_-]{24,}|gsk_[A-Za-z0-9]{40,}|r8_[A-Za-z0-9]{37}"
             r"|pplx-[A-Za-z0-9]{40,}|dapi[0-9a-f]{32}"
             r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}")
_API_KEY_PRE = (r"sk-|[sr]k_(?:live|test)_|whsec_|gh[pousr]_|github_pat_|gl[a-z]{1,4}-|AIza|ya29\.|"
                r"xox[a-z]-|xapp-|hf_|npm_|pypi-|shp[a-z]{2}_|do[por]_v1_|hv[sbr]\.|gsk_|r8_|"
                r"pplx-|dapi|SG\.")


def _builtin(extra: str = "") -> dict[str, tuple[str, str]]:
    """The built-in rules; `extra`: more name alternatives (params' secret_keys)."""
    words, pre_words = _WORDS + extra, _PRE_WORDS + extra
    free, json_name = (_FREE_NAME.replace("WORDS", words), _JSON_NAME.replace("WORDS", words))
    return {
        "private_key": (r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----"
                        r"[A-Za-z0-9+/=\\\s:,.-]{0,20000}", r"PRIVATE KEY"),
        "jwt": (_NOT_GLUED + r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
                r"eyJ"),
        "bearer_token": (r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9\-._~+/]{8,}=*)", r"(?i)bearer"),
        "url_password": (r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^/\s:@\"'\\]{0,256}:"
                         r"(?P<s>[^/\s@\"'\\]{1,256})@", r"://"),
        # the path (and query) of a webhook URL is its credential: hooks.* and *webhook*
        # hosts; a /webhook/, /webhooks/ or /webhookb2/ segment followed by a token (a
        # segment with a digit: not a documentation page), or /hooks/ by a long one
        "webhook_url": (r"(?i)\bhttps?://(?:(?:hooks\.|[a-z0-9.\-]{0,200}webhook)"
                        r"[a-z0-9.\-]{0,200}(?::\d{1,5})?(?P<s>/[^\s\"'<>\\]{1,2048})"
                        r"|[a-z0-9.\-]{1,253}(?::\d{1,5})?(?P<w>/(?:[^\s\"'<>\\/?#]{1,200}/)"
                        r"{0,8}?(?:(?:webhooks?|webhookb2)/(?=[^\s\"'<>\\/?#]{0,200}\d)"
                        r"[^\s\"'<>\\/?#]{8,200}|hooks/(?=[^\s\"'<>\\/?#]{0,200}\d)"
                        r"[^\s\"'<>\\/?#]{16,200})[^\s\"'<>\\]{0,2048}))", r"(?i)hook"),
        "aws_access_key": (_NOT_GLUED + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)"
                           r"[0-9A-Z]{16}(?![A-Za-z0-9])", r"A[KSGIRN][IPDOV]A"),
        "api_key": (_NOT_GLUED + f"(?:{_API_KEYS})", _API_KEY_PRE),
        # `"password": "…"` with any name that names a secret, also as JSON text escaped
        # inside a JSON string (`\"password\": \"…\"`, backslashes `q` before each quote): a
        # text field holding JSON, kept in `extra` or in a quarantined line. An escaped value
        # that itself holds an escaped quote is not matched.
        "secret_value": (r"(?i)(?:^|[{,\s\[])(?P<q>\\{1,15})?\"(?P<k>" + json_name
                         + r")(?(q)(?P=q))\"\s*:\s*"
                         r"(?:(?(q)(?P=q)\"(?P<e>(?:[^\"\\]|\\+[^\"\\]){0,4096}+)(?P=q)\""
                         r"|\"(?P<s>(?:[^\"\\]|\\.)*)\")|(?P<n>-?\d[\d.eE+-]*))",
                         rf"(?i){pre_words}"),
        # an authorization or cookie header, any scheme: its value to the end of the line (or
        # a quote; `name="value"` parameters of Digest and the like are taken whole)
        "auth_header": (r"(?i)(?:(?<=\\[nrt])|(?<![A-Za-z0-9_\-]))(?<!REDACTED:)"
                        r"(?:proxy-)?(?:authorization|(?:set-)?cookie)[\"']?[ \t]{0,4}:[ \t]{0,4}"
                        r"(?:\\{0,15}[\"'])?"
                        r"(?:(?:basic|digest|bearer|token|negotiate|ntlm|hmac|aws4-hmac-sha256"
                        r"|apikey|api-key|sso-key|key|signature|sharedkey)[ \t]{1,4})?"
                        r"(?P<s>[^\s\"'\\](?:[^\r\n\"'\\]|(?<=[A-Za-z]=)(?P<dq>\\{0,15})"
                        r"\"[^\",\r\n\\]{0,512}(?P=dq)\"(?=,|\s|\\|$)){0,4095})",
                        r"(?i)authorization|cookie"),
        # two or more `name=value` pairs joined by `;` (ADO.NET, ODBC, JDBC, Azure storage
        # and Service Bus): the values of the pairs whose name names a secret
        "connection_string": (rf"(?<![A-Za-z0-9_.\-]){_PAIR}(?:[ \t]{{0,4}};[ \t]{{0,4}}"
                              rf"{_PAIR}){{1,40}}",
                              rf"(?i)(?:{pre_words})[A-Za-z0-9 _.\-]{{0,40}}="),
        # `name=value`, `name: value`, `--name value` with a name that names a secret: query
        # strings and form bodies (`?password=`, `&access_token=`, percent-encoded too),
        # command lines, environment files, YAML, headers such as `x-api-key: …`, Python
        # dicts (`'password': '…'`); a value in quotes is taken whole
        "secret_param": (rf"(?i){_NAME_START}(?:(?P<k>{free})(?P<kq>[\"'])?[ \t]{{0,4}}"
                         r"(?:=|:(?![/:])|%3[Dd])[ \t]{0,4}"
                         r"(?:(?P<vq>[\"'])(?P<s>[^\"'\r\n]{1,512})(?P=vq)"
                         r"|(?(kq)(?!)|(?:\\{1,15}[\"'])?(?P<u>[^\s&;\"'<>\\]{1,512})))"
                         rf"|(?P<fk>--{free})[ \t]{{1,4}}"
                         r"(?P<f>[^\s\-\"'<>\\][^\s\"'<>\\]{0,511}))",
                         rf"(?i){pre_words}"),
        # a password a command takes by a short flag that only that command reads so (to
        # others `-p` is a port or a path): the command is looked up by _pick_cli_password
        "cli_password": (r"(?<![^\s'\"=])(?:-p(?:\\{0,15}['\"])?(?P<s>[^\s\"'\\]{1,512})"
                         r"|-(?P<sp>[pa])[ \t]{1,4}(?:\\{0,15}['\"])?"
                         r"(?P<f>[^\s\"'\\\-][^\s\"'\\]{0,511})"
                         r"|(?:-[uU]|--(?:proxy-)?user)(?:[ \t]{1,4}|=)?(?:\\{0,15}['\"])?"
                         r"[^\s:\"'\\]{1,128}:(?P<u>[^\s\"'\\]{1,512}))",
                         r"(?i)mysql|mariadb|sshpass|redis-cli|login|curl"),
        # a header of a HAR file (or any `{"name": …, "value": …}` pair): the value when
        # the name names a secret (`Authorization`, `Cookie`, `X-Api-Key`, …)
        "har_header": (r"(?i)(?P<q>\\{0,15})\"name(?P=q)\"\s*:\s*(?P=q)\"(?P<k>[^\"\\\r\n]{1,80})"
                       r"(?P=q)\"\s*,\s*(?P=q)\"value(?P=q)\"\s*:\s*(?P=q)\""
                       r"(?P<s>(?:[^\"\\]|\\+[^\"\\]|(?(q)(?!)|\\.)){1,4096}+)(?P=q)\"",
                       r"(?i)\"value"),
        # a password said in words: `my password is …`, `the passcode was …`, `pwd: …`
        "password_phrase": (r"(?i)\b(?:password|passwd|passphrase|passcode|pwd|pin)"
                            r"(?:[ \t]{1,4}(?:is|was|will be|=)[ \t]{0,4}:?|[ \t]{0,4}:)[ \t]{1,4}"
                            r"[\"'`]?(?P<s>[^\s\"'`<>\\]{1,256})",
                            r"(?i)pass|pwd|pin"),
        # a payment card number: 13-19 digits, bare or in groups of 3-6 split by one kind
        # of separator, with a card network's prefix and a valid Luhn check digit
        # (_pick_card; a timestamp, an order id or a phone number mostly fails one of them)
        "card_number": (r"(?<![0-9A-Za-z.,+/:_\-])(?:[0-9]{13,19}|[0-9]{4}(?P<sep>[ -])[0-9]{3,6}"
                        r"(?:(?P=sep)[0-9]{3,6}){1,3})(?![0-9A-Za-z_]|[.,/:\-][0-9])",
                        r"[0-9]{13}|[0-9]{4}[ -][0-9]{3,6}[ -][0-9]{3}"),
        # an IBAN: country, check digits, up to 30 letters and digits (in groups of four
        # or not), valid by its mod-97 check (_pick_iban)
        "iban": (r"\b[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b",
                 r"[A-Z]{2}[0-9]{2} ?[A-Z0-9]{4} ?[A-Z0-9]{4}"),
        # a US social security number, dashed (an area of 000, 666 or 9xx is none)
        "ssn": (r"(?<![0-9A-Za-z\-])(?!000|666|9)[0-9]{3}-(?!00)[0-9]{2}-(?!0000)[0-9]{4}"
                r"(?![0-9A-Za-z]|-[0-9])", r"[0-9]{3}-[0-9]{2}-[0-9]{4}"),
        # an address, also percent-encoded in a URL (`jane%40example.org`, `%2540`)
        "email": (r"\b[A-Za-z0-9._%+-]{1,64}(?:@|%(?:25)?40)[A-Za-z0-9-]{1,63}"
                  r"(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}\b", r"@|%(?:25)?40"),
        "phone": (r"(?:\+\d{1,3}[ .-]?(?:\(?\d{1,4}\)?[ .-]?){2,5}\d{2,4}"
                  r"|\(\d{3}\)\s?\d{3}[ .-]\d{4}|\b\d{3}[.-]\d{3}[.-]\d{4})\b",
                  r"\+\d|\d{3}\)?[ .-]?\d{3}[ .-]\d{4}"),
    }


BUILTIN: dict[str, tuple[str, str]] = _builtin()
# Lower-case substrings one of which a text must hold for a rule to match (cheaper than
# its pre-filter; none: the pre-filter alone)
_NAME_LITERALS = ("pass", "pwd", "pw", "secret", "token", "key", "auth", "credential", "creds",
                  "cookie", "session", "sessid", "sig")
_LITERALS: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",), "jwt": ("eyj",), "bearer_token": ("bearer",),
    "url_password": ("://",), "webhook_url": ("hook",), "auth_header": ("authorization",
                                                                        "cookie"),
    "aws_access_key": ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
    "email": ("@", "%40", "%2540"), "har_header": ('"value',),
    "password_phrase": ("pass", "pwd", "pin"),
    "cli_password": ("mysql", "mariadb", "sshpass", "redis-cli", "login", "curl")}
PATTERN_NAMES: tuple[str, ...] = tuple(BUILTIN)
# The gate of a table: per rule, an RE2 pattern that every text the rule can rewrite
# matches, tighter than its pre-filter where that one is often true of text that holds no
# secret (`sk-` inside `support_desk-1`, `@` in `success@1`, `+0` of a time zone). It
# picks the texts that go to Python at all; the pre-filters (in RE2) then pick the rules.
# Python's `\d` is any Unicode digit: `[0-9\x{100}-\x{10FFFF}]` holds them all (every
# other one is above U+0660) whatever Unicode version either engine knows; `(?s:.)`
# stands for Python's `\s`; pieces are left out where they only narrow.
_D = r"[0-9\x{100}-\x{10FFFF}]"
# A pre-filter as RE2 runs it where RE2's reading of the Python one is narrower than the
# rule (RE2's `\d` is ASCII): phone numbers in any script's digits
_RE2_PRE: dict[str, str] = {"phone": rf"\+{_D}|{_D}{{3}}\)?[ .-]?{_D}{{3}}[ .-]{_D}{{4}}"}
_GATES: dict[str, str] = {
    "jwt": r"(?:^|[^A-Za-z0-9])eyJ[A-Za-z0-9_-]{5,}\.eyJ",
    "url_password": r"://[^/:@\"'\\]*:[^/@\"'\\]+@",
    "webhook_url": r"(?i)https?://[^\s\"'<>\\]*hook",
    "api_key": rf"(?:^|[^A-Za-z0-9])(?:{_API_KEY_PRE})",
    "email": r"[A-Za-z0-9._%+-](?:@|%(?:25)?40)[A-Za-z0-9-][A-Za-z0-9.-]*\.[A-Za-z]{2}",
    "password_phrase": (r"(?i)(?:password|passwd|passphrase|passcode|pwd|pin)"
                        r"(?:[ \t]{1,4}(?:is|was|will be|=)|[ \t]{0,4}:)[ \t:]"),
    "har_header": r"(?i)\"name\\*\"\s*:\s*\\*\"[^\"\\]*\\*\"\s*,\s*\\*\"value",
    "cli_password": r"(?i)(?:mysql|mariadb|sshpass|redis-cli|login|curl)[^\r\n]*-[pau]",
    "phone": (rf"\+{_D}{{1,3}}[ .-]?(?:\(?{_D}{{1,4}}\)?[ .-]?){{2,5}}{_D}{{2,4}}"
              rf"|\({_D}{{3}}\)(?s:.)?{_D}{{3}}[ .-]{_D}{{4}}|{_D}{{3}}[.-]{_D}{{3}}[.-]{_D}{{4}}"),
}
_HEADER = re.compile(r"(?i)(?:proxy-)?authorization|(?:set-)?cookie")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_PLACEHOLDER = re.compile(r"\[REDACTED:[^\]\s]{1,64}\]")
# JSON escapes that hide a character a rule looks for (`\/`, `\u0026`; any run of
# backslashes, so JSON text escaped inside JSON text too); `"` and `\` stay escaped
_ESCAPED = re.compile(r"(?<!\\)\\++(?:/|u00([2-7][0-9A-Fa-f]))")  # from a run's start: linear
_ESCAPED_PRE = r"\\(?:/|u00[2-7])"
_DEFAULT_KEY = b"tracerl-redact-v1"
# Columns never rewritten: lineage and the closed vocabularies of the step schema.
SKIP_COLUMNS = frozenset({"source_file", "action.type", "split"})
_MAX_CHUNKS = 16  # a column in more chunks is combined first (a regex pass costs a compile)


def _unescaped(text: str) -> str:
    def plain(m: re.Match) -> str:
        if m.group(1) is None:
            return "/"
        ch = chr(int(m.group(1), 16))
        return m.group(0) if ch in "\"\\\x7f" else ch

    return _ESCAPED.sub(plain, text)


@lru_cache(maxsize=1 << 16)
def _keyed_placeholder(key: bytes, kind: str, secret: str) -> str:
    """The placeholder with its digest (one secret recurs in a log: an e-mail address in
    a call's arguments, its result and the next message; each HMAC is computed once)."""
    mac = hmac.new(key, f"{kind}\0{secret}".encode("utf-8", "surrogatepass"),
                   hashlib.sha256).hexdigest()[:12]
    return f"[REDACTED:{kind}:{mac}]"


def _digest_key() -> bytes:
    return os.environ.get("TRACERL_REDACT_KEY", "").encode() or _DEFAULT_KEY


# Which short flag of which command carries a password (_pick_cli_password): MySQL's and
# MariaDB's clients read `-p<password>` glued (a bare `-p` prompts, and the word after it
# is the database); sshpass `-p`, glued or not; redis-cli `-a <password>`; a registry
# login (`docker login -p`, podman, helm, …); curl `-u`/`--user user:password` (and its
# proxy's): the part after the colon. A program's name counts as a word of its own (a
# path's last part, `.exe` too), in the same command as the flag: after the last line
# break (also escaped, in JSON text), `|`, `;`, `&`, backtick or `$(` before it, and at
# most _CLI_LOOK_BACK characters before it.
_CLI_PROGRAM = re.compile(
    r"(?i)(?<![A-Za-z0-9_.\-])(?:(?P<glued>mysql(?:dump|admin|import|check|show|pump|slap"
    r"|binlog|sh)?|mariadb(?:-dump|-admin|-import|-check|-show|-slap|-binlog)?)"
    r"|(?P<sshpass>sshpass)|(?P<redis>redis-cli)"
    r"|(?P<registry>docker|podman|helm|nerdctl|buildah|skopeo|oras|crane|regctl)"
    r"|(?P<curl>curl)|(?P<login>login))(?:\.exe)?(?![A-Za-z0-9_.\-])")
_COMMAND_START = re.compile(r"[\r\n|;&`]|\\[nr]|\$\(")
_CLI_LOOK_BACK = 512


@lru_cache(maxsize=8)
def _programs(text: str) -> tuple[list[int], dict[str, list[int]]]:
    """Where the commands of a text start, and where each kind of program is named: once
    a text, however many flags it holds (a flag's look-back is then two bisections)."""
    starts = [0, *(m.end() for m in _COMMAND_START.finditer(text))]
    found: dict[str, list[int]] = {k: [] for k in _CLI_PROGRAM.groupindex}
    for m in _CLI_PROGRAM.finditer(text):
        found[m.lastgroup].append(m.start())
    return starts, found


def _pick_cli_password(m: re.Match) -> list[Span]:
    at = m.start()
    starts, found = _programs(m.string)
    low = max(starts[bisect_right(starts, at) - 1], at - _CLI_LOOK_BACK)

    def named(kind: str) -> bool:  # a program of that kind in the flag's command
        where = found[kind]
        i = bisect_left(where, low)
        return i < len(where) and where[i] < at

    login = named("login") and named("registry")
    if m.group("s") is not None:  # -p<secret>
        secret = "s" if named("glued") or named("sshpass") or login else None
    elif m.group("f") is not None:  # -p <secret>, -a <secret>
        flag = m.group("sp")
        secret = "f" if (flag == "p" and (named("sshpass") or login)) or (
            flag == "a" and named("redis")) else None
    else:  # -u user:<secret>
        secret = "u" if named("curl") else None
    return [(*m.span(secret), "")] if secret else []


# (start, end, quote): a secret span of the text, and the quote to put around its
# placeholder (a JSON number becomes a JSON string)
Span = tuple[int, int, str]


# A value that is code, not a secret: a template or variable (`${SESSION_ID}`, `$TOKEN`,
# `{{ token }}`, `%(password)s`, `<password>`), a literal of no value (`nil`, `None`,
# `null`, `""`), a call or a lookup (`getpass()`, `os.environ["PW"]`, `input(`), masks
# (`****`). Trailing `,`/`;` of the line of code it ends are not part of it.
_CODE_VALUE = re.compile(
    r"(?:\$\{[^}]{0,200}\}|\$(?:[A-Z_][A-Z0-9_]{0,100}|[a-z_][a-z0-9_]{0,100})"
    r"|\{\{[^}]{0,200}\}\}|%\([A-Za-z_]{1,64}\)s|<[A-Za-z_ -]{1,64}>"
    r"|(?i:nil|none|null|undefined|true|false)"
    r"|\*{1,64}|x{3,64}|[A-Za-z_][A-Za-z0-9_]{0,100}(?:\.[A-Za-z_][A-Za-z0-9_]{0,100}){0,8}"
    r"(?:\([^)]{0,200}\)?|\[[^\]]{0,200}\])"
    r"|(?:process|import\.meta|Deno)\.env\.[A-Za-z_][A-Za-z0-9_]{0,100}"
    r"|\[REDACTED:[^\]\s]{1,64}\])[,;)]{0,3}")


def is_code(value: str) -> bool:
    """Whether a value found after a secret's name is code or a placeholder, not a
    secret (see _CODE_VALUE)."""
    return _CODE_VALUE.fullmatch(value.strip().strip("\"'`")) is not None


def code_at(m: re.Match, group: str) -> bool:
    """Whether the value a match found (its `group`) is code: the value alone, or the
    code that starts where it starts and runs past its end (a value cut at a quote or a
    space: `os.environ['API_KEY']`, `{{ vault_password }}`, `ENV["SECRET"]`)."""
    value = m.group(group)
    if is_code(value):
        return True
    start, end = m.span(group)
    text = m.string
    while start < end and text[start] in "\"'`":
        start += 1
    code = _CODE_VALUE.match(text, start, min(len(text), end + 256))
    return code is not None and code.end() >= end - len(value) + len(value.rstrip("\"'`"))


def _pick_phrase(m: re.Match) -> list[Span]:
    """A password said in words, without the punctuation that ends the sentence."""
    value = m.group("s").rstrip(".,;:!?)]}")
    start = m.start("s")
    if not value or code_at(m, "s") or value.lower() in _NOT_A_PASSWORD:
        return []
    return [(start, start + len(value), "")]


# words that say something about a password, not what it is ("the password is required")
_NOT_A_PASSWORD = frozenset({
    "required", "incorrect", "correct", "wrong", "invalid", "valid", "expired", "missing",
    "empty", "set", "changed", "reset", "not", "too", "the", "a", "an", "your", "my", "now",
    "case-sensitive", "optional", "hidden", "masked", "stored", "saved", "updated", "weak",
    "strong", "blank", "unknown", "needed", "being", "also", "still", "no", "yes"})


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


# first digits of the card networks: Visa 4; Mastercard 51-55, 2221-2720; Amex 34, 37;
# Diners 300-305, 36, 38, 39; Discover and UnionPay 6; JCB 35; Maestro 50, 56-58
_CARD_PREFIX = re.compile(r"4|5[0-8]|2(?:2[2-9]|[3-6]|7[01]|720)|3[4-9]|30[0-5]|6")


def _pick_card(m: re.Match) -> list[Span]:
    digits = re.sub(r"[ -]", "", m.group(0))
    ok = (13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) is not None
          and len(set(digits)) > 1 and _luhn(digits))
    return [(*m.span(), "")] if ok else []


def _iban_valid(compact: str) -> bool:
    moved = compact[4:] + compact[:4]
    return 15 <= len(compact) <= 34 and int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _pick_iban(m: re.Match) -> list[Span]:
    """The longest prefix of the match, cut at a group's end, that is a valid IBAN (a
    word in capitals after it may have been taken as one more group)."""
    text = m.group(0)
    cuts = [len(text)] + [i for i in range(len(text) - 1, 14, -1) if text[i] == " "]
    if " " not in text:
        cuts = range(len(text), 14, -1)
    for end in cuts:
        if _iban_valid(text[:end].replace(" ", "")):
            return [(m.start(), m.start() + end, "")]
    return []


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
        self._extra_names = frozenset(k.lower() for k in self.secret_keys)
        extra = "".join("|" + re.escape(k) for k in self.secret_keys)
        rules = {k: v for k, v in _builtin(extra).items() if k not in self.off}
        for name, regex in self.patterns.items():
            rules[name] = (regex, regex)
        pickers = {"secret_value": self._pick_value, "secret_param": self._pick_param,
                   "connection_string": self._pick_pairs, "auth_header": self._pick_header,
                   "cli_password": _pick_cli_password, "har_header": self._pick_har,
                   "password_phrase": _pick_phrase, "card_number": _pick_card,
                   "iban": _pick_iban}
        names = (*_NAME_LITERALS, *(k.lower() for k in self.secret_keys))
        literals = {**_LITERALS, **dict.fromkeys(("secret_value", "secret_param",
                                                  "connection_string"), names)}
        self._rules = [(name, re.compile(regex), re.compile(pre), pickers.get(name),
                        literals.get(name, ()),
                        pre if name in self.patterns else _RE2_PRE.get(name, pre))
                       for name, (regex, pre) in rules.items()]
        # a params pattern is a Python regex (`\d`, `\w`, `\b` read Unicode; RE2 reads
        # ASCII): Python's re gates and picks it, in the table as in `text`
        gates = [_GATES.get(name, pre) for name, (_, pre) in rules.items()
                 if name not in self.patterns]
        self._python_gates = [rule[2] for rule in self._rules if rule[0] in self.patterns]
        self._prefilter = "|".join([*(f"(?:{gate})" for gate in gates),
                                    _ESCAPED_PRE]) if rules else ""
        self._key = _digest_key()
        self._headers_on = "auth_header" in rules

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

    def names_a_secret(self, name: str, where: str = "key") -> bool:
        """`names_a_secret`, or one of the params' `secret_keys` (any case)."""
        name = name.strip()
        return names_a_secret(name, where) or name.lower().lstrip("-") in self._extra_names

    # --- which parts of a match are secret --------------------------------------------
    def _pick_value(self, m: re.Match) -> list[Span]:
        if not self.names_a_secret(m.group("k")):
            return []
        for group in ("s", "e"):
            if m.group(group) is not None:
                return [] if code_at(m, group) else [(*m.span(group), "")]
        return [(*m.span("n"), (m.group("q") or "") + '"')]  # a number: a string now

    def _pick_param(self, m: re.Match) -> list[Span]:
        name, value = ("k", "s") if m.group("k") is not None else ("fk", "f")
        if m.group(name) is None or (self._headers_on and _HEADER.fullmatch(m.group(name))):
            return []  # an authorization or cookie header is auth_header's, scheme and all
        value = value if m.group(value) is not None else "u"
        start = m.start(name)
        before = m.string[max(0, start - 3):start].lower()
        where = ("query" if before.endswith(("?", "&", ";")) or before in ("%26", "%3f")
                 else "key" if m.group("kq") else "text")
        if code_at(m, value):
            return []
        return [(*m.span(value), "")] if self.names_a_secret(m.group(name), where) else []

    def _pick_har(self, m: re.Match) -> list[Span]:
        name = m.group("k")
        if not (self.names_a_secret(name, "query") or _HEADER.fullmatch(name.strip())
                ) or code_at(m, "s"):
            return []
        return [(*m.span("s"), "")]

    def _pick_pairs(self, m: re.Match) -> list[Span]:
        spans = []
        for pair in _PAIR_PARTS.finditer(m.string, m.start(), m.end()):
            group = next(g for g in ("b", "q1", "q2", "v") if pair.group(g) is not None)
            start, end = pair.span(group)
            end = start + len(pair.group(group).rstrip())
            if (end > start and self.names_a_secret(pair.group("k"), "query")
                    and not is_code(pair.group(group))):
                spans.append((start, end, ""))
        return spans

    @staticmethod
    def _pick_header(m: re.Match) -> list[Span]:
        start, value = m.start("s"), m.group("s").rstrip()
        # a cookie's `name=value; …` pairs: code when each value is
        code = all(is_code(pair.partition("=")[2] or pair) for pair in value.split(";")
                   if pair.strip())
        return [] if code else [(start, start + len(value), "")]

    @staticmethod
    def _pick_group(m: re.Match) -> list[Span]:
        if not m.re.groupindex:  # the whole match is the secret
            return [(m.start(), m.end(), "")]
        group = next((g for g in SECRET_GROUPS
                      if g in m.re.groupindex and m.group(g) is not None), 0)
        return [(*m.span(group), "")]

    # --- placeholders -----------------------------------------------------------------
    def placeholder(self, kind: str, secret: str) -> str:
        if not self.keep_digest:
            return f"[REDACTED:{kind}]"
        return _keyed_placeholder(self._key, kind, secret)

    def _redacted(self, kind: str, secret: str, quote: str, counts: Counter) -> str:
        """The secret's placeholder; a secret around placeholders of an earlier rule keeps
        them and has each of its other parts redacted."""
        if "[REDACTED:" not in secret:
            counts[kind] += 1
            return quote + self.placeholder(kind, secret) + quote
        out, pos = [], 0
        for inner in [*_PLACEHOLDER.finditer(secret), None]:
            end = inner.start() if inner else len(secret)
            piece = secret[pos:end]
            if _ALNUM.search(piece):  # not the punctuation around a placeholder
                counts[kind] += 1
                piece = self.placeholder(kind, piece)
            out.append(piece + (inner.group(0) if inner else ""))
            pos = inner.end() if inner else end
        return "".join(out)

    def _sub(self, rule: tuple, text: str, counts: Counter) -> str:
        kind, regex, _, pick, *_ = rule

        def repl(m: re.Match) -> str:
            spans = (pick or self._pick_group)(m)
            if not spans:
                return m.group(0)
            out, pos = [], m.start(0)
            for start, end, quote in spans:
                out += [text[pos:start], self._redacted(kind, text[start:end], quote, counts)]
                pos = end
            out.append(text[pos:m.end(0)])
            return "".join(out)

        return regex.sub(repl, text)

    # --- entry points -----------------------------------------------------------------
    def text(self, text: str, rules: list[tuple] | None = None) -> tuple[str, Counter]:
        """Every pattern over a text (raw line, JSON text, message); a text that hides a
        secret behind JSON escapes comes back unescaped around it (same JSON meaning).
        `rules`: the text's candidate rules when already known (`_candidates_of`)."""
        counts: Counter = Counter()
        if not self.enabled or not text:
            return text, counts
        new = self._all_rules(text, counts, rules)
        if "\\" in text and _ESCAPED.search(text):
            plain_counts: Counter = Counter()
            plain = self._all_rules(_unescaped(text), plain_counts)
            if plain_counts.total() > counts.total():
                return plain, plain_counts
        return new, counts

    def _all_rules(self, text: str, counts: Counter, rules: list[tuple] | None = None) -> str:
        for rule in self._candidates(text) if rules is None else rules:
            text = self._sub(rule, text, counts)
        return text

    def _candidates(self, text: str) -> list[tuple]:
        """The rules whose cheap necessary condition holds for `text`: Python's re for a
        short text, RE2 (linear, C++) for a long one."""
        if len(text) < 65536:  # a substring test (fast) before the pre-filter's regex
            low = text.lower()
            return [rule for rule in self._rules
                    if (not rule[4] or any(x in low for x in rule[4])) and rule[2].search(text)]
        one = pa.array([text])
        found = []
        for rule in self._rules:
            if rule[0] in self.patterns:  # a Python regex (see __post_init__)
                hit = rule[2].search(text) is not None
            else:
                hit = pc.match_substring_regex(one, rule[5])[0].as_py()
            if hit:
                found.append(rule)
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
                if self._har_header(new):  # {"name": "Authorization", "value": "…"}
                    counts["har_header"] += 1
                    new["value"] = self.placeholder("har_header", new["value"])
                for k, child in new.items():
                    if (isinstance(k, str) and child is not None and self._secret_key_on()
                            and not isinstance(child, dict | list) and self.names_a_secret(k)
                            and not str(child).startswith("[REDACTED:")
                            and not (isinstance(child, str) and is_code(child))):
                        counts["secret_value"] += 1
                        new[k] = self.placeholder("secret_value", str(child))
                    else:
                        stack.append((new, k))
            elif isinstance(v, list):
                new_list = list(v)
                holder[key] = new_list
                stack.extend((new_list, i) for i in range(len(new_list)))
        return root[0], counts

    def _har_header(self, pair: dict) -> bool:
        """Whether a dict is a header of a HAR file (or any name/value pair) whose name
        names a secret and whose value is not yet redacted nor code."""
        name, value = pair.get("name"), pair.get("value")
        return ("har_header" not in self.off and isinstance(name, str)
                and isinstance(value, str) and bool(value) and len(name) <= 80
                and (self.names_a_secret(name, "query") or bool(_HEADER.fullmatch(name.strip())))
                and not value.startswith("[REDACTED:") and not is_code(value))

    def _secret_key_on(self) -> bool:
        return "secret_value" not in self.off

    def array(self, values: pa.Array) -> tuple[pa.Array, Counter]:
        """A string array with every text redacted (what `table` does to each of its
        string arrays); the same object when nothing in it is a secret."""
        new, counts = self._leaves([values])
        return new[0], counts

    def table(self, table: pa.Table) -> tuple[pa.Table, Counter]:
        """Every string of the table, at any depth of structs, lists, maps and their
        combinations (e.g. the list of event structs of `observation.events`, the keys of
        `reward_components`), except the lineage and closed-vocabulary SKIP_COLUMNS.
        Two walks over the columns: one collects their string arrays, `_leaves` redacts
        them all at once, the other rebuilds only the columns where one of them changed
        (a column, chunk or container without a secret stays the same object)."""
        counts: Counter = Counter()
        if not self.enabled or table.num_rows == 0:
            return table, counts
        leaves: list[pa.Array] = []

        def collect(values: pa.Array) -> tuple[pa.Array, Counter]:
            leaves.append(values)
            return values, counts

        columns, spans = [], []  # per column: its chunks' (first leaf, end) in `leaves`
        for f in table.schema:
            column = table.column(f.name)
            if column.num_chunks > _MAX_CHUNKS:  # tables concatenated record by record
                column = pa.chunked_array([column.combine_chunks()], type=f.type)
            chunk_spans = []
            for chunk in column.chunks:
                start = len(leaves)
                _rewrite(chunk, f.name, collect, counts)
                chunk_spans.append((start, len(leaves)))
            columns.append(column)
            spans.append(chunk_spans)
        new_leaves, counts = self._leaves(leaves)
        if not counts:
            return table, counts
        out = []
        for f, column, chunk_spans in zip(table.schema, columns, spans, strict=True):
            chunks = []
            for chunk, (start, end) in zip(column.chunks, chunk_spans, strict=True):
                if all(new_leaves[k] is leaves[k] for k in range(start, end)):
                    chunks.append(chunk)
                    continue
                order = iter(range(start, end))
                replace = partial(_walked_again, order, leaves, new_leaves)
                chunks.append(_rewrite(chunk, f.name, replace, Counter()))
                assert next(order, None) is None, f"{f.name}: the two walks disagree"
            changed = any(a is not b for a, b in zip(chunks, column.chunks, strict=True))
            out.append(pa.chunked_array(chunks, type=f.type) if changed else column)
        return pa.Table.from_arrays(out, schema=table.schema), counts

    def _leaves(self, leaves: list[pa.Array]) -> tuple[list[pa.Array], Counter]:
        """String arrays redacted together, each distinct text once. The arrays of a
        type are made distinct (each, then together); one RE2 pass of the gate over
        their distinct texts picks the few that may hold a secret (most batches of most
        logs: none, and that is all it costs); one RE2 pass per rule over those picks
        each text's candidate rules; each is rewritten in Python once; in an array whose
        distinct texts hold a changed one, the rows holding it are found by one lookup
        and written back in place (`replace_with_mask`); the others are returned as they
        are. Counts are per row: a secret in a text that 500 rows hold counts 500 times
        (what Parquet writes)."""
        counts: Counter = Counter()
        new_leaves = list(leaves)
        by_type: dict[pa.DataType, list[int]] = {}
        for k, values in enumerate(leaves):
            if len(values) and values.null_count < len(values):
                by_type.setdefault(values.type, []).append(k)
        done: dict[str, tuple[str, Counter]] = {}  # text -> redacted, counts
        for members in by_type.values():
            uniques = [leaves[k].unique() for k in members]
            distinct = (pa.concat_arrays(uniques).unique() if len(uniques) > 1
                        else uniques[0]).drop_null()
            hit_texts = self._gated(distinct)
            if not len(hit_texts):
                continue
            texts = hit_texts.to_pylist()
            for text, rules in zip(texts, self._candidates_of(hit_texts, texts), strict=True):
                if text not in done:
                    done[text] = self.text(text, rules)
            changed = [text for text in texts if done[text][1]]
            if not changed:
                continue
            changed_set = pa.array(changed, type=hit_texts.type)
            new_texts = pa.array([done[text][0] for text in changed], type=hit_texts.type)
            per_text = np.zeros(len(changed), dtype=np.int64)  # rows holding each
            for k, unique in zip(members, uniques, strict=True):
                if not pc.any(pc.is_in(unique, value_set=changed_set)).as_py():
                    continue
                codes = pc.fill_null(pc.index_in(leaves[k], value_set=changed_set),
                                     -1).to_numpy()
                rows = codes >= 0
                per_text += np.bincount(codes[rows], minlength=len(changed))
                new_leaves[k] = pc.replace_with_mask(leaves[k], pa.array(rows),
                                                     new_texts.take(codes[rows]))
            for text, n in zip(changed, per_text.tolist(), strict=True):
                for kind, m in done[text][1].items():
                    counts[kind] += m * n
        return new_leaves, counts

    def _gated(self, distinct: pa.Array) -> pa.Array:
        """The distinct texts some rule may rewrite: the built-in rules' gate in RE2, a
        params pattern's in Python (see __post_init__)."""
        if not self._prefilter:  # no rule at all
            return distinct.slice(0, 0)
        hit = pc.match_substring_regex(distinct, self._prefilter)
        if self._python_gates:
            python = np.fromiter((any(g.search(t) for g in self._python_gates)
                                  for t in distinct.to_pylist()), dtype=bool,
                                 count=len(distinct))
            hit = pc.or_(pc.fill_null(hit, False), pa.array(python))
        return distinct.filter(hit)

    def _candidates_of(self, array: pa.Array, texts: list[str]) -> list[list[tuple]]:
        """For each text of an array (`texts`: the same as Python strings), the rules whose
        pre-filter holds for it: one RE2 pass per rule over all of them (a params pattern
        RE2 cannot run: Python's re decides). A built-in rule whose pre-filter finds
        nothing in the texts joined by newlines is skipped after one pass over one string,
        far cheaper than one over many short ones: none of them anchors, so each matches
        the joined texts wherever it matches one of them (a newline is what it sees at a
        text's edge). A params pattern may anchor (`^…$`): always one pass per text."""
        hits = []
        joined = pa.array(["\n".join(texts)], type=pa.large_string())
        for rule in self._rules:
            try:
                if rule[0] in self.patterns:  # a Python regex: Python picks it
                    raise pa.ArrowInvalid("a params pattern")
                if not pc.match_substring_regex(joined, rule[5])[0].as_py():
                    continue
                hit = pc.match_substring_regex(array, rule[5]).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:
                hit = np.fromiter((rule[2].search(t) is not None for t in texts), dtype=bool,
                                  count=len(texts))
            hits.append((rule, hit))
        return [[rule for rule, hit in hits if hit[j]] for j in range(len(texts))]

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
        kinds = [rule[0] for rule in self._rules]
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


def _walked_again(order: Iterator[int], leaves: list[pa.Array], new_leaves: list[pa.Array],
                  values: pa.Array) -> tuple[pa.Array, Counter]:
    """The second walk's leaf: the next string array's redacted version (the array
    `values` itself when it did not change, so its container is not rebuilt)."""
    k = next(order)
    return (values if new_leaves[k] is leaves[k] else new_leaves[k]), Counter()


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
