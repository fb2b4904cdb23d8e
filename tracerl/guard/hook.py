"""The in-process adapter: a guard as an agent runtime's tool-guardrail hook.

A runtime that vets each tool call before it runs (a "tool input guardrail", a
`before_tool_call` callback, a middleware around the tool executor) needs a function of
(the conversation so far, the proposed call) that says allow or deny, and why. `hook`
makes one of a `Guard`:

    from tracerl.guard import Guard, hook
    guard = Guard.from_params(load_config("pipelines/support_desk/params.yaml"))
    check = hook(guard)                      # deny on "block: low value" only
    decision = check(messages, {"name": "issue_refund", "arguments": {...}})
    if not decision.allowed:
        ...  # tell the model decision.message instead of running the tool

Denied: "block: low value" and "block: unseen" (a tool, argument or history the logs
never showed, unless params say `guard.unseen: warn`). `deny_unsupported=True` also denies
calls the logs cannot vouch for at that state ("warn: unsupported"); by default they run,
with the warning in the decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracerl.guard.core import DENIED, WARN_UNSUPPORTED


@dataclass(frozen=True)
class Decision:
    allowed: bool
    verdict: str          # allow | warn: unsupported | block: low value | block: unseen
    message: str          # what to tell the model (or the log) about the call
    score: dict[str, Any]  # Guard.score's full answer


Hook = Callable[..., Decision]


def hook(guard: Any, *, deny_unsupported: bool = False) -> Hook:
    """A function (messages, call, context=None) -> Decision wrapping `guard.score`."""
    deny = set(DENIED) | ({WARN_UNSUPPORTED} if deny_unsupported else set())

    def check(messages: Sequence[Mapping[str, Any]], call: Mapping[str, Any],
              context: Mapping[str, str] | None = None) -> Decision:
        score = guard.score(messages, call, context)
        allowed = score["verdict"] not in deny
        message = (f"tool call {call['name']!r} {'allowed' if allowed else 'denied'} by "
                   f"the tracerl guard ({score['verdict']}): {score['reason']}")
        return Decision(allowed, score["verdict"], message, score)

    return check
