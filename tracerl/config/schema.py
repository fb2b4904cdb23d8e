"""The schema of params.yaml, checked before any stage (or `tracerl ingest`) does work.

Every mistake becomes one line naming the file and the dotted key: an unknown key (with
"did you mean"), a missing section or key, a wrong type, a value out of range. Models
forbid unknown keys and take no silent coercion (strict: `episodes: "3000"` or
`episodes: true` is an error, an integer where a float is expected is fine).

To add a knob: add a field to its section's model below (with a default if older params
files may lack it). To add a section: a new `Section` subclass and a field on `Params`.
A per-pipeline params file (`pipelines/<name>/params.yaml`) is checked with the same
models: `validate_params(load_params(path), path)`.
"""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from tracerl.config.base import NonNegativeInt, PositiveInt, Probability, Section
from tracerl.config.base import did_you_mean as _did_you_mean
from tracerl.config.learning import Ope, Report, Train  # the learning half's sections

CALCULATOR_OPS = ("add", "sub", "mul")


class ParamsError(ValueError):
    """params.yaml does not fit the schema; str() is one line per mistake."""

    def __init__(self, path: Path | str, problems: list[str]) -> None:
        self.path = str(path)
        self.problems = problems
        super().__init__("\n".join(f"{self.path}: {p}" for p in problems))


class Behavior(Section):
    lookup: Probability = 0.88
    op: Probability = 0.62
    final: Probability = 0.90
    ops: Annotated[list[Literal["add", "sub", "mul"]], Field(min_length=1)] = [
        "add", "sub", "mul"]


class Calculator(Section):
    datasets: Annotated[list[str], Field(min_length=1)]
    episodes: PositiveInt
    seed: NonNegativeInt
    test_fraction: Annotated[float, Field(ge=0.0, lt=1.0)]
    behavior: dict[str, Behavior] = {}

    @model_validator(mode="after")
    def _behaviour_of_known_datasets(self) -> Calculator:
        for name in self.behavior:
            if name not in self.datasets:
                raise ValueError(f"behavior.{name}: not one of calculator.datasets "
                                 f"{self.datasets}{_did_you_mean(name, self.datasets)}")
        if len(set(self.datasets)) != len(self.datasets):
            raise ValueError(f"datasets: a name appears twice in {self.datasets}")
        return self


class Ingest(Section):
    max_bad_fraction: Probability = 0.01
    batch_lines: PositiveInt = 25_000
    batch_bytes: Annotated[int, Field(ge=1 << 16)] = 8 << 20  # also ends a batch (memory)
    workers: NonNegativeInt = 0
    max_record_bytes: PositiveInt = 16 << 20   # a longer line is quarantined unread
    max_depth: Annotated[int, Field(ge=1, le=200)] = 64  # nesting of a record's JSON
    strict: bool = False  # true: a field the step schema does not name rejects its record
    redact: Redact = Field(default_factory=lambda: Redact())
    # OpenTelemetry / Langfuse: the attribute (or score) whose value is the episode's reward,
    # and which of several evaluations is (tracerl.data.adapters.ReadOptions)
    reward_attribute: str | None = None
    reward_evaluation: str | None = None


class Redact(Section):
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
                raise ValueError(f"unknown pattern {name!r}{_did_you_mean(name, PATTERN_NAMES)}"
                                 f"; patterns: {', '.join(PATTERN_NAMES)}")
        return names

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        import re

        for name, regex in patterns.items():
            if not name.replace("_", "").isalnum():
                raise ValueError(f"pattern name {name!r}: letters, digits and _ only")
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a regular expression: {exc}") from None
        return patterns


Ingest.model_rebuild()


class Validate(Section):
    reward_min: float
    reward_max: float
    tools: list[str] | None = None  # the tools an agent may call (None: any offered)
    hallucinated_tools: Literal["fail", "count"] = "fail"

    @model_validator(mode="after")
    def _ordered(self) -> Validate:
        if self.reward_min > self.reward_max:
            raise ValueError(f"reward_min {self.reward_min} > reward_max {self.reward_max}")
        return self


