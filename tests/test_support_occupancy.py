"""The critic layer's support (`tracerl.ope.support.occupancy_ess`, `critic_support`): the
effective episodes of a candidate's state-action occupancy over the log's empirical model,
on tiny tabular logs whose values are computed by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from tracerl.ope.estimate import LOW_SUPPORT
from tracerl.ope.support import Support, critic_support, enough_per_task, occupancy_ess
from tracerl.rl.transitions import Transitions

# States: A (start), B, C, D. Step 0 at A: action 0 -> B, action 1 -> C; step 1 at B or C:
# action 0 -> D; step 2 at D: action 0 or 1 ends. Eight episodes, every path twice: the
# branches recombine at D.
A, B, C, D = 0, 1, 2, 3


def recombining_log() -> Transitions:
    episode, t, rows, a, done = [], [], [], [], []
    paths = [(0, 0), (0, 1), (1, 0), (1, 1)] * 2
    for i, (first, last) in enumerate(paths):
        for step, (state, action) in enumerate(((A, first), (B if first == 0 else C, 0),
                                                (D, last))):
            episode.append(i)
            t.append(step)
            rows.append([state])
            a.append(action)
            done.append(step == 2)
    n = len(a)
    return Transitions.build(episode=np.array(episode), t=np.array(t),
                             rows=np.array(rows), a=np.array(a), r=np.zeros(n),
                             done=np.array(done), actions=("x", "y"), variables=("s",),
                             behavior_logp=np.full(n, np.log(0.5)))


def table(tr: Transitions, by_state: dict[int, tuple[float, float]]) -> np.ndarray:
    """(n_states, 2) from {state value: (p0, p1)} (rows sorted by value: index = value)."""
    assert tr.rows[:, 0].tolist() == [A, B, C, D]
    return np.array([by_state[s] for s in (A, B, C, D)], dtype=np.float64)


def test_the_logger_has_every_episode() -> None:
    # N(A,0) = N(A,1) = N(B,0) = N(C,0) = N(D,0) = N(D,1) = 4; the logger's frequencies
    # 1/2 at A and D: d = 1/2 on each of the six cells, E[T] = 3,
    # sum d^2 / N = 6 x 0.25 / 4 = 0.375, ESS = 3 / 0.375 = 8 = n.
    tr = recombining_log()
    logger = table(tr, {A: (0.5, 0.5), B: (1, 0), C: (1, 0), D: (0.5, 0.5)})
    ess = occupancy_ess(tr, logger, np.zeros(tr.n_episodes, dtype=np.int64), 1)
    assert ess == pytest.approx([8.0, 8.0], abs=1e-12)  # the one group, and the whole log


def test_a_deterministic_candidate_on_a_thin_branch() -> None:
    # Right at A, action 1 at D: d(A,1) = d(C,0) = d(D,1) = 1, sum d^2 / N = 3 / 4,
    # E[T] = 3: ESS = 4. Its trajectory weights: 1 / (0.5 x 0.5) = 4 on the 2 episodes
    # that follow it, Kish ESS (2 x 4)^2 / (2 x 16) = 2. The occupancy counts the four
    # logged visits of (D, 1) that came through B as well.
    tr = recombining_log()
    det = table(tr, {A: (0, 1), B: (1, 0), C: (1, 0), D: (0, 1)})
    ess = occupancy_ess(tr, det, np.zeros(tr.n_episodes, dtype=np.int64), 1)
    assert ess == pytest.approx([4.0, 4.0], abs=1e-12)
    w = np.array([0, 0, 0, 4.0, 0, 0, 0, 4.0])  # paths (1, 1) are episodes 3 and 7
    # min_n_eff 8 (one task): the critic's share 4 / 8, the trajectory's 2 / 8.
    share, occupancy = critic_support(tr, det, w, 8.0)
    assert share == pytest.approx(0.5) and occupancy == pytest.approx(4.0)
    assert enough_per_task(tr, w, 8.0)[0] == pytest.approx(0.25)


def test_per_layer_support_and_flags() -> None:
    sup = Support(0.25, 1.0, 1.0, 0.25, 10.0, 2.0, 4.0, "distribution", critic=0.96,
                  occupancy_episodes=7.7)
    assert sup.of_layer("critic") == 0.96 and sup.of_layer("importance") == 0.25
    assert sup.flags(0.95, "critic") == [] and sup.flags(0.95) == [LOW_SUPPORT]
    without = Support(0.25, 1.0, 1.0, 0.25, 10.0, 2.0, 4.0, "distribution")
    assert without.of_layer("critic") == 0.25  # no occupancy: the trajectory support


def test_a_closed_loop_falls_back_to_the_discount() -> None:
    # One state, action 0 loops back (logged 2x), action 1 ends (logged 2x); a candidate
    # always taking 0 never leaves the empirical chain: singular at gamma 1.
    tr = Transitions.build(episode=np.array([0, 0, 0, 1]), t=np.array([0, 1, 2, 0]),
                           rows=np.zeros((4, 1), dtype=np.int64), a=np.array([0, 0, 1, 1]),
                           r=np.zeros(4), done=np.array([False, False, True, True]),
                           actions=("stay", "go"), variables=("s",))
    loop = np.array([[1.0, 0.0]])
    assert np.isnan(occupancy_ess(tr, loop, np.zeros(2, dtype=np.int64), 1)).all()
    # gamma 0.9: visits 1 / (1 - 0.9) = 10 on (s, 0), N = 2, E[T] / sum d^2 / N = 10 / 50,
    # but no logged (s, 0) ends an episode: reach 0, no effective episode.
    share, occupancy = critic_support(tr, loop, np.zeros(2), 30.0, gamma=0.9)
    assert occupancy == 0.0 and share == 0.0
    half = np.array([[0.5, 0.5]])
    # Half stay, half go: visits 1 + 1/2 + 1/4 ... = 2 at gamma 1 (no fallback): d = (1, 1),
    # N = (2, 2), reach = d(s, go) x 1 = 1, ESS = 2 / (1/2 + 1/2) = 2 = n.
    assert occupancy_ess(tr, half, np.zeros(2, dtype=np.int64), 1) == pytest.approx([2, 2])


def test_uncovered_mass_leaves_the_chain_and_the_episodes_with_it() -> None:
    # The recombining log, a candidate going right at A and at D half action 1, half an
    # action the logs never show there (restricted to the covered: (0, 0.5) at D).
    # d(A,1) = d(C,0) = 1, d(D,1) = 1/2: E[T] = 2.5, sum d^2 / N = (1 + 1 + 1/4) / 4,
    # reach 1/2 (the D-1 endings): ESS = 0.5 x 2.5 / 0.5625.
    tr = recombining_log()
    half = table(tr, {A: (0, 1), B: (1, 0), C: (1, 0), D: (0, 0.5)})
    ess = occupancy_ess(tr, half, np.zeros(tr.n_episodes, dtype=np.int64), 1)
    assert ess == pytest.approx([0.5 * 2.5 / 0.5625] * 2)
