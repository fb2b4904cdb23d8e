"""The calculator's logs: native step records (``tracerl.data.schema``) of a dataset's
behaviour policy, written as JSON lines."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import orjson

from tracerl.data.schema import canonical_json
from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.rules import (
    ACTIONS,
    DEFAULT_GAMMA,
    FINAL,
    LOOKUP_X,
    LOOKUP_Y,
    STAGE_RESULT,
    STAGE_X_KNOWN,
    STAGE_Y_KNOWN,
    STEP_COST,
    TASKS,
)
from tracerl.envs.calculator.simulator import Rollouts, simulate

PROMPT_VERSION = "calculator_prompt_v1"
TOOL_SCHEMA_VERSION = "calculator_tools_v1"
ENVIRONMENT_VERSION = "calculator_v1"
REWARD_SOURCE = "calculator_env"
BEHAVIOR_POLICY_PREFIX = "calculator_scripted_v1"

_OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


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
