"""ATIF trajectories (Harbor, v1.0-v1.8)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "atif",
    counts="trajectory",
    detect=Ref("tracerl.data.formats.atif.detect:detect"),
    read=Ref("tracerl.data.formats.atif.read:read_atif"),
    sidecars=Ref("tracerl.data.formats.atif.read:sidecars"),
    line_records=True,
    propensities=True, rewards=True,
    priority=50,
    readme=(
        'an ATIF trajectory (v1.0–v1.8), a list, or JSONL',
        ('a top-level trajectory (each embedded `subagent_trajectories` entry is an episode of its '
         'own, `<id>/<sub id>`)'),
        ('agent steps are turns (`message`, `tool_calls[{tool_call_id, function_name, '
         'arguments}]`), `observation.results` answer by `source_call_id` (`is_error`, at the '
         'result or in its `extra`, → observation.error); a trajectory continued in another file '
         "(`continued_trajectory_ref`) is one episode, the continuation's `is_copied_context` "
         "steps left out; `metrics.logprobs` sum to the turn's behaviour log-probability "
         '(`action_logprobs` of its first row, 0.0 on the others); `cost_usd`, step `model_name`; '
         'system/user steps are events. Reward: a numeric `reward` (root, `extra`, '
         "`final_metrics.extra`) or the Harbor trial's `result.json` (`verifier_result.rewards`) "
         "beside `agent/`. A Harbor trial's and job's `config.json`/`result.json`, "
         '`verifier/reward.json` and `agent/episode-<n>/debug.json` are read with the trajectory, '
         'not as inputs.'),
    ),
)
