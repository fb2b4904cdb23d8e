"""The validate stage's side of the Great Expectations project under gx/."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tracerl.gx_project import stale
from tracerl.params import get


class SuiteOutOfDate(RuntimeError):
    pass


def require_current_suite(params: dict[str, Any], names: list[str],
                          gx_dir: Path | None = None) -> None:
    """The kept suite and checkpoints (the folder `paths.gx` names) must be what params
    generate: a changed expectation is reviewed as a diff of that folder, never applied
    silently."""
    gx_dir = Path(gx_dir or get(params, "paths.gx", "gx"))
    out = stale(gx_dir, float(get(params, "validate.reward_min")),
                float(get(params, "validate.reward_max")), names)
    if out:
        params_file = os.environ.get("TRACERL_PARAMS", "params.yaml")
        raise SuiteOutOfDate(f"{gx_dir.as_posix()}/ does not match params ({params_file}): "
                             f"{', '.join(out)}; run `python -m tracerl gx generate "
                             f"--params {params_file}` and commit the diff")

