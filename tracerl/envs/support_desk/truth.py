"""The truth of a policy on the support desk: its value by rolling it out in the simulator.

The state space (hidden customer x dialogue) is too large to enumerate, so the truth is a
Monte Carlo mean over `n` fresh episodes with its standard error sd / sqrt(n); the
discounted return is bounded in [-(step_cost + error_cost) * max_actions, 1], so at the
default n = 200,000 the SE is about 0.001 (reported with every value). The policy is asked
once per distinct observable state of each step (a few hundred states stand for 200,000
rows): the same probabilities, at a fraction of a learned policy's featurizing cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tracerl.envs.support_desk.sim import STATE_CARDINALITY, SupportDeskParams, simulate

if TYPE_CHECKING:  # the one protocol (tracerl.rl.policy), for type hints only
    from tracerl.rl.policy import Policy

_RADIX = np.cumprod((1, *STATE_CARDINALITY[:-1])).astype(np.int64)


class _OnDistinctStates:
    """`policy` asked once per distinct state row (mixed-radix code of the state)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        states = np.asarray(states)
        _, at, code = np.unique(states.astype(np.int64) @ _RADIX, return_index=True,
                                       return_inverse=True)
        return np.asarray(self.policy.action_probs(states[at]), dtype=np.float64)[
            code.reshape(-1)]


def mc_truth(policy: Policy, *, gamma: float, n: int = 200_000, seed: int,
             params: SupportDeskParams | None = None, chunk: int = 100_000) -> dict:
    """{"value", "se", "success", "success_se", "mean_length", "n", "seed"} of `policy`."""
    returns, success, lengths = [], [], []
    policy = _OnDistinctStates(policy)
    for k, start in enumerate(range(0, n, chunk)):  # bounded memory
        ep = simulate(policy, min(chunk, n - start), params, seed=seed + 7919 * k)
        returns.append(ep.returns(gamma))
        success.append(ep.success)
        lengths.append(ep.lengths)
    g = np.concatenate(returns)
    ok = np.concatenate(success).astype(float)
    return {"value": float(g.mean()), "se": float(g.std(ddof=1) / np.sqrt(n)),
            "success": float(ok.mean()), "success_se": float(ok.std(ddof=1) / np.sqrt(n)),
            "mean_length": float(np.concatenate(lengths).mean()), "n": int(n), "seed": seed}
