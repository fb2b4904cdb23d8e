"""tracerl installed like a library: the wheel `make dist` builds, pip-installed into a fresh
venv, gives `tracerl init` in a team's own git repository (no tracerl checkout anywhere near
it), and `dvc repro` there runs the installed package to a report.

The venv sees the project venv's site-packages (a .pth line) for tracerl's dependencies, so
the test installs only the wheel (`--no-deps --no-index`: fast and offline), and the
checkout's editable install is not on its path (the .pth files of that folder are not run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, ROOT

pytestmark = pytest.mark.integration

TAU2 = ROOT / ".." / "shared" / "realdata" / "tau2-bench"
LOGS = ("gpt-4.1_airline.json", "ft-gpt-4.1-sft_airline.json")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900
         ) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{cmd}: {done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def test_the_wheel_installed_in_a_fresh_venv_runs_init_and_dvc_repro_in_a_new_repo(
        tmp_path: Path, prefect_server: str) -> None:
    if not all((TAU2 / name).is_file() for name in LOGS):
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DVC_ROOT")}
    dist = tmp_path / "dist"
    _run([str(BIN / "python"), "-c", "import sys; from setuptools import build_meta as b; "
          "print(b.build_wheel(sys.argv[1]))", str(dist)], ROOT, env)
    wheel = next(dist.glob("tracerl-*.whl"))

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})[
        "purelib"])
    (purelib / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = venv / "bin" / "python"
    _run([str(BIN / "python"), "-m", "pip", "--python", str(python), "install", "-q",
          "--no-deps", "--no-index", str(wheel)], tmp_path, env)

    repo = tmp_path / "team-repo"
    repo.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in LOGS:
        shutil.copy(TAU2 / name, logs / name)
    # the fresh venv first: its python runs the stages, and its tracerl is the wheel's
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{BIN}{os.pathsep}{env.get('PATH', '')}"
    _run(["git", "init", "-q"], repo, env)
    where = _run([str(python), "-c", "import tracerl, flows; print(tracerl.__file__); "
                  "print(flows.__file__)"], repo, env).stdout.split()
    assert all(Path(w).is_relative_to(purelib) for w in where), where

    _run([str(venv / "bin" / "tracerl"), "init", "airline", "--logs", *map(str, (
        logs / n for n in LOGS))], repo, env)
    stages = yaml.safe_load((repo / "pipelines/airline/dvc.yaml").read_text())["stages"]
    version = _run([str(python), "-m", "tracerl", "--version"], repo, env).stdout.split()[-1]
    assert all(s["cmd"].endswith(f"--tracerl {version}") for s in stages.values())

    _run([str(BIN / "dvc"), "repro", "pipelines/airline/dvc.yaml"], repo, env, timeout=1800)
    report = repo / "reports" / "airline"
    assert list(report.rglob("*.html")), sorted(p.name for p in report.rglob("*"))
    ope = json.loads((repo / "metrics" / "airline" / "ope.json").read_text())
    assert ope
