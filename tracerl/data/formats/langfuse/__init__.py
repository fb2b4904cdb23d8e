"""Langfuse traces and observations (exports, public API lists, blob storage)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "langfuse",
    counts="trace",
    unit="folder",
    detect=Ref("tracerl.data.formats.langfuse.detect:detect"),
    read=Ref("tracerl.data.formats.langfuse.read:read_langfuse"),
    line_records=True,
    rewards=True,
    priority=20,
    readme=(
        ('`{"trace", "observations"}` exports (or a trace with inline observations), a list, or '
         'JSONL; the public API\'s `{"data": [observation…]}` (grouped by `traceId`); a `{"data": '
         '[trace…]}` list with observation ids only is quarantined, saying to export with '
         'observations'),
        'a trace (its agents are episodes `<trace>/<agent>`)',
        ("GENERATION = a model call (its `input`/`output` in any provider's shape: chat, Anthropic "
         '(also an output that is the bare list of content blocks), Gemini, Responses API, '
         'LangChain, text); TOOL observations, and spans named after a pending call, are tool runs '
         '(matched by `gen_ai.tool.call.id`, else name and arguments); AGENT observations separate '
         "agents; observations with snake_case fields (the blob-storage export's observations "
         "JSONL) too; numeric scores → reward_components (the reward: `ingest.reward_evaluation`'s "
         'score, else the only one); task = trace name.'),
    ),
)
