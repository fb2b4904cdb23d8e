"""dvc.yaml tells the truth: every project module a stage's flow imports is one of its deps,
and validation gates the chain."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tracerl.cli import STAGES, flow_of
from tracerl.params import load_params

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tracerl", "flows", "tasks")


def _module_file(module: str) -> Path | None:
    """The project file that defines `module`, or None for third-party modules."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_of(path: Path, module_level_only: bool = False) -> set[str]:
    """Every module named by an import anywhere in the file (lazy imports included, unless
    `module_level_only`), with `from pkg import name` also naming `pkg.name` in case it is
    a module."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rpartition(".")[0]
    names: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body if module_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def project_closure(*modules: str) -> set[Path]:
    """Project files executed by importing `modules`: their imports, transitively, and every
    package `__init__.py` on the way (importing a.b.c runs a/__init__ and a/b/__init__)."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            path = _module_file(".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(_imports_of(path))
    return seen


# The CLI functions `python -m tracerl run <stage>` executes: their lazy imports run too.
RUN_PATH = ("run", "_checked_params")


def _imports_in_functions(path: Path, names: tuple[str, ...]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found.update(alias.name for alias in inner.names)
                elif isinstance(inner, ast.ImportFrom) and inner.module:
                    found.add(inner.module)
                    found.update(f"{inner.module}.{alias.name}" for alias in inner.names)
    return found


def _entry_point() -> set[Path]:
    """What `python -m tracerl run <stage>` runs besides the stage's flow: the CLI module
    itself with its module-level imports and the lazy imports of the functions on the `run`
    path (its other commands' lazy imports do not run)."""
    cli = [ROOT / "tracerl" / "__main__.py", ROOT / "tracerl" / "cli.py"]
    names = set().union(*(_imports_of(p, module_level_only=True) for p in cli))
    names |= _imports_in_functions(ROOT / "tracerl" / "cli.py", RUN_PATH)
    names -= {"tracerl.cli", "tracerl.cli.app"}  # followed above, module level only
    return set(cli) | project_closure("flows.server", *names)


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
    assert set(STAGES) <= set(stages), "a flow in tracerl.cli.STAGES has no dvc.yaml stage"


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
    assert "tracerl/coverage.py" in closure  # imported inside coverage_of()
    assert "tracerl/__init__.py" in closure
    assert "tracerl/policies/__init__.py" in closure


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_validate_is_upstream_of_relabel(pipeline: str) -> None:
    target = "relabel" if pipeline == "dvc.yaml" else f"{pipeline}:relabel"
    out = subprocess.run([sys.executable, "-m", "dvc", "dag", "--dot", target], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert any("validate" in line and "-> " in line and "relabel" in line.split("->")[1]
               for line in out.splitlines()), out
