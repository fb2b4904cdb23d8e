"""OpenTelemetry GenAI spans (OTLP JSON, JSONL, Jaeger, Tempo, console exporter)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "otel-genai",
    counts="conversation",
    # OTel spans join across the files of one input (a trace cut across rotated files).
    # Not shardable: slices work (tests/test_otel_speed.py) but each repeats the whole
    # file's load and holds all its spans (10,000 conversations, 2 workers sliced against
    # one process, load 2.5: wall 1.22x, CPU 1.45x, tree peak 1.5 vs 0.8 GB); a large JSON
    # Lines file is read in jobs of its lines instead (read_lines: each loads only its own).
    unit="folder",
    detect=Ref("tracerl.data.formats.otel_genai.detect:detect"),
    read=Ref("tracerl.data.formats.otel_genai.read:read_otel"),
    rewards=True,
    priority=30,
    readme=(
        ('OTLP JSON (`resourceSpans`, with `resourceLogs` events; camelCase or proto names), JSONL '
         "of exports or of single spans, the Python SDK's console-exporter output "
         '(`ReadableSpan.to_json()` spans one after another), Jaeger query-API JSON '
         '(`data[].spans`, `tags` as `{key, type, value}`, microseconds)'),
        ('a conversation per agent (spans joined by `gen_ai.conversation.id`, else trace id; split '
         "by the nearest `invoke_agent`'s agent); a trace with no GenAI span is none (counted)"),
        ('a model-call span is a turn, in any of the three attribute generations (indexed '
         '`gen_ai.prompt.N.*`/`gen_ai.completion.N.*`; per-message events '
         '`gen_ai.*.message`/`gen_ai.choice`; `gen_ai.input.messages`/`gen_ai.output.messages` '
         "with typed parts) and OpenInference's `llm.*`; producers' own attributes (also Strands' "
         "Bedrock blocks, Spring AI `tool_call` spans, Latitude, Braintrust, LiteLLM's numbered "
         'calls beside an empty output message) where no `gen_ai` ones say it: OpenLLMetry tool '
         'spans (`traceloop.entity.*`), Logfire / pydantic-ai (the `events` attribute, `running '
         'tool:` spans with `tool_arguments`/`tool_response`), the Vercel AI SDK '
         '(`ai.prompt.messages`, `ai.response.*`, `ai.toolCall` spans), Google ADK (`call_llm` '
         'with `gcp.vertex.agent.llm_request`/`.llm_response`, '
         '`gcp.vertex.agent.tool_call_args`/`.tool_response`); of two layers describing one call, '
         'one turn; `execute_tool` spans answer calls by `gen_ai.tool.call.id` (else name) or, '
         "without captured content, are the calls; results also from the next call's input; "
         'rewards from `gen_ai.evaluation.result` events (or `ingest.reward_attribute`).'),
    ),
)
