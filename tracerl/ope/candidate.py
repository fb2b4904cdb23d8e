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
        return self.step_probs is not None or self.policy is not None

    @property
    def has_logged_probs(self) -> bool:
        return self.logged_logprob is not None or self.has_distribution

    def distribution(self, tr: Transitions) -> np.ndarray | None:
        """(n_steps, n_actions) pi_e(. | history_t) per logged step: `step_probs`, else the
        policy's at each step's encoded state; None when the candidate gives neither."""
        if self.step_probs is not None:
            probs = np.asarray(self.step_probs, dtype=np.float64)
            if probs.shape != (tr.n, tr.n_actions):
                raise ValueError(f"candidate {self.name}: step_probs must be ({tr.n}, "
                                 f"{tr.n_actions}) (steps x actions), got {probs.shape}")
            return probs
        if self.policy is not None:
            return np.asarray(self.policy.action_probs(tr.rows), dtype=np.float64)[tr.s]
        return None

    def state_distribution(self, tr: Transitions) -> np.ndarray | None:
        """(n_states, n_actions) pi_e(. | s) when the candidate's distribution is a function
        of the encoded state (a policy; a scored table whose rows agree within each state
        and with its logged log-probs), else None: the layers then work per step."""
        if self.step_probs is None and self.policy is not None:
            per_state = np.asarray(self.policy.action_probs(tr.rows), dtype=np.float64)
        else:
            steps = self.distribution(tr)
            if steps is None:
                return None
            per_state = np.zeros((tr.n_states, tr.n_actions))
            per_state[tr.s] = steps
            if not np.allclose(per_state[tr.s], steps, rtol=0.0, atol=1e-12):
                return None  # the distribution depends on more of the history than s
        if self.logged_logprob is not None:
            with np.errstate(divide="ignore"):
                mine = np.log(per_state[tr.s, tr.a])
            if not np.allclose(mine, self.logged_logprob, rtol=0.0, atol=1e-9,
                               equal_nan=True):
                return None
        return per_state

    def logged_probs(self, tr: Transitions) -> np.ndarray | None:
        """pi_e(a_t | history_t) of every logged action: exp(`logged_logprob`), else read
        off the distribution; None when the candidate gives neither."""
        if self.logged_logprob is not None:
            logp = np.asarray(self.logged_logprob, dtype=np.float64)
            if logp.shape != (tr.n,):
                raise ValueError(f"candidate {self.name}: logged_logprob must hold one "
                                 f"log-prob per logged step ({tr.n}), got {logp.shape}")
            if np.any(np.isnan(logp)) or np.any(logp > 1e-9):
                raise ValueError(f"candidate {self.name}: logged_logprob must be log-probs "
                                 "(<= 0, no NaN)")
            return np.minimum(np.exp(logp), 1.0)
        steps = self.distribution(tr)
        return None if steps is None else steps[np.arange(tr.n), tr.a]

    def behavior_probs(self, tr: Transitions) -> np.ndarray | None:
        """pi_b(a_t | history_t) from `behavior_logprob` (overrides the logs' and the
        behaviour model's), None when not given."""
        if self.behavior_logprob is None:
            return None
        logp = np.asarray(self.behavior_logprob, dtype=np.float64)
        if logp.shape != (tr.n,):
            raise ValueError(f"candidate {self.name}: behavior_logprob must hold one "
                             f"log-prob per logged step ({tr.n}), got {logp.shape}")
        return np.minimum(np.exp(logp), 1.0)


__all__ = ["Candidate"]
