"""The calculator fixture's items that read params: each dataset's logs and behaviour
policy from `calculator.behavior.<dataset>`, and the exact truth (every start and branch
enumerated: standard error 0). Declared in the package's `FIXTURE`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.logs import log_records, write_jsonl


def behavior_policy(dataset: str, params: Mapping[str, Any]) -> BehaviorPolicy:
    """The policy that logged `dataset` (calculator.behavior.<dataset>, defaults if absent)."""
    spec = BehaviorSpec.from_params(
        (params.get("calculator", {}).get("behavior") or {}).get(dataset))
    return BehaviorPolicy(dataset, spec)


def truth_metrics(policy: Any, params: Mapping[str, Any]) -> dict[str, float]:
    """Exact success and discounted return of `policy`, standard errors 0."""
    exact = exact_value(policy, float(params["gamma"]))
    return {**exact, "return_se": 0.0, "success_se": 0.0}


def truth(policy: Any, params: Mapping[str, Any]) -> tuple[float, float]:
    """(exact discounted return, 0.0)."""
    return float(exact_value(policy, float(params["gamma"]))["return"]), 0.0


def generate_logs(dataset: str, index: int, params: Mapping[str, Any], path: Path) -> int:
    """The dataset's native JSONL (seed calculator.seed + index); returns steps written."""
    c = params["calculator"]
    records = log_records(
        dataset, int(c["episodes"]), int(c["seed"]) + index, float(c["test_fraction"]),
        BehaviorSpec.from_params((c.get("behavior") or {}).get(dataset, {})),
        float(params["gamma"]))
    return write_jsonl(path, records)

