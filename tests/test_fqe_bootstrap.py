"""FQE's refit bootstrap: the same resampling distribution as drawing episodes with
replacement and refitting, at a cost that does not grow with repeated episodes."""

from __future__ import annotations

import numpy as np

from tracerl.ope.fqe import FittedQEvaluation
from tracerl.ope.fqe_bootstrap import fqe_bootstrap_values


def _two_step_logs(n: int, seed: int):
    """s0 -a-> s1 (r=0), then at s1 action 0 gives r=1 w.p. 0.7 else 0, and ends.
    Behaviour picks a in {0, 1} at s0 (both lead to s1); target: 50/50 at s0, action 0."""
    rng = np.random.default_rng(seed)
    a0 = rng.integers(0, 2, n)
    r1 = (rng.random(n) < 0.7).astype(float)
    episode = np.repeat(np.arange(n), 2)
    t = np.tile([0, 1], n)
    s = np.tile([0, 1], n)
    a = np.column_stack([a0, np.zeros(n, dtype=int)]).reshape(-1)
    r = np.column_stack([np.zeros(n), r1]).reshape(-1)
    s_next = np.tile([1, -1], n)
    done = np.tile([False, True], n)
    pi = np.array([[0.5, 0.5], [1.0, 0.0]])
    return s, a, r, s_next, done, episode, t, np.zeros(n, dtype=int), pi


def _brute_force(logs, n_boot: int, seed: int, gamma: float) -> np.ndarray:
    s, a, r, s_next, done, episode, t, initial, pi = logs
    n = len(initial)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_boot):  # a test oracle: slow on purpose
        pick = rng.integers(0, n, n)
        rows = np.concatenate([np.flatnonzero(episode == e) for e in pick])
        fqe = FittedQEvaluation(gamma).fit(s[rows], a[rows], r[rows], s_next[rows], done[rows],
                                           pi)
        out.append(fqe.value(initial[pick]))
    return np.array(out)


def test_refit_bootstrap_matches_drawing_episodes_and_refitting():
    logs = _two_step_logs(300, seed=1)
    fast = fqe_bootstrap_values(*logs[:8], logs[8], gamma=0.9, n_boot=3000, seed=2)
    slow = _brute_force(logs, n_boot=600, seed=3, gamma=0.9)
    # V(s0) = 0.9 * P(r=1): its bootstrap spread is 0.9 * sqrt(p (1 - p) / n) = 0.0239.
    assert abs(fast.std() - 0.9 * np.sqrt(0.7 * 0.3 / 300)) < 0.003
    assert abs(fast.std() - slow.std()) < 0.003
    assert abs(fast.mean() - slow.mean()) < 0.004


def test_deterministic_logs_give_a_point_interval_at_the_closed_form():
    logs = list(_two_step_logs(50, seed=4))
    logs[2] = np.tile([0.0, 1.0], 50)  # r = 1 always at the end
    values = fqe_bootstrap_values(*logs[:8], logs[8], gamma=0.9, n_boot=200, seed=0)
    assert np.allclose(values, 0.9)  # V(s0) = 0 + 0.9 * 1


def test_a_pair_missing_from_a_resample_keeps_q_zero():
    # One episode in 200 took a rare action at s0 whose continuation pays 10; resamples
    # that miss it must value that action at 0, like the full fit of such data would.
    logs = list(_two_step_logs(200, seed=5))
    s, a, r, s_next, done, episode, t, initial, _ = logs
    a = a.copy()
    a[0] = 2  # episode 0's first action is the rare one
    pi = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # the target always takes it
    values = fqe_bootstrap_values(s, a, r, s_next, done, episode, t, initial, pi, gamma=0.9,
                                  n_boot=2000, seed=6)
    missing = np.isclose(values, 0.0)
    # P(a resample misses episode 0) = (1 - 1/200)^200 = 0.367
    assert abs(missing.mean() - 0.367) < 0.04
