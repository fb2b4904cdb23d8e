"""Gemini CLI sessions (chat recordings) and headless `--output-format stream-json`."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "gemini-cli",
    counts="session",
    unit="file",
    detect=Ref("tracerl.data.formats.gemini_cli.detect:detect"),
    read=Ref("tracerl.data.formats.gemini_cli.read:read"),
    priority=43,
    readme=(
        ('a Gemini CLI session (`~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.jsonl`: '
         'a metadata line, then message records, `$rewindTo` and `$set` lines; or the older '
         'whole `.json` ConversationRecord `{sessionId, projectHash, messages}`), or `gemini -p '
         '--output-format stream-json` output (`init`, `message`, `tool_use`, `tool_result`, '
         '`error`, `result` lines; `--output-format json` holds no actions: refused)'),
        ('a session (episode id: the sessionId, stream-json\'s `session_id`; a sub-agent\'s '
         'session file is its own)'),
        ('a `gemini` message is a turn: its `toolCalls[{id, name, args, result, status}]` are '
         'calls with their results (the functionResponse\'s `response`; status `error` / '
         '`cancelled`, or a response `{error}` → observation.error), thought summaries '
         '`extra.reasoning`, `model` the behaviour policy, `tokens` summed; a message written '
         'again replaces it, a rewind '
         'drops the messages from its target on (counted: `rewound_messages`); user messages '
         'are events, info/warning/error messages system events. stream-json: the assistant '
         'text and `tool_use`s before a `tool_result` are a turn; a `tool_result` answers '
         'by `tool_id` (`output`; status `error` → observation.error). No reward.'),
    ),
)
