"""Whether a file is a mini-swe-agent trajectory: `trajectory_format` "mini-swe-agent…",
or `messages` beside an `info` with `mini_version`."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.mini_swe_agent.read import is_trajectory


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return b'"mini-swe-agent' in s.head or (s.has(b"mini_version") and s.has(b"messages"))
    return is_trajectory(s.record)
