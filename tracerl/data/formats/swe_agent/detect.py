"""Whether a file is a SWE-agent trajectory: a `trajectory` list of steps with `action` and
`observation` beside `info` / `history` (or `attempts` of them)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.swe_agent.read import is_trajectory


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"trajectory") and s.has(b"action") and s.has(b"observation") and \
            s.has(b"thought", b"execution_time")
    return is_trajectory(s.record)
