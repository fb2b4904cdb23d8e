"""The calculator's simulator: roll a policy out, vectorised across episodes.

The policy is asked, at each step, once per distinct encoded state of the episodes still
running (`rules.rows_of`: what the calculator's encoder gives the same state in a log).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracerl.envs.calculator.behavior import checked_probs
from tracerl.envs.calculator.rules import (
    ADD,
    CODE_RESULT,
    CODE_STAGE,
    CODE_TASK,
    DEFAULT_GAMMA,
    FINAL,
    MUL,
    N_RESULTS,
    NO_RESULT,
    RESULT_MIN,
    STAGE_RESULT,
    STAGE_Y_KNOWN,
    STATE_KEYS,
    STEP_COST,
    SUB,
    TASKS,
    rows_of,
)

if TYPE_CHECKING:  # the one protocol (tracerl.rl.policy), for type hints only
    from tracerl.rl.policy import Policy

_STEP_DTYPES: dict[str, type] = {
    "episode": np.int64, "t": np.int8, "task": np.int8, "x": np.int16, "y": np.int16,
    "stage": np.int8, "state": np.int16, "action": np.int8, "prob": np.float64,
    "reward": np.float64, "task_success": np.int8, "valid": np.bool_, "done": np.bool_,
    "result": np.int16,
}


@dataclass(frozen=True)
class Rollouts:
    """Simulated episodes as flat per-step arrays, ordered by (episode, t).

    Per step: episode, t, task (index into TASKS), x, y, stage (0..3), state (code; the
    key is STATE_KEYS[code]), action (index into ACTIONS), prob (policy probability of
    the action taken), reward, task_success (+1/-1/0), valid, done, result (stored result
    after the step, NO_RESULT if none). Per episode (prefix ``ep_``): task, x, y, length,
    discounted return, success.
    """

    gamma: float
    episode: np.ndarray
    t: np.ndarray
    task: np.ndarray
    x: np.ndarray
    y: np.ndarray
    stage: np.ndarray
    state: np.ndarray
    action: np.ndarray
    prob: np.ndarray
    reward: np.ndarray
    task_success: np.ndarray
    valid: np.ndarray
    done: np.ndarray
    result: np.ndarray
    ep_task: np.ndarray
    ep_x: np.ndarray
    ep_y: np.ndarray
    ep_length: np.ndarray
    ep_return: np.ndarray
    ep_success: np.ndarray

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return len(self.ep_task)

    @property
    def n_steps(self) -> int:
        """Number of steps over all episodes."""
        return len(self.episode)

    def state_keys(self) -> np.ndarray:
        """State key string of each step (object array)."""
        return np.asarray(STATE_KEYS, dtype=object)[self.state]


def simulate(
    policy: Policy, n_episodes: int, seed: int, gamma: float = DEFAULT_GAMMA
) -> Rollouts:
    """Roll out `policy` for `n_episodes` episodes, vectorised across episodes."""
    if n_episodes < 0:
        raise ValueError("n_episodes must be >= 0")
    rng = np.random.default_rng(seed)
    n = n_episodes
    task = rng.integers(0, len(TASKS), n).astype(np.int8)
    x = rng.integers(1, 10, n).astype(np.int16)
    y = rng.integers(1, 10, n).astype(np.int16)
    truth = np.select([task == 0, task == 1], [x + y, x - y], x * y).astype(np.int16)

    stage = np.zeros(n, dtype=np.int8)
    result = np.full(n, NO_RESULT, dtype=np.int16)
    success = np.zeros(n, dtype=bool)
    active = np.arange(n)
    chunks: list[dict[str, np.ndarray]] = []
    t = 0
    # Every valid step advances the stage and final/invalid calls end the episode, so at
    # most four steps are taken; the loop runs over t, never over episodes.
    while active.size:
        s, tk, xa, ya, res = stage[active], task[active], x[active], y[active], result[active]
        codes = np.where(
            s < STAGE_RESULT,
            tk.astype(np.int32) * 3 + s,
            9 + tk.astype(np.int32) * N_RESULTS + (res.astype(np.int32) - RESULT_MIN),
        )
        # The policy is asked once per distinct encoded state (whether a stored result is
        # right is part of the state: the critic reads it, a policy may).
        right = np.where(s == STAGE_RESULT, np.where(res == truth[active], 1, 2), 0)
        uniq, inv = np.unique(codes.astype(np.int64) * 3 + right, return_inverse=True)
        u_code = uniq // 3
        probs = checked_probs(policy, rows_of(CODE_TASK[u_code], CODE_STAGE[u_code],
                                              CODE_RESULT[u_code], uniq % 3 == 1))
        cum = np.cumsum(probs, axis=1)
        # Dividing by the last column makes it exactly 1.0, and every trailing zero-prob
        # action shares that value, so u < 1 can never select a zero-probability action.
        cum /= cum[:, -1:]
        u = rng.random(active.size)
        act = (cum[inv] <= u[:, None]).sum(axis=1).astype(np.int8)
        prob = probs[inv, act]

        is_op = (act >= ADD) & (act <= MUL)
        expected = np.where(s == STAGE_RESULT, FINAL, s)
        valid = np.where(s == STAGE_Y_KNOWN, is_op, act == expected)
        is_final = valid & (s == STAGE_RESULT)
        correct = is_final & (res == truth[active])
        t_success = np.where(is_final, np.where(correct, 1, -1), 0).astype(np.int8)
        cost = np.where(valid, -STEP_COST, 0.0)
        tool_err = np.where(valid, 0.0, -1.0)
        reward = t_success + tool_err + cost  # reward = sum of its components

        op_value = np.select([act == ADD, act == SUB], [xa + ya, xa - ya], xa * ya)
        new_res = np.where(valid & (s == STAGE_Y_KNOWN), op_value, res).astype(np.int16)
        done = ~valid | is_final

        chunks.append(
            dict(
                episode=active, t=np.full(active.size, t, dtype=np.int8), task=tk, x=xa, y=ya,
                stage=s, state=codes.astype(np.int16), action=act, prob=prob, reward=reward,
                task_success=t_success, valid=valid, done=done, result=new_res,
            )
        )
        result[active] = new_res
        stage[active] = np.where(valid & (s < STAGE_RESULT), s + 1, s)
        success[active[correct]] = True
        active = active[~done]
        t += 1

    if chunks:
        steps = {k: np.concatenate([c[k] for c in chunks]).astype(dt, copy=False)
                 for k, dt in _STEP_DTYPES.items()}
    else:
        steps = {k: np.empty(0, dtype=dt) for k, dt in _STEP_DTYPES.items()}
    length = np.bincount(steps["episode"], minlength=n)
    # Chunks are in t order; place each step at its episode's start offset + t.
    start = np.cumsum(length) - length
    pos = start[steps["episode"]] + steps["t"]
    flat = {}
    for k, v in steps.items():
        out = np.empty_like(v)
        out[pos] = v
        flat[k] = out
    disc = flat["reward"] * np.power(gamma, flat["t"].astype(np.float64))
    ep_return = np.bincount(flat["episode"], weights=disc, minlength=n)
    return Rollouts(
        gamma=gamma, **flat, ep_task=task, ep_x=x, ep_y=y, ep_length=length,
        ep_return=ep_return, ep_success=success,
    )


def mc_value(
    policy: Policy, n_episodes: int, seed: int, gamma: float = DEFAULT_GAMMA
) -> dict:
    """Monte Carlo estimate of success (overall, per task) and discounted return, with SEs."""
    ro = simulate(policy, n_episodes, seed, gamma)

    def mean_se(v: np.ndarray) -> tuple[float, float]:
        if v.size == 0:
            return math.nan, math.nan
        se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
        return float(v.mean()), se

    succ = ro.ep_success.astype(np.float64)
    out: dict = {"n_episodes": n_episodes}
    out["success"], out["success_se"] = mean_se(succ)
    out["return"], out["return_se"] = mean_se(ro.ep_return)
    out["success_by_task"] = {}
    out["success_by_task_se"] = {}
    for ti, task in enumerate(TASKS):
        m, se = mean_se(succ[ro.ep_task == ti])
        out["success_by_task"][task] = m
        out["success_by_task_se"][task] = se
    return out
