"""Fixtures, loaded by name: what an environment with a simulator brings to the generic
stages.

A fixture is a package `tracerl/envs/<name>/` whose `__init__.py` declares one `Fixture`
(`FIXTURE = Fixture(...)`). A dataset names its fixture in params (`datasets.<name>.fixture`
or the pipeline's `fixture:`); the stages load that package by name. Importing it runs the
declaration only: each item (log generator, state encoders, verifiers, replay,
behaviour policy, truth, result view) is given by reference (`Ref("module:attribute")`)
and imported when a stage first uses it, so a stage runs, and depends on, only the code it
uses (`python -m tracerl deps`). Nothing registers anything at import time.

A fixture's state encoders and verifiers are named after it (`calculator`,
`calculator_exact@1`): the generic registries (`tracerl.config.registries`) find a name
they do not hold in the fixture it names, so a saved policy that names its encoder loads
anywhere. Real logs have no fixture: the
layers that need one (replay against a simulator's rules, truth) are then reported as not
applicable, never guessed.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from tracerl.config.registry import Ref, Registry, resolve

if TYPE_CHECKING:
    from tracerl.config.schema import Params

PACKAGE = "tracerl.envs"

# The kinds of item a fixture may bring: named collections (looked up by name through the
# generic registries), then single items (attributes of the fixture). These are the words
# of tracerl.cli.STAGE_USES.
COLLECTIONS = ("encoders", "verifiers")
ITEMS = ("generate_logs", "replay_adapter", "behavior_policy", "truth", "truth_metrics",
         "result_view")


def instance(cls: type) -> Any:
    """A verifier declared by its class: the instance with the class's defaults."""
    return cls()


class _Item:
    """A fixture's single item, declared directly or by `Ref`: resolved when read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.use = name

    def __get__(self, fixture: Fixture | None, owner: type | None = None) -> Any:
        if fixture is None:
            return self
        return resolve(fixture._declared.get(self.use), self.use,
                       f"the {fixture.name} fixture's {self.use}")


class Fixture:
    """What one fixture brings; every item is optional.

    name: the fixture's name in params (and its package's, `tracerl.envs.<name>`).
    params: its params section model (a `tracerl.config.base.Section`), the top-level key
    `<name>:` of a pipeline that names this fixture. encoder: the name of the state
    encoder (among `encoders`, `tracerl.rl.encoding`) its logs are read with.
    encoders, verifiers: name -> class / instance or `Ref`; every name is the fixture's
    name or starts with `<name>_`.
    generate_logs: ``(dataset, index, params, path)`` -> records written: the generate
    stage's logs of the dataset (the index-th of the pipeline's datasets) at `path`.
    replay_adapter: builds the ``ReplayAdapter`` that replays a policy against the
    dataset's recorded tool responses (its `state_codes` give the encoder's rows a policy
    acts on). behavior_policy: ``(dataset, params)`` -> the policy that logged that
    dataset. truth: ``(policy, params)`` -> ``(value, standard_error)``, 0.0 when exact
    (enumerated), else Monte Carlo. truth_metrics: ``(policy, params)`` -> the truth of
    every metric OPE reports (``return``, ``success``) with their standard errors
    (``return_se``, ``success_se``). result_view: ``(reports, metrics, console)`` -> bool:
    prints the fixture's own results in `tracerl results` (True when it had any).
    """

    generate_logs = _Item()
    replay_adapter = _Item()
    behavior_policy = _Item()
    truth = _Item()
    truth_metrics = _Item()
    result_view = _Item()

    def __init__(self, name: str, *, params: type | None = None, encoder: str | None = None,
                 encoders: Mapping[str, Any] | None = None,
                 verifiers: Mapping[str, Any] | None = None, **items: Any) -> None:
        unknown = sorted(set(items) - set(ITEMS))
        if unknown:
            raise TypeError(f"fixture {name!r}: unknown items {unknown}; items: "
                            f"{', '.join(ITEMS)}")
        self.name = name
        self.params = params
        self.encoder = encoder
        self._declared = dict(items)
        self.encoders = Registry(f"{name} state encoder", encoders, use="encoders")
        self.verifiers = Registry(f"{name} verifier", verifiers, use="verifiers",
                                  build=instance)
        for use in COLLECTIONS:
            for item in getattr(self, use).own_names():
                if not owns(name, item):
                    raise ValueError(f"fixture {name!r}: {use} item {item!r} must be named "
                                     f"{name!r} or {name + '_'!r}...")
        if encoder is not None and encoder not in self.encoders.own_names():
            raise ValueError(f"fixture {name!r}: encoder {encoder!r} is not one of its "
                             f"encoders {self.encoders.own_names()}")

    def refs(self, use: str) -> list[Ref]:
        """The references of the items of kind `use` (the code a stage using them runs)."""
        if use in COLLECTIONS:
            return getattr(self, use).refs()
        item = self._declared.get(use)
        return [item] if isinstance(item, Ref) else []

    def __repr__(self) -> str:
        return f"Fixture({self.name!r})"


def owns(fixture: str, item: str) -> bool:
    """Whether an item name belongs to the fixture (`calculator`, `calculator_critic`)."""
    return item == fixture or item.startswith(fixture + "_")


@cache
def fixture_names() -> tuple[str, ...]:
    """Every fixture: the packages under tracerl/envs/ (found without importing them)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
                        if m.ispkg))


def _declared(fixture: Any) -> Fixture:
    if not isinstance(fixture, Fixture):
        raise TypeError(f"a fixture package declares one Fixture (FIXTURE), got {fixture!r}")
    return fixture


# The fixtures by name: each package's declaration, imported when first asked for.
FIXTURES: Registry[Fixture] = Registry(
    "fixture", {name: Ref(f"{PACKAGE}.{name}:FIXTURE") for name in fixture_names()},
    build=_declared)


def get_fixture(name: str) -> Fixture:
    """The fixture `name`: its package's declaration (`tracerl.envs.<name>.FIXTURE`)."""
    fixture = FIXTURES.get(name)
    if fixture.name != name:
        raise TypeError(f"{PACKAGE}.{name} declares the fixture {fixture.name!r}")
    return fixture


def owner_of(item: str) -> Fixture | None:
    """The fixture an item name belongs to (the longest fixture name it starts with)."""
    names = [f for f in fixture_names() if owns(f, item)]
    return get_fixture(max(names, key=len)) if names else None


def fixture_fallback(use: str) -> dict[str, Any]:
    """A generic registry's `fallback` and `fallback_names` for items of kind `use`: a
    name it does not hold is looked up in the fixture the name belongs to."""

    def of(name: str) -> Registry | None:
        fixture = owner_of(name)
        return None if fixture is None else getattr(fixture, use)

    def names() -> list[str]:
        return [n for f in fixture_names() for n in getattr(get_fixture(f), use).own_names()]

    return {"fallback": of, "fallback_names": names}


def fixture_of(params: Params, dataset: str | None = None) -> Fixture | None:
    """The fixture of `dataset` (``datasets.<dataset>.fixture``, else the pipeline's
    ``fixture:``); None for real logs."""
    name = params.fixture_name_of(dataset) if dataset is not None else params.fixture
    return None if name is None else get_fixture(name)
