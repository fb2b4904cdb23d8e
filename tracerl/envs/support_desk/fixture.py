"""The support desk's items that read params (declared in the package's `FIXTURE`): its
logs, the behaviour policy and the Monte Carlo truth."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracerl.envs.support_desk import FixtureParams, chat, generate
from tracerl.envs.support_desk.sim import ScriptedPolicy
from tracerl.envs.support_desk.truth import mc_truth


def fixture_params(params: Mapping[str, Any]) -> FixtureParams:
    """The `support_desk` params block (defaults for what it leaves out)."""
    return FixtureParams.from_dict(params.get("support_desk"))


def behavior_policy(dataset: str, params: Mapping[str, Any]) -> ScriptedPolicy:
    """The scripted logger of the datasets (support_desk.behavior)."""
    return fixture_params(params).behavior


def truth_metrics(policy: Any, params: Mapping[str, Any]) -> dict[str, float]:
    """Monte Carlo value (discounted return) and success of `policy` with their standard
    errors: support_desk.truth.episodes fresh rollouts from support_desk.truth.seed."""
    p = fixture_params(params)
    mc = mc_truth(policy, gamma=float(params["gamma"]), n=p.truth_episodes, seed=p.truth_seed,
                  params=p.env)
    return {"return": mc["value"], "return_se": mc["se"], "success": mc["success"],
            "success_se": mc["success_se"]}


def truth(policy: Any, params: Mapping[str, Any]) -> tuple[float, float]:
    """(Monte Carlo value, its standard error)."""
    m = truth_metrics(policy, params)
    return m["return"], m["return_se"]


def generate_logs(dataset: str, index: int, params: Mapping[str, Any], path: Path) -> int:
    """support_desk.episodes conversations of the scripted logger as OpenAI-chat JSONL
    (seed support_desk.seed + index); returns conversations written."""
    p = fixture_params(params)
    episodes = generate(p, seed=p.seed + index)
    chat.write_jsonl(episodes, path, behavior_policy=p.behavior.name,
                     gamma=float(params["gamma"]))
    return episodes.n_episodes

