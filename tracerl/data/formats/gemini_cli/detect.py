"""Whether a file is Gemini CLI's: a session (`sessionId` beside `projectHash`: the
`.jsonl`'s metadata line, or the whole `.json`), `--output-format stream-json` output (its
`init` event) or `--output-format json` output; `variant` says which."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.gemini_cli.read import is_session
from tracerl.data.formats.gemini_cli.stream_json import is_json_output, is_stream_event


def detect(s: Sniffed) -> bool:
    return variant(s) is not None


def variant(s: Sniffed) -> str | None:
    """"session" (a chat recording), "stream-json" (`--output-format stream-json`), "json"
    (`--output-format json`: no actions, its reader says so) or None."""
    if s.keys_only:
        return "session" if s.has(b"sessionId") and s.has(b"projectHash") else None
    if is_session(s.record):
        return "session"
    if s.jsonl and is_stream_event(s.record):
        return "stream-json"
    return "json" if not s.array and is_json_output(s.record) else None
