"""FQE's refit bootstrap: the same resampling distribution as drawing episodes with
replacement and refitting, at a cost that does not grow with repeated episodes."""

from __future__ import annotations

import numpy as np
import pytest

from tracerl.ope.grouped import fqe_bootstrap_values
from tracerl.rl.bellman import BellmanBackup, evaluate


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
        q, _, _ = evaluate(BellmanBackup(s[rows], a[rows], r[rows], s_next[rows], done[rows],
                                         *pi.shape, gamma), pi, 1000)
        out.append(float((q * pi).sum(axis=1)[initial[pick]].mean()))
    return np.array(out)


def test_refit_bootstrap_matches_drawing_episodes_and_refitting():
    logs = _two_step_logs(300, seed=1)
    fast = fqe_bootstrap_values(*logs[:7], logs[8], gamma=0.9, n_boot=3000, seed=2)
    slow = _brute_force(logs, n_boot=600, seed=3, gamma=0.9)
    # V(s0) = 0.9 * P(r=1): its bootstrap spread is 0.9 * sqrt(p (1 - p) / n) = 0.0239.
    assert abs(fast.std() - 0.9 * np.sqrt(0.7 * 0.3 / 300)) < 0.003
    assert abs(fast.std() - slow.std()) < 0.003
    assert abs(fast.mean() - slow.mean()) < 0.004


def test_deterministic_logs_give_a_point_interval_at_the_closed_form():
    logs = list(_two_step_logs(50, seed=4))
    logs[2] = np.tile([0.0, 1.0], 50)  # r = 1 always at the end
    values = fqe_bootstrap_values(*logs[:7], logs[8], gamma=0.9, n_boot=200, seed=0)
    assert np.allclose(values, 0.9)  # V(s0) = 0 + 0.9 * 1


def test_a_pair_missing_from_a_resample_keeps_q_zero():
    # One episode in 200 took a rare action at s0 whose continuation pays 10; resamples
    # that miss it must value that action at 0, like the full fit of such data would.
    logs = list(_two_step_logs(200, seed=5))
    s, a, r, s_next, done, episode, t, initial, _ = logs
    a = a.copy()
    a[0] = 2  # episode 0's first action is the rare one
    pi = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # the target always takes it
    values = fqe_bootstrap_values(s, a, r, s_next, done, episode, t, pi, gamma=0.9,
                                  n_boot=2000, seed=6)
    missing = np.isclose(values, 0.0)
    # P(a resample misses episode 0) = (1 - 1/200)^200 = 0.367
    assert abs(missing.mean() - 0.367) < 0.04


def test_grouped_trajectories_give_the_same_estimates_as_every_episode():
    """IS-family values computed once per distinct trajectory, weighted by how often it
    was logged, equal those computed over every logged episode."""
    from tracerl.ope.grouped import TrajectoryGroups
    from tracerl.ope.importance import EpisodeBatch, estimate_is_family

    rng = np.random.default_rng(7)
    n = 400
    a0, a1 = rng.integers(0, 2, n), rng.integers(0, 2, n)
    s = np.column_stack([np.zeros(n, int), 1 + a0]).reshape(-1)  # s1 in {1, 2} follows a0
    a = np.column_stack([a0, a1]).reshape(-1)
    r = np.column_stack([np.zeros(n), (a1 == a0).astype(float)]).reshape(-1)
    s_next = np.column_stack([1 + a0, np.full(n, -1)]).reshape(-1)
    done = np.tile([False, True], n)
    pi_b = np.where(a == 1, 0.3, 0.7)
    episode, t = np.repeat(np.arange(n), 2), np.tile([0, 1], n)
    target = np.array([[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]])
    q = rng.normal(size=(3, 2))

    groups = TrajectoryGroups(s, a, r, s_next, done, pi_b, episode, t, 3, 2)
    assert groups.n_distinct == 4 and groups.counts.sum() == n  # (a0, a1) pairs
    v = (q * target).sum(axis=1)
    full = EpisodeBatch.from_steps(episode, t, r, pi_b, target[s, a], q[s, a], v[s], 0.9)
    grouped = groups.batch(target, q, 0.9)
    kwargs = {"support": 1.0, "seed": 1, "n_boot": 0, "level": 0.95, "min_ess_fraction": 0.1,
              "min_n_eff": 30.0, "value_range": (0.0, 1.0)}
    for e_full, e_group in zip(estimate_is_family(full, **kwargs),
                               estimate_is_family(grouped, multiplicity=groups.counts,
                                                  **kwargs), strict=True):
        assert e_group.value == pytest.approx(e_full.value, abs=1e-12), e_full.estimator
        assert e_group.ess == pytest.approx(e_full.ess, rel=1e-12)
        assert e_group.n == e_full.n == n