class ValidateOverride(Section):
    """datasets.<name>.validate: any of the validate keys, over the section's defaults."""

    reward_min: float | None = None
    reward_max: float | None = None
    tools: list[str] | None = None
    hallucinated_tools: Literal["fail", "count"] | None = None


def _fixture(name: str | None) -> str | None:
    from tracerl.config.fixtures import FIXTURES

    if name is not None and name not in FIXTURES:
        raise ValueError(f"unknown fixture {name!r}{_did_you_mean(name, list(FIXTURES))}"
                         f"; fixtures: {', '.join(sorted(FIXTURES))}")
    return name


class Dataset(Section):
    """datasets.<name> of a pipeline on logs (e.g. pipelines/tau2/params.yaml)."""

    inputs: list[str] = []
    fixture: str | None = None  # the simulator that made these logs (else the pipeline's)
    format: Literal["auto", "jsonl", "tau2", "openai-chat", "anthropic", "atif", "claude-code",
                    "langfuse", "otel-genai"] = "auto"
    validate_: ValidateOverride | None = Field(default=None, alias="validate")

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)
    _check = field_validator("fixture")(classmethod(lambda cls, v: _fixture(v)))


class SupportDeskEnv(Section):
    """support_desk.env: the simulator's knobs (tracerl.envs.support_desk.sim)."""

    intent_probs: Annotated[list[Annotated[float, Field(ge=0.0)]],
                            Field(min_length=4, max_length=4)] = [0.35, 0.2, 0.25, 0.2]
    p_intent_stated: Probability = 0.6
    p_answer: Probability = 0.75
    p_shipped: Probability = 0.5
    refund_days: NonNegativeInt = 30
    max_days: NonNegativeInt = 90
    step_cost: Annotated[float, Field(ge=0.0)] = 0.01
    error_cost: Annotated[float, Field(ge=0.0)] = 0.02
    escalate_reward: float = 0.2
    max_actions: PositiveInt = 40

    @model_validator(mode="after")
    def _probabilities(self) -> SupportDeskEnv:
        if abs(sum(self.intent_probs) - 1.0) > 1e-9:
            raise ValueError(f"intent_probs: must sum to 1, got {sum(self.intent_probs)}")
        return self


class SupportDeskBehavior(Section):
    """support_desk.behavior: the scripted logger (sim.ScriptedPolicy)."""

    p_script: Probability = 0.4
    p_skip_check: Probability = 0.3
    name: str = "support_desk_scripted_v1"


class SupportDeskTruth(Section):
    episodes: PositiveInt = 200_000   # Monte Carlo rollouts per candidate
    seed: NonNegativeInt = 20261201


class SupportDesk(Section):
    """The support-desk fixture's block (tracerl.envs.support_desk.FixtureParams)."""

    env: SupportDeskEnv = Field(default_factory=lambda: SupportDeskEnv())
    behavior: SupportDeskBehavior = Field(default_factory=lambda: SupportDeskBehavior())
    episodes: PositiveInt = 10_000    # logged conversations per dataset
    seed: NonNegativeInt = 20261130
    truth: SupportDeskTruth = Field(default_factory=lambda: SupportDeskTruth())


class Paths(Section):
    raw: str
    ingested: str
    labelled: str
    models: str
    reports: str
    metrics: str
    plots: str
    gx: str = "gx"                   # the kept Great Expectations suite and checkpoints
    inbox: str | None = None         # nightly: new raw log files are dropped here
    landed: str | None = None        # nightly: one partition per ingested inbox file
    manifest: str | None = None      # nightly: content hashes of the files seen


class Dask(Section):
    address: str | None = None       # an existing cluster's scheduler; None: a local one
    n_workers: PositiveInt = 2
    threads_per_worker: PositiveInt = 1


class Runtime(Section):
    task_runner: Literal["sequential", "dask"] = "sequential"
    dask: Dask = Field(default_factory=lambda: Dask())


class Nightly(Section):
    dataset: str                     # dataset of a file dropped at the top of the inbox


class PipelinePaths(Paths):
    """A pipeline on logs generates nothing and trains nothing (yet)."""

    raw: str | None = None
    models: str | None = None


