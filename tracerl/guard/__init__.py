"""A guard for a tool-using agent: vet a proposed tool call against the logs before it runs.

`Guard.score(history, proposed_call)` gives the call's support under the logs (its logged
count and estimated behaviour probability at the encoded state), its Q and advantage under
the logging policy with intervals, and a verdict, `allow`, `warn: unsupported` or
`block: low value` (thresholds: params `guard:`, `tracerl.config.guard`).

- `core`: the table fitted on a dataset's transitions, vectorised judgements, and
  `GuardedPolicy` (a policy whose blocked draws are re-sampled);
- `guard`: `Guard` (load from a pipeline's artifacts, read the agent's messages, score);
- `hook`: the adapter for an agent runtime's tool-guardrail hook;
- `serve`: `tracerl guard serve`, the same on a loopback HTTP endpoint.
"""

from tracerl.guard.core import (
    ALLOW,
    BLOCK_LOW_VALUE,
    VERDICTS,
    WARN_UNSUPPORTED,
    GuardedPolicy,
    GuardTable,
)
from tracerl.guard.guard import Guard, GuardInputError, encode_call
from tracerl.guard.hook import Decision, hook

__all__ = ["ALLOW", "BLOCK_LOW_VALUE", "VERDICTS", "WARN_UNSUPPORTED", "Decision", "Guard",
           "GuardInputError", "GuardTable", "GuardedPolicy", "encode_call", "hook"]
