"""dvc.yaml tells the truth: every project module a stage's flow imports is one of its deps,
and validation gates the chain."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tracerl.cli import STAGES, flow_of, stage_plan
from tracerl.config import deps
from tracerl.config.params import load_params

ROOT = Path(__file__).resolve().parents[1]

# DVC commands in the checkout itself (its lock, .dvc/tmp): on one xdist worker
pytestmark = pytest.mark.xdist_group("checkout_dvc")


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
        needed = project_closure(flow_of(flow)[0]) | _entry_point()
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
    assert "tracerl/rl/__init__.py" in closure


@pytest.mark.integration
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_validate_is_upstream_of_relabel(pipeline: str) -> None:
    target = "relabel" if pipeline == "dvc.yaml" else f"{pipeline}:relabel"
    out = subprocess.run([sys.executable, "-m", "dvc", "dag", "--dot", target], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert any("validate" in line and "-> " in line and "relabel" in line.split("->")[1]
               for line in out.splitlines()), out


def test_dvc_yaml_code_deps_are_the_generated_ones() -> None:
    # `python -m tracerl deps` writes them; a stage whose deps drift fails here by name.
    drift = deps.sync_deps(ROOT, stage_plan, check=True)
    assert not drift, f"run `python -m tracerl deps`: {drift}"


DATA_STAGES = ("generate", "ingest", "validate", "relabel", "coverage")
LEARNING = ("tracerl/ope/", "tracerl/rl/")


def _under(dep: str, prefixes: tuple[str, ...]) -> bool:
    """A dep (a file, or a package directory DVC hashes whole) holds code under one of
    `prefixes` (folders ending in /)."""
    folder = dep.rstrip("/") + "/"
    return any(folder.startswith(p) or p.startswith(folder) for p in prefixes)


def _learning_deps(pipeline: str, stage: str) -> list[str]:
    spec = _stages(pipeline).get(stage)
    return [] if spec is None else [d for d in _code_deps(pipeline, spec)
                                    if _under(d, LEARNING)]


def test_the_real_log_pipeline_depends_on_no_fixture() -> None:
    for name, stage in _stages("pipelines/tau2/dvc.yaml").items():
        envs = [d for d in _code_deps("pipelines/tau2/dvc.yaml", stage)
                if _under(d, ("tracerl/envs/",))]
        assert not envs, f"tau2 {name} depends on fixture code: {envs}"


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("stage", [s for s in DATA_STAGES if s != "coverage"])
def test_a_data_stage_runs_no_learning_code(pipeline: str, stage: str) -> None:
    assert not _learning_deps(pipeline, stage)


# Coverage counts N(s, a) over the states of a state encoder: it runs the learning half's one
# representation (the encoders and Transitions), never a learner or an OPE estimator. Its
# deps are packages (tracerl/rl whole: a learner's change reruns it, never an estimator's).
REPRESENTATION = {"tracerl/rl/__init__.py", "tracerl/rl/encoding.py", "tracerl/rl/transitions.py"}


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_coverage_runs_the_representation_only(pipeline: str) -> None:
    ran = {p.relative_to(ROOT).as_posix() for p in project_closure(flow_of("coverage")[0])}
    assert {p for p in ran if p.startswith(LEARNING)} <= REPRESENTATION
    assert set(_learning_deps(pipeline, "coverage")) <= {"tracerl/rl"}


def test_a_package_is_one_dep_and_a_module_of_a_package_with_subpackages_its_file() -> None:
    # One `dvc exp show` column per package, not per file; DVC hashes a directory dep whole
    # (recursively), so only a package holding no other package is declared as a directory.
    dep = {rel: deps.code_dep_of(ROOT, ROOT / rel).relative_to(ROOT).as_posix() for rel in (
        "tracerl/ope/importance.py", "tracerl/data/formats/tau2/read.py",
        "flows/_runtime/server.py",
        "tracerl/envs/calculator/rules.py", "tracerl/data/schema.py", "tracerl/cli.py",
        "flows/ope.py", "tasks/ope.py", "tracerl/envs/__init__.py")}
    assert dep == {"tracerl/ope/importance.py": "tracerl/ope",
                   # the formats are one dep, sub-packages and all (a new one edits no
                   # dvc.yaml: tests/test_format_names.py)
                   "tracerl/data/formats/tau2/read.py": "tracerl/data/formats",
                   "flows/_runtime/server.py": "flows/_runtime",
                   "tracerl/envs/calculator/rules.py": "tracerl/envs/calculator",
                   "tracerl/data/schema.py": "tracerl/data/schema.py",
                   "tracerl/cli.py": "tracerl/cli.py", "flows/ope.py": "flows/ope.py",
                   "tasks/ope.py": "tasks/ope.py",
                   "tracerl/envs/__init__.py": "tracerl/envs/__init__.py"}


def test_a_stage_missing_a_package_it_imports_is_reported(tmp_path: Path) -> None:
    # The cover check above is the one that fails when a stage imports a package its deps do
    # not name: drop tracerl/ope from the ope stage and it names the files left uncovered.
    stage = _stages()["ope"]
    kept = [d for d in _code_deps("dvc.yaml", stage) if d != "tracerl/ope"]
    needed = project_closure(flow_of("ope")[0]) | _entry_point()
    lacking = {p.relative_to(ROOT).as_posix() for p in needed if not _covered(p, kept)}
    assert "tracerl/ope/importance.py" in lacking
    assert not {p for p in lacking if not p.startswith("tracerl/ope/")}


def _copy_project(dest: Path) -> None:
    """The checkout's tracked files and the pipelines' outputs that exist, at `dest`
    (`../shared` beside it, as beside the checkout: the tau2 logs are read from there)."""
    import shutil

    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    outs = [o for p in PIPELINES for s in _stages(p).values() for o in s.get("outs", [])]
    for rel in files:
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    for top in ("data", "reports", "models", "metrics", "plots"):
        if (ROOT / top).is_dir() and outs:
            shutil.copytree(ROOT / top, dest / top, dirs_exist_ok=True, symlinks=True)
    shared = ROOT.parent / "shared"
    if shared.exists():
        (dest.parent / "shared").symlink_to(shared.resolve())
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)  # DVC works in a git repo


def _dvc_status(repo: Path) -> dict[str, set[str]]:
    """`dvc status` of every pipeline: stage -> the code deps it reports changed."""
    import orjson

    out = subprocess.run([sys.executable, "-m", "dvc", "status", "--json", *PIPELINES],
                         cwd=repo, capture_output=True, text=True, check=True).stdout
    changed: dict[str, set[str]] = {}
    for stage, items in orjson.loads(out).items():
        deps = {d.replace("../../", "") for item in items if isinstance(item, dict)
                for d in item.get("changed deps", {})}
        changed[stage] = {d for d in deps if d.split("/")[0] in ("tracerl", "flows", "tasks")}
    return changed


@pytest.mark.integration
def test_an_ope_formula_change_reruns_no_ingest_or_validate(tmp_path: Path) -> None:
    # A real `dvc status` in a copy of the project, before and after changing
    # tracerl/ope/importance.py: the stages that run it go stale, and no ingest or
    # validate stage of any pipeline changes status (a copy's outputs are not in its
    # cache, and its code may differ from the dvc.lock already: only the change counts).
    repo = tmp_path / "repo"
    _copy_project(repo)
    before = _dvc_status(repo)
    formula = repo / "tracerl" / "ope" / "importance.py"
    formula.write_text(formula.read_text() + "\n# a changed formula\n")
    after = _dvc_status(repo)
    for pipeline in PIPELINES:
        prefix = "" if pipeline == "dvc.yaml" else f"{pipeline}:"
        assert "tracerl/ope" in after[f"{prefix}ope"], (pipeline, after)  # its package
        for stage in ("ingest", "validate"):
            key = f"{prefix}{stage}"
            assert after.get(key, set()) == before.get(key, set()), (key, before, after)
            assert "tracerl/ope" not in after.get(key, set())


def test_closure_skips_imports_for_type_hints_only(tmp_path: Path) -> None:
    # `if TYPE_CHECKING:` never runs: the calculator's simulator names the policy protocol
    # for its type hints only, so the logs it writes depend on no learning code.
    closure = {p.relative_to(ROOT).as_posix() for p in project_closure(
        "tracerl.envs.calculator.logs")}
    assert "tracerl/envs/calculator/simulator.py" in closure
    assert not [p for p in closure if p.startswith(LEARNING)], closure


def test_what_external_candidates_read_becomes_ope_deps(tmp_path: Path, monkeypatch) -> None:
    # A candidate declared in params (ope.candidates.external) makes `tracerl deps` add its
    # scored tables (per dataset) and its policy's code to the ope stage, and no other stage.
    params = load_params(ROOT / "pipelines" / "tau2" / "params.yaml")
    params.setdefault("ope", {}).setdefault("candidates", {})["external"] = {
        "new_prompt": {"scored": "data/scored/new_prompt/{dataset}.jsonl"},
        "mine": {"policy": "agents.mine:make"},
        "inside": {"policy": "tracerl.rl.policy:uniform"}}
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    (tmp_path / "agents").mkdir()  # a project folder outside the packages
    monkeypatch.chdir(tmp_path)
    plan = stage_plan("ope", params_file)
    datasets = params["ope"].get("datasets") or list(params["datasets"])  # OPE's datasets
    assert list(plan.inputs) == [*(f"data/scored/new_prompt/{d}.jsonl" for d in datasets),
                                 "agents"]
    assert list(plan.modules) == ["tracerl.rl.policy"]
    assert not stage_plan("train", params_file).inputs

    # sync_deps adds them to the ope stage as data deps (relative to its wdir), once.
    pipeline = ROOT / "pipelines" / "tau2" / "dvc.yaml"
    stage = dict(yaml.safe_load(pipeline.read_text())["stages"]["ope"])
    inputs = deps.stage_inputs(ROOT, pipeline, stage, plan)
    assert inputs == [*(f"data/scored/new_prompt/{d}.jsonl" for d in datasets), "agents"]
    code = deps.stage_code_deps(ROOT, pipeline, stage, plan)
    assert "tracerl/rl" in code  # the policy module's package (already there via the flow)
