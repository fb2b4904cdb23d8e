"""The support-desk fixture: a multi-turn customer-service agent with known truth.

This module is what loading the fixture by name runs (`fixture: support_desk` in params):
the declaration below, and the fixture's params (`FixtureParams`). Each item is imported
only when a stage uses it: log generator (`fixture.generate_logs`: `generate` ->
episodes, `chat.write_jsonl` -> OpenAI-chat JSONL), behaviour policy, the state encoder
(`transitions`, over what `encoder.decode` reads off the logged steps), verifiers, the
replay adapter (`replay.SupportDeskReplay`) and the Monte Carlo truth (`truth.mc_truth`).
`features` has the feature maps of the benchmarks and `features.to_transitions`, the state
encoder's test oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracerl.config.fixtures import Fixture
from tracerl.config.registry import Ref
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
_HERE = "tracerl.envs.support_desk"

FIXTURE = Fixture(
    NAME,
    encoder="support_desk",
    encoders={"support_desk": Ref(f"{_HERE}.transitions:SupportDeskEncoder")},
    verifiers={"support_desk_success@1": Ref(f"{_HERE}.verifiers:SupportDeskSuccess"),
               "support_desk_tool_error@1": Ref(f"{_HERE}.verifiers:SupportDeskToolError"),
               "support_desk_step_cost@1": Ref(f"{_HERE}.verifiers:SupportDeskStepCost"),
               "support_desk_escalate@1": Ref(f"{_HERE}.verifiers:SupportDeskEscalate")},
    generate_logs=Ref(f"{_HERE}.fixture:generate_logs"),
    replay_adapter=Ref(f"{_HERE}.replay:SupportDeskReplay"),
    behavior_policy=Ref(f"{_HERE}.fixture:behavior_policy"),
    truth=Ref(f"{_HERE}.fixture:truth"),
    truth_metrics=Ref(f"{_HERE}.fixture:truth_metrics"),
)

__all__ = ["ACTIONS", "FIXTURE", "NAME", "FixtureParams", "behavior_policy", "generate"]
