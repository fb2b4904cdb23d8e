"""Tabular offline learners over featurized transitions: behaviour cloning and FQI.

Both learn one deterministic action per state seen in the data and act only among the
featurizer's valid actions. A state never seen in the data gets the uniform distribution
over its valid actions; every such lookup is counted in ``n_unseen_queries_``.

They implement the ``Policy`` protocol (tracerl.policies.bellman: ``action_probs(state_keys)``
-> ``(n, n_actions)``), so ``calculator.exact_value`` / ``mc_value`` evaluate them directly.
The backup is the one of tracerl.policies.bellman, with V the max over allowed actions.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tracerl.features import Featurizer
from tracerl.policies.bellman import BellmanBackup
from tracerl.policies.transitions import Transitions

TIE_BREAKS = ("lowest_index", "random")
SUPPORTS = ("none", "logged")
# Scores within this distance of the best are ties (FQI means differ by rounding only).
TIE_TOLERANCE = 1e-9


def greedy(scores: np.ndarray, allowed: np.ndarray, tie_break: str,
           rng: np.random.Generator | None = None) -> np.ndarray:
    """Per row, the index of the best allowed score; ties by lowest index or at random."""
    masked = np.where(allowed, scores, -np.inf)
    best = masked.max(axis=1, keepdims=True)
    ties = allowed & (masked >= best - TIE_TOLERANCE)
    if tie_break == "random":
        rng = rng if rng is not None else np.random.default_rng(0)
        return np.argmax(np.where(ties, rng.random(ties.shape), -1.0), axis=1)
    return np.argmax(ties, axis=1)  # argmax of booleans: the first True


def as_transitions(data: Transitions | pa.Table, featurizer: Featurizer | None) -> Transitions:
    """Transitions as given, or built from a step table with `featurizer`."""
    if isinstance(data, Transitions):
        return data
    if featurizer is None:
        raise ValueError("fitting on a step table needs a featurizer")
    return Transitions.from_steps(data, featurizer)


class TabularPolicyBase:
    """Shared acting logic: one learned action per seen state, uniform-valid elsewhere."""

    # Fitted attributes every subclass sets in fit (see _set_policy).
    actions_: tuple[str, ...]
    state_keys_: np.ndarray  # sorted keys of the states seen in the data
    action_: np.ndarray  # learned action index per entry of state_keys_
    counts_: np.ndarray  # N(s, a), shape (n_seen_states, n_actions)
    unsupported_states_: list[str]
    featurizer_: Featurizer
    n_unseen_queries_: int

    def __init__(self, tie_break: str = "lowest_index", seed: int = 0) -> None:
        self.tie_break = tie_break
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters as passed to __init__."""
        names = inspect.signature(type(self).__init__).parameters
        return {name: getattr(self, name) for name in names if name != "self"}

    def _check_params(self) -> None:
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}")

    def _set_policy(self, tr: Transitions, seen: np.ndarray, action: np.ndarray,
                    unsupported: np.ndarray, n_sa: np.ndarray) -> np.ndarray:
        """Keep the seen states, sorted by key; return the index map for extra tables."""
        keep = np.flatnonzero(seen)
        keep = keep[np.argsort(tr.state_keys[keep], kind="stable")]
        self.actions_ = tr.actions
        self.state_keys_ = tr.state_keys[keep]
        self.action_ = action[keep].astype(np.int64)
        self.counts_ = n_sa[keep]
        self.unsupported_states_ = sorted(tr.state_keys[seen & unsupported].tolist())
        self.featurizer_ = tr.featurizer
        self.n_unseen_queries_ = 0
        return keep

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def _lookup(self, state_keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(distinct keys, row of each distinct key in state_keys_ or -1, inverse index)."""
        keys = np.asarray(state_keys, dtype=str).reshape(-1)
        uniq, inverse = np.unique(keys, return_inverse=True)
        pos = np.searchsorted(self.state_keys_, uniq)
        pos_clipped = np.minimum(pos, max(len(self.state_keys_) - 1, 0))
        found = (pos < len(self.state_keys_)) & (
            self.state_keys_[pos_clipped] == uniq if len(self.state_keys_) else False
        )
        return uniq, np.where(found, pos, -1), inverse.reshape(-1)

    def action_probs(self, state_keys: Sequence[str]) -> np.ndarray:
        """(n, n_actions): one-hot on the learned action; uniform over valid if unseen."""
        uniq, row, inverse = self._lookup(state_keys)
        probs = np.zeros((len(uniq), len(self.actions_)))
        seen = row >= 0
        probs[np.flatnonzero(seen), self.action_[row[seen]]] = 1.0
        for j in np.flatnonzero(~seen):  # once per distinct unseen key
            valid = list(self.featurizer_.valid_actions(str(uniq[j])))
            probs[j, valid] = 1.0 / len(valid)
        self.n_unseen_queries_ += int(np.count_nonzero(~seen[inverse]))
        return probs[inverse]

    def act(self, state_keys: Sequence[str],
            rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Action index per key; unseen states draw uniformly (rng, default: `seed`)."""
        probs = self.action_probs(state_keys)
        rng = np.random.default_rng(self.seed if rng is None else rng)
        cum = np.cumsum(probs, axis=1)
        cum /= cum[:, -1:]  # the last column is exactly 1, so u < 1 never picks a 0-prob action
        u = rng.random(len(probs))
        return (cum <= u[:, None]).sum(axis=1)

    def is_seen(self, state_keys: Sequence[str]) -> np.ndarray:
        """True where the state was seen in the training data."""
        _, row, inverse = self._lookup(state_keys)
        return (row >= 0)[inverse]


class BehaviorCloning(TabularPolicyBase):
    """Tabular BC: in each state, the most frequently logged valid action.

    Ties between equally frequent actions: ``"lowest_index"`` (first in the action
    vocabulary) or ``"random"`` (drawn with `seed`). A state where only invalid actions
    were logged acts as if every valid action had count 0 (listed in unsupported_states_).
    """

    def fit(self, data: Transitions | pa.Table,
            featurizer: Featurizer | None = None) -> BehaviorCloning:
        """Count N(s, a) and keep argmax_a N(s, a) over valid a."""
        self._check_params()
        tr = as_transitions(data, featurizer)
        n_s, n_a = tr.n_states, tr.n_actions
        n_sa = np.bincount(tr.s * n_a + tr.a, minlength=n_s * n_a).reshape(n_s, n_a)
        seen = n_sa.sum(axis=1) > 0
        unsupported = ~(n_sa * tr.valid).any(axis=1)
        action = greedy(n_sa.astype(np.float64), tr.valid, self.tie_break, self._rng())
        self._set_policy(tr, seen, action, unsupported, n_sa)
        return self


class FittedQIteration(TabularPolicyBase):
    """Tabular fitted Q iteration on logged transitions, naive or support-constrained.

    Each iteration fits Q(s, a) to the mean over logged transitions at (s, a) of
    ``r + gamma * (1 - done) * max_{a' in A(s')} Q(s', a')`` (the least-squares fit of a
    table). Never-logged (s, a) keep Q = 0.

    support="none": A(s) is every valid action of s (the chapter's naive FQI: an unlogged
    action at Q = 0 can beat logged actions with negative Q). support="logged": A(s) is the
    valid actions logged at s, for the bootstrap max and for acting; a seen state with no
    logged valid action falls back to its valid actions and is listed in
    ``unsupported_states_``. Rows whose episode log ends without done bootstrap nothing.
    """

    def __init__(self, gamma: float = 0.99, n_iterations: int = 50, support: str = "none",
                 tie_break: str = "lowest_index", seed: int = 0) -> None:
        super().__init__(tie_break=tie_break, seed=seed)
        self.gamma = gamma
        self.n_iterations = n_iterations
        self.support = support

    def fit(self, data: Transitions | pa.Table,
            featurizer: Featurizer | None = None) -> FittedQIteration:
        """Run `n_iterations` of FQI; learn q_, the greedy action per state, support_."""
        self._check_params()
        if self.support not in SUPPORTS:
            raise ValueError(f"support must be one of {SUPPORTS}, got {self.support!r}")
        tr = as_transitions(data, featurizer)
        n_s, n_a = tr.n_states, tr.n_actions
        sa = tr.s.astype(np.int64) * n_a + tr.a
        n_sa = np.bincount(sa, minlength=n_s * n_a).reshape(n_s, n_a)
        seen = n_sa.sum(axis=1) > 0
        logged = (n_sa > 0) & tr.valid
        unsupported = ~logged.any(axis=1)
        if self.support == "logged":
            allowed = np.where(unsupported[:, None], tr.valid, logged)
        else:
            allowed = tr.valid
        if np.any(seen & ~allowed.any(axis=1)):
            raise ValueError("the featurizer gives a seen state no valid action")

        backup = BellmanBackup(tr.s, tr.a, tr.r, tr.s_next, tr.done, n_s, n_a, self.gamma)
        no_action = ~allowed.any(axis=1)  # only unused vocabulary entries can have none
        q = np.zeros((n_s, n_a))
        residual = 0.0
        for _ in range(self.n_iterations):
            v = np.where(allowed, q, -np.inf).max(axis=1)  # max_{a'} Q(s', a')
            v[no_action] = 0.0
            q_new = backup(v)
            residual = float(np.max(np.abs(q_new - q))) if q.size else 0.0
            q = q_new

        action = greedy(q, allowed, self.tie_break, self._rng())
        keep = self._set_policy(tr, seen, action, unsupported, n_sa)
        self.q_ = q[keep]
        self.support_ = logged[keep]
        self.bellman_residual_ = residual  # max |Q_k - Q_{k-1}| of the last iteration
        return self

    def q_values(self, state_keys: Sequence[str]) -> np.ndarray:
        """Learned Q rows; NaN for states not seen in the data."""
        _, row, inverse = self._lookup(state_keys)
        out = np.full((len(row), len(self.actions_)), np.nan)
        out[row >= 0] = self.q_[row[row >= 0]]
        return out[inverse]
