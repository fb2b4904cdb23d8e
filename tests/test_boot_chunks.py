"""The critic's bootstrap in chunks (one Prefect task each in the ope stage) gives the same
interval, to the last bit, for any chunk size, as the bootstrap in one piece."""

from __future__ import annotations

import numpy as np
import pytest

from tests.calculator_ope import prepared, settings, steps_of
from tracerl.envs.calculator.behavior import BehaviorPolicy
from tracerl.ope.evaluate import evaluate_policy
from tracerl.ope.grouped import (
    TrajectoryGroups,
    critic_boot_values,
    critic_bootstrap,
    critic_interval,
)
from tracerl.rl.bellman import BellmanBackup, evaluate

N_BOOT = 37


def _looping_groups(n: int, seed: int) -> tuple[TrajectoryGroups, np.ndarray]:
    """Episodes that walk 0 -> 1 -> 0 ... (a cycle, so refits converge geometrically and
    replicates converge after different numbers of iterations), ending at random."""
    rng = np.random.default_rng(seed)
    s, a, r, s_next, done, episode, t = ([] for _ in range(7))
    for e in range(n):
        state, step = 0, 0
        while True:
            action = int(rng.integers(0, 2))
            end = bool(rng.random() < 0.3) or step == 8
            s.append(state), a.append(action), r.append(float(rng.random() < 0.4 + 0.2 * action))
            s_next.append(-1 if end else 1 - state), done.append(end)
            episode.append(e), t.append(step)
            if end:
                break
            state, step = 1 - state, step + 1
    groups = TrajectoryGroups(*(np.asarray(x) for x in (s, a, r, s_next, done)),
                              np.full(len(s), 0.5), np.asarray(episode), np.asarray(t), 2, 2)
    return groups, np.array([[0.3, 0.7], [0.6, 0.4]])


def _interval(groups: TrajectoryGroups, target: np.ndarray, chunk: int | None
              ) -> tuple[float, float, np.ndarray]:
    boot = critic_bootstrap(groups, target, (0.0, 20.0), 0.95, 2000, N_BOOT, seed=11,
                            chunk=chunk)
    values = [critic_boot_values(groups, boot, i) for i in reversed(range(len(boot.chunks)))]
    values.reverse()  # chunks run in any order; joined in chunk order
    low, high = critic_interval(boot, values, groups.n, 0.95, seed=11)
    return low, high, np.concatenate(values, axis=1)


@pytest.mark.parametrize("chunk", [1, 2, 5, 12, N_BOOT - 1, N_BOOT, 500])
def test_chunked_critic_bootstrap_equals_one_piece_on_a_cyclic_log(chunk):
    groups, target = _looping_groups(400, seed=3)
    whole = _interval(groups, target, None)
    chunked = _interval(groups, target, chunk)
    assert len(critic_bootstrap(groups, target, (0.0, 20.0), 0.99, 1000, N_BOOT, seed=11,
                                chunk=chunk).chunks) == -(-N_BOOT // chunk)
    assert whole[:2] == chunked[:2]
    assert np.array_equal(whole[2], chunked[2])  # every replicate, bit for bit
    assert whole[0] < whole[1]


def test_a_replicate_refitted_in_a_batch_equals_it_refitted_alone():
    """Each replicate stops at its own convergence: the batch it shares does not matter."""
    groups, target = _looping_groups(300, seed=5)
    draws = groups.draws(6, seed=2)
    batch = groups.refit_q(target, draws, 0.95, 2000)
    for i in range(len(draws)):
        alone = groups.refit_q(target, draws[i:i + 1], 0.95, 2000)
        assert np.array_equal(batch[i], alone[0])
    # ... and alone it is the single fit's fixed point (same backup, one replicate).
    weight = groups.kind_weights(draws[:1])
    backup = BellmanBackup(groups.kinds[:, 0], groups.kinds[:, 1], groups.kinds[:, 2],
                           groups.kinds[:, 3], groups.kinds[:, 4] != 0, 2, 2, 0.95,
                           weights=weight)
    q, iterations, change = evaluate(backup, target, 2000)
    assert change <= 1e-10 and 1 < iterations < 2000
    assert np.allclose(q[0], batch[0], atol=1e-8)


def test_evaluate_policy_gives_the_same_records_for_any_boot_chunk():
    steps = steps_of("no_mul_support", 400, 7)
    s = settings(400, n_boot=60, return_range=(-1.05, 0.98))
    data = prepared(steps, s, replay=False)
    policy = BehaviorPolicy("good_coverage")  # stochastic, partly unsupported
    whole = [e.to_dict() for e in evaluate_policy(data, policy, s, seed=4)]
    assert any(r["layer"] == "critic" and r["ci_low"] is not None for r in whole)
    for chunk in (1, 7, 59, 60, 1000):
        again = settings(400, n_boot=60, return_range=(-1.05, 0.98), boot_chunk=chunk)
        assert [e.to_dict() for e in evaluate_policy(data, policy, again, seed=4)] == whole