class Filters(Section):
    """The reward components the SWiRL filters read (tracerl.data.relabel.select_training_data)."""

    process: dict[str, float] | None = None
    outcome: str | None = None


class Relabel(Section):
    verifiers: Annotated[list[str], Field(min_length=1)]
    weights: dict[str, float]
    filters: Filters | None = None

    @field_validator("verifiers")
    @classmethod
    def _registered(cls, ids: list[str]) -> list[str]:
        from tracerl.config.registries import VERIFIERS

        for vid in ids:
            if vid not in VERIFIERS:
                raise ValueError(f"unknown verifier {vid!r}{_did_you_mean(vid, list(VERIFIERS))}")
        return ids


def _featurizer(name: str) -> str:
    from tracerl.config.registries import ENCODERS

    if name not in ENCODERS:
        raise ValueError(f"unknown state encoder {name!r}{_did_you_mean(name, list(ENCODERS))}"
                         f"; encoders: {', '.join(sorted(ENCODERS))}")
    return name


class CrossAgent(Section):
    target: str
    reference: str


class Coverage(Section):
    featurizer: str  # the state encoder whose states coverage counts (tracerl.rl.encoding)
    featurizer_params: dict[str, Any] = {}
    cross_agent: list[CrossAgent] = []
    _check = field_validator("featurizer")(classmethod(lambda cls, v: _featurizer(v)))


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


class Table(Section):
    mc_episodes: PositiveInt
    seed: NonNegativeInt


class Params(Section):
    gamma: Annotated[float, Field(gt=0.0, le=1.0)]
    fixture: str | None = None  # the datasets' simulator (tracerl.fixtures); None: real logs
    calculator: Calculator
    ingest: Ingest = Field(default_factory=lambda: Ingest())
    validate_: Validate = Field(alias="validate")
    paths: Paths
    relabel: Relabel
    coverage: Coverage
    train: Train
    table: Table
    ope: Ope
    report: Report = Field(default_factory=lambda: Report())
    datasets: dict[str, Dataset] | None = None
    runtime: Runtime = Field(default_factory=lambda: Runtime())
    nightly: Nightly | None = None

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)
    _check = field_validator("fixture")(classmethod(lambda cls, v: _fixture(v)))


class LogsParams(Section):
    """A pipeline on logged data (`datasets:` names its inputs, no `calculator:`), e.g.
    pipelines/tau2/params.yaml: ingest → validate → relabel → coverage."""

    gamma: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    fixture: str | None = None  # the datasets' simulator (tracerl.fixtures); None: real logs
    support_desk: SupportDesk | None = None
    datasets: Annotated[dict[str, Dataset], Field(min_length=1)]
    ingest: Ingest = Field(default_factory=lambda: Ingest())
    validate_: Validate = Field(alias="validate")
    paths: PipelinePaths
    relabel: Relabel
    coverage: Coverage
    train: Train | None = None
    table: Table | None = None
    ope: Ope | None = None
    report: Report = Field(default_factory=lambda: Report())
    compare: Compare = Field(default_factory=lambda: Compare())
    runtime: Runtime = Field(default_factory=lambda: Runtime())
    nightly: Nightly | None = None

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)
    _check = field_validator("fixture")(classmethod(lambda cls, v: _fixture(v)))

    @model_validator(mode="after")
    def _pairs_of_known_datasets(self) -> LogsParams:
        for pair in self.coverage.cross_agent:
            for end in (pair.target, pair.reference):
                if end not in self.datasets:
                    raise ValueError(f"coverage.cross_agent: {end!r} is not one of datasets "
                                     f"{list(self.datasets)}"
                                     f"{_did_you_mean(end, list(self.datasets))}")
        for pair in [] if self.compare.pairs == "all" else self.compare.pairs:
            for end in (pair.agent, pair.baseline):
                if end not in self.datasets:
                    raise ValueError(f"compare.pairs: {end!r} is not one of datasets "
                                     f"{list(self.datasets)}"
                                     f"{_did_you_mean(end, list(self.datasets))}")
        return self


