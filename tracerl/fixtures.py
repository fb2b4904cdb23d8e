"""What a fixture (an environment with a simulator, under ``tracerl/envs/``) brings to the
generic stages, registered by name at the edge.

A dataset names its fixture in params (``datasets.<name>.fixture`` or the pipeline's
``fixture:``); the stages look it up here, so the generic core never imports an
environment. Real logs have no fixture: the layers that need one (replay against a
simulator's rules, truth) are then reported as not applicable, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fixture:
    """name: the key in params. encoder: the registered step encoder (``tracerl.fa_encoders``)
    whose states the function-approximation learners and critic read (None: the tabular
    featurizer path). replay_adapter: builds the ``ReplayAdapter`` that replays a policy
    against the dataset's recorded tool responses. behavior_policy: ``(dataset, params)`` ->
    the policy that logged that dataset, when it is known. truth: ``(policy, params)`` ->
    ``(value, standard_error)``, 0.0 when exact (enumerated), else Monte Carlo."""

    name: str
    encoder: str | None = None
    replay_adapter: Callable[[], Any] | None = None
    behavior_policy: Callable[[str, Mapping[str, Any]], Any] | None = None
    truth: Callable[[Any, Mapping[str, Any]], tuple[float, float]] | None = None


FIXTURES: dict[str, Fixture] = {}


def register_fixture(fixture: Fixture) -> Fixture:
    """Add a fixture under its name; registering a different one under a taken name fails."""
    if FIXTURES.get(fixture.name, fixture) is not fixture:
        raise ValueError(f"fixture {fixture.name!r} is already registered")
    FIXTURES[fixture.name] = fixture
    return fixture


def get_fixture(name: str) -> Fixture:
    """The registered fixture `name` (importing ``tracerl.envs`` registers the built-in ones)."""
    try:
        return FIXTURES[name]
    except KeyError:
        raise ValueError(f"unknown fixture {name!r}; expected one of {sorted(FIXTURES)}") \
            from None
