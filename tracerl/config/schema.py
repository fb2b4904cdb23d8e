"""The params model: what every pipeline's params file may say, typed end to end.

`load_config(path)` reads and checks a params file and returns the `Params` model the
stages and the library receive; every mistake is one line naming the file and the dotted
key: an unknown key (with "did you mean"), a missing section or key, a wrong type, a value
out of range, a name no registry holds. Every key has its default in its section's model
(a params file states only what differs); a section without a sensible default (e.g. the
calculator's datasets) is required where it is used.

The sections: the data stages' (`tracerl.config.data`), those every stage shares
(`tracerl.config.pipeline`), the learning stages' (below: `train`, `table`, `ope`,
`report`, until their typed models land in `tracerl.config.learning`), and each named
fixture's own section (`calculator:`, `support_desk:`), whose model the fixture declares
(`Fixture.params`, found by loading the fixture the params name).

To add a knob: add a field (with its default) to its section's model. To add a section:
a new `Section` subclass and a field on `Params`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from tracerl.config.base import (
    NonNegativeInt,
    ParamsError,
    PositiveInt,
    Probability,
    Section,
    problem,
)
from tracerl.config.data import (
    Compare,
    Coverage,
    Dataset,
    Ingest,
    Relabel,
    Validate,
    check_names,
    known_fixture,
)
from tracerl.config.pipeline import Nightly, Paths, Runtime
from tracerl.config.registry import did_you_mean

OPE_LAYERS = ("replay", "verifier", "critic", "importance")  # tracerl.ope.layers.LAYERS


# --- the learning stages' sections (tracerl.config.learning will replace these) --------


class Train(Section):
    split: Literal["train", "validation", "test"] | None = None
    data_filter: Literal["all", "process", "outcome", "process+outcome"]
    iterations: PositiveInt
    tie_break: Literal["lowest_index", "random"]
    seed: NonNegativeInt


class BCParams(Section):
    C: Annotated[float, Field(gt=0.0)] = 1.0          # inverse L2 strength
    max_iter: PositiveInt = 500


class FQIParams(Section):
    n_iterations: PositiveInt = 60
    alpha: Annotated[float, Field(gt=0.0)] = 1e-3    # ridge
    min_behavior_prob: Probability = 0.05            # fqi_constrained: the support threshold
    epsilon: Probability = 0.0                       # mass spread over the allowed actions


class HeldOut(Section):
    group_by: str = "task"                           # the step column a fold groups by
    n_folds: Annotated[int, Field(ge=2)] = 5


class FeaturesTrain(Section):
    """train.kind: features — function-approximation learners over a step encoder."""

    kind: Literal["features"]
    encoder: str                                     # a registered step encoder
    encoder_params: dict[str, Any] = {}
    datasets: list[str] | None = None                # default: every dataset
    learners: Annotated[list[Literal["bc", "fqi", "fqi_constrained"]], Field(min_length=1)]
    n_bits: Annotated[int, Field(ge=4, le=24)] = 12  # hashed feature columns: 2**n_bits
    templates: list[list[NonNegativeInt]] | None = None  # default: singles, pairs, all
    seed: NonNegativeInt
    bc: BCParams = Field(default_factory=lambda: BCParams())
    fqi: FQIParams = Field(default_factory=lambda: FQIParams())
    fqi_constrained: FQIParams = Field(default_factory=lambda: FQIParams())
    heldout: HeldOut = Field(default_factory=lambda: HeldOut())

    @field_validator("encoder")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        check_names("encoders", [name], info)
        return name


class FAReplay(Section):
    replays: PositiveInt = 8      # per logged episode, for a stochastic candidate
    max_steps: PositiveInt = 50


class FeaturesOpe(Section):
    """ope.kind: features — every layer that applies, for the feature-based policies."""

    kind: Literal["features"]
    datasets: Annotated[list[str], Field(min_length=1)]  # the logs evaluated on
    layers: list[Literal["replay", "verifier", "critic", "importance"]] = list(OPE_LAYERS)
    headline: Literal["critic/lstdq", "importance/is", "importance/pdis", "importance/wis",
                      "importance/pdwis", "importance/dr", "importance/wdr"] = "critic/lstdq"
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    n_boot: PositiveInt = 1000
    seed: NonNegativeInt
    min_support: Probability = 0.95
    min_behavior_prob: Probability = 0.05
    min_ess_fraction: Probability = 0.1
    min_dual_ess_fraction: Probability = 0.05
    critic_alpha: Annotated[float, Field(gt=0.0)] = 1e-6
    return_range: Annotated[tuple[float, float], Field(strict=False)] | None = None
    replay: FAReplay = Field(default_factory=lambda: FAReplay())  # with a fixture's adapter


class Report(Section):
    kind: Literal["tabular", "features"] = "tabular"
    title: str | None = None


class Table(Section):
    mc_episodes: PositiveInt
    seed: NonNegativeInt


class Replay(Section):
    min_draws: PositiveInt
    max_samples: PositiveInt
    max_steps: PositiveInt


class Softened(Section):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _eps(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            raise ValueError("expected a mapping policy -> list of epsilons")
        for policy, eps in values.items():
            if not isinstance(eps, list) or not all(
                    isinstance(e, int | float) and not isinstance(e, bool) and 0 <= e <= 1
                    for e in eps):
                raise ValueError(f"{policy}: expected a list of epsilons in [0, 1], got {eps!r}")
        return values


class Candidates(Section):
    softened: Softened = Field(default_factory=lambda: Softened())
    mixtures: list[Annotated[tuple[str, str, Probability], Field(strict=False)]] = []


class Ope(Section):
    split: Literal["all", "train", "validation", "test"]
    layers: list[Literal["replay", "verifier", "critic", "importance"]]
    headline: str
    is_estimators: list[Literal["is", "pdis", "wis", "pdwis", "dr", "wdr"]]
    critic_featurizer: str
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)]
    n_boot: PositiveInt
    # Critic bootstrap replicates per Prefect task (the outputs are the same for any value).
    boot_chunk: PositiveInt = 500
    seed: NonNegativeInt
    min_support: Probability
    min_ess_fraction: Probability
    fqe_iterations: PositiveInt
    return_range: Annotated[tuple[float, float], Field(strict=False)] | None = None
    min_n_eff: Annotated[float, Field(gt=0)] | None = None
    dr_folds: Annotated[int, Field(ge=2)] = 2
    replay: Replay
    candidates: Candidates = Field(default_factory=lambda: Candidates())

    @field_validator("critic_featurizer")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        check_names("featurizers", [name], info)
        return name

    @field_validator("headline")
    @classmethod
    def _layer_estimator(cls, value: str) -> str:
        layer, sep, estimator = value.partition("/")
        if not sep or not estimator or layer not in OPE_LAYERS:
            raise ValueError(f"expected <layer>/<estimator> with layer one of {OPE_LAYERS}, "
                             f"got {value!r}")
        return value


def _kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "features" if kind == "features" else "tabular"


AnyTrain = Annotated[Annotated[Train, Tag("tabular")] | Annotated[FeaturesTrain,
                                                                  Tag("features")],
                     Discriminator(_kind)]
AnyOpe = Annotated[Annotated[Ope, Tag("tabular")] | Annotated[FeaturesOpe, Tag("features")],
                   Discriminator(_kind)]


# --- the root ---------------------------------------------------------------------------


class Params(Section):
    """A pipeline's params file. Each named fixture adds its own section (see
    `params_model`)."""

    gamma: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0  # the one discount of every stage
    fixture: str | None = None  # the datasets' simulator (tracerl/envs/<name>); None: real logs
    datasets: dict[str, Dataset] = {}  # name -> its logs (a fixture's section may name them)
    ingest: Ingest = Ingest()
    validate_: Validate = Field(default=Validate(), alias="validate")
    paths: Paths = Paths()
    relabel: Relabel = Relabel()
    coverage: Coverage = Coverage()
    compare: Compare = Compare()
    train: AnyTrain | None = None
    table: Table | None = None
    ope: AnyOpe | None = None
    report: Report = Report()
    runtime: Runtime = Runtime()
    nightly: Nightly = Nightly()

    @field_validator("fixture")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        return known_fixture(name)

    # -- what the stages ask of it

    def fixture_names(self) -> list[str]:
        """Every fixture these params name: the pipeline's, then its datasets' own."""
        named = [self.fixture, *(d.fixture for d in self.datasets.values())]
        return list(dict.fromkeys(n for n in named if n))

    def fixture_name_of(self, dataset: str) -> str | None:
        """``datasets.<dataset>.fixture``, else the pipeline's ``fixture:`` (None: real logs)."""
        entry = self.datasets.get(dataset)
        return (entry.fixture if entry is not None else None) or self.fixture

    def dataset_names(self) -> list[str]:
        """The keys of `datasets`, else the datasets a fixture's section names
        (calculator.datasets)."""
        if self.datasets:
            return list(self.datasets)
        for name in self.fixture_names():
            named = getattr(getattr(self, name, None), "datasets", None)
            if named:
                return list(named)
        return []

    def dataset(self, name: str) -> Dataset:
        """datasets.<name> (its defaults when params do not list it)."""
        return self.datasets.get(name) or Dataset()

    def validate_rules(self, name: str) -> Validate:
        """The validate section with datasets.<name>.validate over it."""
        override = self.dataset(name).validate_
        return self.validate_ if override is None else override.over(self.validate_)

    @model_validator(mode="after")
    def _names_of_known_datasets(self) -> Params:
        names = self.dataset_names()
        ends = [("coverage.cross_agent", end) for pair in self.coverage.cross_agent
                for end in (pair.target, pair.reference)]
        ends += [("compare.pairs", end) for pair in ([] if self.compare.pairs == "all"
                                                     else self.compare.pairs)
                 for end in (pair.agent, pair.baseline)]
        if self.nightly.dataset is not None:
            ends.append(("nightly.dataset", self.nightly.dataset))
        for section in (self.train, self.ope):
            for name in getattr(section, "datasets", None) or []:
                ends.append((f"{'train' if section is self.train else 'ope'}.datasets", name))
        for where, name in ends:
            if name not in names:
                raise ValueError(f"{where}: {name!r} is not one of datasets {names}"
                                 f"{did_you_mean(name, names)}")
        return self


