"""The guard's table: per encoded state and action, what the logs say of taking it there.

Fitted once on a dataset's logged transitions, over the encoder's policy view of the states
(the variables a policy reads: what an agent proposing a call can be judged on). Every number
is the one step credit of `tracerl.rl.credit.step_credit`, the estimate the exports write,
here with one-hot features over that view and the logged frequencies as the logging policy:

- support: N(s, a), N(s) and pi_hat_b(a|s) = N(s, a) / N(s), the maximum-likelihood fit
  over one-hot states that `tracerl.ope.support` calls covered when pi_hat_b(a|s) >=
  min_behavior_prob (a deterministic proposal's ratio bounded by 1 / min_behavior_prob);
- value: Q(s, a) of the logging policy (the one critic, tabular here), V(s) = sum_a
  pi_hat_b(a|s) Q(s, a) and the advantage A(s, a) = Q(s, a) - V(s);
- intervals (level `confidence`): the critic's per-episode influence (the delta method),
  widened to hold one unseen outcome at the worst and at the best return per (state,
  action), kept inside the value's range; and the credit's flags (few_observations below
  `min_count`, rare_action, not_converged, out_of_range, no_interval).

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

from tracerl.config.guard import GuardSettings
from tracerl.ope.support import covered
from tracerl.rl.credit import INTERVAL, step_credit
from tracerl.rl.features import OneHot
from tracerl.rl.policy import Acting, Policy
from tracerl.rl.transitions import Transitions

ALLOW, WARN_UNSUPPORTED, BLOCK_LOW_VALUE = "allow", "warn: unsupported", "block: low value"
BLOCK_UNSEEN = "block: unseen"  # what the logs never showed (Guard.score; not the table's)
VERDICTS = (ALLOW, WARN_UNSUPPORTED, BLOCK_LOW_VALUE, BLOCK_UNSEEN)
DENIED = frozenset({BLOCK_LOW_VALUE, BLOCK_UNSEEN})


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
    flags: np.ndarray           # the step credit's flags (a tuple) of a logged pair, else None
    verdict: np.ndarray         # index into VERDICTS


class GuardTable:
    """The fitted table (see the module docstring); `fit` builds it from transitions."""

    def __init__(self, encoder: Any, settings: GuardSettings, *, gamma: float,
                 value_range: tuple[float, float], variables: tuple[int, ...],
                 codes: np.ndarray, labels: np.ndarray, counts: np.ndarray, q: np.ndarray,
                 q_low: np.ndarray, q_high: np.ndarray, v: np.ndarray,
                 advantage: np.ndarray, a_low: np.ndarray, a_high: np.ndarray,
                 flags: np.ndarray, interval: str | None) -> None:
        self.encoder, self.settings, self.gamma = encoder, settings, gamma
        self.value_range = value_range
        self.variables = variables
        self.codes, self.labels, self.counts = codes, labels, counts
        self.q, self.q_low, self.q_high, self.v = q, q_low, q_high, v
        self.advantage, self.a_low, self.a_high = advantage, a_low, a_high
        self.flags, self.interval = flags, interval  # flags: a tuple per logged cell
        self.behavior = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
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
        shape = tuple(int(tr.encoder.cardinality[j]) for j in variables)
        credit = step_credit(view, OneHot(shape, n_a), pb, gamma=gamma,
                             iterations=settings.iterations, level=settings.confidence,
                             value_range=value_range, min_count=settings.min_count,
                             min_behavior_prob=settings.min_behavior_prob)
        cell = (credit.pair_s, credit.pair_a)

        def table(values: np.ndarray) -> np.ndarray:  # per logged pair -> (n_s, n_a), NaN
            out = np.full((n_s, n_a), np.nan)
            out[cell] = values
            return out

        flags = np.empty((n_s, n_a), dtype=object)
        flags[cell] = [tuple(f) for f in credit.flags]
        codes = np.ravel_multi_index(view.rows.T.astype(np.int64), shape) if n_s \
            else np.zeros(0, dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        return cls(tr.encoder, settings, gamma=gamma, value_range=value_range,
                   variables=variables, codes=codes[order],
                   labels=np.asarray(view.labels)[order], counts=counts[order],
                   q=table(credit.q)[order], q_low=table(credit.q_low)[order],
                   q_high=table(credit.q_high)[order], v=credit.v[order],
                   advantage=table(credit.advantage)[order],
                   a_low=table(credit.adv_low)[order], a_high=table(credit.adv_high)[order],
                   flags=flags[order], interval=INTERVAL if credit.n_episodes > 1 else None)

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
        flags = np.where(ok, self.flags[i, a], None) if self.n_states else \
            np.full(len(rows), None, dtype=object)
        return Judgement(known_state=known, state_count=state_count, count=count,
                         behavior_prob=prob, supported=supported, q=q,
                         q_low=take(self.q_low), q_high=take(self.q_high), v=v,
                         advantage=take(self.advantage), advantage_low=take(self.a_low),
                         advantage_high=a_high, flags=flags, verdict=verdict)

    def blocked(self, rows: np.ndarray) -> np.ndarray:
        """(m, n_actions) bool: the calls the guard blocks at each full encoder row."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.encoder.variables))
        n_a = len(self.actions)
        j = self.judge(np.repeat(rows, n_a, axis=0), np.tile(np.arange(n_a), len(rows)))
        return (j.verdict == 2).reshape(len(rows), n_a)


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
