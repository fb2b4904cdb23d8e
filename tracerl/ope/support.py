"""Support: which of a target's decisions the data covers, and how much of its play.

A target's decision (s, a) is *covered* when its density ratio to the behaviour model is
bounded: pi_e(a|s) / pi_hat_b(a|s) <= 1 / min_behavior_prob, i.e. pi_hat_b(a|s) >=
min_behavior_prob x pi_e(a|s). pi_hat_b is the maximum-likelihood fit of the logged action
distribution (`tracerl.rl.learners.behavior_model`: the frequencies N(s, a) / N(s) over
one-hot features, a logistic regression otherwise). So an action never logged at s (over
one-hot features) is never covered, a deterministic target is covered where the logs take
its action at least min_behavior_prob of the time, and the logging policy is covered on its
own logs (its ratio is about 1).

`support`, the one number every layer reports, is the target's probability, from the
logged starts, of an episode whose every decision is covered: the critic's value
(`tracerl.ope.critic`) of the reach problem, reward 1 on reaching the end, gamma = 1, the
target restricted to covered actions, so V(s) = P(finish from s without an uncovered
decision). Over one-hot features this is exact on the logged transitions (an unlogged pair
keeps Q = 0). When the target puts all its mass on covered actions at every logged state it
never leaves them: support is 1 and nothing is solved. `decisions` is the share of the
target's mass, at the logged steps' states, on covered actions (a detail every layer gives).
"""

from __future__ import annotations

import numpy as np

from tracerl.ope.critic import Critic, Design
from tracerl.ope.estimate import LOW_SUPPORT, UNSUPPORTED_ACTIONS
from tracerl.rl.features import FeatureMap
from tracerl.rl.transitions import Transitions


def covered(behavior_probs: np.ndarray, valid: np.ndarray, target: np.ndarray,
            min_behavior_prob: float) -> np.ndarray:
    """(n_states, n_actions) bool: pi_hat_b(a|s) >= min_behavior_prob x pi_e(a|s) > 0
    (the ratio bounded by 1 / min_behavior_prob), a valid."""
    behavior_probs = np.asarray(behavior_probs)
    return ((behavior_probs > 0) & (behavior_probs >= min_behavior_prob * np.asarray(target))
            & np.asarray(valid, dtype=bool))


def decision_support(tr: Transitions, target: np.ndarray, cover: np.ndarray) -> float:
    """Share of the target's mass, at the logged steps' states, on covered actions."""
    mass = (target * cover).sum(axis=1)
    return float(mass[tr.s].mean()) if tr.n else 1.0


def episode_support(tr: Transitions, target: np.ndarray, cover: np.ndarray,
                    features: FeatureMap, *, iterations: int = 1000, alpha: float = 1e-6,
                    design: Design | None = None) -> float:
    """The target's probability of an episode whose every decision is covered (see the
    module docstring); 1 without solving anything when every logged state is covered."""
    mass = (target * cover).sum(axis=1)
    visited = np.zeros(tr.n_states, dtype=bool)
    visited[tr.s] = True
    if np.all(mass[visited] >= 1.0 - 1e-12):
        return 1.0
    reach = Critic(features, gamma=1.0, alpha=alpha, iterations=iterations).fit(
        tr, target * cover, reward=tr.done.astype(np.float64), design=design)
    return float(np.clip(reach.value_, 0.0, 1.0))


def support_flags(support: float, *, min_support: float, unsupported: bool = False
                  ) -> list[str]:
    """UNSUPPORTED_ACTIONS when the target puts mass the data does not cover (support < 1,
    or the caller says so); LOW_SUPPORT when support < min_support (never ranked first)."""
    if not 0.0 <= support <= 1.0:
        raise ValueError(f"support must lie in [0, 1], got {support}")
    flags = []
    if unsupported or support < 1.0:
        flags.append(UNSUPPORTED_ACTIONS)
    if support < min_support:
        flags.append(LOW_SUPPORT)
    return flags
