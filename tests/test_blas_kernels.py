"""One OpenBLAS kernel family on every x86-64 machine (tracerl/__init__.py): a process that
imports tracerl before numpy computes with Haswell's kernels, whatever the CPU, so the
pipelines' outputs are the same bytes on Intel and AMD machines."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

_PROBE = ("import tracerl, numpy, threadpoolctl; "
          "print([i.get('architecture') for i in threadpoolctl.threadpool_info() "
          "if i.get('internal_api') == 'openblas'])")


@pytest.mark.integration
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the pin is for x86-64")
@pytest.mark.parametrize("given", [None, "SkylakeX", "Zen"])
def test_a_stage_process_uses_haswell_kernels(given):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if given is not None:  # what a machine's environment may set
        env["OPENBLAS_CORETYPE"] = given
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['Haswell']", out


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the pin is for x86-64")
def test_the_suite_computes_with_the_stages_kernels():
    """Tests compare what the API computes here with the stages' figures (test_api)."""
    import threadpoolctl

    kernels = {i.get("architecture") for i in threadpoolctl.threadpool_info()
               if i.get("internal_api") == "openblas"}
    assert kernels <= {"Haswell"}, kernels
