"""tracerl: offline RL and off-policy evaluation on logged agent traces.

The notebook API (`tracerl.api`, loaded on first use so that `import tracerl` stays light:
no Prefect, no Great Expectations, not even pyarrow until a function is called):

    import tracerl
    logs = tracerl.read_logs("results.json")              # a step table, quarantine, summary
    tracerl.validate(logs, reward_min=0, reward_max=1)     # the Great Expectations suite
    labelled = tracerl.relabel(logs, ["tau2_outcome@1"], {"task_success": 1.0})
    tracerl.coverage(labelled, "dialogue").to_pandas()     # relabel first (rewards per row)
    tracerl.compare({"a": a_steps, "b": b_steps}).to_pandas()  # on the tasks they share
    tracerl.evaluate(a_steps, {"a": a_steps, "b": b_steps}).to_pandas()  # OPE of learnt policies
"""

from __future__ import annotations

import os
import platform
from typing import Any

# Same params, same bytes on every x86-64 machine: OpenBLAS (numpy's, scipy's) picks its
# kernels by CPU (SkylakeX on Intel AVX-512, Haswell on AMD Zen), their sums differ in the
# last bits, and that moves fitted values and every figure after them (dvc.lock's hashes).
# Haswell's kernels (AVX2) run on any x86-64 machine of the last decade. Set over any value
# the environment has (machines here come with one set), and read when numpy first loads
# OpenBLAS: it holds in every process that imports tracerl first (each pipeline stage,
# its workers).
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"

# name -> module that defines it. Looked up by name (importlib), so importing a submodule
# of tracerl (what every pipeline stage does) never loads the API, and the stages' code
# deps (tracerl.config.deps, an import graph) do not grow with it.
_API = {name: "tracerl.api" for name in ("Evaluation", "Logs", "compare", "coverage",
                                         "evaluate", "read_logs", "relabel", "validate")}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:  # PEP 562: the API loads on first use
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'tracerl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
