"""Whether a file is an ATIF trajectory: `schema_version` "ATIF-…", or `steps` with
`session_id` / `agent` / `trajectory_id`."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return b'"ATIF' in s.head or (s.has(b"steps") and s.has(b"session_id"))
    value = s.record
    if not isinstance(value, dict):
        return False
    schema = value.get("schema_version")
    return (isinstance(schema, str) and schema.upper().startswith("ATIF")) or (
        isinstance(value.get("steps"), list)
        and ("session_id" in value or "agent" in value or "trajectory_id" in value))
