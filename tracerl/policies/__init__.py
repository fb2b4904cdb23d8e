"""Offline policies learned from featurized step tables (tabular BC and FQI), the one
`Policy` protocol and the one Bellman backup (tracerl.policies.bellman)."""

from tracerl.policies.bellman import BellmanBackup, Policy
from tracerl.policies.tabular import BehaviorCloning, FittedQIteration
from tracerl.policies.transitions import Transitions, build_transitions

__all__ = ["BehaviorCloning", "BellmanBackup", "FittedQIteration", "Policy", "Transitions",
           "build_transitions"]
