"""Step encoders: a schema-v2 step table -> the flat transition arrays (``FATransitions``)
that the function-approximation learners and OPE read.

An encoder turns each step's observable state into a fixed-width row of small integers
(``cardinality[i]`` values for variable i), which ``HashedFeaturizer`` hashes into sparse
features, and each step's action into a code of ``actions``. Generic encoders (over any
agent's dialogue) are registered here; a fixture registers its own when its package is
imported, so this module never imports an environment.
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from tracerl.ope.fa_data import FATransitions


class StepEncoder(Protocol):
    name: str
    cardinality: tuple[int, ...]  # values per state variable: states[:, i] < cardinality[i]
    actions: list[str]            # action vocabulary: code k is actions[k]

    def transitions(self, steps: pa.Table) -> FATransitions:
        """One row per step, ordered by (episode, t); behaviour log-probs NaN if not logged."""
        ...


ENCODERS: dict[str, type] = {}


def register_encoder(cls: type) -> type:
    """Add an encoder class under its `name` (usable as a class decorator)."""
    if ENCODERS.get(cls.name, cls) is not cls:
        raise ValueError(f"step encoder {cls.name!r} is already registered")
    ENCODERS[cls.name] = cls
    return cls


def get_encoder(name: str, **params: Any) -> StepEncoder:
    """A registered step encoder by name and parameters."""
    try:
        cls = ENCODERS[name]
    except KeyError:
        raise ValueError(f"unknown step encoder {name!r}; expected one of "
                         f"{sorted(ENCODERS)}") from None
    return cls(**params)
