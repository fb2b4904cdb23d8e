"""Anthropic Messages API requests, responses, streams and batches."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "anthropic",
    counts="conversation",
    detect=Ref("tracerl.data.formats.anthropic.detect:detect"),
    read=Ref("tracerl.data.formats.anthropic.read:read_anthropic"),
    line_records=True,
    priority=70,
    readme=(
        ('Messages API requests (`{model, system, messages, tools}`), responses (`type: message`), '
         'request+response pairs, recorded HTTP exchanges (`{status, headers, body}`, a JSON or '
         'server-sent-event body), event streams (as events, or a text file of `event:`/`data:` '
         'lines), Message Batches result lines (`{custom_id, result}`) and request lines '
         '(`{custom_id, params}`), claude-trace logs (`.claude-trace/log-*.jsonl`: one logged call '
         'a line; a request whose response never came is the conversation so far, calls to other '
         'endpoints are counted, not read); JSON, a list or JSONL'),
        ('a conversation (a request, a response, an exchange, a batch line: episode id '
         '`custom_id`; an `errored`/`expired`/`canceled` batch result is quarantined with its '
         'reason)'),
        ('`tool_use` blocks are calls (and `server_tool_use` / `mcp_tool_use`, answered by their '
         'result blocks by `tool_use_id`, a `*_error` content → observation.error; a streamed call '
         'whose input is not JSON keeps its text as arguments), `tool_result` blocks (in user '
         'messages) answer them by `tool_use_id`, `is_error` → observation.error; `thinking` → '
         '`extra.reasoning`; `system` → history; usage → episode tokens; behavior_policy = `model` '
         '(after a refusal `fallback` block, the model that answered; the switch in '
         "`extra.fallback`); a stream's `error` event → `extra.stream_error`."),
    ),
)
