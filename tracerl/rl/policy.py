"""The one `Policy` protocol, and the policies made of others.

A policy maps encoded states (rows of an encoder's state variables, ``(m, k)`` ints;
`tracerl.rl.encoding`) to action distributions ``(m, n_actions)``, rows summing to 1.
Learners, the OPE layers, replay, candidates and the fixtures' simulators and exact
evaluator all take it: a fixture's simulator calls a policy with the rows its encoder
gives its states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tracerl.rl.transitions import distinct_rows


@runtime_checkable
class Policy(Protocol):
    def action_probs(self, states: np.ndarray) -> np.ndarray: ...


def sample_actions(probs: np.ndarray, rng: np.random.Generator,
                   rows: np.ndarray | None = None) -> np.ndarray:
    """One action per row of `probs` (per entry of `rows`, the row of `probs` each draw
    uses, when given: a few distinct states stand for many episodes). The cumulative sums
    are divided by their last column, which makes it exactly 1, so u < 1 never picks a
    trailing zero-probability action."""
    cum = np.cumsum(probs, axis=1)
    cum /= cum[:, -1:]
    if rows is not None:
        cum = cum[rows]
    return (cum <= rng.random(len(cum))[:, None]).sum(axis=1)


class Acting:
    """`act` for a policy with `action_probs` and a `seed`."""

    seed: int = 0

    def act(self, states: np.ndarray, rng: np.random.Generator | int | None = None
            ) -> np.ndarray:
        """One action per state, drawn from action_probs (rng, default: `seed`)."""
        rng = np.random.default_rng(self.seed if rng is None else rng)
        return sample_actions(self.action_probs(states), rng)

    def action_probs(self, states: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError


def on_distinct(policy: Policy, states: np.ndarray) -> np.ndarray:
    """`policy.action_probs` asked once per distinct row of `states`, gathered per row."""
    states = np.asarray(states)
    if len(states) < 2:
        return np.asarray(policy.action_probs(states), dtype=np.float64)
    code, first = distinct_rows(states)
    return np.asarray(policy.action_probs(states[first]), dtype=np.float64)[code]


def uniform_valid(valid: np.ndarray) -> np.ndarray:
    """Uniform over each row's valid actions (over every action where none is valid)."""
    valid = np.asarray(valid, dtype=bool)
    valid = np.where(valid.any(axis=1, keepdims=True), valid, True)
    return valid / valid.sum(axis=1, keepdims=True)


class UniformValidPolicy(Acting):
    """Uniform over the actions the encoder says are valid in each state."""

    def __init__(self, valid_actions: Callable[[np.ndarray], np.ndarray]) -> None:
        self.valid_actions = valid_actions

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        return uniform_valid(self.valid_actions(np.asarray(states)))


class MixturePolicy(Acting):
    """pi(a|s) = sum_i w_i pi_i(a|s): at each decision, follow component i with prob. w_i."""

    def __init__(self, components: Sequence[Policy], weights: Sequence[float]) -> None:
        if len(components) != len(weights) or not components:
            raise ValueError("a mixture needs one weight per component")
        weights = np.asarray(weights, dtype=float)
        if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
            raise ValueError(f"mixture weights must be >= 0 and sum to 1, got {list(weights)}")
        self.components = list(components)
        self.weights = weights

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        return sum(w * np.asarray(p.action_probs(states), dtype=float)
                   for w, p in zip(self.weights, self.components, strict=True))


def derived(spec: Mapping[str, Any]) -> Iterator[tuple[str, list[str | None], list[float]]]:
    """(name, component names (None: uniform over valid actions), weights) of each policy
    a candidates spec (params ``ope.candidates``) derives from named ones:

    softened: {name: [eps, ...]} -> "name~eps": (1 - eps) pi_name + eps uniform-valid
    mixtures: [[a, b, w], ...]   -> "a+b@w": w pi_a + (1 - w) pi_b
    """
    for name, epsilons in (spec.get("softened") or {}).items():
        for eps in epsilons:
            yield f"{name}~{eps:g}", [name, None], [1.0 - eps, eps]
    for a, b, w in spec.get("mixtures") or []:
        yield f"{a}+{b}@{w:g}", [a, b], [w, 1.0 - w]


def with_derived(base: Mapping[str, Policy], spec: Mapping[str, Any],
                 uniform: Policy) -> dict[str, Policy]:
    """The base policies plus what `spec` derives from them (see `derived`)."""
    out: dict[str, Policy] = dict(base)
    for name, parts, weights in derived(spec):
        out[name] = MixturePolicy([uniform if p is None else base[p] for p in parts], weights)
    return out
