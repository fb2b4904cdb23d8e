"""A guard for a tool-using agent: vet a proposed tool call against the logs before it runs.

`Guard.score(history, proposed_call)` gives the call's support under the logs (its logged
count and estimated behaviour probability at the encoded state), its Q and advantage under
the logging policy with intervals, its arguments against the logged ones, and a verdict,
`allow`, `warn: unsupported`, `block: low value` or `block: unseen` (what the logs never
showed: denied by default; thresholds: params `guard:`, `tracerl.config.guard`).

- `arguments`: the logged arguments of each tool, and a proposed call's against them;
- `core`: the table fitted on a dataset's transitions, vectorised judgements, and
  `GuardedPolicy` (a policy whose blocked draws are re-sampled);
- `guard`: `Guard` (load from a pipeline's artifacts, read the agent's messages, score);
- `hook`: the adapter for an agent runtime's tool-guardrail hook;
- `serve`: `tracerl guard serve`, the same on a loopback HTTP endpoint.
"""

from tracerl.guard.arguments import ArgumentRanges
from tracerl.guard.core import (
    ALLOW,
    BLOCK_LOW_VALUE,
    BLOCK_UNSEEN,
    VERDICTS,
    WARN_UNSUPPORTED,
    GuardedPolicy,
    GuardTable,
)
from tracerl.guard.guard import Guard, GuardInputError, encode_call
from tracerl.guard.hook import Decision, hook

__all__ = ["ALLOW", "BLOCK_LOW_VALUE", "BLOCK_UNSEEN", "VERDICTS", "WARN_UNSUPPORTED",
           "ArgumentRanges", "Decision", "Guard", "GuardInputError", "GuardTable",
           "GuardedPolicy", "encode_call", "hook"]
