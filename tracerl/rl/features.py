"""Feature maps over integer state rows: phi(s) for behaviour cloning, phi(s, a) for Q.

Both maps give each row a few column indices (every feature is 0/1):

- `OneHot` (``one_hot``): one column per value of the chosen variables (their mixed-radix
  code, the *cell*), times the action: the tabular case. Its least-squares fits are the
  per-cell means, so a solver told `one_hot` fits in one bincount (exact and fast).
- `Hashed` (``hashed``): one column per template (a tuple of variables), the template's
  mixed-radix code hashed with its id (and the action) into one of 2**n_bits columns:

      phi(s)_j    = #{templates k : h(k, code_k(s))    = j}
      phi(s, a)_j = #{templates k : h(k, code_k(s), a) = j}

  every row has exactly len(templates) non-zeros, memory is O(rows x templates) whatever the
  number of distinct states; a template of every variable is the state's identity (up to
  hash collisions) while coarser templates generalise across states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import scipy.sparse as sp

_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing multiplier
_MIX2 = np.uint64(0xC2B2AE3D27D4EB4F)


def _checked(rows: np.ndarray, cardinality: Sequence[int]) -> np.ndarray:
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != len(cardinality):
        raise ValueError(f"states must be (m, {len(cardinality)}) ints, got {rows.shape}")
    return rows


@dataclass(frozen=True)
class OneHot:
    """One-hot of the cell of `variables` (None: every variable), times the action."""

    cardinality: tuple[int, ...]
    n_actions: int
    variables: tuple[int, ...] | None = None
    kind = "one_hot"
    one_hot = True

    def __post_init__(self) -> None:
        if int(np.prod([self.cardinality[v] for v in self.used], dtype=float)) >= 2**62:
            raise ValueError("one-hot cells overflow int64: use hashed features")

    @property
    def used(self) -> tuple[int, ...]:
        return tuple(range(len(self.cardinality))) if self.variables is None \
            else tuple(self.variables)

    @property
    def n_cells(self) -> int:
        return int(np.prod([self.cardinality[v] for v in self.used], dtype=np.int64))

    @property
    def n_features(self) -> int:
        return self.n_cells * self.n_actions

    @property
    def n_state_features(self) -> int:
        return self.n_cells

    def cells(self, rows: np.ndarray) -> np.ndarray:
        """The cell (mixed-radix code of the used variables) of each row, int64; rows hold
        every variable, or just the used ones (a `Transitions.project` of them)."""
        rows = np.asarray(rows)
        if rows.ndim == 2 and rows.shape[1] == len(self.used) != len(self.cardinality):
            columns = list(range(len(self.used)))
        else:
            rows, columns = _checked(rows, self.cardinality), list(self.used)
        code = np.zeros(len(rows), dtype=np.int64)
        for c, v in zip(columns, self.used, strict=True):
            code = code * self.cardinality[v] + rows[:, c]
        return code

    def state_columns(self, rows: np.ndarray) -> np.ndarray:
        return self.cells(rows)[:, None]

    def sa_columns(self, rows: np.ndarray, actions: np.ndarray | int) -> np.ndarray:
        a = np.broadcast_to(np.asarray(actions, dtype=np.int64), (len(rows),))
        return (self.cells(rows) * self.n_actions + a)[:, None]

    def get_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "cardinality": list(self.cardinality),
                "n_actions": self.n_actions,
                "variables": None if self.variables is None else list(self.variables)}


@dataclass(frozen=True)
class Hashed:
    """Hashed one-hot features of templates over the variables of a state row."""

    cardinality: tuple[int, ...]
    templates: tuple[tuple[int, ...], ...]
    n_bits: int = 14
    n_actions: int = 0  # for state-action features
    kind = "hashed"
    one_hot = False

    def __post_init__(self) -> None:
        for t in self.templates:
            if any(not 0 <= c < len(self.cardinality) for c in t):
                raise ValueError(f"template {list(t)} names a state variable outside "
                                 f"0..{len(self.cardinality) - 1}")

    @property
    def n_features(self) -> int:
        return 1 << self.n_bits

    n_state_features = n_features

    def codes(self, rows: np.ndarray) -> np.ndarray:
        """(m, n_templates) uint64 template codes (template id folded in)."""
        rows = _checked(rows, self.cardinality)
        out = np.empty((len(rows), len(self.templates)), dtype=np.uint64)
        for k, cols in enumerate(self.templates):  # over templates, not rows
            code = np.zeros(len(rows), dtype=np.uint64)
            for c in cols:
                code = code * np.uint64(self.cardinality[c]) + rows[:, c].astype(np.uint64)
            out[:, k] = code * np.uint64(64) + np.uint64(k)
        return out

    def _bucket(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = (x * _MIX) ^ ((x * _MIX2) >> np.uint64(29))
            h = h * _MIX
        return (h >> np.uint64(64 - self.n_bits)).astype(np.int64)

    def state_columns(self, rows: np.ndarray) -> np.ndarray:
        return self._bucket(self.codes(rows))

    def sa_columns(self, rows: np.ndarray, actions: np.ndarray | int) -> np.ndarray:
        return self.sa_from_codes(self.codes(rows), actions)

    def sa_from_codes(self, codes: np.ndarray, actions: np.ndarray | int) -> np.ndarray:
        """Column indices (m, n_templates) of phi(s, a) from `codes(rows)`."""
        if self.n_actions < 1:
            raise ValueError("no n_actions: not a state-action feature map")
        a = np.asarray(actions, dtype=np.uint64)
        a = a[:, None] if a.ndim == 1 else a
        return self._bucket(codes * np.uint64(self.n_actions) + a)

    def get_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "cardinality": list(self.cardinality),
                "templates": [list(t) for t in self.templates], "n_bits": self.n_bits,
                "n_actions": self.n_actions}


FeatureMap = OneHot | Hashed


def default_templates(n_vars: int) -> tuple[tuple[int, ...], ...]:
    """Every single variable, every pair, and all variables together."""
    singles = [(i,) for i in range(n_vars)]
    pairs = list(combinations(range(n_vars), 2))
    return tuple(singles + pairs + ([tuple(range(n_vars))] if n_vars > 2 else []))


def feature_map(params: Mapping[str, Any], cardinality: Sequence[int], n_actions: int,
                variables: Sequence[int] | None = None) -> FeatureMap:
    """The feature map a params section names (``kind: one_hot`` with optional `variables`;
    ``kind: hashed`` with `n_bits` and `templates`) over states of `cardinality`;
    `variables`: the one-hot default (e.g. the encoder's policy variables)."""
    kind = params.get("kind", "one_hot")
    cardinality = tuple(int(c) for c in cardinality)
    if kind == "one_hot":
        chosen = variables if params.get("variables") is None else params["variables"]
        return OneHot(cardinality, int(n_actions),
                      None if chosen is None else tuple(int(v) for v in chosen))
    if kind == "hashed":
        templates = params.get("templates")
        templates = default_templates(len(cardinality)) if templates is None \
            else tuple(tuple(int(c) for c in t) for t in templates)
        return Hashed(cardinality, templates, int(params.get("n_bits", 12)), int(n_actions))
    raise ValueError(f"unknown feature map kind {kind!r}; expected one_hot or hashed")


def from_params(d: Mapping[str, Any]) -> FeatureMap:
    """The feature map `get_params` described."""
    if d["kind"] == "one_hot":
        return OneHot(tuple(d["cardinality"]), int(d["n_actions"]),
                      None if d.get("variables") is None else tuple(d["variables"]))
    return Hashed(tuple(d["cardinality"]), tuple(tuple(t) for t in d["templates"]),
                  int(d["n_bits"]), int(d["n_actions"]))


def matrix(columns: np.ndarray, n_cols: int, weights: np.ndarray | None = None
           ) -> sp.csr_matrix:
    """The 0/1 (or per-row weighted) CSR matrix of rows with `columns` (m, k) set."""
    m, k = columns.shape
    values = np.ones(m * k) if weights is None else np.repeat(np.asarray(weights, float), k)
    return sp.csr_matrix((values, columns.reshape(-1), np.arange(0, m * k + 1, k)),
                         shape=(m, n_cols))


def column_positions(used: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Position of each column in sorted `used`; len(used) where it is not there (so a
    padded weight vector maps columns the data never used to 0)."""
    if not len(used):
        return np.zeros(np.shape(cols), dtype=np.int64)
    pos = np.minimum(np.searchsorted(used, cols), len(used) - 1)
    return np.where(used[pos] == cols, pos, len(used)).astype(np.int64)


def row_sums(w: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """sum_j w[cols[..., j]]: a linear model on 0/1 features (explicit over the few
    templates, the last axis: faster than a reduce); cols (m, k) or (m, n_actions, k),
    the latter every action's at once with the very same sums."""
    out = w[cols[..., 0]]
    for j in range(1, cols.shape[-1]):
        out += w[cols[..., j]]
    return out
