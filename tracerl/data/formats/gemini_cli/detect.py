"""Whether a file is a Gemini CLI session: `sessionId` beside `projectHash` (the `.jsonl`'s
metadata line, or the whole `.json`)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.gemini_cli.read import is_session


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"sessionId") and s.has(b"projectHash")
    return is_session(s.record)
