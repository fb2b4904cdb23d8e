"""Whether a file is a Codex CLI rollout: its first line a `session_meta` envelope (or any
rollout envelope), or an old rollout's `{id, timestamp, instructions}`."""

from __future__ import annotations

from tracerl.data.formats.codex_cli.read import is_rollout_line
from tracerl.data.formats.common.detect import Sniffed


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.jsonl and s.has(b"session_meta") and s.has(b"payload")
    return s.jsonl and is_rollout_line(s.record)
