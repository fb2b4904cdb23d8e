"""mini-swe-agent trajectories (`<instance>.traj.json`, v1.x and v2.x)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "mini-swe-agent",
    counts="trajectory",
    detect=Ref("tracerl.data.formats.mini_swe_agent.detect:detect"),
    read=Ref("tracerl.data.formats.mini_swe_agent.read:read"),
    line_records=True,
    priority=45,
    readme=(
        ('a mini-swe-agent trajectory (`<instance>.traj.json`: `{info, messages, '
         'trajectory_format: "mini-swe-agent-1[.1]"}`, v1.x and v2.x), a list, or JSONL'),
        'a trajectory (episode id `instance_id`, else the file name without `.traj.json`)',
        ('each command run is a `bash` call (`{"command": …}`): v1 the one fenced command of '
         'the reply (```` ```bash ```` or `config.*.action_regex`; a reply with none or several '
         'ran nothing: a `message` row), v2 the reply\'s `extra.actions` (text models, chat '
         'tool calls sharing a turn, the Responses API\'s items); its output (the next user '
         'message, a `tool` message or `function_call_output`; the exit for the submitting '
         'command) is the observation, `exception_info` or a non-zero `returncode` the error; '
         'a reply a FormatError refused (`extra.model_response`) is a `message` row; '
         'behaviour policy `config.model.model_name`, reply `extra.cost`, instance cost, exit '
         'status, tokens. No reward.'),
    ),
)