def _model_for(params: dict) -> type[BaseModel]:
    """The calculator pipeline's model, or a logs pipeline's (datasets, no calculator)."""
    return LogsParams if "datasets" in params and "calculator" not in params else Params


def _unwrap_optional(annotation: Any) -> Any:
    """`X | None` -> X (an optional section still names its keys)."""
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    if isinstance(annotation, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class that holds the key at loc[-1] (None when it is not a model)."""
    current: Any = model
    dict_key = False
    for part in loc[:-1]:
        if dict_key:  # a free key of a dict of models (a dataset name)
            dict_key = False
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        fields = {(f.alias or n): f for n, f in current.model_fields.items()}
        if part not in fields:
            return None
        current = _unwrap_optional(fields[part].annotation)
        args = getattr(current, "__args__", ())
        if getattr(current, "__origin__", None) is dict and len(args) == 2:
            current, dict_key = args[1], True
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _key(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "<top level>"


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _problem(model: type[BaseModel], error: dict) -> str:
    loc, kind = tuple(error["loc"]), error["type"]
    # Union/literal errors add the tried type to loc; keep the dotted key the user wrote.
    loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith(
        ("literal", "function-")))))
    key = _key(loc)
    if kind == "extra_forbidden":
        holder = _model_at(model, loc)
        names = [f.alias or n for n, f in holder.model_fields.items()] if holder else []
        where = _key(loc[:-1])
        known = f"; {where} keys: {', '.join(names)}" if names else ""
        return f"unknown key {key}{_did_you_mean(loc[-1], names)}{known}"
    if kind == "missing":
        what = "section" if _model_at(model, (*loc, "_")) is not None else "key"
        return f"missing {what} {key}"
    message = error["msg"]
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
        if re.match(r"^[\w.]+: ", message):  # a model check naming its own sub-key
            return f"{key}.{message}" if loc else message
        return f"{key}: {message}" if loc else message
    return f"{key}: {message[0].lower() + message[1:]}, got {_describe(error.get('input'))}"


def validate_params(params: Any, path: Path | str = "params.yaml", *,
                    partial: bool = False) -> BaseModel | None:
    """The params as checked models; ParamsError (one line per mistake) otherwise.

    partial: only the sections present are checked, none is required (a params file of
    `tracerl ingest` outside a pipeline may hold just `ingest:`)."""
    if not isinstance(params, dict):
        raise ParamsError(path, [f"expected a mapping at the top level, got "
                                 f"{type(params).__name__}"])
    model = _model_for(params)
    try:
        if not partial:
            return model.model_validate(params)
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        errors = []
        for key, value in params.items():
            if key not in fields:
                errors.append({"loc": (key,), "type": "extra_forbidden", "msg": "", "input": value})
                continue
            try:
                TypeAdapter(fields[key].annotation).validate_python(value)
            except ValidationError as exc:
                errors += [{**e, "loc": (key, *e["loc"])} for e in exc.errors()]
        if errors:
            raise ParamsError(path, list(dict.fromkeys(_problem(model, e) for e in errors)))
        return None
    except ValidationError as exc:
        errors = exc.errors()
        problems = list(dict.fromkeys(_problem(model, e) for e in errors))
        # A misspelt key is one mistake: "unknown key a.dataset (did you mean 'datasets'?)"
        # stands for "missing key a.datasets" too.
        meant = {(m.group(1) + "." if m.group(1) else "") + m.group(2) for p in problems
                 if (m := re.match(r"unknown key (?:(.*)\.)?\S+ \(did you mean '([^']+)'", p))}
        problems = [p for p in problems if not (
            p.startswith("missing ") and p.split()[-1] in meant)]
        raise ParamsError(path, problems) from None


def check_params_file(path: Path | str = "params.yaml", *, partial: bool = False
                      ) -> dict[str, Any]:
    """Load and validate a params file; ParamsError names the file and every bad key."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ParamsError(path, ["no such params file"])
    try:
        with open(path, encoding="utf-8") as f:
            params = yaml.safe_load(f) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ParamsError(path, [f"not valid YAML: {' '.join(str(exc).split())}"]) from None
    validate_params(params, path, partial=partial)
    return params
