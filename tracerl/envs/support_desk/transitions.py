"""The support desk's step encoder: the dialogue state `encoder.decode` reads off the logged
steps, as the transitions the feature-based learners and OPE read."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from tracerl.data.verifiers import as_numpy
from tracerl.envs.support_desk.encoder import DecodeError, _where, decode, logged_behavior_logp
from tracerl.envs.support_desk.sim import ACTIONS, N_ACTIONS, STATE_CARDINALITY
from tracerl.ope.fa_data import FATransitions


class SupportDeskEncoder:
    """Step encoder: the observable dialogue state (`sim.STATE_VARS`) and the action of each
    step; rewards are the `reward` column (relabel with the support desk's verifiers first:
    they reproduce the simulator's shaped reward), behaviour log-probs as logged."""

    name: ClassVar[str] = "support_desk"
    cardinality: tuple[int, ...] = STATE_CARDINALITY
    actions: list[str] = list(ACTIONS)

    def transitions(self, steps: pa.Table) -> FATransitions:
        """One row per step, ordered by (episode_id, t)."""
        d = decode(steps)
        reward = as_numpy(steps.column("reward")).astype(float)[d.order] if steps.num_rows \
            else np.zeros(0)
        if np.isnan(reward).any():
            rows = d.order[np.isnan(reward)]
            raise DecodeError(f"reward is null on {len(rows)} step(s), e.g. "
                              f"{_where(steps, rows)}: relabel the steps with the support "
                              "desk's verifiers first")
        last = d.last
        next_states = np.zeros_like(d.states)
        next_states[:-1] = d.states[1:]
        next_states[last] = 0  # unused: an episode's last row bootstraps nothing
        return FATransitions(episode=d.episode, t=d.t, states=d.states,
                             actions=d.action, rewards=reward, done=last, has_next=~last,
                             next_states=next_states,
                             behavior_logp=logged_behavior_logp(steps, d), n_actions=N_ACTIONS)
