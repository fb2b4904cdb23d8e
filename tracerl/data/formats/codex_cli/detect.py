"""Whether a file is Codex CLI's: a rollout (its first line a `session_meta` envelope, or
any rollout envelope, or an old rollout's `{id, timestamp, instructions}`) or `codex exec
--json` output (`thread.started`, `turn.started` or an item event); `variant` says which."""

from __future__ import annotations

from tracerl.data.formats.codex_cli.exec_json import is_exec_event, is_legacy_line
from tracerl.data.formats.codex_cli.read import is_rollout_line
from tracerl.data.formats.common.detect import Sniffed


def detect(s: Sniffed) -> bool:
    return variant(s) is not None


def variant(s: Sniffed) -> str | None:
    """"rollout" (a session file), "exec-json" (`codex exec --json` output),
    "exec-json-legacy" (that output before the 0.4x rewrite: `{id, msg}` events) or None."""
    if not s.jsonl:
        return None
    if s.keys_only:
        if s.has(b"session_meta") and s.has(b"payload"):
            return "rollout"
        return "exec-json" if s.head.startswith(b'{"type":"thread.started","thread_id":') \
            else None
    if is_rollout_line(s.record):
        return "rollout"
    if is_exec_event(s.record):
        return "exec-json"
    return "exec-json-legacy" if is_legacy_line(s.record) else None
