"""The one Bellman backup of tracerl: the one-hot solve of every learner and critic.

With one-hot features of a state (`tracerl.rl.features.OneHot`: a table over the states
`Transitions.project` gives), a least-squares fit is the per-cell mean, so FQI, FQE, FQE
refitted on bootstrap resamples and the support and visitation backups of OPE all iterate
the same fit of a table:

    Q_{k+1}(s, a) = sum_j w_j [r_j + gamma (1 - done_j) V_k(s'_j)] / sum_j w_j

over the logged transitions j at (s, a), with weights w (1 per transition, or a bootstrap
replicate's counts). A pair with no weight keeps Q = 0 (the callers report the support
that convention rests on). Only V_k differs: the max over allowed actions (FQI) or the
expectation under a target policy (FQE). A row whose log ends without done (s' = -1)
bootstraps nothing.
"""

from __future__ import annotations

import numpy as np

from tracerl.rl.transitions import NO_NEXT

# Scores within this distance of the best are ties (FQI means differ by rounding only).
TIE_TOLERANCE = 1e-9
TIE_BREAKS = ("lowest_index", "random")


def greedy(scores: np.ndarray, allowed: np.ndarray, tie_break: str = "lowest_index",
           rng: np.random.Generator | None = None) -> np.ndarray:
    """Per row, the index of the best allowed score; ties (within TIE_TOLERANCE) by lowest
    index or at random."""
    masked = np.where(allowed, scores, -np.inf)
    best = masked.max(axis=1, keepdims=True)
    ties = allowed & (masked >= best - TIE_TOLERANCE)
    if tie_break == "random":
        rng = rng if rng is not None else np.random.default_rng(0)
        return np.argmax(np.where(ties, rng.random(ties.shape), -1.0), axis=1)
    return np.argmax(ties, axis=1)  # argmax of booleans: the first True


class BellmanBackup:
    """Q_{k+1} from V_k for one or many weightings of the same transitions.

    s, a, r, s_next, done: one entry per transition (or per distinct transition kind);
    weights: (n,) or (b, n) non-negative weights, one row per replicate (default: 1 each).
    prior_weight, prior_target (of a call): an extra pseudo-observation per cell of weight
    prior_weight (b, n_cells) and value prior_target, the unseen-outcome atom of the
    critic's interval (tracerl.ope.estimate); with weights, n_cells counts the logged cells
    (`cells`), without, every (s, a).
    """

    def __init__(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s_next: np.ndarray,
                 done: np.ndarray, n_states: int, n_actions: int, gamma: float,
                 weights: np.ndarray | None = None) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma}")
        s, a, s_next = (np.asarray(x, dtype=np.int64) for x in (s, a, s_next))
        self.n_states, self.n_actions = n_states, n_actions
        n_cells = n_states * n_actions
        cell = s * n_actions + a
        has_next = s_next != NO_NEXT
        self.single = weights is None or np.ndim(weights) == 1
        if weights is None:
            # Unit weights (the learners, millions of rows): one bincount per backup, in
            # the rows' own order, no sort.
            order = slice(None)
            self.weights = None
            self.cell_weight = np.bincount(cell, minlength=n_cells)[None, :].astype(float)
            self.cell = cell
            self.cells = np.arange(n_cells)
        else:
            # Replicates (a few hundred transition kinds): sorted once by cell, so a
            # backup of every replicate is one reduceat.
            order = np.argsort(cell, kind="stable")
            sorted_cell = cell[order]
            self.starts = np.flatnonzero(np.r_[True, sorted_cell[1:] != sorted_cell[:-1]]) \
                if len(cell) else np.zeros(0, dtype=np.int64)
            self.cells = sorted_cell[self.starts]  # the logged (s, a) cells, flat codes
            self.cell = None
            self.weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))[:, order]
            self.cell_weight = np.add.reduceat(self.weights, self.starts, axis=1) \
                if len(cell) else np.zeros((len(self.weights), 0))
        self.r = np.asarray(r, dtype=np.float64)[order]
        self.s_next = np.where(has_next, s_next, 0)[order]
        self.discount = gamma * (~np.asarray(done, dtype=bool) & has_next)[order]

    @property
    def n_replicates(self) -> int:
        return len(self.cell_weight)

    def __call__(self, v: np.ndarray, prior_weight: np.ndarray | None = None,
                 prior_target: float = 0.0) -> np.ndarray:
        """Q_{k+1}, (b, n_states, n_actions) (or (n_states, n_actions) for unweighted or
        1-D weights), from V_k of shape (n_states,) or (b, n_states)."""
        q = np.zeros((self.n_replicates, self.n_states * self.n_actions))
        q[:, self.cells] = self.cell_values(v, prior_weight, prior_target)
        q = q.reshape(-1, self.n_states, self.n_actions)
        return q[0] if self.single else q

    def cell_values(self, v: np.ndarray, prior_weight: np.ndarray | None = None,
                    prior_target: float = 0.0) -> np.ndarray:
        """Q_{k+1} on `cells` only, (b, len(cells)): what __call__ scatters into the table."""
        if self.weights is None and np.ndim(v) == 1:
            target = self.r + self.discount * v[self.s_next]
            num = np.bincount(self.cell, weights=target,
                              minlength=self.n_states * self.n_actions)[None, :]
        elif self.weights is None:
            raise ValueError("an unweighted backup takes V of shape (n_states,)")
        elif len(self.r):
            target = self.r + self.discount * np.atleast_2d(v)[:, self.s_next]  # (b, n)
            num = np.add.reduceat(self.weights * target, self.starts, axis=1)
        else:
            num = np.zeros((self.n_replicates, 0))
        den = self.cell_weight
        if prior_weight is not None:
            num = num + prior_weight * prior_target
            den = den + prior_weight
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

    def logged(self) -> np.ndarray:
        """(n_states, n_actions) bool: cells with at least one transition."""
        return self.counts() > 0

    def counts(self) -> np.ndarray:
        """(n_states, n_actions): total weight of each cell (first replicate)."""
        out = np.zeros(self.n_states * self.n_actions)
        out[self.cells] = self.cell_weight[0]
        return out.reshape(self.n_states, self.n_actions)


