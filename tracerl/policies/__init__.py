"""Offline policies learned from featurized step tables (tabular BC and FQI)."""

from tracerl.policies.tabular import BehaviorCloning, FittedQIteration
from tracerl.policies.transitions import Transitions, build_transitions

__all__ = ["BehaviorCloning", "FittedQIteration", "Transitions", "build_transitions"]
