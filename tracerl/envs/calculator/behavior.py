"""The calculator's policies given by hand: the logging (behaviour) policies of its
datasets, the scripted optimum, and lookup tables keyed like the chapter (``mul|1|1|12``).
Each takes encoded state rows (`rules.VARIABLES`), like every `tracerl.rl.policy.Policy`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tracerl.envs.calculator.rules import (
    ACTION_INDEX,
    FINAL,
    LOOKUP_X,
    LOOKUP_Y,
    N_ACTIONS,
    POLICY_VARIABLES,
    STAGE_Y_KNOWN,
    STATE_KEYS,
    TASKS,
    VARIANTS,
    labels,
    stages_of,
)


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
    """A lookup table from policy key (``"mul|1|1|12"``) to action distribution.

    Keys missing from the table get `default`; with no default a missing key raises
    KeyError, so a policy never silently acts in states it was not defined for.
    """

    def __init__(self, table: Mapping[str, np.ndarray | Sequence[float]],
                 default: np.ndarray | Sequence[float] | None = None) -> None:
        self.table: dict[str, np.ndarray] = {k: _as_row(v, k) for k, v in table.items()}
        self.default = None if default is None else _as_row(default, "default")

    @classmethod
    def deterministic(cls, actions: Mapping[str, str | int],
                      default: str | int | None = None) -> TabularPolicy:
        """Policy taking one fixed action (name or index) per state."""
        return cls({k: one_hot(a) for k, a in actions.items()},
                   None if default is None else one_hot(default))

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """Rows of the table (or the default) for each state."""
        rows = []
        for key in labels(states, POLICY_VARIABLES) if len(states) else []:
            row = self.table.get(key, self.default)
            if row is None:
                raise KeyError(f"TabularPolicy has no entry for state {key!r} and no default")
            rows.append(row)
        return np.array(rows, dtype=np.float64).reshape(len(rows), N_ACTIONS)


def scripted_action(task: int, stage: np.ndarray) -> np.ndarray:
    """The scripted call of each stage: lookup_x, lookup_y, the task's op, final."""
    return np.choose(np.asarray(stage), (LOOKUP_X, LOOKUP_Y, ACTION_INDEX[TASKS[task]], FINAL))


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


def _behavior_row(spec: BehaviorSpec, task: int, stage: int) -> np.ndarray:
    if stage != STAGE_Y_KNOWN:
        # Only the scripted call is valid here, so noise over valid calls adds nothing:
        # probability 1 exactly, so that its log-probability is exactly 0.
        return one_hot(int(scripted_action(task, stage)))
    allowed = [ACTION_INDEX[op] for op in spec.ops]
    row = np.zeros(N_ACTIONS)
    if TASKS[task] not in spec.ops:
        row[allowed] = 1.0 / len(allowed)
        return row
    row[allowed] = (1.0 - spec.op) / len(allowed)
    row[ACTION_INDEX[TASKS[task]]] += spec.op
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
        # One row per (task, stage): the policy reads nothing else.
        self.table = np.array([_behavior_row(spec, task, stage) for task in range(len(TASKS))
                               for stage in range(4)])

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """Behaviour distribution of each encoded state."""
        states = np.asarray(states).reshape(-1, 5)
        return self.table[states[:, 0] * 4 + stages_of(states)]


def scripted_optimal_policy() -> TabularPolicy:
    """Deterministic optimal policy: lookup_x, lookup_y, the task's op, final."""
    from tracerl.envs.calculator.rules import CODE_STAGE, CODE_TASK

    return TabularPolicy.deterministic({
        key: int(scripted_action(int(CODE_TASK[code]), int(CODE_STAGE[code])))
        for code, key in enumerate(STATE_KEYS)})


def checked_probs(policy: object, states: np.ndarray) -> np.ndarray:
    """policy.action_probs(states), checked to be (len(states), N_ACTIONS) distributions."""
    probs = np.asarray(policy.action_probs(states), dtype=np.float64)
    if probs.shape != (len(states), N_ACTIONS):
        raise ValueError(f"policy returned shape {probs.shape}, expected "
                         f"({len(states)}, {N_ACTIONS})")
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError("policy returned negative or non-finite probabilities")
    if np.any(np.abs(probs.sum(axis=1) - 1.0) > 1e-6):
        raise ValueError("policy returned rows that do not sum to 1")
    return probs
