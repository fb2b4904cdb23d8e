"""The guard's table: per encoded state and action, what the logs say of taking it there.

Fitted once on a dataset's logged transitions (the encoder's policy view of the states):

- support: N(s, a), N(s) and the estimated behaviour probability pi_hat_b(a|s) =
  N(s, a) / N(s), the maximum-likelihood fit over one-hot states that
  `tracerl.ope.support` calls covered when pi_hat_b(a|s) >= min_behavior_prob (a
  deterministic proposal's ratio bounded by 1 / min_behavior_prob);
- value: Q(s, a) of the logging policy, the tabular FQE of pi_hat_b on the logs (the one
  Bellman backup, `tracerl.rl.bellman`), V(s) = sum_a pi_hat_b(a|s) Q(s, a) and the
  advantage A(s, a) = Q(s, a) - V(s): how much better than the logging policy's own average
  at s taking a is, by the logs;
- intervals: an episode bootstrap of that FQE (`n_boot` multinomial resamples of the
  episodes; the behaviour probabilities held at the full log's), each replicate's Q(s, a)
  mixed with the worst return (lower end) or the best (upper end) by a share ~ Beta(1,
  N_b(s, a)), the cell's one unseen outcome (`tracerl.ope.intervals` rule 1), so a cell
  seen a few times gets a wide interval instead of a confident one; percentiles of the
  replicates' Q(s, a) and Q(s, a) - V(s), kept inside the value's range.

The verdict (`GuardSettings`): ``warn: unsupported`` when the call was logged at the state
fewer than `min_count` times or pi_hat_b(a|s) < min_behavior_prob (its value is unknown:
the guard does not pretend), ``block: low value`` when the advantage's upper end is below
`block_advantage`, else ``allow``. Every array is per distinct state, never per step; a
judgement is a lookup, vectorised over many states at once (`judge`, `blocked`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from tracerl.config.guard import GuardSettings
from tracerl.ope.support import covered
from tracerl.rl.bellman import BellmanBackup, evaluate
from tracerl.rl.policy import Acting, Policy
from tracerl.rl.transitions import Transitions

ALLOW, WARN_UNSUPPORTED, BLOCK_LOW_VALUE = "allow", "warn: unsupported", "block: low value"
VERDICTS = (ALLOW, WARN_UNSUPPORTED, BLOCK_LOW_VALUE)


def returns_to_go(tr: Transitions, gamma: float) -> np.ndarray:
    """G_t = sum_{k >= t} gamma^(k - t) r_k within each episode (rows in (episode, t)
    order): each episode's discounted total minus what its earlier steps hold."""
    if not tr.n:
        return np.zeros(0)
    index = np.arange(tr.n)
    first = np.r_[True, tr.episode[1:] != tr.episode[:-1]]
    start = np.maximum.accumulate(np.where(first, index, 0))
    discount = gamma ** (index - start).astype(np.float64)
    scaled = tr.r * discount
    before = np.cumsum(scaled) - scaled  # sum over every earlier row
    earlier = before - before[start]     # ... within the row's episode
    total = np.bincount(tr.episode, weights=scaled)[tr.episode]
    return (total - earlier) / discount


def logged_value_range(tr: Transitions, gamma: float) -> tuple[float, float]:
    """The extremes of the logged discounted returns-to-go (a range every Q lies in when
    params give none)."""
    g = returns_to_go(tr, gamma)
    return (float(min(g.min(initial=0.0), 0.0)), float(max(g.max(initial=0.0), 0.0)))


@dataclass(frozen=True)
class Judgement:
    """Per (state, action) asked, arrays of one entry each (NaN where not logged)."""

    known_state: np.ndarray     # the state was seen in the logs
    state_count: np.ndarray     # N(s)
    count: np.ndarray           # N(s, a)
    behavior_prob: np.ndarray   # pi_hat_b(a|s) = N(s, a) / N(s)
    supported: np.ndarray
    q: np.ndarray
    q_low: np.ndarray
    q_high: np.ndarray
    v: np.ndarray
    advantage: np.ndarray
    advantage_low: np.ndarray
    advantage_high: np.ndarray
    verdict: np.ndarray         # index into VERDICTS


