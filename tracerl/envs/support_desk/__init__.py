"""The support-desk fixture: a multi-turn customer-service agent with known truth.

What it declares (for the fixture registry the pipeline will look up by params):
log generator (`generate` -> episodes, `chat.write_jsonl` -> OpenAI-chat JSONL), behaviour
policy (`behavior_policy`), feature maps (`features.policy_features`,
`features.critic_features`), transitions (`features.to_transitions`: the state
encoder's test oracle) and Monte Carlo truth (`truth.mc_truth`).
`registry` registers the state encoder, verifiers and the fixture (with its replay
adapter, `replay.SupportDeskReplay`); `tracerl.envs` imports it.
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
    truth_episodes: int = 200_000  # Monte Carlo rollouts per candidate's truth
    truth_seed: int = 20261201

    @classmethod
    def from_dict(cls, d: dict | None) -> FixtureParams:
        d = dict(d or {})
        return cls(env=SupportDeskParams.from_dict(d.get("env")),
                   behavior=ScriptedPolicy(**(d.get("behavior") or {})),
                   episodes=int(d.get("episodes", 10_000)),
                   seed=int(d.get("seed", 20261130)),
                   truth_episodes=int((d.get("truth") or {}).get("episodes", 200_000)),
                   truth_seed=int((d.get("truth") or {}).get("seed", 20261201)))


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
