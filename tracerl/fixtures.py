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
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Fixture:
    """name: the key in params. encoder: the registered state encoder
    (``tracerl.rl.encoding``) of its logs. replay_adapter: builds the ``ReplayAdapter``
    that replays a policy against the dataset's recorded tool responses.
    behavior_policy: ``(dataset, params)`` -> the policy that logged that dataset, when it
    is known. truth: ``(policy, params)`` ->
    ``(value, standard_error)``, 0.0 when exact (enumerated), else Monte Carlo.
    truth_metrics: ``(policy, params)`` -> the truth of every metric OPE reports
    (``return``, ``success``) with their standard errors (``return_se``, ``success_se``).
    generate_logs: ``(dataset, index, params, path)`` -> records written: the generate
    stage's logs of the dataset (the index-th of the pipeline's datasets) at `path`."""

    name: str
    encoder: str | None = None
    replay_adapter: Callable[[], Any] | None = None
    behavior_policy: Callable[[str, Mapping[str, Any]], Any] | None = None
    truth: Callable[[Any, Mapping[str, Any]], tuple[float, float]] | None = None
    truth_metrics: Callable[[Any, Mapping[str, Any]], Mapping[str, float]] | None = None
    generate_logs: Callable[[str, int, Mapping[str, Any], Path], int] | None = None


FIXTURES: dict[str, Fixture] = {}


def register_fixture(fixture: Fixture) -> Fixture:
    """Add a fixture under its name; registering a different one under a taken name fails."""
    if FIXTURES.get(fixture.name, fixture) is not fixture:
        raise ValueError(f"fixture {fixture.name!r} is already registered")
    FIXTURES[fixture.name] = fixture
    return fixture


def fixture_of(params: Mapping[str, Any], dataset: str | None = None) -> Fixture | None:
    """The fixture of `dataset`: ``datasets.<dataset>.fixture``, else the pipeline's
    ``fixture:``; None for real logs (no fixture named)."""
    entry = (params.get("datasets") or {}).get(dataset) if dataset is not None else None
    name = entry.get("fixture") if isinstance(entry, dict) else None
    name = name or params.get("fixture")
    return None if name is None else get_fixture(name)


def get_fixture(name: str) -> Fixture:
    """The registered fixture `name` (importing ``tracerl.envs`` registers the built-in ones)."""
    try:
        return FIXTURES[name]
    except KeyError:
        raise ValueError(f"unknown fixture {name!r}; expected one of {sorted(FIXTURES)}") \
            from None
