"""Inspect AI eval logs (`.json` and the zipped `.eval`)."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format(
    "inspect-ai",
    counts="sample",
    detect=Ref("tracerl.data.formats.inspect_ai.detect:detect"),
    read=Ref("tracerl.data.formats.inspect_ai.read:read"),
    rewards=True,
    priority=47,
    readme=(
        ('an Inspect AI eval log: `.json` (`{version, status, eval, plan, results, stats, '
         'samples}`, streamed a sample at a time) or `.eval` (a zip: `header.json` or a '
         'running log\'s `_journal/start.json`, `samples/<id>_epoch_<n>.json`; deflate or '
         'Zstandard entries)'),
        'a sample and epoch (episode id `<eval_id>:<sample id>:<epoch>`)',
        ('assistant `tool_calls[{id, function, arguments}]` are calls (parallel ones share a '
         'turn), `tool` messages answer by `tool_call_id` (`error.message` → observation.error); '
         '`attachment://` references put back; reasoning parts → `extra.reasoning`; behaviour '
         'policy the message\'s `model`, else `eval.model`; task, epoch (trial), model_usage '
         'tokens, total_time, the sample\'s error or limit. Reward: the sample\'s `scores` (each '
         'a component, `C`/`I`/`P`/`N`, booleans and numbers as value_to_float reads them; an '
         'object score\'s entries `<scorer>/<key>`), the reward `ingest.reward_evaluation`\'s '
         'scorer, else the first.'),
    ),
)
