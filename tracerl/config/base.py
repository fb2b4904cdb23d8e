"""What every params section shares: the `Section` base, the `ParamsError` a mistake
raises, and the one-line messages (the dotted key, "did you mean", the allowed values).

Sections forbid unknown keys and take no silent coercion (strict: `episodes: "3000"` or
`episodes: true` is an error; an integer where a float is expected is fine). A section's
defaults are its fields' defaults: the one place they are defined.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, Tag, ValidationInfo

from tracerl.config.registry import did_you_mean

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
# A path in params (YAML text), a Path in the model.
PathStr = Annotated[Path, Field(strict=False)]


class ParamsError(ValueError):
    """A params file does not fit the model; str() is one line per mistake."""

    def __init__(self, path: Path | str, problems: list[str]) -> None:
        self.path = str(path)
        self.problems = problems
        super().__init__("\n".join(f"{self.path}: {p}" for p in problems))


class Section(BaseModel):
    """A params section: typed, frozen, unknown keys refused. Code reads its attributes
    (a section is not a mapping: no raw params past `tracerl.config.schema.load_config`)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    def dump(self) -> dict[str, Any]:
        """As plain JSON data, keys as in YAML, every default filled in."""
        return self.model_dump(mode="json", by_alias=True)


def check_names(kind: str, names: list[str], info: ValidationInfo) -> None:
    """Each of `names` is a generic item of the registry `kind` or one of the pipeline's
    fixtures' (the validation context's `fixtures`); else a ValueError saying which. A
    section validated on its own (no context) may name any fixture's item."""
    from tracerl.config import registries
    from tracerl.config.fixtures import get_fixture, owner_of
    from tracerl.config.registry import plugin_module_found

    registry = getattr(registries, kind.upper())
    if info.context is None:  # a section checked on its own (no pipeline): any fixture's
        known = list(registry)
        for name in names:
            if name not in registry:
                raise ValueError(f"unknown {registry.kind} {name!r}"
                                 f"{did_you_mean(name, known)}; {registry.kind}s: "
                                 f"{', '.join(known)}")
        return
    fixtures = list(info.context.get("fixtures", ()))
    known = [*registry.own_names(), *(n for f in fixtures
                                      for n in getattr(get_fixture(f), kind).own_names())]
    for name in names:
        if name in known:
            continue
        if registry.is_plugin(name):
            if not plugin_module_found(name):
                raise ValueError(f"{registry.kind} plugin {name!r}: no module "
                                 f"{name.partition(':')[0]!r} on the path (install the "
                                 f"package that holds it, or fix the name)")
            continue
        owner = owner_of(name)
        if owner is not None and name in getattr(owner, kind):
            raise ValueError(f"{name!r} is the {owner.name} fixture's, which these params do "
                             f"not name (fixture: {owner.name})")
        raise ValueError(f"unknown {registry.kind} {name!r}{did_you_mean(name, known)}; "
                         f"{registry.kind}s: {', '.join(known)}")


# --- messages --------------------------------------------------------------------------


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X, `Annotated[X, ...]` -> X (an optional section still names its keys)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 1:
        return _unwrap(args[0])
    return annotation


def _tagged(annotation: Any) -> dict[str, Any]:
    """The members of a tagged union (`Annotated[A, Tag("a")] | ...`), by tag."""
    members = {}
    for arg in get_args(annotation) if get_origin(annotation) is not Annotated else ():
        if get_origin(arg) is Annotated:
            tags = [m.tag for m in get_args(arg)[1:] if isinstance(m, Tag)]
            if tags:
                members[tags[0]] = arg
    return members


def _is_model(x: Any) -> bool:
    return isinstance(x, type) and issubclass(x, BaseModel)


def _step(annotation: Any, part: Any) -> Any:
    """What `annotation` holds under `part` (None: nothing known)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (dict, Mapping) and len(args) == 2:
        return args[1]  # part is a free key (a dataset name)
    if origin in (list, tuple) and args and isinstance(part, int):
        return args[0]
    if _is_model(annotation):
        fields = {(f.alias or n): f for n, f in annotation.model_fields.items()}
        return fields[part].annotation if part in fields else None
    return None


def walk(model: type[BaseModel], raw: tuple) -> tuple[tuple, list[Any], Any]:
    """A validation error's loc as the user wrote it (a tagged union's tag and pydantic's
    member names dropped), the model holding each of its keys (None where it is not a
    model), and the annotation at its end."""
    current: Any = model
    clean: list[Any] = []
    holders: list[Any] = []
    for part in raw:
        annotation = _unwrap(current)
        tagged = _tagged(annotation)
        if part in tagged:
            current = tagged[part]
            continue
        if isinstance(part, str) and ("[" in part or part.startswith(("literal", "function-"))):
            continue
        clean.append(part)
        holders.append(annotation if _is_model(annotation) else None)
        current = _step(annotation, part)
    return tuple(clean), holders, _unwrap(current)


def _key(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "<top level>"


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problem(model: type[BaseModel], error: Mapping[str, Any], hint: Any = None) -> str:
    """One line for one pydantic error: the dotted key as the user wrote it, what is wrong,
    and what was meant. hint(loc) -> extra text for an unknown key at loc (or "")."""
    loc, holders, at = walk(model, tuple(error["loc"]))
    kind, key = error["type"], _key(loc)
    if kind == "extra_forbidden":
        holder = holders[-1] if holders else None
        names = [f.alias or n for n, f in holder.model_fields.items()] if holder else []
        where = f"{_key(loc[:-1])} keys" if loc[:-1] else "top-level keys"
        known = f"; {where}: {', '.join(names)}" if names else ""
        extra = hint(loc) if hint is not None else ""
        return f"unknown key {key}{did_you_mean(loc[-1], names)}{extra}{known}"
    if kind == "missing":
        return f"missing {'section' if _is_model(at) else 'key'} {key}"
    message = error["msg"]
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
        if re.match(r"^[\w.]+: ", message):  # a model check naming its own sub-key
            return f"{key}.{message}" if loc else message
        return f"{key}: {message}" if loc else message
    meant = ""
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
        meant = did_you_mean(error.get("input"), allowed)
    return (f"{key}: {message[0].lower() + message[1:]}, got {_describe(error.get('input'))}"
            f"{meant}")
