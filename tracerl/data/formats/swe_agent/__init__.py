"""SWE-agent trajectories (`<instance_id>.traj`, 0.x and 1.x)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "swe-agent",
    counts="trajectory",
    detect=Ref("tracerl.data.formats.swe_agent.detect:detect"),
    read=Ref("tracerl.data.formats.swe_agent.read:read"),
    line_records=True,
    priority=46,
    readme=(
        ('a SWE-agent `.traj` file (`{trajectory, history, info, replay_config?}`, 0.x and '
         '1.x; a RetryAgent run\'s `attempts`), a list, or JSONL'),
        ('a trajectory (episode id: the file name without `.traj`; each attempt '
         '`<id>/attempt-<k>`, the chosen copy at the top level not read twice)'),
        ('each step with an `action` is a `bash` call (`{"command": action}`: SWE-agent runs '
         'every action, its tools included, as a shell command), the step\'s `thought` its '
         'content, `observation` its result; a step without an action (an exit on an error, '
         'autosubmitted) is a `message` row, its observation an event; the history\'s system '
         'and task messages (demonstrations left out) are the state; behaviour policy '
         '`replay_config.agent.model.name`; exit status, instance cost, tokens sent/received. '
         'No reward.'),
    ),
)