class GuardTable:
    """The fitted table (see the module docstring); `fit` builds it from transitions."""

    def __init__(self, encoder: Any, settings: GuardSettings, *, gamma: float,
                 value_range: tuple[float, float], variables: tuple[int, ...],
                 codes: np.ndarray, labels: np.ndarray, counts: np.ndarray, q: np.ndarray,
                 q_low: np.ndarray, q_high: np.ndarray, a_low: np.ndarray,
                 a_high: np.ndarray) -> None:
        self.encoder, self.settings, self.gamma = encoder, settings, gamma
        self.value_range = value_range
        self.variables = variables
        self.codes, self.labels, self.counts = codes, labels, counts
        self.q, self.q_low, self.q_high = q, q_low, q_high
        self.a_low, self.a_high = a_low, a_high
        n_s = counts.sum(axis=1, keepdims=True)
        self.behavior = counts / np.maximum(n_s, 1)
        self.v = np.nansum(np.where(counts > 0, q, 0.0) * self.behavior, axis=1)
        self.shape = tuple(int(encoder.cardinality[j]) for j in variables)

    @property
    def actions(self) -> tuple[str, ...]:
        return tuple(self.encoder.actions)

    @property
    def n_states(self) -> int:
        return len(self.codes)

    @classmethod
    def fit(cls, tr: Transitions, settings: GuardSettings | None = None, *, gamma: float,
            value_range: tuple[float, float] | None = None) -> GuardTable:
        settings = settings or GuardSettings()
        if tr.encoder is None:
            raise ValueError("the guard needs transitions made by an encoder")
        if not tr.n:
            raise ValueError("the guard needs a log with at least one step")
        variables = tuple(tr.encoder.policy_variables)
        view = tr.project(variables)
        n_s, n_a = view.n_states, view.n_actions
        value_range = tuple(value_range) if value_range is not None \
            else logged_value_range(view, gamma)
        counts = np.bincount(view.s.astype(np.int64) * n_a + view.a,
                             minlength=n_s * n_a).reshape(n_s, n_a)
        pb = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
        full = BellmanBackup(view.s, view.a, view.r, view.s_next, view.done, n_s, n_a, gamma)
        q, _, _ = evaluate(full, pb, settings.iterations)
        q_low, q_high, a_low, a_high = _bootstrap(view, pb, gamma, value_range, settings)
        logged = counts > 0
        lo, hi = value_range
        span = hi - lo
        nan = np.full_like(q, np.nan)
        q = np.where(logged, np.clip(q, lo, hi), nan)
        q_low = np.where(logged, np.clip(q_low, lo, hi), nan)
        q_high = np.where(logged, np.clip(q_high, lo, hi), nan)
        a_low = np.where(logged, np.clip(a_low, -span, span), nan)
        a_high = np.where(logged, np.clip(a_high, -span, span), nan)
        shape = tuple(int(tr.encoder.cardinality[j]) for j in variables)
        codes = np.ravel_multi_index(view.rows.T.astype(np.int64), shape) if n_s \
            else np.zeros(0, dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        return cls(tr.encoder, settings, gamma=gamma, value_range=value_range,
                   variables=variables, codes=codes[order],
                   labels=np.asarray(view.labels)[order], counts=counts[order], q=q[order],
                   q_low=q_low[order], q_high=q_high[order], a_low=a_low[order],
                   a_high=a_high[order])

    def lookup(self, rows: np.ndarray) -> np.ndarray:
        """Index of each full encoder row's state in the table, -1 where never logged."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.encoder.variables))
        part = rows[:, list(self.variables)]
        inside = np.all((part >= 0) & (part < np.asarray(self.shape)), axis=1)
        codes = np.ravel_multi_index(np.where(inside[:, None], part, 0).T, self.shape) \
            if len(part) else np.zeros(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.codes, codes), max(self.n_states - 1, 0))
        found = inside & (self.codes[pos] == codes) if self.n_states else \
            np.zeros(len(codes), dtype=bool)
        return np.where(found, pos, -1)

    def judge(self, rows: np.ndarray, actions: np.ndarray) -> Judgement:
        """The table's answer for each (full encoder row, action index) pair; an action
        index of -1 (a call outside the encoder's vocabulary) is never supported."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.encoder.variables))
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        at = self.lookup(rows)
        known = at >= 0
        ok = known & (actions >= 0)
        i, a = np.where(ok, at, 0), np.where(ok, actions, 0)

        def take(table: np.ndarray, fill: float = np.nan) -> np.ndarray:
            return np.where(ok, table[i, a], fill) if self.n_states else \
                np.full(len(rows), fill)

        count = take(self.counts, 0).astype(np.int64)
        state_count = np.where(known, self.counts.sum(axis=1)[i], 0) if self.n_states \
            else np.zeros(len(rows), dtype=np.int64)
        prob = take(self.behavior, 0.0)
        valid = np.asarray(self.encoder.valid_actions(rows), dtype=bool)[
            np.arange(len(rows)), a] if len(rows) else np.zeros(0, dtype=bool)
        supported = ok & (count >= self.settings.min_count) & covered(
            prob, valid & ok, np.ones(len(rows)), self.settings.min_behavior_prob)
        a_high = take(self.a_high)
        verdict = np.where(~supported, 1,
                           np.where(a_high < self.settings.block_advantage, 2, 0))
        v = np.where(known, self.v[i], np.nan) if self.n_states else np.full(len(rows), np.nan)
        q = take(self.q)
        return Judgement(known_state=known, state_count=state_count, count=count,
                         behavior_prob=prob, supported=supported, q=q,
                         q_low=take(self.q_low), q_high=take(self.q_high), v=v,
                         advantage=q - v, advantage_low=take(self.a_low),
                         advantage_high=a_high, verdict=verdict)

    def blocked(self, rows: np.ndarray) -> np.ndarray:
        """(m, n_actions) bool: the calls the guard blocks at each full encoder row."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.encoder.variables))
        n_a = len(self.actions)
        j = self.judge(np.repeat(rows, n_a, axis=0), np.tile(np.arange(n_a), len(rows)))
        return (j.verdict == 2).reshape(len(rows), n_a)


def _bootstrap(view: Transitions, pb: np.ndarray, gamma: float,
               value_range: tuple[float, float], settings: GuardSettings
               ) -> tuple[np.ndarray, ...]:
    """(Q low, Q high, A low, A high), (n_states, n_actions) each: the episode bootstrap of
    the module docstring. Identical transitions are one kind, weighted per replicate by
    how often the resampled episodes hold them (a sparse product, no per-step copy)."""
    n_s, n_a = pb.shape
    key = np.stack([view.s.astype(np.int64), view.a.astype(np.int64),
                    view.s_next.astype(np.int64), view.done.astype(np.int64),
                    np.ascontiguousarray(view.r, dtype=np.float64).view(np.int64)], axis=1)
    kinds, kind_of = np.unique(key, axis=0, return_inverse=True)
    kind_of = kind_of.reshape(-1)
    n_ep, b = view.n_episodes, settings.n_boot
    rng = np.random.default_rng([settings.seed, 0])
    draws = rng.multinomial(n_ep, np.full(n_ep, 1.0 / n_ep), size=b).astype(np.float64)
    per_episode = sp.csr_matrix((np.ones(view.n), (view.episode, kind_of)),
                                shape=(n_ep, len(kinds)))
    weights = np.asarray((per_episode.T @ draws.T).T)  # (b, kinds)
    backup = BellmanBackup(kinds[:, 0], kinds[:, 1], kinds[:, 4].copy().view(np.float64),
                           kinds[:, 2], kinds[:, 3].astype(bool), n_s, n_a, gamma,
                           weights=weights)
    q, _, _ = evaluate(backup, pb, settings.iterations)  # (b, n_states, n_actions)
    v = (q * pb).sum(axis=2)
    seen = np.zeros((b, n_s * n_a))
    seen[:, backup.cells] = backup.cell_weight
    seen = seen.reshape(b, n_s, n_a)
    # The cell's own unseen outcome (rule 1 of tracerl.ope.intervals, at the judged cell
    # only: an atom at every cell would compound along the whole horizon): a replicate's
    # Q(s, a) mixed with the range's end by a share ~ Beta(1, its weight there); a cell a
    # replicate never drew sits at the end.
    share = np.random.default_rng([settings.seed, 1]).beta(1.0, np.maximum(seen, 1.0))
    lo, hi = value_range
    q_lo = np.where(seen > 0, (1.0 - share) * q + share * lo, lo)
    q_hi = np.where(seen > 0, (1.0 - share) * q + share * hi, hi)
    tail = (1.0 - settings.confidence) / 2.0
    return (np.quantile(q_lo, tail, axis=0), np.quantile(q_hi, 1.0 - tail, axis=0),
            np.quantile(q_lo - v[:, :, None], tail, axis=0),
            np.quantile(q_hi - v[:, :, None], 1.0 - tail, axis=0))


class GuardedPolicy(Acting):
    """`policy` behind the guard: a draw the guard blocks is re-sampled, up to `draws`
    draws in all (the last one is taken whatever it is). Exactly, with B the blocked mass
    at s: pi(a|s) (1 - B^draws) / (1 - B) for an allowed a, pi(a|s) B^(draws - 1) for a
    blocked one. A state the logs never showed blocks nothing."""

    def __init__(self, policy: Policy, table: GuardTable, draws: int = 10) -> None:
        if draws < 1:
            raise ValueError(f"draws must be >= 1, got {draws}")
        self.policy, self.table, self.draws = policy, table, int(draws)

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        p = np.asarray(self.policy.action_probs(states), dtype=np.float64)
        blocked = self.table.blocked(states)
        mass = (p * blocked).sum(axis=1, keepdims=True)
        k = self.draws
        kept = np.where(mass < 1.0, (1.0 - mass ** k) / np.where(mass < 1.0, 1.0 - mass, 1.0),
                        float(k))
        return np.where(blocked, p * mass ** (k - 1), p * kept)
