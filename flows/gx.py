"""The validate stage's side of the Great Expectations project under gx/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracerl.gx_project import stale
from tracerl.params import get


class SuiteOutOfDate(RuntimeError):
    pass


def require_current_suite(params: dict[str, Any], names: list[str],
                          gx_dir: Path = Path("gx")) -> None:
    """The kept suite and checkpoints must be what params generate: a changed expectation
    is reviewed as a diff of gx/, never applied silently."""
    out = stale(gx_dir, float(get(params, "validate.reward_min")),
                float(get(params, "validate.reward_max")), names)
    if out:
        raise SuiteOutOfDate(f"gx/ does not match params.yaml: {', '.join(out)}; run "
                             "`python -m tracerl gx generate` and commit the diff")


def futures_done(futures: list) -> list:
    return [f.result() for f in futures]
