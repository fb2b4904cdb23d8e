"""The calculator's state encoder (the fixture's `calculator`).

A step's state is read from its logged task and ``state.memory`` (the canonical JSON of
what the agent knew before the step: x, y, the stored result): the row of
`rules.VARIABLES` (task, x known, y known, result, whether the result is right, judged from
the looked-up values the log recorded, as calculator_exact@1 judges). The action is the
tool name, one of `rules.ACTIONS`; the valid actions are the environment's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.envs.calculator import rules
from tracerl.rl.encoding import Encoder, step_order, where
from tracerl.rl.transitions import Transitions


def _codes(column: pa.ChunkedArray, what: str, steps: pa.Table) -> tuple[np.ndarray, list]:
    if column.null_count:
        bad = int(np.flatnonzero(~column.is_valid().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"{what} is null in {column.null_count} row(s), e.g. "
                         f"{where(steps, bad)}")
    encoded = pc.dictionary_encode(column).combine_chunks()
    return encoded.indices.to_numpy().astype(np.int64), encoded.dictionary.to_pylist()


class CalculatorEncoder(Encoder):
    """Encoded states of the calculator toy (see the module docstring)."""

    name: ClassVar[str] = "calculator"
    variables = rules.VARIABLES
    cardinality = rules.CARDINALITY
    actions = rules.ACTIONS

    @property
    def policy_variables(self) -> tuple[int, ...]:
        return rules.POLICY_VARIABLES

    def valid_actions(self, rows: np.ndarray) -> np.ndarray:
        return rules.valid_mask(rows)

    def labels(self, rows: np.ndarray, variables: Sequence[int] | None = None) -> list[str]:
        return rules.labels(rows, variables)

    def state_rows(self, steps: pa.Table) -> np.ndarray:
        """The encoded state of each row (in table order)."""
        task_idx, tasks = _codes(steps.column("task"), "task", steps)
        mem_idx, memories = _codes(pc.struct_field(steps.column("state"), "memory"),
                                   "state.memory", steps)
        unknown = sorted(set(tasks) - set(rules.TASKS))
        if unknown:
            raise ValueError(f"not calculator tasks: {unknown}; expected {rules.TASKS}")
        # Parse each distinct (task, memory) once; rows only carry integer codes.
        combo, combo_idx = np.unique(task_idx * max(len(memories), 1) + mem_idx,
                                     return_inverse=True)
        distinct = np.zeros((len(combo), len(rules.VARIABLES)), dtype=np.int64)
        for i, c in enumerate(combo.tolist()):
            task, text = tasks[c // len(memories)], memories[c % len(memories)]
            memory = orjson.loads(text)
            if not isinstance(memory, dict):
                raise ValueError(f"state.memory is not a JSON object: {text!r}")
            result = memory.get("result")
            row = [rules.TASK_INDEX[task], "x" in memory, "y" in memory, 0, 0]
            if result is not None:
                row[3] = int(result) - rules.RESULT_MIN + 1
                right = rules.apply_op(task, memory.get("x"), memory.get("y")) == result \
                    if "x" in memory and "y" in memory else False
                row[4] = 1 if right else 2
            distinct[i] = row
        return distinct[combo_idx.reshape(-1)]

    def action_codes(self, steps: pa.Table) -> np.ndarray:
        """Index into ACTIONS of each row's tool (in table order)."""
        tool_idx, tools = _codes(pc.struct_field(steps.column("action"), "tool"),
                                 "action.tool", steps)
        unknown = sorted(set(tools) - set(rules.ACTIONS))
        if unknown:
            raise ValueError(f"not calculator tools: {unknown}; expected {rules.ACTIONS}")
        lookup = np.array([rules.ACTION_INDEX[t] for t in tools], dtype=np.int64)
        return lookup[tool_idx] if len(tools) else np.empty(0, dtype=np.int64)

    def transitions(self, steps: pa.Table) -> Transitions:
        order = step_order(steps)
        return self.build(steps, order, self.state_rows(steps)[order],
                          self.action_codes(steps)[order])
