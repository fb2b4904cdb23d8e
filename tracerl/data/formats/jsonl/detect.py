"""Whether a file is native step records: `episode_id` with `t` and `action`."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"episode_id") and s.has(b"action") and not s.has(b"messages")
    value = s.record
    return isinstance(value, dict) and "episode_id" in value and "t" in value \
        and "action" in value
