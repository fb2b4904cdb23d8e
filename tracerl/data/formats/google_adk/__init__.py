"""Google ADK sessions, eval sets and eval set results."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "google-adk",
    counts="session or eval case",
    detect=Ref("tracerl.data.formats.google_adk.detect:detect"),
    read=Ref("tracerl.data.formats.google_adk.read:read"),
    line_records=True,
    rewards=True,
    priority=42,
    readme=(
        ('a Google ADK session (`{id, app_name, user_id, state, events}`, as the API server '
         'and `adk web` export it), an eval set (`*.evalset.json`: `{eval_set_id, '
         'eval_cases}`) or an eval set result (`{eval_set_result_id, eval_case_results}`); '
         'snake_case or camelCase; a list or JSONL'),
        'a session; an eval case (`<eval set id>/<eval id>`)',
        ('a model event\'s `function_call` parts are one turn\'s calls, `function_response` '
         'parts answer by id (else name); text-only model events are `message` rows '
         '(`thought` parts → `extra.reasoning`); partial (streamed) events left out; an '
         'event\'s `error_code` a system event; a multi-agent session stays one episode, '
         'each step\'s agent `extra.author` (`transfer_to_agent` a call); eval cases\' '
         'invocations: `user_content`, '
         '`intermediate_data` (`invocation_events`, or `tool_uses` / `tool_responses` / '
         '`intermediate_responses`) and `final_response`; behaviour policy `model_version`; '
         '`usage_metadata` tokens. Reward (eval set results): `final_eval_status` (passed '
         '1.0, failed 0.0), metric scores its components (`ingest.reward_evaluation` names a '
         'metric to be the reward); a result\'s `session_details` events when present.'),
    ),
)
