"""The calculator fixture's params section (`calculator:`), with its defaults."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tracerl.config.base import NonNegativeInt, PositiveInt, Probability, Section
from tracerl.config.registry import did_you_mean


class Behavior(Section):
    """calculator.behavior.<dataset>: the logging policy. The scripted call is taken with
    probability lookup / op / final, else a uniform call among the valid ones; at the op
    stage only `ops` are valid to the logger (tracerl.envs.calculator.behavior.BehaviorSpec)."""

    lookup: Probability = 0.88
    op: Probability = 0.62
    final: Probability = 0.90
    ops: Annotated[list[Literal["add", "sub", "mul"]], Field(min_length=1)] = [
        "add", "sub", "mul"]


class Calculator(Section):
    """calculator: the simulated datasets and how each was logged."""

    datasets: Annotated[list[str], Field(min_length=1)]  # one behaviour policy each
    episodes: PositiveInt = 3000          # per dataset
    seed: NonNegativeInt = 20261129       # dataset i is simulated from seed + i
    test_fraction: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.2  # episodes in the test split
    behavior: dict[str, Behavior] = {}    # per dataset; a dataset not named logs with the defaults

    @model_validator(mode="after")
    def _behaviour_of_known_datasets(self) -> Calculator:
        for name in self.behavior:
            if name not in self.datasets:
                raise ValueError(f"behavior.{name}: not one of calculator.datasets "
                                 f"{self.datasets}{did_you_mean(name, self.datasets)}")
        if len(set(self.datasets)) != len(self.datasets):
            raise ValueError(f"datasets: a name appears twice in {self.datasets}")
        return self

    def behavior_of(self, dataset: str) -> Behavior:
        """The logging policy's knobs of `dataset`."""
        return self.behavior.get(dataset) or Behavior()
