"""The support-desk fixture: a multi-turn customer-service agent with known truth.

This module is what loading the fixture by name runs (`fixture: support_desk` in params):
the declaration below, with its params section (`support_desk:`, `params.py`; as the
simulator takes it, `FixtureParams`). Each item is imported
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
from tracerl.envs.support_desk.params import SupportDesk
from tracerl.envs.support_desk.sim import (
    ACTIONS,
    Episodes,
    ScriptedPolicy,
    SupportDeskParams,
    simulate,
)

_DEFAULT = SupportDesk()


def _simulator(section: SupportDesk) -> SupportDeskParams:
    return SupportDeskParams(**{**section.env.model_dump(),
                                "intent_probs": tuple(section.env.intent_probs)})


def _logger(section: SupportDesk) -> ScriptedPolicy:
    return ScriptedPolicy(**section.behavior.model_dump())


@dataclass(frozen=True)
class FixtureParams:
    """The `support_desk` params section as the simulator takes it (its defaults are the
    section's, `params.SupportDesk`): env knobs, the behaviour policy, sizes and seeds."""

    env: SupportDeskParams = field(default_factory=lambda: _simulator(_DEFAULT))
    behavior: ScriptedPolicy = field(default_factory=lambda: _logger(_DEFAULT))
    episodes: int = _DEFAULT.episodes
    seed: int = _DEFAULT.seed
    truth_episodes: int = _DEFAULT.truth.episodes  # Monte Carlo rollouts per candidate
    truth_seed: int = _DEFAULT.truth.seed

    @classmethod
    def of(cls, section: SupportDesk) -> FixtureParams:
        """From the checked `support_desk:` section."""
        return cls(env=_simulator(section), behavior=_logger(section),
                   episodes=section.episodes, seed=section.seed,
                   truth_episodes=section.truth.episodes, truth_seed=section.truth.seed)

    @classmethod
    def from_dict(cls, d: dict | None) -> FixtureParams:
        """From a raw `support_desk:` mapping (checked: unknown keys, ranges)."""
        return cls.of(SupportDesk.model_validate(d or {}))


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
    params=SupportDesk,
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
