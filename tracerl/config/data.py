"""The data stages' sections: `datasets`, `ingest` (with `redact`), `validate`, `relabel`,
`coverage`, `compare`. Every key has its default here; a params file states only what
differs.

Names a section holds (verifiers, state encoders) are checked against the registries
(`tracerl.config.registries`) and the fixtures the params name, passed in as the
validation context by `tracerl.config.schema`. Checking params runs in every stage, so
these modules import no implementation (`tracerl.config.options` builds the library's
objects from a section, in the stages that use them).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tracerl.config.base import (
    NonNegativeInt,
    PositiveInt,
    Probability,
    Section,
    check_names,
)
from tracerl.config.registry import did_you_mean


class Redact(Section):
    """ingest.redact: secrets and personal data become [REDACTED:<type>:<digest>]."""

    enabled: bool = True
    keep_digest: bool = True            # placeholder keeps a keyed digest (see tracerl.data.redact)
    disable: list[str] = []             # built-in pattern names to switch off
    patterns: dict[str, str] = {}       # extra patterns: type name -> regular expression
    secret_keys: list[str] = []         # extra JSON key names whose values are secrets

    @field_validator("disable")
    @classmethod
    def _known_patterns(cls, names: list[str]) -> list[str]:
        from tracerl.data.redact import PATTERN_NAMES

        for name in names:
            if name not in PATTERN_NAMES:
                raise ValueError(f"unknown pattern {name!r}{did_you_mean(name, PATTERN_NAMES)}"
                                 f"; patterns: {', '.join(PATTERN_NAMES)}")
        return names

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        for name, regex in patterns.items():
            if not name.replace("_", "").isalnum():
                raise ValueError(f"pattern name {name!r}: letters, digits and _ only")
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a regular expression: {exc}") from None
        return patterns


class Ingest(Section):
    max_bad_fraction: Probability = 0.01  # fail the stage when quarantined/read exceeds this
    batch_lines: PositiveInt = 25_000     # records parsed per batch (bounds memory)
    batch_bytes: Annotated[int, Field(ge=1 << 16)] = 8 << 20  # also ends a batch (memory)
    workers: NonNegativeInt = 0           # parser processes; 0 = one per core for large inputs
    max_record_bytes: PositiveInt = 16 << 20   # a longer line is quarantined unread
    max_depth: Annotated[int, Field(ge=1, le=200)] = 64  # nesting of a record's JSON
    strict: bool = False  # true: a field the step schema does not name rejects its record
    redact: Redact = Redact()
    # OpenTelemetry / Langfuse: the attribute (or score) whose value is the episode's reward,
    # and which of several evaluations is (tracerl.data.formats.ReadOptions)
    reward_attribute: str | None = None
    reward_evaluation: str | None = None


HallucinatedTools = Literal["fail", "count"]


class Validate(Section):
    """The rules of the step-table suite; datasets.<name>.validate overrides any of them."""

    reward_min: float = 0.0   # bounds of the per-step scalar reward (default: a 0/1 outcome)
    reward_max: float = 1.0
    tools: list[str] | None = None  # the tools an agent may call (None: any offered)
    hallucinated_tools: HallucinatedTools = "fail"  # a call to a tool not offered: fail | count

    @model_validator(mode="after")
    def _ordered(self) -> Validate:
        if self.reward_min > self.reward_max:
            raise ValueError(f"reward_min {self.reward_min} > reward_max {self.reward_max}")
        return self


class ValidateOverride(Section):
    """datasets.<name>.validate: any of the validate keys, over the section's values."""

    reward_min: float | None = None
    reward_max: float | None = None
    tools: list[str] | None = None
    hallucinated_tools: HallucinatedTools | None = None

    def over(self, rules: Validate) -> Validate:
        """`rules` with what this override sets."""
        return Validate.model_validate({**rules.model_dump(), **self.model_dump(
            exclude_none=True)})




class Dataset(Section):
    """datasets.<name>: where a dataset's logs are and what made them."""

    inputs: list[str] = []      # log files or folders (default: <paths.raw>/<name>.jsonl)
    source: str | None = None   # where the inputs come from (said when they are missing)
    fixture: str | None = None  # the simulator that made these logs (else the pipeline's)
    format: str = "auto"  # a format (tracerl.config.formats), module:FORMAT, or auto
    validate_: ValidateOverride | None = Field(default=None, alias="validate")

    @field_validator("fixture")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        return known_fixture(name)

    @field_validator("format")
    @classmethod
    def _known_format(cls, name: str) -> str:
        from tracerl.config.formats import check_format_name

        return check_format_name(name)


def known_fixture(name: str | None) -> str | None:
    """`name` when it is a fixture (a package under tracerl/envs/), else a ValueError."""
    from tracerl.config.fixtures import FIXTURES

    if name is not None and name not in FIXTURES:
        raise ValueError(f"unknown fixture {name!r}{did_you_mean(name, FIXTURES.names())}"
                         f"; fixtures: {', '.join(FIXTURES.names())}")
    return name


class Filters(Section):
    """The reward components the SWiRL filters read (tracerl.data.relabel.select_training_data)."""

    process: dict[str, float] | None = None
    outcome: str | None = None


class Relabel(Section):
    """Rewards recomputed by versioned verifiers: reward = sum of weight * component. The
    default keeps the logged outcome (the done row's logged reward) as the reward."""

    verifiers: Annotated[list[str], Field(min_length=1)] = ["tau2_outcome@1"]
    weights: dict[str, float] = {"task_success": 1.0}
    filters: Filters | None = None

    @field_validator("verifiers")
    @classmethod
    def _registered(cls, ids: list[str], info: ValidationInfo) -> list[str]:
        check_names("verifiers", ids, info)
        return ids


class CrossAgent(Section):
    target: str
    reference: str


class Coverage(Section):
    """Which states and actions the logs support, by a state encoder's rows."""

    featurizer: str = "dialogue"  # a state encoder (tracerl.config.registries.ENCODERS)
    featurizer_params: dict[str, Any] = {}
    cross_agent: list[CrossAgent] = []  # share of target's (state, action) pairs reference logged

    @field_validator("featurizer")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        check_names("encoders", [name], info)
        return name


class ComparePair(Section):
    agent: str                       # the difference is agent minus baseline
    baseline: str

    @model_validator(mode="after")
    def _two_agents(self) -> ComparePair:
        if self.agent == self.baseline:
            raise ValueError(f"agent and baseline are both {self.agent!r}")
        return self


class Compare(Section):
    """compare: logged agents on the tasks they share (tracerl.data.compare)."""

    pairs: Literal["all"] | list[ComparePair] = "all"  # all: each dataset vs every earlier one
    value: str = "return"            # return (summed rewards) | a reward component on the done row
    success_threshold: float | None = None  # success = value >= this (None: values must be 0/1)
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    n_boot: PositiveInt = 10_000     # paired bootstrap resamples over tasks
    seed: NonNegativeInt = 2026
    max_k: PositiveInt = 8           # pass^k for k = 1 .. min(max_k, fewest trials of a task)
    min_tasks: PositiveInt = 30      # fewer common tasks: the interval is flagged unreliable
    exclude_terminations: list[str] = ["infrastructure_error"]  # episodes that never ran
