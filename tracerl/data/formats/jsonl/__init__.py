"""Native step records (tracerl.data.schema), one per line."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "jsonl",
    counts="line",
    detect=Ref("tracerl.data.formats.jsonl.detect:detect"),
    line_records=True,
    propensities=True, rewards=True,
    priority=10,
    readme=(
        'JSONL (one per line, `.jsonl` / `.jsonl.gz`)',
        'a line (a step)',
        ("the step table's own fields: `episode_id`, `t`, `action{type, tool, arguments}`, "
         '`observation`, `reward`, `done`, `action_logprobs`, ... (see the schema above)'),
    ),
)
