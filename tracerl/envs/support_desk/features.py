"""Support-desk featurizers and the thin episodes -> transition arrays layer.

The observable dialogue state (`sim.STATE_VARS`) is what a featurizer over the chat record
reads off the messages (intent stated or answered, which lookups succeeded, the policy
check's verdict, whether the last tool call errored); entity values (emails, order ids,
amounts) never enter the features, so states repeat while conversations do not.

`to_transitions` turns simulated episodes straight into the arrays the FA policies and OPE
take. The pipeline reads logs through the `openai-chat` adapter and the step encoder
(`encoder.py`) instead, which gives the same arrays exactly (tests/test_support_desk_logs.py):
`to_transitions` stays as that test's oracle and as a shortcut for benchmarks that measure
OPE on simulated episodes.
"""

from __future__ import annotations

import numpy as np

from tracerl.envs.support_desk.sim import N_ACTIONS, STATE_CARDINALITY, STATE_VARS, Episodes
from tracerl.hashed_features import HashedFeaturizer
from tracerl.ope.fa_data import FATransitions

_ALL = tuple(range(len(STATE_VARS)))
_PROGRESS = (0, 2, 3, 4, 5, 7, 9)  # intent, verified, order id, looked up, checked, resolved,
# violated


def policy_featurizer(n_bits: int = 12) -> HashedFeaturizer:
    """phi(s) for policies: bias, every variable, intent x every variable, the full state."""
    templates = ((), *((i,) for i in _ALL), *((0, i) for i in _ALL[1:]), _ALL)
    return HashedFeaturizer("support_desk_policy", STATE_CARDINALITY, templates, n_bits)


def critic_featurizer(n_bits: int = 16) -> HashedFeaturizer:
    """phi(s, a) for the critic and FQI: the full state, its progress part, the action."""
    return HashedFeaturizer("support_desk_critic", STATE_CARDINALITY, (_ALL, _PROGRESS),
                            n_bits, n_actions=N_ACTIONS)


def to_transitions(ep: Episodes, *, logged_propensities: bool = True) -> FATransitions:
    """Flat transition arrays of simulated episodes (ordered by episode, t)."""
    n_steps = len(ep.action)
    last = np.ones(n_steps, dtype=bool)
    last[:-1] = ep.episode[1:] != ep.episode[:-1]
    next_states = np.empty_like(ep.states)
    next_states[:-1] = ep.states[1:]
    next_states[last] = 0  # unused: done rows bootstrap nothing
    return FATransitions(
        episode=ep.episode, t=ep.t.astype(np.int64), states=ep.states,
        actions=ep.action.astype(np.int64), rewards=ep.reward.astype(np.float64),
        done=ep.done & last, has_next=~last, next_states=next_states,
        behavior_logp=ep.logp if logged_propensities else np.full(n_steps, np.nan),
        n_actions=N_ACTIONS)
