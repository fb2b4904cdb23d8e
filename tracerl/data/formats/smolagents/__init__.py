"""smolagents run logs (memory steps)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "smolagents",
    counts="run",
    detect=Ref("tracerl.data.formats.smolagents.detect:detect"),
    read=Ref("tracerl.data.formats.smolagents.read:read"),
    line_records=True,
    rewards=True,
    priority=49,
    readme=(
        ('smolagents memory steps (`step.dict()`: a JSON list of them, a RunResult `{output, '
         'state, steps}`, or a benchmark runner\'s JSONL line `{question, prediction, '
         'intermediate_steps, task_id, ...}`)'),
        'a run (episode id `task_id`, else `<file>:<record>`)',
        ('an ActionStep is a turn: its `tool_calls` (a CodeAgent\'s `python_interpreter` with '
         'the code, a ToolCallingAgent\'s calls) the calls, `model_output` the content, '
         '`observations` the first call\'s result (parallel outputs come joined: counted as '
         '`joined_observations`), `error` its observation.error; a step without calls is a '
         '`message` row; a PlanningStep a `message` row (`extra.planning`); the TaskStep the '
         'user_goal; token_usage summed. Reward: a runner line\'s `is_correct` / `score`.'),
    ),
)
