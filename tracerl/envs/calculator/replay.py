"""How replay follows the calculator: which tools are pure, which belong to an episode, and
how a served response moves the agent's state (task, x known, y known, result)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.envs.calculator.env import (
    ACTIONS,
    ADD,
    FINAL,
    LOOKUP_X,
    LOOKUP_Y,
    MUL,
    N_RESULTS,
    NO_RESULT,
    RESULT_MIN,
    STATE_KEYS,
    SUB,
    TASK_INDEX,
)
from tracerl.ope.replay import EPISODE, PURE, TERMINAL

_STAGE_START, _STAGE_X, _STAGE_Y, _STAGE_RESULT = range(4)


class CalculatorReplay:
    """Replay adapter: lookups are served from the episode's own log (x and y are that
    episode's hidden values), arithmetic from any episode (a pure function of its
    arguments), and `final` is terminal (the verifier judges it)."""

    actions = ACTIONS
    tool_scope = {"lookup_x": EPISODE, "lookup_y": EPISODE, "add": PURE, "sub": PURE,
                  "mul": PURE, "final": TERMINAL}

    def initial_state(self, first_steps: pa.Table) -> dict[str, np.ndarray]:
        n = first_steps.num_rows
        task = pc.index_in(first_steps.column("task"), value_set=pa.array(list(TASK_INDEX)))
        return {
            "task": task.to_numpy(zero_copy_only=False).astype(np.int64),
            "stage": np.zeros(n, dtype=np.int64),
            "x": np.full(n, NO_RESULT, dtype=np.int64),
            "y": np.full(n, NO_RESULT, dtype=np.int64),
            "result": np.full(n, NO_RESULT, dtype=np.int64),
        }

    def state_keys(self, state: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
        codes = _state_codes(state["task"][rows], state["stage"][rows], state["result"][rows])
        return np.asarray(STATE_KEYS, dtype=object)[codes]

    def state_codes(self, state: dict[str, np.ndarray], rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, the distinct state keys): keys are made for distinct states only."""
        distinct, code = np.unique(
            _state_codes(state["task"][rows], state["stage"][rows], state["result"][rows]),
            return_inverse=True)
        return code.reshape(-1), np.asarray(STATE_KEYS, dtype=object)[distinct]

    def arguments(self, state: dict[str, np.ndarray], rows: np.ndarray,
                  actions: np.ndarray) -> np.ndarray:
        """Canonical JSON arguments of each call, filled from what the agent knows."""
        x, y, result = (_json(state[k][rows]) for k in ("x", "y", "result"))
        op_args = _concat('{"a":', x, ',"b":', y, "}")
        final_args = _concat('{"answer":', result, "}")
        is_op = (actions >= ADD) & (actions <= MUL)
        return np.where(is_op, op_args, np.where(actions == FINAL, final_args, "{}"))

    def apply(self, state: dict[str, np.ndarray], rows: np.ndarray, actions: np.ndarray,
              results: np.ndarray) -> None:
        """Store what each served call returned and advance the stage."""
        value = pd.to_numeric(pd.Series(results, dtype=object), errors="coerce")
        value = value.fillna(NO_RESULT).to_numpy().astype(np.int64)
        for action, key, stage in ((LOOKUP_X, "x", _STAGE_X), (LOOKUP_Y, "y", _STAGE_Y)):
            hit = rows[actions == action]
            state[key][hit] = value[actions == action]
            state["stage"][hit] = stage
        is_op = (actions == ADD) | (actions == SUB) | (actions == MUL)
        state["result"][rows[is_op]] = value[is_op]
        state["stage"][rows[is_op]] = _STAGE_RESULT


def _json(values: np.ndarray) -> np.ndarray:
    """JSON text of integers; the no-value marker becomes null."""
    return np.where(values == NO_RESULT, "null", values.astype(str))


def _concat(*parts: str | np.ndarray) -> np.ndarray:
    out = np.asarray(parts[0])
    for part in parts[1:]:
        out = np.char.add(out, part)
    return out


def _state_codes(task: np.ndarray, stage: np.ndarray, result: np.ndarray) -> np.ndarray:
    """The calculator's state code (see calculator._code), vectorised."""
    after = 9 + task * N_RESULTS + (result - RESULT_MIN)
    return np.where(stage == _STAGE_RESULT, after, task * 3 + np.minimum(stage, 2))
