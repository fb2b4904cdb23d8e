"""What the OPE layers know of one candidate on one logged dataset.

A candidate is whatever a team wants judged against the logged agent: one of tracerl's
own trained policies, a Python policy named by import path, or a *scored table* (the
candidate's log-probability of each logged action, from teacher forcing a new model, prompt
or agent version on the logged histories). What each layer needs:

- the IS family: ``logged_logprob``, log pi_e(a_t | history_t) of every logged step;
- the critic and DR: ``step_probs``, pi_e(. | history_t) over the action abstraction at every
  logged step (the next step's row serves as the distribution at the next state);
- replay: ``policy``, callable on encoded states (`tracerl.rl.policy.Policy`).

A policy gives all three; a scored table gives what its file holds, and a layer whose input
is missing says so ("not applicable: needs ...") instead of guessing. Arrays are per logged
step of the dataset's `Transitions`, in its (episode, t) order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracerl.rl.policy import Policy
from tracerl.rl.transitions import Transitions


@dataclass(frozen=True, eq=False)
class Candidate:
    """One candidate's inputs to OPE on one dataset (see the module docstring)."""

    name: str
    policy: Policy | None = None
    logged_logprob: np.ndarray | None = None    # (n_steps,) log pi_e(a_t | history_t)
    step_probs: np.ndarray | None = None        # (n_steps, n_actions) pi_e(. | history_t)
    # A second scored table of the behaviour (log pi_b of the logged actions): overrides the
    # logs' action_logprobs and the behaviour model's estimate.
    behavior_logprob: np.ndarray | None = None  # (n_steps,)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # source, scoring settings

    @classmethod
    def of_policy(cls, name: str, policy: Policy, tr: Transitions,
                  provenance: Mapping[str, Any] | None = None) -> Candidate:
        """A policy's candidate: its distribution at each logged step's encoded state."""
        per_state = np.asarray(policy.action_probs(tr.rows), dtype=np.float64)
        step_probs = per_state[tr.s]
        with np.errstate(divide="ignore"):
            logged = np.log(step_probs[np.arange(tr.n), tr.a])
        return cls(name, policy, logged, step_probs, None, dict(provenance or {}))

    @property
    def has_distribution(self) -> bool:
        return self.step_probs is not None

    @property
    def has_logged_probs(self) -> bool:
        return self.logged_logprob is not None


__all__ = ["Candidate"]
