"""The feature maps the `train` and `ope` params name, over a fitted state encoder: the
learners' (`train.features`) and the critic's (`ope.critic.features`, else the learners'
over every variable). The train and ope stages and `tracerl.evaluate` build them here."""

from __future__ import annotations

from typing import Any

from tracerl.rl.features import FeatureMap, feature_map


def train_features(train: Any, encoder: Any) -> FeatureMap:
    """The learners' feature map (one-hot default: the variables a policy reads)."""
    return feature_map(train.features.model_dump(), encoder.cardinality, len(encoder.actions),
                       encoder.policy_variables)


def critic_features(ope: Any, train: Any, encoder: Any) -> FeatureMap:
    """The critic's feature map: `ope.critic.features`, else the train features over every
    variable (a one-hot critic reads what the policy does not, e.g. the calculator's
    result_ok)."""
    spec = (ope.critic.features or train.features).model_dump()
    if ope.critic.features is None:
        spec["variables"] = None
    return feature_map(spec, encoder.cardinality, len(encoder.actions))