@cache
def params_model(fixtures: tuple[str, ...] = ()) -> type[Params]:
    """The `Params` model with a section for each of `fixtures` (the fixture's own
    `params` model under its name): required when that model has a key without a default."""
    from tracerl.config.fixtures import get_fixture

    fields: dict[str, Any] = {}
    for name in fixtures:
        section = get_fixture(name).params
        if section is None:
            continue
        try:
            default = section()
        except ValidationError:
            fields[name] = (section, ...)
        else:
            fields[name] = (section, default)
    if not fields:
        return Params
    return create_model(f"Params[{', '.join(fixtures)}]", __base__=Params, **fields)


def _named_fixtures(params: dict) -> list[str]:
    """The fixtures a raw params mapping names. A misspelt one stands for the fixture it
    closest names (the model reports the typo, once; the rest is checked as meant)."""
    import difflib

    from tracerl.config.fixtures import FIXTURES

    datasets = params.get("datasets")
    named = [params.get("fixture"), *((d or {}).get("fixture") for d in datasets.values()
                                      if isinstance(d, dict))] if isinstance(datasets, dict) \
        else [params.get("fixture")]
    meant = []
    for name in (n for n in named if isinstance(n, str)):
        close = difflib.get_close_matches(name, FIXTURES.names(), n=1, cutoff=0.6)
        meant += [name] if name in FIXTURES else close
    return list(dict.fromkeys(meant))


