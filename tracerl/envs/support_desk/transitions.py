"""The support desk's state encoder: the dialogue state `encoder.decode` reads off the
logged steps, as the `Transitions` the learners, OPE and coverage read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.verifiers import as_numpy
from tracerl.envs.support_desk.encoder import (
    DecodeError,
    _where,
    decode,
    logged_behavior_logp,
    state_labels,
)
from tracerl.envs.support_desk.sim import ACTIONS, STATE_CARDINALITY, STATE_VARS
from tracerl.rl.encoding import Encoder
from tracerl.rl.transitions import Transitions


class SupportDeskEncoder(Encoder):
    """State encoder: the observable dialogue state (`sim.STATE_VARS`) and the action of each
    step; rewards are the `reward` column (relabel with the support desk's verifiers first:
    they reproduce the simulator's shaped reward), behaviour log-probs as logged. Every
    action is valid in every state (the simulator accepts any action anywhere; a wrong one
    errors or breaks a rule)."""

    name: ClassVar[str] = "support_desk"
    variables = STATE_VARS
    cardinality = STATE_CARDINALITY
    actions = ACTIONS

    def labels(self, rows: np.ndarray, variables: Sequence[int] | None = None) -> list[str]:
        if variables is not None and tuple(variables) != tuple(range(len(STATE_VARS))):
            return super().labels(rows, variables)  # a part of the state: name=value
        return state_labels(np.asarray(rows))

    def transitions(self, steps: pa.Table) -> Transitions:
        """One row per step, ordered by (episode_id, t)."""
        d = decode(steps)
        reward = as_numpy(steps.column("reward")).astype(float)[d.order] if steps.num_rows \
            else np.zeros(0)
        if np.isnan(reward).any():
            rows = d.order[np.isnan(reward)]
            raise DecodeError(f"reward is null on {len(rows)} step(s), e.g. "
                              f"{_where(steps, rows)}: relabel the steps with the support "
                              "desk's verifiers first")
        task = pc.fill_null(steps.column("task"), "").take(pa.array(d.order)) \
            .to_numpy(zero_copy_only=False) if steps.num_rows else np.zeros(0, dtype=object)
        return Transitions.build(
            episode=d.episode, t=d.t, rows=d.states, a=d.action, r=reward, done=d.last,
            actions=self.actions, variables=self.variables,
            behavior_logp=logged_behavior_logp(steps, d), task=task,
            valid=self.valid_actions, labels=self.labels, encoder=self)
