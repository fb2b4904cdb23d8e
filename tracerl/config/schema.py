"""The params model: what every pipeline's params file may say, typed end to end.

`load_config(path)` reads and checks a params file and returns the `Params` model the
stages and the library receive; every mistake is one line naming the file and the dotted
key: an unknown key (with "did you mean"), a missing section or key, a wrong type, a value
out of range, a name no registry holds. Every key has its default in its section's model
(a params file states only what differs); a section without a sensible default (e.g. the
calculator's datasets) is required where it is used.

The sections: the data stages' (`tracerl.config.data`), those every stage shares
(`tracerl.config.pipeline`), the learning stages' (`train`, `ope`, `report`:
`tracerl.config.learning`; the calculator's chapter `table`: below), and each named
fixture's own section (`calculator:`, `support_desk:`), whose model the fixture declares
(`Fixture.params`, found by loading the fixture the params name).

To add a knob: add a field (with its default) to its section's model. To add a section:
a new `Section` subclass and a field on `Params`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from tracerl.config.base import (
    NonNegativeInt,
    ParamsError,
    PositiveInt,
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
    known_fixture,
)
from tracerl.config.export import Export
from tracerl.config.guard import GuardSettings
from tracerl.config.learning import Ope, Report, Train
from tracerl.config.pipeline import Nightly, Paths, Runtime
from tracerl.config.registry import did_you_mean


class Table(Section):
    """table: the calculator chapter's table (flows/table.py): each policy's Monte Carlo
    value beside the exact one."""

    mc_episodes: PositiveInt = 20_000  # rollouts per (dataset, policy); SE <= 0.0036
    seed: NonNegativeInt = 11


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
    train: Train | None = None
    table: Table | None = None
    ope: Ope | None = None
    report: Report = Report()
    runtime: Runtime = Runtime()
    nightly: Nightly = Nightly()
    export: Export | None = None  # the export stage's (it has no default folder)
    guard: GuardSettings = GuardSettings()  # tracerl.guard and `tracerl guard serve`

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

    from tracerl.config.params import YamlRefused, load_yaml

    path = Path(path)
    if not path.is_file():
        raise ParamsError(path, ["no such params file"])
    try:
        params = load_yaml(path)
    except YamlRefused as exc:
        raise ParamsError(path, [str(exc)]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ParamsError(path, [f"not valid YAML: {' '.join(str(exc).split())}"]) from None
    return {} if params is None else params


def load_config(path: Path | str = "params.yaml", *,
                needs: tuple[str, ...] | list[str] = ()) -> Params:
    """Read and check a params file: the `Params` model, or ParamsError naming the file and
    every bad key."""
    return validate_params(read_params_file(path), path, needs=needs)
