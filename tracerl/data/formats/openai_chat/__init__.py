"""OpenAI-style chat conversations (messages, logged calls, ShareGPT)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "openai-chat",
    counts="conversation",
    detect=Ref("tracerl.data.formats.openai_chat.detect:detect"),
    read=Ref("tracerl.data.formats.openai_chat.read:read_openai_chat"),
    line_records=True,
    rewards=True,
    priority=90,
    readme=(
        ('JSONL (one per line), a JSON list, or one document: a bare list of messages (also a '
         'LangChain message dump: `type` human/ai/tool), `{"messages": [...]}`, records '
         '`{messages` (or `traj`, or `conversations`: OpenAI messages or ShareGPT `from`/`value` '
         "turns with LLaMA-Factory's `function_call`/`observation`)`, reward?, task_id?, trial?, "
         'id?, tools?, info?}`, prompt-completion records `{prompt: [...], completion: [...]}` '
         '(TRL, verifiers), or logged calls `{request: {messages, tools}, response: <chat '
         "completion>}` / OpenPipe's `{input, output, tags}`"),
        'a conversation',
        ('`role` system/developer/user/assistant/tool/function; assistant `tool_calls[{id, '
         'function{name, arguments}}]` (or the older `function_call`, answered by name); `tool` '
         'messages answer by `tool_call_id`. episode_id = `id`/`episode_id`, else '
         '`<source>:<record>` (see below); `reward` a number or an object of numbers (its '
         '`reward`/`total` the reward); `tools` → available_tools; other record fields under the '
         "done row's `extra.episode`."),
    ),
)
