"""The logs a pipeline reads from outside the repository (`datasets.<name>.inputs` of its
params, e.g. the shared tau2-bench sample at ../shared/realdata): which are absent, and a
message that names each and says how to get it (`datasets.<name>.source`).

`make run` runs every pipeline whose inputs are present and skips, with this message, one
whose inputs are absent (`tracerl inputs`); the ingest stage refuses to start without them,
with the same message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class MissingInput:
    dataset: str
    path: str
    source: str | None  # where the file comes from (params `datasets.<name>.source`)


def missing_inputs(params: Mapping[str, Any], root: Path = Path(".")) -> list[MissingInput]:
    """Every declared input path that does not exist (relative paths: from `root`, the
    repository root the stages run in)."""
    missing = []
    for name, entry in (params.get("datasets") or {}).items():
        if not isinstance(entry, Mapping):
            continue
        for path in entry.get("inputs") or []:
            if not (root / path).exists():
                missing.append(MissingInput(str(name), str(path), entry.get("source")))
    return missing


def missing_message(params_file: str, missing: list[MissingInput]) -> str:
    """What is missing, where it comes from, and how to point the pipeline at a copy (the
    lines after "<who>: ")."""
    lines = ["its input logs are missing:"]
    for m in missing:
        where = "" if Path(m.path).is_absolute() else f" = {Path(m.path).resolve()}"
        lines.append(f"  - {m.path}{where} (dataset {m.dataset})")
    sources = list(dict.fromkeys((m.dataset, m.source) for m in missing if m.source))
    for dataset, source in sources:
        lines.append(f"  {dataset} comes from {source}")
    if not sources:
        lines.append(f"  (no datasets.<name>.source in {params_file} says where they come from)")
    lines.append(f"  then put them at the paths above, or point datasets.<name>.inputs in "
                 f"{params_file} at your copies")
    return "\n".join(lines)
