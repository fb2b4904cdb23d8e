"""Replay's integer coding: the step-by-step trajectory fold, first-seen positions, and
sampling from per-distinct-state probabilities give what the plain definitions give."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracerl.ope.replay import _distinct_replays, _first_seen
from tracerl.rl.policy import sample_actions
from tracerl.rl.transitions import distinct_rows


class _Log:
    """The few ReplayLog fields the fold reads."""

    def __init__(self, context: np.ndarray, n_args: int, n_results: int, n_errors: int):
        self.context, self.n = context, len(context)
        self.n_tools, self.n_args = 7, n_args
        self.result_values = np.empty(n_results + 1, dtype=object)
        self.error_values = np.empty(n_errors + 1, dtype=object)


def test_fold_matches_the_episodes_by_steps_signature() -> None:
    rng = np.random.default_rng(0)
    n, horizon = 400, 4
    log = _Log(rng.integers(0, 3, n), n_args=5, n_results=4, n_errors=2)
    trace, active = [], np.arange(n)
    signature = np.full((n, 3 + 4 * horizon), -2, dtype=np.int64)
    signature[:, 0] = log.context
    for t in range(horizon):
        active = active[rng.random(len(active)) < 0.8]
        step = {"row": active, "act": rng.integers(0, 2, len(active)),
                "args": rng.integers(0, 2, len(active)),
                "result": rng.integers(-1, 2, len(active)),
                "error": rng.integers(-1, 1, len(active))}
        trace.append(step)
        for j, key in enumerate(("act", "args", "result", "error")):
            signature[active, 3 + 4 * t + j] = step[key]
    complete, unsupported = rng.random(n) < 0.5, rng.random(n) < 0.2
    signature[:, 1], signature[:, 2] = complete, unsupported
    code, first = _distinct_replays(trace, log, complete, unsupported)
    want_code, want_first = distinct_rows(signature)
    np.testing.assert_array_equal(code, want_code)
    np.testing.assert_array_equal(first, want_first)


def test_first_seen_is_the_first_position_of_each_code() -> None:
    codes, _ = pd.factorize(np.random.default_rng(1).integers(0, 9, 200))
    np.testing.assert_array_equal(_first_seen(codes), np.unique(codes, return_index=True)[1])
    assert len(_first_seen(np.zeros(0, dtype=np.int64))) == 0


def test_sampling_per_distinct_state_draws_what_per_row_sampling_draws() -> None:
    rng = np.random.default_rng(2)
    probs = rng.random((6, 4))
    probs /= probs.sum(axis=1, keepdims=True)
    rows = rng.integers(0, 6, 500)
    got = sample_actions(probs, np.random.default_rng(3), rows=rows)
    np.testing.assert_array_equal(got, sample_actions(probs[rows], np.random.default_rng(3)))
