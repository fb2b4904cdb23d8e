"""Log formats, loaded by name: what one format of agent logs brings to ingest.

A format is a package `tracerl/data/formats/<name>/` (the name with `-` written `_`) whose
`__init__.py` declares one `Format` (`FORMAT = Format(...)`): its name, what one of its
records is, how a file of it is recognised (`detect`), how it is read (`read`), its
capabilities, and its row of the README's formats table. Its code is given by reference
(`Ref("module:attribute")`) and imported when ingest first uses it, so checking params
imports no reader. Every list of formats — `--format` choices, the params check, the
detection order, the README table, the test matrix — is built from `FORMATS`; the runner
asks a format's capabilities, never its name.

A team's own format is a plugin: a `Format` named by `module:attribute` where params name
a format (`format: my_logs.fmt:FORMAT`), or installed under the entry-point group
`tracerl.formats` (`my-logs = "my_logs.fmt:FORMAT"`), which detection then tries too.

The package `tracerl/data/formats/common/` holds what readers share (messages,
dialogue, records, jsonstream, detection of containers); it is no format.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from tracerl.config.registry import Ref, Registry, UnknownName, resolve

PACKAGE = "tracerl.data.formats"
SHARED = "common"  # the readers' shared helpers (no format)
ENTRY_POINTS = "tracerl.formats"
AUTO = "auto"  # --format auto: each file detected
USE = "formats"  # the kind of code a stage that reads formats resolves (STAGE_USES)

Unit = Literal["record", "file", "folder"]
UNITS: tuple[str, ...] = ("record", "file", "folder")


@dataclass(frozen=True)
class Format:
    """One log format.

    name: its name in params and `--format` (its package `tracerl.data.formats.<name with
    _>`). counts: what one of its records is, the unit `read` counts ("conversation").
    unit: what one input of it is — "record": each record of a file stands alone;
    "file": a file is one session (a folder of them is one agent's logs: one dataset at
    `tracerl init`); "folder": records are joined across the files of one input (a trace
    whose spans are in several files): its reader takes `joined` and `source_file`.
    detect: ``(Sniffed) -> bool`` (tracerl.data.formats.common.detect.Sniffed): whether
    the first record of a file is one of this format's; None: never detected, only named.
    read: ``(path, limits, options, **kw) -> Iterator[AdaptedRecord]``; None: native step
    records (the native parser reads them). sidecars: ``(path) -> list[Path]``: files read
    with `path`, not inputs of their own.
    shardable: its reader reads a large file in slices (`shard=(k, n)`; `plan_slices`
    optional). line_records: each record is one line of JSON Lines, so a large JSONL file
    is split by lines. propensities / rewards: its logs can carry the logging policy's
    log-probabilities / rewards (the README table says so; OPE layers need them).
    priority: detection order (lower first; a format whose shape is a subset of another's
    goes first; built-ins are spaced by 10, a plugin defaults to 50). readme: its row of the
    README's formats table: (a file holds, a record is, actions, observations, reward).
    """

    name: str
    counts: str
    unit: Unit = "record"
    detect: Any = None
    read: Any = None
    sidecars: Any = None
    shardable: bool = False
    line_records: bool = False
    propensities: bool = False
    rewards: bool = False
    priority: int = 50
    readme: tuple[str, str, str] = ("", "", "")

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"format {self.name!r}: unit {self.unit!r} is not one of {UNITS}")
        if not self.name or self.name == AUTO or ":" in self.name:
            raise ValueError(f"format name {self.name!r}: not {AUTO!r}, without ':'")

    @property
    def native(self) -> bool:
        """Its records are native step records (read by the native parser)."""
        return self.read is None

    @property
    def joins_files(self) -> bool:
        """Its reader reads the files of one input together (unit "folder")."""
        return self.unit == "folder"

    def reader(self) -> Callable[..., Iterator[Any]]:
        return resolve(self.read, USE, f"the {self.name} format's reader")

    def detector(self) -> Callable[[Any], bool] | None:
        return resolve(self.detect, USE, f"the {self.name} format's detector")

    def sidecars_of(self) -> Callable[[Any], list] | None:
        return resolve(self.sidecars, USE, f"the {self.name} format's sidecars")

    def refs(self) -> list[Ref]:
        """The references of its code (what a stage reading this format runs)."""
        return [r for r in (self.detect, self.read, self.sidecars) if isinstance(r, Ref)]

    @property
    def doc(self) -> str:
        """Its README row as one text (what refusals compare a record's keys with)."""
        return " ".join(self.readme)

    def __repr__(self) -> str:
        return f"Format({self.name!r})"


def package_of(name: str) -> str:
    """The package a built-in format `name` is declared in."""
    return f"{PACKAGE}.{name.replace('-', '_')}"


@cache
def builtin_names() -> tuple[str, ...]:
    """The built-in formats: the packages under tracerl/data/formats/ (found without
    importing them), named with `-` for `_`."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(sorted(m.name.replace("_", "-")
                        for m in pkgutil.iter_modules(spec.submodule_search_locations)
                        if m.ispkg and m.name != SHARED))


@cache
def plugin_refs() -> dict[str, Ref]:
    """The installed plugins: entry points of the group `tracerl.formats` (name ->
    `module:attribute` of its Format)."""
    return {ep.name: Ref(ep.value)
            for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


def _declared(item: Any) -> Format:
    if not isinstance(item, Format):
        raise TypeError(f"a format package declares one Format (FORMAT), got {item!r}")
    return item


# The formats by name: each package's (or plugin's) declaration, imported when first used.
FORMATS: Registry[Format] = Registry(
    "format", {**{name: Ref(f"{package_of(name)}:FORMAT") for name in builtin_names()},
               **plugin_refs()}, build=_declared)


def is_reference(name: str) -> bool:
    """A format named by `module:attribute` (a plugin not installed as an entry point)."""
    return ":" in name


def get_format(name: str) -> Format:
    """The format `name` (a registered name, or `module:attribute` of a Format)."""
    if is_reference(name):
        return _declared(Ref(name).resolve())
    fmt = FORMATS.get(name)
    if fmt.name != name:
        raise TypeError(f"format {name!r} is declared as {fmt.name!r}")
    return fmt


def check_format_name(name: str) -> str:
    """`name` when params may name it (auto, a format, `module:attribute`), else
    UnknownName (did you mean, every format). A reference is checked when read."""
    if name == AUTO or is_reference(name) or name in FORMATS:
        return name
    raise UnknownName("format", name, [AUTO, *FORMATS.names()])


def format_names() -> list[str]:
    """Every registered format, in detection order."""
    return [f.name for f in detection_order()]


def detection_order() -> list[Format]:
    """Every registered format, lowest priority first (ties by name)."""
    return sorted((FORMATS.get(n) for n in FORMATS.names()), key=lambda f: (f.priority, f.name))


def choices() -> list[str]:
    """What `--format` accepts by name: auto, then every format in detection order."""
    return [AUTO, *format_names()]


README_HEADER = ("| format | a file holds | a record is | actions, observations, reward |\n"
                 "|---|---|---|---|\n")


def readme_table() -> str:
    """The README's formats table, one row per built-in format in detection order (a test
    holds the README equal to it: `python -m tracerl formats --readme` prints it)."""
    rows = [f"| `{f.name}` | " + " | ".join(f.readme) + " |" for f in detection_order()
            if f.name in builtin_names()]
    return README_HEADER + "\n".join(rows) + "\n"
