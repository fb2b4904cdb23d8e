"""dvc.yaml tells the truth: every project module a stage's flow imports is one of its deps,
and validation gates the chain."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tracerl.cli import STAGES, flow_of
from tracerl.config import deps
from tracerl.config.params import load_params

ROOT = Path(__file__).resolve().parents[1]


def project_closure(*modules: str) -> set[Path]:
    return deps.project_closure(ROOT, *modules)


def _entry_point() -> set[Path]:
    return deps.entry_point_closure(ROOT)


def _covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


PIPELINES = ["dvc.yaml", *sorted(p.relative_to(ROOT).as_posix()
                                 for p in ROOT.glob("pipelines/*/dvc.yaml"))]


def _stages(pipeline: str = "dvc.yaml") -> dict[str, dict]:
    return yaml.safe_load((ROOT / pipeline).read_text())["stages"]


def _flow_stage(stage: dict) -> str:
    """The flow a DVC stage runs: its command is `python -m tracerl run <flow> [...]`."""
    cmd = stage["cmd"].split()
    assert cmd[:4] == ["python", "-m", "tracerl", "run"], stage["cmd"]
    return cmd[4]


def _stage_params(stage: dict) -> dict:
    """The params file a stage's command runs with (`--params FILE`, else params.yaml): it
    decides which flow a stage with a `kind` runs."""
    cmd = stage["cmd"].split()
    file = cmd[cmd.index("--params") + 1] if "--params" in cmd else "params.yaml"
    return load_params(ROOT / file)


def _code_deps(pipeline: str, stage: dict) -> list[str]:
    """Code deps as paths from the repository root (a stage's deps are relative to its
    wdir, which is relative to the dvc.yaml's folder)."""
    wdir = ((ROOT / pipeline).parent / stage.get("wdir", ".")).resolve()
    deps = [d for d in stage.get("deps", []) if not d.startswith("${")]
    return [(wdir / d).resolve().relative_to(ROOT).as_posix() for d in deps
            if (wdir / d).resolve().is_relative_to(ROOT)]


def test_every_stage_runs_a_known_flow() -> None:
    stages = _stages()
    for name, stage in stages.items():
        assert _flow_stage(stage) == name, name
        assert name in STAGES, f"dvc.yaml stage {name} has no flow in tracerl.cli.STAGES"
    # A flow may serve only some pipelines (compare: datasets over shared tasks, tau2).
    wired = set().union(*(_stages(p) for p in PIPELINES))
    assert set(STAGES) <= wired, "a flow in tracerl.cli.STAGES has no dvc.yaml stage"


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_stage_deps_cover_every_module_its_flow_imports(pipeline: str) -> None:
    missing = {}
    for name, stage in _stages(pipeline).items():
        flow = _flow_stage(stage)
        deps = _code_deps(pipeline, stage)
        needed = project_closure(flow_of(flow, _stage_params(stage))[0]) | _entry_point()
        lacking = sorted(p.relative_to(ROOT).as_posix() for p in needed
                         if not _covered(p, deps))
        if lacking:
            missing[name] = lacking
    assert not missing, f"{pipeline}: stages miss deps their flows import: {missing}"


def test_closure_follows_lazy_and_relative_imports(tmp_path: Path) -> None:
    # The walker itself: a lazy import inside a function is found, and so is the package
    # __init__ that importing a submodule executes.
    closure = {p.relative_to(ROOT).as_posix() for p in project_closure("tasks.coverage")}
    assert "tracerl/data/coverage.py" in closure  # imported inside coverage_of()
    assert "tracerl/__init__.py" in closure
    assert "tracerl/policies/__init__.py" in closure


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_validate_is_upstream_of_relabel(pipeline: str) -> None:
    target = "relabel" if pipeline == "dvc.yaml" else f"{pipeline}:relabel"
    out = subprocess.run([sys.executable, "-m", "dvc", "dag", "--dot", target], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert any("validate" in line and "-> " in line and "relabel" in line.split("->")[1]
               for line in out.splitlines()), out


def test_dvc_yaml_code_deps_are_the_generated_ones() -> None:
    # `python -m tracerl deps` writes them; a stage whose deps drift fails here by name.
    drift = deps.sync_deps(ROOT, lambda stage, file: flow_of(stage, load_params(file))[0],
                           check=True)
    assert not drift, f"run `python -m tracerl deps`: {drift}"
