"""Calculator toy environment: a tool-using agent computes x op y without seeing x or y.

The agent must call lookup_x, then lookup_y, then exactly one of add/sub/mul, then final.
Any other call is invalid and ends the episode with reward -1. This module holds the
environment, the logging behaviour policies, a vectorised simulator, an exact evaluator
(ground truth for off-policy estimators) and a logger that writes native step records
in the layout of ``tracerl.data.schema``.

States are keyed by strings such as ``"mul|1|1|12"`` (task, x known, y known, stored
result) so that any policy representation can be used; internally they are small ints.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import orjson

from tracerl.data.schema import canonical_json

if TYPE_CHECKING:  # the logs this module writes need no learning code
    from tracerl.policies.bellman import Policy  # the one protocol: action_probs(state_keys)

ACTIONS: tuple[str, ...] = ("lookup_x", "lookup_y", "add", "sub", "mul", "final")
N_ACTIONS = len(ACTIONS)
ACTION_INDEX: dict[str, int] = {a: i for i, a in enumerate(ACTIONS)}
TASKS: tuple[str, ...] = ("add", "sub", "mul")
TASK_INDEX: dict[str, int] = {t: i for i, t in enumerate(TASKS)}
VARIANTS: tuple[str, ...] = ("good_coverage", "no_mul_support")

LOOKUP_X, LOOKUP_Y, ADD, SUB, MUL, FINAL = range(N_ACTIONS)
# Stages of an episode; the strict tool order makes (task, stage, result) a full state.
STAGE_START, STAGE_X_KNOWN, STAGE_Y_KNOWN, STAGE_RESULT = range(4)

STEP_COST = 0.02
DEFAULT_GAMMA = 0.99
X_VALUES = range(1, 10)
Y_VALUES = range(1, 10)

# Stored results span sub's minimum (1 - 9) to mul's maximum (9 * 9).
RESULT_MIN, RESULT_MAX = -8, 81
N_RESULTS = RESULT_MAX - RESULT_MIN + 1
NO_RESULT = -1000  # sentinel in int arrays for "no result stored"


PROMPT_VERSION = "calculator_prompt_v1"
TOOL_SCHEMA_VERSION = "calculator_tools_v1"
ENVIRONMENT_VERSION = "calculator_v1"
REWARD_SOURCE = "calculator_env"
BEHAVIOR_POLICY_PREFIX = "calculator_scripted_v1"

_OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


# --------------------------------------------------------------------------- state keys


def state_key(task: str, x_known: bool, y_known: bool, result: int | None) -> str:
    """Stable string key of a state, e.g. ``"mul|1|1|12"`` or ``"add|1|0|-"``."""
    if task not in TASK_INDEX:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    res = "-" if result is None else str(int(result))
    return f"{task}|{int(bool(x_known))}|{int(bool(y_known))}|{res}"


def parse_state_key(key: str) -> tuple[str, bool, bool, int | None]:
    """Inverse of `state_key`: (task, x_known, y_known, result)."""
    try:
        task, xk, yk, res = key.split("|")
        if task not in TASK_INDEX or xk not in ("0", "1") or yk not in ("0", "1"):
            raise ValueError
        return task, xk == "1", yk == "1", None if res == "-" else int(res)
    except ValueError:
        raise ValueError(f"malformed calculator state key {key!r}") from None


def _code(task: int, stage: int, result: int) -> int:
    """Small-int state code: 9 pre-result states, then one per (task, result)."""
    if stage < STAGE_RESULT:
        return task * 3 + stage
    return 9 + task * N_RESULTS + (result - RESULT_MIN)


def _build_state_tables() -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    keys: list[str] = []
    tasks: list[int] = []
    stages: list[int] = []
    results: list[int] = []
    for ti, task in enumerate(TASKS):
        for stage in (STAGE_START, STAGE_X_KNOWN, STAGE_Y_KNOWN):
            keys.append(state_key(task, stage >= 1, stage >= 2, None))
            tasks.append(ti)
            stages.append(stage)
            results.append(NO_RESULT)
    for ti, task in enumerate(TASKS):
        for res in range(RESULT_MIN, RESULT_MAX + 1):
            keys.append(state_key(task, True, True, res))
            tasks.append(ti)
            stages.append(STAGE_RESULT)
            results.append(res)
    return (
        tuple(keys),
        np.array(tasks, dtype=np.int8),
        np.array(stages, dtype=np.int8),
        np.array(results, dtype=np.int16),
    )


# STATE_KEYS[code] is the key of internal state `code` (covers every reachable state).
STATE_KEYS, _CODE_TASK, _CODE_STAGE, _CODE_RESULT = _build_state_tables()
STATE_CODE: dict[str, int] = {k: i for i, k in enumerate(STATE_KEYS)}


def valid_actions(key: str) -> tuple[int, ...]:
    """Indices into ACTIONS of the calls the environment accepts in this state."""
    _, x_known, y_known, result = parse_state_key(key)
    if not x_known:
        return (LOOKUP_X,)
    if not y_known:
        return (LOOKUP_Y,)
    if result is None:
        return (ADD, SUB, MUL)
    return (FINAL,)


def _apply_op(op: str, x: int, y: int) -> int:
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    return x * y


# --------------------------------------------------------------------------- policies


def one_hot(action: str | int) -> np.ndarray:
    """Deterministic action distribution on one action (name or index)."""
    idx = ACTION_INDEX[action] if isinstance(action, str) else int(action)
    row = np.zeros(N_ACTIONS)
    row[idx] = 1.0
    return row


def _as_row(value: np.ndarray | Sequence[float], what: str) -> np.ndarray:
    row = np.asarray(value, dtype=np.float64)
    if row.shape != (N_ACTIONS,):
        raise ValueError(f"{what}: expected {N_ACTIONS} probabilities, got shape {row.shape}")
    if not np.all(np.isfinite(row)) or np.any(row < 0) or abs(row.sum() - 1.0) > 1e-9:
        raise ValueError(f"{what}: not a probability distribution: {row.tolist()}")
    return row


class TabularPolicy:
    """A lookup table from state key to action distribution.

    Keys missing from the table get `default`; with no default a missing key raises
    KeyError, so a policy never silently acts in states it was not defined for.
    """

    def __init__(
        self,
        table: Mapping[str, np.ndarray | Sequence[float]],
        default: np.ndarray | Sequence[float] | None = None,
    ) -> None:
        self.table: dict[str, np.ndarray] = {k: _as_row(v, k) for k, v in table.items()}
        self.default = None if default is None else _as_row(default, "default")

    @classmethod
    def deterministic(
        cls, actions: Mapping[str, str | int], default: str | int | None = None
    ) -> TabularPolicy:
        """Policy taking one fixed action (name or index) per state."""
        return cls(
            {k: one_hot(a) for k, a in actions.items()},
            None if default is None else one_hot(default),
        )

    def action_probs(self, state_keys: Sequence[str]) -> np.ndarray:
        """Rows of the table (or the default) for each key."""
        rows = []
        for key in state_keys:
            row = self.table.get(key, self.default)
            if row is None:
                raise KeyError(f"TabularPolicy has no entry for state {key!r} and no default")
            rows.append(row)
        return np.array(rows, dtype=np.float64).reshape(len(rows), N_ACTIONS)


def _scripted_action(task: str, stage: int) -> int:
    return (LOOKUP_X, LOOKUP_Y, ACTION_INDEX[task], FINAL)[stage]


def _stage_of(key: str) -> tuple[str, int]:
    task, x_known, y_known, result = parse_state_key(key)
    if not x_known:
        return task, STAGE_START
    if not y_known:
        return task, STAGE_X_KNOWN
    return task, STAGE_Y_KNOWN if result is None else STAGE_RESULT


@dataclass(frozen=True)
class BehaviorSpec:
    """The logging policy's knobs (``params.yaml``: ``calculator.behavior.<dataset>``).

    At each state the scripted call (lookup_x, lookup_y, the task's op, final) is taken with
    probability ``lookup`` / ``lookup`` / ``op`` / ``final``; otherwise a uniformly random
    call among those valid in the state. At the op stage the valid calls are restricted to
    ``ops`` (the ops the logger may use); when the task's op is not among them the logger
    picks uniformly among ``ops``. At lookup and final stages exactly one call is valid, so
    ``lookup`` and ``final`` leave the distribution unchanged (the noise has nowhere to go):
    they are kept as knobs so the chapter's parametrisation is visible and testable.
    """

    lookup: float = 0.88
    op: float = 0.62
    final: float = 0.90
    ops: tuple[str, ...] = TASKS

    def __post_init__(self) -> None:
        for name in ("lookup", "op", "final"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"behaviour probability {name}={p!r} must lie in [0, 1]")
        ops = tuple(self.ops)
        unknown = sorted(set(ops) - set(TASKS))
        if not ops or unknown or len(set(ops)) != len(ops):
            raise ValueError(f"behaviour ops {list(ops)!r}: expected distinct ops among {TASKS}")
        object.__setattr__(self, "ops", ops)

    @classmethod
    def from_params(cls, values: Mapping[str, object] | None) -> BehaviorSpec:
        """From a params mapping (missing keys take the chapter's defaults)."""
        values = dict(values or {})
        unknown = sorted(set(values) - {"lookup", "op", "final", "ops"})
        if unknown:
            raise ValueError(f"unknown behaviour keys {unknown}; expected lookup, op, final, ops")
        if "ops" in values:
            values["ops"] = tuple(values["ops"])  # type: ignore[arg-type]
        return cls(**values)  # type: ignore[arg-type]


# The chapter's two logging regimes; params.yaml may override any knob of either.
DEFAULT_BEHAVIOR: dict[str, BehaviorSpec] = {
    "good_coverage": BehaviorSpec(),
    "no_mul_support": BehaviorSpec(ops=("add", "sub")),
}


def _behavior_row(spec: BehaviorSpec, task: str, stage: int) -> np.ndarray:
    if stage != STAGE_Y_KNOWN:
        # Only the scripted call is valid here, so noise over valid calls adds nothing:
        # set probability 1 exactly so that its log-probability is exactly 0.
        return one_hot(_scripted_action(task, stage))
    allowed = [ACTION_INDEX[op] for op in spec.ops]
    row = np.zeros(N_ACTIONS)
    if task not in spec.ops:
        row[allowed] = 1.0 / len(allowed)
        return row
    row[allowed] = (1.0 - spec.op) / len(allowed)
    row[ACTION_INDEX[task]] += spec.op
    return row


class BehaviorPolicy:
    """The scripted-with-noise logging policy of a dataset (see `BehaviorSpec`).

    ``BehaviorPolicy("no_mul_support")`` is the chapter's regime of that name; pass `spec`
    to log with other probabilities or ops.
    """

    def __init__(self, variant: str, spec: BehaviorSpec | None = None) -> None:
        if spec is None:
            if variant not in DEFAULT_BEHAVIOR:
                raise ValueError(
                    f"unknown behaviour variant {variant!r}; expected one of {VARIANTS} "
                    "or an explicit BehaviorSpec")
            spec = DEFAULT_BEHAVIOR[variant]
        self.variant = variant
        self.spec = spec
        self.table: dict[str, np.ndarray] = {}
        for key in STATE_KEYS:
            task, stage = _stage_of(key)
            self.table[key] = _behavior_row(spec, task, stage)

    def action_probs(self, state_keys: Sequence[str]) -> np.ndarray:
        """Behaviour distribution for each key (computed on the fly for unusual keys)."""
        rows = []
        for key in state_keys:
            row = self.table.get(key)
            if row is None:
                # Keys outside STATE_KEYS are unreachable, but answer them consistently.
                row = _behavior_row(self.spec, *_stage_of(key))
            rows.append(row)
        return np.array(rows, dtype=np.float64).reshape(len(rows), N_ACTIONS)


def scripted_optimal_policy() -> TabularPolicy:
    """Deterministic optimal policy: lookup_x, lookup_y, the task's op, final."""
    actions = {}
    for code, key in enumerate(STATE_KEYS):
        task = TASKS[_CODE_TASK[code]]
        actions[key] = _scripted_action(task, int(_CODE_STAGE[code]))
    return TabularPolicy.deterministic(actions)


def _checked_probs(policy: Policy, keys: Sequence[str]) -> np.ndarray:
    probs = np.asarray(policy.action_probs(keys), dtype=np.float64)
    if probs.shape != (len(keys), N_ACTIONS):
        raise ValueError(
            f"policy returned shape {probs.shape}, expected ({len(keys)}, {N_ACTIONS})"
        )
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError("policy returned negative or non-finite probabilities")
    if np.any(np.abs(probs.sum(axis=1) - 1.0) > 1e-6):
        raise ValueError("policy returned rows that do not sum to 1")
    return probs


# --------------------------------------------------------------------------- simulator


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
        uniq, inv = np.unique(codes, return_inverse=True)
        probs = _checked_probs(policy, [STATE_KEYS[c] for c in uniq])
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


# --------------------------------------------------------------------------- exact value


def exact_value(policy: Policy, gamma: float = DEFAULT_GAMMA) -> dict:
    """Exact success probability (overall, per task) and expected discounted return.

    Enumerates all 243 equally likely starts and every branch the policy can take.
    """
    cache: dict[str, np.ndarray] = {}

    def probs_of(key: str) -> np.ndarray:
        row = cache.get(key)
        if row is None:
            row = cache[key] = _checked_probs(policy, [key])[0]
        return row

    def value(task: str, stage: int, x: int, y: int, res: int | None) -> tuple[float, float]:
        """(success probability, expected discounted return) from this state."""
        key = state_key(task, stage >= 1, stage >= 2, res)
        row = probs_of(key)
        succ = ret = 0.0
        for a in np.flatnonzero(row > 0):
            p = float(row[a])
            if stage == STAGE_Y_KNOWN and ADD <= a <= MUL:
                nxt = value(task, STAGE_RESULT, x, y, _apply_op(ACTIONS[a], x, y))
                succ += p * nxt[0]
                ret += p * (-STEP_COST + gamma * nxt[1])
            elif stage < STAGE_Y_KNOWN and a == stage:
                nxt = value(task, stage + 1, x, y, None)
                succ += p * nxt[0]
                ret += p * (-STEP_COST + gamma * nxt[1])
            elif stage == STAGE_RESULT and a == FINAL:
                ok = res == _apply_op(task, x, y)
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


# --------------------------------------------------------------------------- logging


def log_records(name: str, n_episodes: int, seed: int, test_fraction: float,
                spec: BehaviorSpec | None = None, gamma: float = DEFAULT_GAMMA
                ) -> Iterator[dict]:
    """Native step records (schema.LOGGED_FIELDS) of dataset `name`'s behaviour policy.

    `spec` defaults to the chapter's regime of that name (`DEFAULT_BEHAVIOR`).
    """
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"test_fraction must be in [0, 1], got {test_fraction}")
    ro = simulate(BehaviorPolicy(name, spec), n_episodes, seed, gamma)
    # A separate stream from the simulator's, so the split does not perturb the episodes.
    is_test = np.random.default_rng([seed, 1]).random(n_episodes) < test_fraction
    return _records(ro, name, is_test.tolist())


def _records(ro: Rollouts, name: str, is_test: list[bool]) -> Iterator[dict]:
    behavior = f"{BEHAVIOR_POLICY_PREFIX}/{name}"
    goals = [f"Compute x {_OP_SYMBOL[t]} y with the tools" for t in TASKS]
    cols = [ro.episode, ro.t, ro.task, ro.x, ro.y, ro.stage, ro.action, ro.prob, ro.reward,
            ro.task_success, ro.valid, ro.done, ro.result]
    history: list[str] = []
    memory: dict[str, int] = {}
    for ep, t, ti, x, y, stage, a, p, r, ts, valid, done, res in zip(
        *(c.tolist() for c in cols), strict=True
    ):
        if t == 0:
            history = []
            memory = {}
        tool = ACTIONS[a]
        if a in (LOOKUP_X, LOOKUP_Y):
            args: dict = {}
        elif a == FINAL:
            args = {"answer": res if stage == STAGE_RESULT else None}
        else:
            args = {"a": x if stage >= STAGE_X_KNOWN else None,
                    "b": y if stage >= STAGE_Y_KNOWN else None}
        record = {
            "episode_id": f"{name}-{ep:06d}",
            "t": t,
            "task": TASKS[ti],
            "state": {
                "user_goal": goals[ti],
                "conversation_history": "\n".join(history),
                "available_tools": list(ACTIONS),
                "memory": canonical_json(memory),
                "retrieved_context": None,
            },
            "action": {"type": "tool_call", "tool": tool, "arguments": args},
            "observation": None,  # filled below
            "reward": r,
            "done": done,
            "prompt_version": PROMPT_VERSION,
            "tool_schema_version": TOOL_SCHEMA_VERSION,
            "environment_version": ENVIRONMENT_VERSION,
            "action_logprobs": math.log(p) if p < 1.0 else 0.0,
            "reward_components": None,  # filled below
            "reward_source": REWARD_SOURCE,
            "verifier_version": None,
            "split": "test" if is_test[ep] else "train",
            "metadata": {
                "behavior_policy": behavior,
                "temperature": None,
                "latency_ms": None,
                "cost_usd": 0.0,
                "safety_flags": [],
            },
        }
        if valid:
            # tool_result stays an int (or None) so pyarrow.json infers one column type.
            if a == LOOKUP_X:
                tool_result: int | None = x
                history.append(f"lookup_x() -> {x}")
                memory["x"] = x
            elif a == LOOKUP_Y:
                tool_result = y
                history.append(f"lookup_y() -> {y}")
                memory["y"] = y
            elif a == FINAL:
                tool_result = None
            else:
                tool_result = res
                history.append(f"{tool}(a={x}, b={y}) -> {res}")
                memory["result"] = res
            record["observation"] = {"tool_result": tool_result, "error": None}
            record["reward_components"] = {
                "task_success": float(ts),
                "format_valid": 1.0,
                "tool_error_penalty": 0.0,
                "cost_penalty": -STEP_COST,
            }
        else:
            record["observation"] = {
                "tool_result": None,
                "error": f"invalid call: {tool} not allowed in this state",
            }
            record["reward_components"] = {
                "task_success": 0.0,
                "format_valid": 0.0,
                "tool_error_penalty": -1.0,
                "cost_penalty": 0.0,
            }
        yield record


def write_jsonl(path: str | os.PathLike[str], records: Iterable[dict]) -> int:
    """Write records as JSON lines atomically (temp file + os.replace); return the count."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    count = 0
    # os.open with mode 0o666 honours the umask, unlike tempfile's private 0o600 files.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            buf: list[bytes] = []
            for rec in records:
                buf.append(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
                count += 1
                if len(buf) >= 8192:  # batch small writes; keeps memory bounded
                    f.write(b"".join(buf))
                    buf.clear()
            f.write(b"".join(buf))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return count
