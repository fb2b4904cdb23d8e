"""The support desk's verifiers (declared in its `FIXTURE`). Each reads only the log
(the dialogue state `encoder.decode` rebuilds, and the task), never the simulator.

With weights task_success 1, tool_error e, step_cost c, escalate b (the simulator's
`error_cost`, `step_cost`, `escalate_reward`), relabel gives back the simulator's shaped
per-step reward: -c per action, -e per tool error, +1 on a successful reply_final,
+b on escalate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tracerl.data.verifiers import Verifier, as_numpy, column
from tracerl.envs.support_desk.encoder import decode
from tracerl.envs.support_desk.sim import (
    ESCALATE,
    REPLY_FINAL,
    S_CHECKED,
    S_LOOKED,
    S_RESOLVED,
    S_VIOLATED,
    STATUS,
)

SUCCESS = "support_desk_success@1"
# What `encoder.decode` reads: the dialogue state, the action and the task.
DECODED = ("episode_id", "t", "task", "action.type", "action.tool", "action.content",
           "observation.tool_result", "observation.error", "observation.events",
           "state.user_goal")


def _aligned(steps: pa.Table, order: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.zeros(steps.num_rows)
    out[order] = values
    return out


class SupportDeskSuccess(Verifier):
    """1.0 on a reply_final step that resolves the request by the rules, else 0.0.

    Resolved: no action tool was run against a rule earlier in the episode, and, for a
    status request, the order was looked up; for the others, the policy was checked and
    the action tool ran iff the check said eligible. The request is the task's
    (``support_desk/<intent>``)."""

    name, version, component = "support_desk_success", "1", "task_success"
    inputs = ("task; action.type/tool/content; observation.tool_result and user replies "
              "in observation.events (the dialogue state before reply_final)")

    columns = (*DECODED, "done", "reward", "reward_logged")

    def score(self, steps: pa.Table) -> np.ndarray:
        d = decode(steps)
        s = d.states
        if np.any(d.task_intent == 0):
            bad = np.flatnonzero(d.task_intent == 0)[0]
            raise ValueError(f"{self.id}: episode {d.episode_ids[d.episode[bad]]!r} has no "
                             f"support-desk task (expected task support_desk/<intent>)")
        right = np.where(s[:, S_CHECKED] == 1, s[:, S_RESOLVED] == 1,
                         (s[:, S_CHECKED] == 2) & (s[:, S_RESOLVED] == 0))
        done_right = np.where(d.task_intent == STATUS, s[:, S_LOOKED] == 1, right)
        ok = (d.action == REPLY_FINAL) & (s[:, S_VIOLATED] == 0) & done_right
        return _aligned(steps, d.order, ok.astype(float))

    def diagnostics(self, steps: pa.Table) -> dict[str, Any] | None:
        """Agreement with the reward the log carries on each done row (the simulator's)."""
        logged = as_numpy(column(steps, "reward_logged" if "reward_logged" in
                                 steps.column_names else "reward")).astype(float)
        done = as_numpy(column(steps, "done")).astype(bool) & ~np.isnan(logged)
        if not done.any():
            return None
        agree = float(np.mean(self.score(steps)[done] == logged[done]))
        return {"summary": f"agrees with the logged outcome on {agree:.1%} of "
                           f"{int(done.sum())} episodes", "agreement": agree,
                "episodes": int(done.sum())}


class SupportDeskToolError(Verifier):
    """-1.0 on a tool call whose result is an error (an `error` member), else 0.0."""

    name, version, component = "support_desk_tool_error", "1", "tool_error"
    inputs = "observation.tool_result; observation.error"
    columns = DECODED

    def score(self, steps: pa.Table) -> np.ndarray:
        d = decode(steps)
        return _aligned(steps, d.order, -d.error.astype(float))


class SupportDeskStepCost(Verifier):
    """-1.0 on every agent action (a message or a tool call)."""

    name, version, component = "support_desk_step_cost", "1", "step_cost"
    inputs = "one per step row"
    columns = ()

    def score(self, steps: pa.Table) -> np.ndarray:
        return np.full(steps.num_rows, -1.0)


class SupportDeskEscalate(Verifier):
    """1.0 on a hand-over to a human (the escalate message), else 0.0."""

    name, version, component = "support_desk_escalate", "1", "escalate"
    inputs = "action.type; action.content"
    columns = DECODED

    def score(self, steps: pa.Table) -> np.ndarray:
        d = decode(steps)
        return _aligned(steps, d.order, (d.action == ESCALATE).astype(float))

