"""One registry type for everything params name: featurizers, step encoders, verifiers,
fixtures. A registry maps a name to an item; a miss says what was asked for, the closest
name ("did you mean") and every known name.

An item may be declared by reference (`Ref("tracerl.rl.encoding:DialogueEncoder")`): it is
imported when it is first looked up, so checking a params file (which only needs the names)
imports no implementation, and a stage imports only what it uses. A registry may also
have a `fallback`: the registry that holds a name this one does not (a fixture's: see
`tracerl.config.fixtures`).
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# Set by `tracerl run <stage>`: the kinds of items the stage declares it resolves
# (tracerl.cli.STAGE_USES, comma-separated). Its DVC deps hold exactly those items' code,
# so resolving another kind is an error, not a silent missing dep.
STAGE_USES_ENV = "TRACERL_STAGE_USES"
STAGE_ENV = "TRACERL_STAGE"


def did_you_mean(name: object, choices: Iterable[object]) -> str:
    """' (did you mean 'x'?)' for the closest of `choices`, else ''."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class UnknownName(KeyError, ValueError):
    """A name no registry holds; str() names it, the closest known name and all of them."""

    def __init__(self, kind: str, name: object, known: Iterable[str]) -> None:
        self.kind, self.name, self.known = kind, name, sorted(known)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return (f"unknown {self.kind} {self.name!r}{did_you_mean(self.name, self.known)}; "
                f"{self.kind}s: {', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:
        return self.message


def check_stage_use(use: str, what: str) -> None:
    """Refuse, inside a stage run, to resolve a kind of item the stage does not declare."""
    declared = os.environ.get(STAGE_USES_ENV)
    if declared is None or use in declared.split(","):
        return
    stage = os.environ.get(STAGE_ENV, "this stage")
    raise RuntimeError(
        f"stage {stage} resolved {what} (a {use!r} item), which it does not declare: add "
        f"{use!r} to tracerl.cli.STAGE_USES[{stage!r}] and run `python -m tracerl deps` "
        f"(its DVC deps would miss that code)")


@contextmanager
def stage_uses(stage: str, uses: Sequence[str]) -> Iterator[None]:
    """Inside: `stage` may resolve items of the kinds `uses` only (here and in the
    processes it starts, which inherit the environment)."""
    saved = {k: os.environ.get(k) for k in (STAGE_ENV, STAGE_USES_ENV)}
    os.environ[STAGE_ENV], os.environ[STAGE_USES_ENV] = stage, ",".join(uses)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass(frozen=True)
class Ref:
    """An item by reference: `module:attribute`, imported on first use."""

    target: str

    def __post_init__(self) -> None:
        module, sep, attr = self.target.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"a reference is 'module:attribute', got {self.target!r}")

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def resolve(self) -> Any:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


def resolve(item: Any, use: str, what: str) -> Any:
    """`item` itself, or the object a `Ref` names (checked against the stage's uses)."""
    if not isinstance(item, Ref):
        return item
    check_stage_use(use, what)
    return item.resolve()


PLUGIN_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


def plugin_module_found(name: str) -> bool:
    """Whether a plugin's `package.module:attr` names a module on the path (found, not
    imported: checking params runs no plugin code)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name.partition(":")[0]) is not None
    except (ImportError, ValueError):
        return False


class Registry(Generic[T]):
    """name -> item of one kind.

    kind: what an item is, in messages ("featurizer"). use: the name of the kind in
    `STAGE_USES` ("featurizers"); None: resolving an item is not a stage's use of code
    (the fixtures' declarations, loaded by every stage to check its params). fallback:
    name -> the registry that holds names not declared here (None: none does);
    fallback_names: every name the fallbacks hold (for messages only: it may load every
    fixture). build: applied to what a `Ref` resolves to (a verifier declared by its class
    -> its instance)."""

    def __init__(self, kind: str, items: Mapping[str, T | Ref] | None = None, *,
                 use: str | None = None,
                 fallback: Callable[[str], Registry[T] | None] | None = None,
                 fallback_names: Callable[[], Iterable[str]] | None = None,
                 build: Callable[[Any], T] | None = None,
                 plugin: Ref | None = None) -> None:
        self.kind = kind
        self._plugin = plugin
        self._build = build
        self.use = use
        self._items: dict[str, T | Ref] = dict(items or {})
        self._resolved: dict[str, T] = {}
        self._fallback = fallback
        self._fallback_names = fallback_names

    def get(self, name: str) -> T:
        """The item `name`; UnknownName (with "did you mean") when there is none."""
        if name in self._items:
            declared = self._items[name]
            if not isinstance(declared, Ref):
                return declared
            if self.use is not None:
                check_stage_use(self.use, f"{self.kind} {name!r}")
            if name not in self._resolved:
                item = declared.resolve()
                self._resolved[name] = self._build(item) if self._build is not None else item
            return self._resolved[name]
        if self.is_plugin(name):
            if self.use is not None:
                check_stage_use(self.use, f"{self.kind} plugin {name!r}")
            if name not in self._resolved:
                try:
                    found = Ref(name).resolve()
                except (ImportError, AttributeError) as exc:
                    raise ValueError(f"{self.kind} plugin {name!r} cannot be loaded: "
                                     f"{type(exc).__name__}: {exc}") from exc
                self._resolved[name] = self._plugin.resolve()(name, found)
            return self._resolved[name]
        other = self._fallback(name) if self._fallback is not None else None
        if other is None or name not in other:
            raise UnknownName(self.kind, name, self.names())
        return other.get(name)

    __getitem__ = get

    def __contains__(self, name: object) -> bool:
        """Whether `name` is an item here or in its fallback (nothing is imported)."""
        if not isinstance(name, str):
            return False
        if name in self._items or (self.is_plugin(name) and plugin_module_found(name)):
            return True
        other = self._fallback(name) if self._fallback is not None else None
        return other is not None and name in other

    def is_plugin(self, name: str) -> bool:
        """Whether `name` is a plugin's import path (this registry takes plugins)."""
        return self._plugin is not None and bool(PLUGIN_NAME.match(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def own_names(self) -> list[str]:
        """The names declared in this registry (without the fallback's)."""
        return list(self._items)

    def names(self) -> list[str]:
        """Every name this registry can give: its own, then the fallback's."""
        extra = list(self._fallback_names()) if self._fallback_names is not None else []
        return list(dict.fromkeys([*self._items, *extra]))

    def refs(self) -> list[Ref]:
        """The references of the items declared here (what a stage resolving them runs)."""
        return [item for item in self._items.values() if isinstance(item, Ref)]

    def add(self, name: str, item: T | Ref, *, replace: bool = False) -> T | Ref:
        """Add an item at run time (a notebook's own verifier); a taken name needs replace."""
        if name in self._items and not replace and self._items[name] is not item:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        self._resolved.pop(name, None)
        return item

    def remove(self, name: str) -> None:
        self._items.pop(name, None)
        self._resolved.pop(name, None)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.own_names()})"
