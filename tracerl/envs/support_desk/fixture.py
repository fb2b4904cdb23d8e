"""The support desk's items that read params (declared in the package's `FIXTURE`): its
logs, the behaviour policy and the Monte Carlo truth."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracerl.envs.support_desk import FixtureParams, chat, generate
from tracerl.envs.support_desk.sim import ScriptedPolicy
from tracerl.envs.support_desk.truth import mc_truth

if TYPE_CHECKING:
    from tracerl.config.schema import Params


def fixture_params(params: Params) -> FixtureParams:
    """The `support_desk` section, as the simulator takes it."""
    return FixtureParams.of(params.support_desk)


def behavior_policy(dataset: str, params: Params) -> ScriptedPolicy:
    """The scripted logger of the datasets (support_desk.behavior)."""
    return fixture_params(params).behavior


def truth_metrics(policy: Any, params: Params) -> dict[str, float]:
    """Monte Carlo value (discounted return) and success of `policy` with their standard
    errors: support_desk.truth.episodes fresh rollouts from support_desk.truth.seed."""
    p = fixture_params(params)
    mc = mc_truth(policy, gamma=params.gamma, n=p.truth_episodes, seed=p.truth_seed,
                  params=p.env)
    return {"return": mc["value"], "return_se": mc["se"], "success": mc["success"],
            "success_se": mc["success_se"]}


def truth(policy: Any, params: Params) -> tuple[float, float]:
    """(Monte Carlo value, its standard error)."""
    m = truth_metrics(policy, params)
    return m["return"], m["return_se"]


def generate_logs(dataset: str, index: int, params: Params, path: Path) -> int:
    """support_desk.episodes conversations of the scripted logger as OpenAI-chat JSONL
    (seed support_desk.seed + index); returns conversations written."""
    p = fixture_params(params)
    episodes = generate(p, seed=p.seed + index)
    chat.write_jsonl(episodes, path, behavior_policy=p.behavior.name, gamma=params.gamma)
    return episodes.n_episodes
