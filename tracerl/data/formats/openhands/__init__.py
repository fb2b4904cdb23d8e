"""OpenHands event streams (V0 actions/observations, the Agent SDK's events)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "openhands",
    counts="conversation",
    detect=Ref("tracerl.data.formats.openhands.detect:detect"),
    read=Ref("tracerl.data.formats.openhands.read:read"),
    sidecars=Ref("tracerl.data.formats.openhands.read:sidecars"),
    line_records=True,
    priority=48,
    readme=(
        ('OpenHands events: a JSON array (a trajectory export), `{trajectory: [...]}`, an '
         'evaluation\'s `output.jsonl` (`{instance_id, history}` a line), or an `events/` '
         'folder of one event a file (V0 `sessions/<id>/events/<n>.json`, the SDK\'s '
         '`conversations/<id>/events/event-<n>-<uuid>.json`: read from its first file)'),
        'a conversation (episode id `instance_id`, else the conversation folder, else the file)',
        ('V0: an agent action with `tool_call_metadata` is a call (its function and the '
         'arguments in `model_response`), or without function calling a runnable action '
         '(tool = the action); SDK: an `ActionEvent` (`tool_name`, `tool_call`); calls of one '
         'model response share a turn; observations answer by `tool_call_id`, else `cause` '
         '(`error` observations, `success: false`, a non-zero exit code, SDK `is_error`, '
         '`AgentErrorEvent`, `UserRejectObservation` → observation.error); agent messages '
         '(and V0 `finish` without a call) are `message` rows, user messages and the system '
         'prompt events; state changes, recalls and condensations no steps; behaviour policy '
         'the model response\'s `model`; accumulated `llm_metrics` cost and tokens. No reward.'),
    ),
)
