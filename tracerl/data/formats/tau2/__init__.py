"""tau2-bench results: a results file, its directory layout, or one simulation."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "tau2",
    counts="simulation",
    detect=Ref("tracerl.data.formats.tau2.detect:detect"),
    read=Ref("tracerl.data.formats.tau2.read:read_tau2"),
    sidecars=Ref("tracerl.data.formats.tau2.read:sidecars"),
    shardable=True,
    rewards=True,
    priority=40,
    readme=(
        ('a `tau2 run` results file (`info`, `tasks`, `simulations`), its directory layout '
         '(`results.json` + `simulations/<id>.json`), or one simulation file alone'),
        ('a simulation (a file of the layout; an indexed simulation whose file is missing is '
         'quarantined)'),
        ("assistant `tool_calls[{id, name, arguments, requestor}]`; tool messages carry the call's "
         "`id`, `error: true` → observation.error; the user's tool calls (telecom) are events; a "
         "full-duplex run's `ticks` (no `messages`) are read as tau2 flattens them, a run of "
         'speaking chunks one message; reward `reward_info.reward`, components `reward_breakdown`; '
         'task definition under `extra.task`.'),
    ),
)
