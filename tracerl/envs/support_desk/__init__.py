"""The support-desk fixture: a multi-turn customer-service agent with known truth.

What it declares (for the fixture registry the pipeline will look up by params):
log generator (`generate` -> episodes, `chat.write_jsonl` -> OpenAI-chat JSONL), behaviour
policy (`behavior_policy`), featurizers (`featurizers.policy_featurizer`,
`featurizers.critic_featurizer`), transitions (`features.to_transitions`, until the
openai-chat adapter lands) and Monte Carlo truth (`truth.mc_truth`). Not yet: a replay
adapter (recorded tool responses keyed by tool + canonical arguments).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracerl.envs.support_desk import chat, features, truth
from tracerl.envs.support_desk.sim import (
    ACTIONS,
    Episodes,
    ScriptedPolicy,
    SupportDeskParams,
    simulate,
)


@dataclass(frozen=True)
class FixtureParams:
    """The `support_desk` params block: env knobs, the behaviour policy, sizes and seed."""

    env: SupportDeskParams = field(default_factory=SupportDeskParams)
    behavior: ScriptedPolicy = field(default_factory=ScriptedPolicy)
    episodes: int = 10_000
    seed: int = 20261130

    @classmethod
    def from_dict(cls, d: dict | None) -> FixtureParams:
        d = dict(d or {})
        return cls(env=SupportDeskParams.from_dict(d.get("env")),
                   behavior=ScriptedPolicy(**(d.get("behavior") or {})),
                   episodes=int(d.get("episodes", 10_000)),
                   seed=int(d.get("seed", 20261130)))


def behavior_policy(p: FixtureParams) -> ScriptedPolicy:
    """The logging policy of the dataset (from params)."""
    return p.behavior


def generate(p: FixtureParams, n: int | None = None, seed: int | None = None) -> Episodes:
    """Logged episodes of the behaviour policy."""
    return simulate(p.behavior, p.episodes if n is None else n, p.env,
                    seed=p.seed if seed is None else seed)


NAME = "support_desk"
__all__ = ["ACTIONS", "NAME", "FixtureParams", "behavior_policy", "chat", "features",
           "generate", "truth"]
