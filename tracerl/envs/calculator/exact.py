"""The calculator's exact evaluator: the ground truth of every off-policy estimate.

Every one of the 243 equally likely starts and every branch a policy can take are
enumerated (the policy asked once per distinct encoded state): no sampling error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tracerl.envs.calculator.behavior import checked_probs
from tracerl.envs.calculator.rules import (
    ACTIONS,
    ADD,
    DEFAULT_GAMMA,
    FINAL,
    MUL,
    NO_RESULT,
    STAGE_RESULT,
    STAGE_START,
    STAGE_Y_KNOWN,
    STEP_COST,
    TASK_INDEX,
    TASKS,
    X_VALUES,
    Y_VALUES,
    apply_op,
    rows_of,
)

if TYPE_CHECKING:  # the one protocol (tracerl.rl.policy), for type hints only
    from tracerl.rl.policy import Policy


def exact_value(policy: Policy, gamma: float = DEFAULT_GAMMA) -> dict:
    """Exact success probability (overall, per task) and expected discounted return.

    Enumerates all 243 equally likely starts and every branch the policy can take.
    """
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def probs_of(task: str, stage: int, res: int | None, right: bool) -> np.ndarray:
        row = tuple(rows_of([TASK_INDEX[task]], [stage], [NO_RESULT if res is None else res],
                            [right])[0].tolist())
        probs = cache.get(row)
        if probs is None:
            probs = cache[row] = checked_probs(policy, np.array([row]))[0]
        return probs

    def value(task: str, stage: int, x: int, y: int, res: int | None) -> tuple[float, float]:
        """(success probability, expected discounted return) from this state."""
        row = probs_of(task, stage, res, res is not None and res == apply_op(task, x, y))
        succ = ret = 0.0
        for a in np.flatnonzero(row > 0):
            p = float(row[a])
            if stage == STAGE_Y_KNOWN and ADD <= a <= MUL:
                nxt = value(task, STAGE_RESULT, x, y, apply_op(ACTIONS[a], x, y))
                succ += p * nxt[0]
                ret += p * (-STEP_COST + gamma * nxt[1])
            elif stage < STAGE_Y_KNOWN and a == stage:
                nxt = value(task, stage + 1, x, y, None)
                succ += p * nxt[0]
                ret += p * (-STEP_COST + gamma * nxt[1])
            elif stage == STAGE_RESULT and a == FINAL:
                ok = res == apply_op(task, x, y)
                succ += p * ok
                ret += p * ((1.0 if ok else -1.0) - STEP_COST)
            else:
                ret += p * -1.0  # invalid call: -1 and the episode ends
        return succ, ret

    by_task_s: dict[str, float] = {}
    by_task_r: dict[str, float] = {}
    n_xy = len(X_VALUES) * len(Y_VALUES)
    for task in TASKS:
        s_sum = r_sum = 0.0
        for x in X_VALUES:
            for y in Y_VALUES:
                s, r = value(task, STAGE_START, x, y, None)
                s_sum += s
                r_sum += r
        by_task_s[task] = s_sum / n_xy
        by_task_r[task] = r_sum / n_xy
    return {
        "success": sum(by_task_s.values()) / len(TASKS),
        "success_by_task": by_task_s,
        "return": sum(by_task_r.values()) / len(TASKS),
        "return_by_task": by_task_r,
    }
