"""The calculator's rules: a tool-using agent computes x op y without seeing x or y.

The agent must call lookup_x, then lookup_y, then exactly one of add/sub/mul, then final.
Any other call is invalid and ends the episode with reward -1; a right final answer earns
+1, a wrong one -1, and every valid call costs 0.02.

The state, as the calculator's encoder gives it (`tracerl.rl.encoding`): a row of
`VARIABLES` = (task, x known, y known, stored result, whether that result is right).
A policy reads the first four (`POLICY_VARIABLES`: what the chapter's policies see, keyed
``"mul|1|1|12"``); the fifth makes the reward of `final` a function of the state, which a
critic needs (``"mul|1|1|12|ok"``). Internally a state is also a small int code
(`STATE_KEYS[code]`, 282 of them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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

VARIABLES = ("task", "x_known", "y_known", "result", "result_ok")
# result: 0 none, else result - RESULT_MIN + 1; result_ok: 0 none, 1 right, 2 wrong
CARDINALITY = (len(TASKS), 2, 2, N_RESULTS + 1, 3)
POLICY_VARIABLES = (0, 1, 2, 3)


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


def apply_op(op: str, x: int, y: int) -> int:
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    return x * y


def _build_state_tables() -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    keys, tasks, stages, results = [], [], [], []
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
    return (tuple(keys), np.array(tasks, dtype=np.int8), np.array(stages, dtype=np.int8),
            np.array(results, dtype=np.int16))


# STATE_KEYS[code] is the key of internal state `code` (covers every reachable state):
# 9 pre-result states, then one per (task, result).
STATE_KEYS, CODE_TASK, CODE_STAGE, CODE_RESULT = _build_state_tables()


def state_codes(task: np.ndarray, stage: np.ndarray, result: np.ndarray) -> np.ndarray:
    """The internal state code of (task, stage, result), vectorised."""
    task, stage = np.asarray(task, dtype=np.int64), np.asarray(stage, dtype=np.int64)
    after = 9 + task * N_RESULTS + (np.asarray(result, dtype=np.int64) - RESULT_MIN)
    return np.where(stage >= STAGE_RESULT, after, task * 3 + np.minimum(stage, 2))


def rows_of(task: np.ndarray, stage: np.ndarray, result: np.ndarray,
            right: np.ndarray | None = None) -> np.ndarray:
    """Encoded state rows (`VARIABLES`) of (task, stage, stored result, result right?),
    vectorised; `right` only matters where a result is stored (None: unknown, 0)."""
    task, stage = np.asarray(task, dtype=np.int64), np.asarray(stage, dtype=np.int64)
    stored = stage >= STAGE_RESULT
    result = np.where(stored, np.asarray(result, dtype=np.int64) - RESULT_MIN + 1, 0)
    ok = np.zeros(len(task), dtype=np.int64) if right is None else \
        np.where(stored, np.where(np.asarray(right, dtype=bool), 1, 2), 0)
    return np.column_stack([task, stage >= 1, stage >= 2, result, ok]).astype(np.int64)


def stages_of(rows: np.ndarray) -> np.ndarray:
    """The stage of each encoded row."""
    rows = np.asarray(rows)
    return np.select([rows[:, 1] == 0, rows[:, 2] == 0, rows[:, 3] == 0],
                     [STAGE_START, STAGE_X_KNOWN, STAGE_Y_KNOWN], STAGE_RESULT)


def valid_mask(rows: np.ndarray) -> np.ndarray:
    """(m, N_ACTIONS) bool: the calls the environment accepts in each encoded state."""
    stage = stages_of(rows)
    out = np.zeros((len(stage), N_ACTIONS), dtype=bool)
    out[stage == STAGE_START, LOOKUP_X] = True
    out[stage == STAGE_X_KNOWN, LOOKUP_Y] = True
    out[np.ix_(stage == STAGE_Y_KNOWN, [ADD, SUB, MUL])] = True
    out[stage == STAGE_RESULT, FINAL] = True
    return out


def valid_actions(key: str) -> tuple[int, ...]:
    """Indices into ACTIONS of the calls the environment accepts in a keyed state."""
    _, x_known, y_known, result = parse_state_key(key)
    if not x_known:
        return (LOOKUP_X,)
    if not y_known:
        return (LOOKUP_Y,)
    if result is None:
        return (ADD, SUB, MUL)
    return (FINAL,)


def labels(rows: np.ndarray, variables: Sequence[int] | None = None) -> list[str]:
    """``mul|1|1|12`` per row (``|ok`` / ``|bad`` added when `variables` holds result_ok);
    rows hold the `variables` (default all), or every variable."""
    cols = tuple(range(len(VARIABLES))) if variables is None else tuple(variables)
    rows = np.asarray(rows)
    rows = (rows[:, cols] if rows.ndim == 2 and rows.shape[1] != len(cols) else rows).tolist()
    out = []
    for row in rows:
        v = dict(zip(cols, row, strict=True))
        key = state_key(TASKS[v[0]], v[1], v[2], None if v[3] == 0 else v[3] + RESULT_MIN - 1)
        out.append(key + ("", "|ok", "|bad")[v[4]] if 4 in v else key)
    return out


def keys_to_rows(keys: Sequence[str]) -> np.ndarray:
    """Encoded rows (result_ok 0: unknown) of policy keys such as ``"mul|1|1|12"``."""
    parsed = [parse_state_key(k) for k in keys]
    task = np.array([TASK_INDEX[p[0]] for p in parsed], dtype=np.int64)
    stage = np.array([0 if not p[1] else 1 if not p[2] else 2 if p[3] is None else 3
                      for p in parsed], dtype=np.int64)
    result = np.array([NO_RESULT if p[3] is None else p[3] for p in parsed], dtype=np.int64)
    return rows_of(task, stage, result).reshape(len(keys), len(VARIABLES))
