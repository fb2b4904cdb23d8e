"""Hashed sparse features of integer-coded states (and state-action pairs).

A state is a row of small ints (a fixture's observable dialogue state: what the
conversation revealed so far). A *template* is a tuple of columns; its value in a row is the
mixed-radix code of those columns, hashed with the template's id (and the action, for
state-action features) into one of 2**n_bits columns:

    phi(s)_j    = #{templates k : h(k, code_k(s))    = j}
    phi(s, a)_j = #{templates k : h(k, code_k(s), a) = j}

So every row has exactly len(templates) non-zeros, memory is O(rows x templates) whatever
the number of distinct states, and a template of all columns is the state's identity (the
tabular case, up to hash collisions) while coarser templates generalise across states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing multiplier
_MIX2 = np.uint64(0xC2B2AE3D27D4EB4F)


@dataclass(frozen=True)
class HashedFeaturizer:
    """Hashed one-hot features of templates over the columns of an int state array."""

    name: str
    cardinalities: tuple[int, ...]
    templates: tuple[tuple[int, ...], ...]
    n_bits: int = 14
    n_actions: int = 0  # for state-action features

    @property
    def n_features(self) -> int:
        return 1 << self.n_bits

    def get_params(self) -> dict:
        """JSON-ready description (enough to rebuild the featurizer)."""
        return {"name": self.name, "cardinalities": list(self.cardinalities),
                "templates": [list(t) for t in self.templates], "n_bits": self.n_bits,
                "n_actions": self.n_actions}

    @classmethod
    def from_params(cls, d: dict) -> HashedFeaturizer:
        return cls(name=d["name"], cardinalities=tuple(d["cardinalities"]),
                   templates=tuple(tuple(t) for t in d["templates"]), n_bits=d["n_bits"],
                   n_actions=d["n_actions"])

    def codes(self, states: np.ndarray) -> np.ndarray:
        """(m, n_templates) uint64 template codes (template id folded in)."""
        states = np.asarray(states)
        if states.ndim != 2 or states.shape[1] != len(self.cardinalities):
            raise ValueError(f"states must be (m, {len(self.cardinalities)}) ints")
        out = np.empty((len(states), len(self.templates)), dtype=np.uint64)
        for k, cols in enumerate(self.templates):  # over templates, not rows
            code = np.zeros(len(states), dtype=np.uint64)
            for c in cols:
                code = code * np.uint64(self.cardinalities[c]) + states[:, c].astype(np.uint64)
            out[:, k] = code * np.uint64(64) + np.uint64(k)
        return out

    def _bucket(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = (x * _MIX) ^ ((x * _MIX2) >> np.uint64(29))
            h = h * _MIX
        return (h >> np.uint64(64 - self.n_bits)).astype(np.int32)

    def transform(self, states: np.ndarray) -> sp.csr_matrix:
        """phi(s): (m, n_features) CSR with len(templates) ones per row."""
        idx = self._bucket(self.codes(states))
        return _rows_of(idx, self.n_features)

    def transform_sa(self, states: np.ndarray, actions: np.ndarray) -> sp.csr_matrix:
        """phi(s, a): (m, n_features)."""
        return _rows_of(self.sa_index(self.codes(states), actions), self.n_features)

    def sa_index(self, codes: np.ndarray, actions: np.ndarray | int) -> np.ndarray:
        """Column indices (m, n_templates) of phi(s, a) from `codes(states)`."""
        if self.n_actions < 1:
            raise ValueError(f"{self.name}: no n_actions, not a state-action featurizer")
        a = np.asarray(actions, dtype=np.uint64)
        a = a[:, None] if a.ndim == 1 else a
        return self._bucket(codes * np.uint64(self.n_actions) + a)


def _rows_of(idx: np.ndarray, n_cols: int, data: np.ndarray | None = None) -> sp.csr_matrix:
    m, k = idx.shape
    values = np.ones(m * k) if data is None else np.repeat(np.asarray(data, float), k)
    return sp.csr_matrix((values, idx.reshape(-1), np.arange(0, m * k + 1, k)),
                         shape=(m, n_cols))


def expected_sa(featurizer: HashedFeaturizer, states: np.ndarray, probs: np.ndarray,
                scale: np.ndarray | None = None, min_prob: float = 0.0) -> sp.csr_matrix:
    """sum_a probs[:, a] * phi(s, a) (times `scale` per row): (m, n_features) CSR.

    Memory is O(m x templates x actions with probability > min_prob)."""
    codes = featurizer.codes(states)
    m, k = codes.shape
    w = np.asarray(probs, dtype=np.float64)
    if scale is not None:
        w = w * np.asarray(scale, dtype=np.float64)[:, None]
    rows, acts = np.nonzero(w > min_prob)
    cols = featurizer.sa_index(codes[rows], acts.astype(np.uint64))
    data = np.repeat(w[rows, acts], k)
    return sp.coo_matrix((data, (np.repeat(rows, k), cols.reshape(-1))),
                         shape=(m, featurizer.n_features)).tocsr()


def column_positions(used: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Position of each hashed column in sorted `used`; len(used) where it is not there
    (so a padded weight vector maps unseen columns to 0)."""
    pos = np.minimum(np.searchsorted(used, cols), len(used) - 1)
    return np.where(used[pos] == cols, pos, len(used)).astype(np.int32)


def row_sums(w: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """sum_j w[cols[:, j]]: a linear model on one-hot templates (explicit over the few
    templates: faster than a reduce)."""
    out = w[cols[:, 0]].copy()
    for j in range(1, cols.shape[1]):
        out += w[cols[:, j]]
    return out