def _fixture_hint(loc: tuple) -> str:
    """What an unknown top-level key that is a fixture's section means."""
    from tracerl.config.fixtures import FIXTURES

    if len(loc) == 1 and loc[0] in FIXTURES:
        return (f" (the {loc[0]} fixture's section: these params name no fixture "
                f"{loc[0]!r}; set `fixture: {loc[0]}`)")
    return ""


def validate_params(params: Any, path: Path | str = "params.yaml", *,
                    needs: tuple[str, ...] | list[str] = ()) -> Params:
    """The params as the checked `Params` model; ParamsError (one line per mistake)
    otherwise. needs: sections that must be present (the stage to run reads them) although
    the model lets a pipeline leave them out."""
    if not isinstance(params, dict):
        raise ParamsError(path, [f"expected a mapping at the top level, got "
                                 f"{type(params).__name__}"])
    fixtures = _named_fixtures(params)
    model = params_model(tuple(fixtures))
    try:
        config = model.model_validate(params, context={"fixtures": fixtures})
    except ValidationError as exc:
        problems = list(dict.fromkeys(problem(model, e, _fixture_hint) for e in exc.errors()))
        # A misspelt key is one mistake: "unknown key a.dataset (did you mean 'datasets'?)"
        # stands for "missing key a.datasets" too.
        meant = {(m.group(1) + "." if m.group(1) else "") + m.group(2) for p in problems
                 if (m := re.match(r"unknown key (?:(.*)\.)?\S+ \(did you mean '([^']+)'", p))}
        problems = [p for p in problems if not (
            p.startswith("missing ") and p.split()[-1] in meant)]
        raise ParamsError(path, problems) from None
    missing = [name for name in needs if name in model.model_fields
               and getattr(config, name) is None]
    if missing:
        raise ParamsError(path, [f"missing section {name}" for name in missing])
    return config


def read_params_file(path: Path | str) -> dict[str, Any]:
    """A params file's YAML; ParamsError naming the file when it is missing or not YAML."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ParamsError(path, ["no such params file"])
    try:
        with open(path, encoding="utf-8") as f:
            params = yaml.safe_load(f)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ParamsError(path, [f"not valid YAML: {' '.join(str(exc).split())}"]) from None
    return {} if params is None else params


def load_config(path: Path | str = "params.yaml", *,
                needs: tuple[str, ...] | list[str] = ()) -> Params:
    """Read and check a params file: the `Params` model, or ParamsError naming the file and
    every bad key."""
    return validate_params(read_params_file(path), path, needs=needs)
