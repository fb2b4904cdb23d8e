"""Codex CLI sessions (rollout JSONL) and `codex exec --json` output."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "codex-cli",
    counts="session",
    unit="file",
    detect=Ref("tracerl.data.formats.codex_cli.detect:detect"),
    read=Ref("tracerl.data.formats.codex_cli.read:read"),
    priority=44,
    readme=(
        ('a Codex CLI rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`: '
         '`{timestamp, type: session_meta | response_item | event_msg | turn_context | '
         'compacted, payload}` lines; also the older rollouts of bare items after an `{id, '
         'timestamp, instructions}` line), or `codex exec --json` output (`thread.started`, '
         '`turn.*` and `item.started / updated / completed` lines; before the 0.4x rewrite a '
         'config summary, `{prompt}` and `{id, msg}` event lines)'),
        'a session (episode id: the session id; of exec output, the thread id)',
        ('the assistant items between two other items are one turn: `function_call`, '
         '`custom_tool_call`, `local_shell_call` and `web_search_call` are its calls, its '
         'message text the content, its reasoning summary `extra.reasoning`; '
         '`function_call_output` / `custom_tool_call_output` answer by `call_id` (a non-zero '
         '`metadata.exit_code` → observation.error); user and developer messages are events, '
         'a compaction a system event; `event_msg` lines repeat the items and are not read '
         '(but `token_count`: tokens); behaviour policy the turn context\'s `model`. Exec '
         'output: each `command_execution`, `file_change`, `mcp_tool_call`, '
         '`collab_tool_call`, `web_search` item (its last state) a call and its own turn, '
         'with the agent messages and reasoning before it; its result the terminal state '
         '(`aggregated_output`, a non-zero `exit_code` → observation.error; an MCP '
         '`error.message`); an agent message with no call after it a message; the old '
         'output\'s `*_begin` / `*_end` events are read as those items. No reward.'),
    ),
)
