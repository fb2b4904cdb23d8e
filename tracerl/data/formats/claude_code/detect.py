"""Whether a file is Claude Code's: an event line with `type` user | assistant | summary |
system | progress | file-history-snapshot | queue-operation and `sessionId` / `uuid` /
`parentUuid` (also after leading session-state lines `{type: mode | permission-mode |
..., sessionId}`), or a sub-agent's `agent-<id>.meta.json` sidecar (`agentType` /
`toolUseId`), a project's `sessions-index.json`, a Workflow run's `workflows/<runId>.json`
or `journal.jsonl` (read as no record); or a Claude Agent SDK / `claude -p
--output-format stream-json` message (`system` init with `session_id` and `tools`, or a
message with `session_id` and `parent_tool_use_id`), as lines or a JSON array."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tracerl.data.formats.common.detect import Sniffed

CLAUDE_CODE_TYPES = frozenset({"user", "assistant", "summary", "system", "progress",
                               "file-history-snapshot", "queue-operation", "attachment"})


def is_event(value: Any) -> bool:
    """One transcript event, or one Agent SDK / stream-json message."""
    if not isinstance(value, dict):
        return False
    keys = value.keys()
    if value.get("type") in CLAUDE_CODE_TYPES and (
            "sessionId" in keys or "uuid" in keys or "parentUuid" in keys
            or value.get("type") in ("summary", "file-history-snapshot", "queue-operation")):
        return True
    # the Agent SDK's / `claude -p --output-format stream-json`'s (its init line lists the
    # tools; Cursor's CLI copies the shape without them)
    return "session_id" in keys and ((value.get("type") == "system" and value.get("subtype")
                                      == "init" and isinstance(value.get("tools"), list))
                                     or "parent_tool_use_id" in keys)


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"sessionId") and s.has(b"parentUuid")
    value, path = s.record, s.path
    if not isinstance(value, dict):
        return False
    if s.jsonl and path.name == "journal.jsonl" and value.get("type") in ("started", "result") \
            and "agentId" in value:
        return True  # a Claude Code Workflow run's journal
    if not s.jsonl and path.name.startswith("agent-") and path.name.endswith(".meta.json") \
            and ("agentType" in value or "toolUseId" in value):
        return True  # a sub-agent transcript's sidecar
    if not s.jsonl and _side_file(path, value):
        return True  # Claude Code's sessions index or a Workflow run's snapshot
    return is_event(value) or (s.jsonl and _session_head(value, s))


def _side_file(path: Path, value: dict) -> bool:
    if path.name == "sessions-index.json":
        return isinstance(value.get("entries"), list) and "originalPath" in value
    return path.parent.name == "workflows" and isinstance(value.get("runId"), str) \
        and ("workflowProgress" in value or "workflowName" in value)


def _session_head(first: dict, s: Sniffed) -> bool:
    """A Claude Code transcript that opens with session-state lines (`mode`,
    `permission-mode`, `last-prompt`, `ai-title`, `custom-title`, `agent-name`, ...: a
    `type` and the `sessionId`, no uuid), as Claude Code 2.1 writes a session's first
    lines: claude-code when a line after them, in the head, is a transcript event (no
    other format's record)."""
    from tracerl.data.formats.common.detect import classify

    if not (isinstance(first.get("type"), str) and isinstance(first.get("sessionId"), str)):
        return False
    for line in s.head.split(b"\n")[1:50]:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        if not (isinstance(value, dict) and isinstance(value.get("type"), str)):
            return False
        if value.get("type") in CLAUDE_CODE_TYPES and classify(value) == "claude-code":
            return True
        if not isinstance(value.get("sessionId"), str):
            return False
    return False
