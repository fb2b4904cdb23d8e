"""Candidate policies for selection: the trained ones plus stochastic mixtures of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tracerl.policies.bellman import Policy


class UniformValidPolicy:
    """Uniform over the actions the environment accepts in each state."""

    def __init__(self, valid_actions: Callable[[str], tuple[int, ...]], n_actions: int) -> None:
        self.valid_actions = valid_actions
        self.n_actions = n_actions

    def action_probs(self, state_keys: Sequence[str]) -> np.ndarray:
        probs = np.zeros((len(state_keys), self.n_actions))
        for i, key in enumerate(state_keys):  # one row per distinct key: callers pass few
            valid = list(self.valid_actions(key))
            probs[i, valid] = 1.0 / len(valid)
        return probs


class MixturePolicy:
    """π(a|s) = Σ_i w_i π_i(a|s): at each decision, follow component i with probability w_i."""

    def __init__(self, components: Sequence[Policy], weights: Sequence[float]) -> None:
        if len(components) != len(weights) or not components:
            raise ValueError("a mixture needs one weight per component")
        weights = np.asarray(weights, dtype=float)
        if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
            raise ValueError(f"mixture weights must be >= 0 and sum to 1, got {list(weights)}")
        self.components = list(components)
        self.weights = weights

    def action_probs(self, state_keys: Sequence[str]) -> np.ndarray:
        return sum(w * np.asarray(p.action_probs(state_keys), dtype=float)
                   for w, p in zip(self.weights, self.components, strict=True))


def build_candidates(base: Mapping[str, Policy], spec: Mapping[str, Any],
                     uniform: Policy) -> dict[str, Policy]:
    """The base policies plus what `spec` (params.yaml `ope.candidates`) adds:

    softened: {name: [eps, ...]} -> "name~eps": (1 - eps) π_name + eps · uniform-valid
    mixtures: [[a, b, w], ...]   -> "a+b@w": w π_a + (1 - w) π_b
    """
    candidates: dict[str, Policy] = dict(base)
    for name, parts, weights in _derived(spec):
        candidates[name] = MixturePolicy([uniform if p is None else base[p] for p in parts],
                                         weights)
    return candidates


def candidate_names(base: Sequence[str], spec: Mapping[str, Any]) -> list[str]:
    """The names `build_candidates` gives, in its order, without building any policy (a
    flow maps one task per candidate before the policies are loaded)."""
    return [*base, *(name for name, _, _ in _derived(spec))]


def _derived(spec: Mapping[str, Any]) -> Iterator[tuple[str, list[str | None], list[float]]]:
    """(name, component names (None: uniform-valid), weights) of each derived candidate."""
    for name, epsilons in (spec.get("softened") or {}).items():
        for eps in epsilons:
            yield f"{name}~{eps:g}", [name, None], [1.0 - eps, eps]
    for a, b, w in spec.get("mixtures") or []:
        yield f"{a}+{b}@{w:g}", [a, b], [w, 1.0 - w]