def evaluate(backup: BellmanBackup, target_probs: np.ndarray, n_iterations: int,
             tol: float = 1e-10, prior_weight: np.ndarray | None = None,
             prior_target: float = 0.0) -> tuple[np.ndarray, int, float]:
    """Iterate Q <- backup(V), V(s) = sum_a pi(a|s) Q(s, a) from Q = 0 until max |change|
    <= tol or n_iterations; returns (Q, iterations, last change)."""
    pi = np.asarray(target_probs, dtype=np.float64)
    shape = (backup.n_states, backup.n_actions)
    if backup.single:
        q = np.zeros(shape)
        change, n_iter = np.inf, 0
        while n_iter < n_iterations:
            n_iter += 1
            q_new = backup((q * pi).sum(axis=-1), prior_weight, prior_target)
            change = float(np.max(np.abs(q_new - q))) if q.size else 0.0
            q = q_new
            if change <= tol:
                break
        return q, n_iter, change
    # Replicates: iterate on the logged cells only (a table row per replicate is mostly
    # unlogged pairs, which stay 0); cells are sorted by (s, a), so V is one reduceat.
    cells = backup.cells
    weighted_pi = pi.reshape(-1)[cells]
    cell_state = cells // backup.n_actions
    state_start = np.flatnonzero(np.r_[True, cell_state[1:] != cell_state[:-1]]) \
        if len(cells) else np.zeros(0, dtype=np.int64)
    states = cell_state[state_start]
    qc = np.zeros((backup.n_replicates, len(cells)))
    v = np.zeros((backup.n_replicates, backup.n_states))
    # Each replicate stops at its own convergence, as if fitted alone: its Q never depends
    # on which replicates share the batch (bootstrap chunks give the same numbers).
    active = np.ones(backup.n_replicates, dtype=bool)
    change, n_iter = np.inf, 0
    while n_iter < n_iterations and active.any():  # iterations, every replicate at once
        n_iter += 1
        if len(cells):
            v[:, states] = np.add.reduceat(qc * weighted_pi, state_start, axis=1)
        qc_new = backup.cell_values(v, prior_weight, prior_target)
        step = np.max(np.abs(qc_new - qc), axis=1) if qc.size else np.zeros(len(qc))
        change = float(step[active].max())
        qc = np.where(active[:, None], qc_new, qc)
        active &= step > tol
    q = np.zeros((backup.n_replicates, backup.n_states * backup.n_actions))
    q[:, cells] = qc
    return q.reshape(-1, *shape), n_iter, change
