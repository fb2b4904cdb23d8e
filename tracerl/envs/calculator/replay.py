"""How replay follows the calculator: which tools are pure, which belong to an episode, and
how a served response moves the agent's state (task, x known, y known, result)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.envs.calculator.rules import (
    ACTIONS,
    ADD,
    FINAL,
    LOOKUP_X,
    LOOKUP_Y,
    MUL,
    NO_RESULT,
    SUB,
    TASK_INDEX,
    TASKS,
    apply_op,
    rows_of,
    state_codes,
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

    def state_codes(self, state: dict[str, np.ndarray], rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, the distinct encoded states): the rows the calculator's encoder
        gives the same states in a log (the result is right when it is the task's op of
        the looked-up x and y)."""
        task, stage, result = (state[k][rows] for k in ("task", "stage", "result"))
        x, y = state["x"][rows], state["y"][rows]
        right = np.select([task == i for i in range(len(TASKS))],
                          [apply_op(op, x, y) for op in TASKS]) == result
        ok = np.where(stage >= _STAGE_RESULT, np.where(right, 1, 2), 0)
        # The codes are a few hundred small ints: factorised by a dense table (no sort),
        # distinct states in ascending code as np.unique would give them.
        full = state_codes(task, stage, result) * 3 + ok
        present = np.bincount(full) > 0
        code = (np.cumsum(present) - 1)[full]
        at = np.zeros(int(present.sum()), dtype=np.int64)
        at[code] = np.arange(len(rows))  # one episode in each distinct state
        return code, rows_of(task[at], stage[at], result[at], right[at])

    def arguments(self, state: dict[str, np.ndarray], rows: np.ndarray,
                  actions: np.ndarray) -> np.ndarray:
        """Canonical JSON arguments of each call, filled from what the agent knows."""
        x, y, result = (_json(state[k][rows]) for k in ("x", "y", "result"))
        op_args = _concat('{"a":', x, ',"b":', y, "}")
        final_args = _concat('{"answer":', result, "}")
        is_op = (actions >= ADD) & (actions <= MUL)
        return np.where(is_op, op_args, np.where(actions == FINAL, final_args, "{}"))

    def parse_results(self, texts: np.ndarray) -> np.ndarray:
        """The number each distinct recorded answer holds (NO_RESULT: none), once per log:
        `apply` reads these integers, never the texts. A number's answer is read alone, so
        it does not depend on the answers beside it (pd.to_numeric types a whole column)."""
        return np.array([_number(text) for text in texts], dtype=np.int64)

    def apply(self, state: dict[str, np.ndarray], rows: np.ndarray, actions: np.ndarray,
              results: np.ndarray) -> None:
        """Store what each served call returned (`parse_results`' numbers) and advance the
        stage."""
        value = np.asarray(results, dtype=np.int64)
        for action, key, stage in ((LOOKUP_X, "x", _STAGE_X), (LOOKUP_Y, "y", _STAGE_Y)):
            hit = rows[actions == action]
            state[key][hit] = value[actions == action]
            state["stage"][hit] = stage
        is_op = (actions == ADD) | (actions == SUB) | (actions == MUL)
        state["result"][rows[is_op]] = value[is_op]
        state["stage"][rows[is_op]] = _STAGE_RESULT


def _number(text: object) -> int:
    number = pd.to_numeric(pd.Series([text], dtype=object), errors="coerce")
    return int(number.fillna(NO_RESULT).to_numpy().astype(np.int64)[0])


def _json(values: np.ndarray) -> np.ndarray:
    """JSON text of integers; the no-value marker becomes null."""
    return np.where(values == NO_RESULT, "null", values.astype(str))


def _concat(*parts: str | np.ndarray) -> np.ndarray:
    out = np.asarray(parts[0])
    for part in parts[1:]:
        out = np.char.add(out, part)
    return out
