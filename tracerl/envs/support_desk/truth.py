"""The truth of a policy on the support desk: its value by rolling it out in the simulator.

The state space (hidden customer x dialogue) is too large to enumerate, so the truth is a
Monte Carlo mean over `n` fresh episodes with its standard error sd / sqrt(n); the
discounted return is bounded in [-(step_cost + error_cost) * max_actions, 1], so at the
default n = 200,000 the SE is about 0.001 (reported with every value).
"""

from __future__ import annotations

import numpy as np

from tracerl.envs.support_desk.sim import Policy, SupportDeskParams, simulate


def mc_truth(policy: Policy, *, gamma: float, n: int = 200_000, seed: int,
             params: SupportDeskParams | None = None, chunk: int = 100_000) -> dict:
    """{"value", "se", "success", "success_se", "mean_length", "n", "seed"} of `policy`."""
    returns, success, lengths = [], [], []
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
