"""The calculator fixture's items that read params: each dataset's logs and behaviour
policy from `calculator.behavior.<dataset>`, and the exact truth (every start and branch
enumerated: standard error 0). Declared in the package's `FIXTURE`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracerl.envs.calculator.behavior import BehaviorPolicy, BehaviorSpec
from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.logs import log_records, write_jsonl

if TYPE_CHECKING:
    from tracerl.config.schema import Params
    from tracerl.envs.calculator.params import Behavior


def behavior_spec(behavior: Behavior) -> BehaviorSpec:
    """The simulator's BehaviorSpec of a `calculator.behavior.<dataset>` section."""
    return BehaviorSpec(lookup=behavior.lookup, op=behavior.op, final=behavior.final,
                        ops=tuple(behavior.ops))


def behavior_policy(dataset: str, params: Params) -> BehaviorPolicy:
    """The policy that logged `dataset` (calculator.behavior.<dataset>)."""
    return BehaviorPolicy(dataset, behavior_spec(params.calculator.behavior_of(dataset)))


def truth_metrics(policy: Any, params: Params) -> dict[str, float]:
    """Exact success and discounted return of `policy`, standard errors 0."""
    exact = exact_value(policy, params.gamma)
    return {**exact, "return_se": 0.0, "success_se": 0.0}


def truth(policy: Any, params: Params) -> tuple[float, float]:
    """(exact discounted return, 0.0)."""
    return float(exact_value(policy, params.gamma)["return"]), 0.0


def generate_logs(dataset: str, index: int, params: Params, path: Path) -> int:
    """The dataset's native JSONL (seed calculator.seed + index); returns steps written."""
    c = params.calculator
    records = log_records(dataset, c.episodes, c.seed + index, c.test_fraction,
                          behavior_spec(c.behavior_of(dataset)), params.gamma)
    return write_jsonl(path, records)
