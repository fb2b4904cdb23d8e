"""Whether a file holds OpenHands events: a list of them, `{trajectory}` / `{history}` of
them, or one event (a file of an `events/` folder)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.openhands.read import is_event, is_stream


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"tool_call_metadata", b"llm_response_id") or (
            s.has(b"observation") and s.has(b"cause") and s.has(b"extras"))
    return is_event(s.record) or is_stream(s.record)
