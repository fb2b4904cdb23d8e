"""The calculator fixture's featurizers (declared by name in its `FIXTURE`).

- `calculator`: state key ``"task|x_known|y_known|result"`` from the logged task and
  ``state.memory``, action key the tool name, with the environment's valid-action rules.
- `calculator_critic`: the same key refined for a critic (whether the stored result is
  right).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import orjson
import pyarrow as pa

from tracerl.envs.calculator import env as calculator
from tracerl.features import _dictionary, _keys, _recode, _struct_field


class CalculatorFeaturizer:
    """State and action keys of the calculator toy, read from its logged step table.

    The state key is ``calculator.state_key(task, "x" in memory, "y" in memory,
    memory.get("result"))``, where ``state.memory`` is the canonical JSON of what the agent
    knew before the step. The action key is the tool name, one of ``calculator.ACTIONS``.
    """

    name: ClassVar[str] = "calculator"
    actions: ClassVar[tuple[str, ...]] = calculator.ACTIONS

    def get_params(self) -> dict[str, Any]:
        """No parameters."""
        return {}

    def state_codes(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(code per row into the sorted key vocabulary, the vocabulary)."""
        task_idx, tasks = _dictionary(steps.column("task"), "task")
        mem_idx, memories = _dictionary(_struct_field(steps, "state", "memory"), "state.memory")
        # Parse each distinct memory string once; rows only carry integer codes.
        known = []
        for text in memories:
            memory = orjson.loads(text)
            if not isinstance(memory, dict):
                raise ValueError(f"state.memory is not a JSON object: {text!r}")
            known.append(("x" in memory, "y" in memory, memory.get("result")))
        combo, combo_idx = np.unique(task_idx * len(memories) + mem_idx, return_inverse=True)
        labels = [
            calculator.state_key(tasks[c // len(memories)], *known[c % len(memories)])
            for c in combo.tolist()
        ]
        return _recode(combo_idx, labels)

    def state_keys(self, steps: pa.Table) -> np.ndarray:
        """Key of the state before each row's action, e.g. ``"mul|1|1|12"``."""
        return _keys(*self.state_codes(steps))

    def action_codes(self, steps: pa.Table) -> np.ndarray:
        """Index into ACTIONS of each row's tool."""
        tool_idx, tools = _dictionary(_struct_field(steps, "action", "tool"), "action.tool")
        unknown = sorted(set(tools) - set(calculator.ACTIONS))
        if unknown:
            raise ValueError(f"not calculator tools: {unknown}; expected {calculator.ACTIONS}")
        lookup = np.array([calculator.ACTION_INDEX[t] for t in tools], dtype=np.int32)
        return lookup[tool_idx] if len(tools) else np.empty(0, dtype=np.int32)

    def action_keys(self, steps: pa.Table) -> np.ndarray:
        """Tool name of each row."""
        return np.asarray(self.actions, dtype=str)[self.action_codes(steps)]

    def valid_actions(self, state_key: str) -> tuple[int, ...]:
        """Indices into ACTIONS the environment accepts in this state."""
        return calculator.valid_actions(state_key)


class CalculatorCriticFeaturizer(CalculatorFeaturizer):
    """The policy's state key refined for a critic: at the result stage it adds whether the
    stored result is right (``"add|1|1|5|ok"``), judged from the looked-up values the log
    recorded (what calculator_exact@1 reads).

    Why: the policy's key drops x and y, so one key mixes right and wrong results, in
    proportions set by the behaviour policy. A critic fitted on it is biased for any other
    policy; with the bit, the reward of `final` is a function of the state.
    """

    name: ClassVar[str] = "calculator_critic"

    def state_codes(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        task_idx, tasks = _dictionary(steps.column("task"), "task")
        mem_idx, memories = _dictionary(_struct_field(steps, "state", "memory"), "state.memory")
        combo, combo_idx = np.unique(task_idx * len(memories) + mem_idx, return_inverse=True)
        labels = []
        for c in combo.tolist():
            task, memory = tasks[c // len(memories)], orjson.loads(memories[c % len(memories)])
            key = calculator.state_key(task, "x" in memory, "y" in memory, memory.get("result"))
            if memory.get("result") is not None:
                right = calculator._apply_op(task, memory.get("x"), memory.get("y"))
                key += "|ok" if memory["result"] == right else "|bad"
            labels.append(key)
        return _recode(combo_idx, labels)

    @staticmethod
    def policy_key(critic_key: str) -> str:
        """The policy's state key inside a critic key."""
        return critic_key.removesuffix("|ok").removesuffix("|bad")

    def valid_actions(self, state_key: str) -> tuple[int, ...]:
        return calculator.valid_actions(self.policy_key(state_key))
