"""The support-desk fixture's params section (`support_desk:`), with its defaults."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tracerl.config.base import NonNegativeInt, PositiveInt, Probability, Section


class SupportDeskEnv(Section):
    """support_desk.env: the simulator's knobs (tracerl.envs.support_desk.sim)."""

    intent_probs: Annotated[list[Annotated[float, Field(ge=0.0)]],
                            Field(min_length=4, max_length=4)] = [0.35, 0.2, 0.25, 0.2]
    p_intent_stated: Probability = 0.6   # the opening message names the intent
    p_answer: Probability = 0.75         # the user answers a question (else "not sure")
    p_shipped: Probability = 0.5
    refund_days: NonNegativeInt = 30     # refund policy window
    max_days: NonNegativeInt = 90        # days since purchase ~ U{0..max_days}
    step_cost: Annotated[float, Field(ge=0.0)] = 0.01
    error_cost: Annotated[float, Field(ge=0.0)] = 0.02
    escalate_reward: float = 0.2
    max_actions: PositiveInt = 40

    @model_validator(mode="after")
    def _probabilities(self) -> SupportDeskEnv:
        if abs(sum(self.intent_probs) - 1.0) > 1e-9:
            raise ValueError(f"intent_probs: must sum to 1, got {sum(self.intent_probs)}")
        return self


class SupportDeskBehavior(Section):
    """support_desk.behavior: the scripted logger (sim.ScriptedPolicy): its action w.p.
    p_script, else uniform over the ten non-terminal actions; it skips the policy check on
    refunds w.p. p_skip_check."""

    p_script: Probability = 0.4
    p_skip_check: Probability = 0.3
    name: str = "support_desk_scripted_v1"


class SupportDeskTruth(Section):
    episodes: PositiveInt = 200_000   # Monte Carlo rollouts per candidate (SE ~ 0.001)
    seed: NonNegativeInt = 20261201


class SupportDesk(Section):
    """support_desk: the simulator, the logger, how many conversations and the truth."""

    env: SupportDeskEnv = SupportDeskEnv()
    behavior: SupportDeskBehavior = SupportDeskBehavior()
    episodes: PositiveInt = 10_000    # logged conversations per dataset
    seed: NonNegativeInt = 20261130   # dataset i is simulated from seed + i
    truth: SupportDeskTruth = SupportDeskTruth()
