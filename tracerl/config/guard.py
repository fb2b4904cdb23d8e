"""params `guard:`: how `tracerl.guard` judges a proposed tool call (and where it serves).

A call is *unsupported* when the logs hold fewer than `min_count` steps taking it at the
encoded state, or its estimated behaviour probability there is below `min_behavior_prob`
(`tracerl.ope.support.covered` for a deterministic proposal): its value is not known, so
the guard warns. A supported call is *blocked* when the upper end of its advantage's
interval (level `confidence`) under the logging policy is below `block_advantage`: the
logs say, with that confidence, that it does worse than the logging policy's own average
at that state by more than the margin. Q, the advantage and their intervals are the one
step credit's (`tracerl.rl.credit`: the delta method, one unseen outcome per (state, action)).

What the logs never showed is denied by default (`unseen: deny`, verdict ``block: unseen``):
a tool no logged step called, an argument path never logged with that tool or a number
outside its logged range (`tracerl.guard.arguments`), and a history the encoder cannot place.
`unseen: warn` lets them through as ``warn: unsupported``.

`tracerl guard serve` answers only requests bearing `Authorization: Bearer <token>` when the
environment variable `token_env` names is set, refuses bodies over `max_body_bytes` (413),
and logs to `log` (relative to the directory it runs in).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tracerl.config.base import PositiveInt, Probability, Section


class GuardSettings(Section):
    dataset: str | None = None         # whose logs judge (default: the pipeline's first)
    min_count: PositiveInt = 1         # logged steps taking the call at the state
    min_behavior_prob: Probability = 0.05  # = ope.min_behavior_prob's notion of support
    block_advantage: float = -0.05     # block when the advantage's upper bound is below
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    iterations: PositiveInt = 1000     # the critic's backups at most (stops at tol 1e-10)
    host: str = "127.0.0.1"            # `tracerl guard serve`: loopback only
    port: Annotated[int, Field(ge=1, le=65535)] = 8765
    unseen: Literal["deny", "warn"] = "deny"  # a tool, argument or history never logged
    token_env: str = "TRACERL_GUARD_TOKEN"  # set: requests need Authorization: Bearer <it>
    max_body_bytes: PositiveInt = 1_000_000  # a larger request body is refused (413)
    log: str = ".tracerl/guard.log"    # the server's log (requests, errors, stops)
