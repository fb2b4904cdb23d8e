"""Support-desk feature maps and the thin episodes -> `Transitions` layer.

The observable dialogue state (`sim.STATE_VARS`) is what a featurizer over the chat record
reads off the messages (intent stated or answered, which lookups succeeded, the policy
check's verdict, whether the last tool call errored); entity values (emails, order ids,
amounts) never enter the features, so states repeat while conversations do not.

`to_transitions` turns simulated episodes straight into the `Transitions` the learners and
OPE take. The pipeline reads logs through the `openai-chat` adapter and the state encoder
(`encoder.py`) instead, which gives the same transitions exactly (tests/test_support_desk_logs.py):
`to_transitions` stays as that test's oracle and as a shortcut for benchmarks that measure
OPE on simulated episodes.
"""

from __future__ import annotations

import numpy as np

from tracerl.envs.support_desk.sim import N_ACTIONS, STATE_CARDINALITY, STATE_VARS, Episodes
from tracerl.rl.features import Hashed
from tracerl.rl.transitions import Transitions

_ALL = tuple(range(len(STATE_VARS)))
_PROGRESS = (0, 2, 3, 4, 5, 7, 9)  # intent, verified, order id, looked up, checked, resolved,
# violated


def policy_features(n_bits: int = 12) -> Hashed:
    """phi(s) for policies: bias, every variable, intent x every variable, the full state."""
    templates = ((), *((i,) for i in _ALL), *((0, i) for i in _ALL[1:]), _ALL)
    return Hashed(STATE_CARDINALITY, templates, n_bits, n_actions=N_ACTIONS)


def critic_features(n_bits: int = 16) -> Hashed:
    """phi(s, a) for the critic and FQI: the full state, its progress part, the action."""
    return Hashed(STATE_CARDINALITY, (_ALL, _PROGRESS), n_bits, n_actions=N_ACTIONS)


def to_transitions(ep: Episodes, *, logged_propensities: bool = True) -> Transitions:
    """The transitions of simulated episodes (ordered by episode, t), as the encoder gives
    those of their logs."""
    from tracerl.envs.support_desk.transitions import SupportDeskEncoder

    n_steps = len(ep.action)
    last = np.ones(n_steps, dtype=bool)
    last[:-1] = ep.episode[1:] != ep.episode[:-1]
    encoder = SupportDeskEncoder()
    return Transitions.build(
        episode=ep.episode, t=ep.t, rows=ep.states, a=ep.action, r=ep.reward,
        done=ep.done & last, actions=encoder.actions, variables=STATE_VARS,
        behavior_logp=ep.logp if logged_propensities else None,
        valid=encoder.valid_actions, labels=encoder.labels, encoder=encoder)
