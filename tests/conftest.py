"""Shared fixtures: a real local Prefect server and throw-away copies of the project."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def prefect_server() -> str:
    """The project's long-lived local Prefect server (started here if it is not running)."""
    os.chdir(ROOT)  # prefect.toml lives here
    from flows.server import api_url, ensure_server

    ensure_server()
    return api_url()


def copy_project(dest: Path, **param_overrides: dict) -> Path:
    """A copy of the project's files as git sees them (tracked + untracked, not ignored),
    in a fresh git repo, with params.yaml sections updated."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    for section, values in param_overrides.items():
        params.setdefault(section, {}).update(values)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (dest / "dvc.lock").unlink(missing_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def project_env(**extra: str) -> dict[str, str]:
    """Environment for stage commands: the project's virtualenv first on PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.update(extra)
    return env
