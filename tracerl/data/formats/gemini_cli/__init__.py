"""Gemini CLI sessions (chat recordings)."""

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
         'whole `.json` ConversationRecord `{sessionId, projectHash, messages}`)'),
        'a session (episode id: the sessionId; a sub-agent\'s session file is its own)',
        ('a `gemini` message is a turn: its `toolCalls[{id, name, args, result, status}]` are '
         'calls with their results (the functionResponse\'s `response`; status `error` / '
         '`cancelled` → observation.error), thought summaries `extra.reasoning`, `model` the '
         'behaviour policy, `tokens` summed; a message written again replaces it, a rewind '
         'drops the messages from its target on (counted: `rewound_messages`); user messages '
         'are events, info/warning/error messages system events. No reward.'),
    ),
)
