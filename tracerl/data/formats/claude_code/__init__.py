"""Claude Code session transcripts and Agent SDK / stream-json messages."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "claude-code",
    counts="session",
    unit="file",
    detect=Ref("tracerl.data.formats.claude_code.detect:detect"),
    read=Ref("tracerl.data.formats.claude_code.read:read_claude_code"),
    sidecars=Ref("tracerl.data.formats.claude_code.read:sidecars"),
    priority=60,
    readme=(
        ('a session transcript (`~/.claude/projects/.../<session>.jsonl`, also one that opens with '
         "session-state lines) or a sub-agent's (`<session>/subagents/agent-<id>.jsonl`, with its "
         '`agent-<id>.meta.json`: agent type and parent `toolUseId` under `extra.episode`); the '
         "Agent SDK's / `claude -p --output-format stream-json` message stream (lines or a JSON "
         "array: a sub-agent's messages, by `parent_tool_use_id`, are episode "
         "`<session>/task-<id>`; the init line's tools → available_tools); a project's "
         "`sessions-index.json` and a Workflow run's snapshot and journal are counted, not read"),
        ('a session with an agent turn, one per sidechain/sub-agent (`<session>/agent-<id>`); an '
         'unreadable line alone'),
        ("the episode is the session tree's live branch (`uuid`/`parentUuid`): a rewind's "
         'abandoned branch is no action (counted: `abandoned_branches`, '
         '`abandoned_branch_messages`); assistant lines sharing `message.id` are one turn; '
         '`tool_use` blocks are calls, user `tool_result` blocks answer them; meta, '
         'compaction-summary, system and synthetic (`<synthetic>`, API error) lines are system '
         'events; `summary`, `file-history-snapshot`, `progress`, `queue-operation` lines and the '
         '`acompact` compaction agent are no actions (counted in `notes`). No reward.'),
    ),
)
