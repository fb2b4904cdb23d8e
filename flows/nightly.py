"""nightly: bring the whole chain up to date with `dvc repro`, on a schedule.

DVC decides what reruns (new raw logs, changed params or code); each stage it runs is its
own flow run in the UI. This flow streams DVC's output into its log and publishes what the
run produced.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.common import md_table, path, publish, stage_params


class ReproFailed(RuntimeError):
    pass


@flow(name="nightly")
def nightly_flow(force: bool = False) -> str:
    logger = get_run_logger()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    command = ["dvc", "repro", *(["--force"] if force else [])]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env)
    ran = []
    for line in process.stdout:  # stream, so a long stage shows progress in the UI
        line = line.rstrip()
        if line:
            logger.info(line)
        if line.startswith("Running stage '"):
            ran.append(line.split("'")[1])
    if process.wait() != 0:
        raise ReproFailed(f"`{' '.join(command)}` exited {process.returncode}; see the log")
    params = stage_params()
    summary = (f"Stages run: {', '.join(ran) if ran else 'none (everything up to date)'}\n\n"
               + md_table(["report"], [[p] for p in sorted(
                   str(x) for x in path(params, "reports").rglob("*.json"))]))
    publish("nightly-summary", summary, "What the nightly `dvc repro` ran and produced")
    return ", ".join(ran)
