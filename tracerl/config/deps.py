"""The code deps of every DVC stage, generated from the import closure of what it runs.

A stage's command is `python -m tracerl run <stage> [--params FILE]`: it executes the CLI's
entry point (its module-level imports and the lazy imports of the functions on the `run`
path) and the stage's flow module, with everything they import, transitively (imports
inside functions included, and every package `__init__.py` on the way). Those files are
the stage's code deps; nothing else is. What is loaded by name is added from the stage's
params: the declaration of every fixture they name (`tracerl.envs.<name>`, loaded by every
stage to check params), and the code of each item of the kinds the stage declares it uses
(`tracerl.cli.STAGE_USES`), the generic registries' and those fixtures' (each item is a
`Ref` to the module that defines it). A stage that resolves a kind it does not declare
fails (tracerl.config.registry.check_stage_use), so these deps cannot silently miss code.

A dep is declared per package, not per file (`code_dep_of`). The formats
(tracerl/data/formats, loaded by name) are one dep, the folder, sub-packages and all: adding
a format adds a package and edits no dvc.yaml. Elsewhere, a module of a package with no
sub-packages (tracerl/ope, tracerl/rl, tracerl/envs/calculator, flows/_runtime, ...) is
covered by that package's directory, which DVC hashes as one `.dir` (one column of `dvc
exp show`, not one per file); a module directly in a package that has sub-packages
(tracerl/cli.py, flows/ingest.py, tasks/ope.py, tracerl/data/schema.py, ...) is its own
file, so a stage's own flow and task modules stay precise and no directory of one fixture
is a dep of another pipeline. Any change in a package a stage imports reruns it.

    python -m tracerl deps          # rewrite the code deps of every dvc.yaml
    python -m tracerl deps --check  # exit 1 naming each stage whose deps drifted

Only code entries (paths under `tracerl/`, `flows/`, `tasks/`) are rewritten; data deps,
comments and the rest of each file are kept as written (ruamel round trip).
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("tracerl", "flows", "tasks")
# The CLI functions `python -m tracerl run <stage>` executes: their lazy imports run too.
RUN_PATH = ("run", "_checked_config")


def _module_file(root: Path, module: str) -> Path | None:
    """The project file that defines `module`, or None for third-party modules."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): a block that never runs."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_nodes(nodes: Iterable[ast.AST], nested: bool = True) -> Iterable[ast.AST]:
    """The import statements among `nodes` (and, if `nested`, inside them), skipping the
    bodies of `if TYPE_CHECKING:` (imports for type hints only, never executed)."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif _is_type_checking(node):
            yield from _import_nodes(node.orelse, nested)
        elif nested or isinstance(node, ast.If | ast.Try):
            yield from _import_nodes(ast.iter_child_nodes(node), nested)


def imports_of(root: Path, path: Path, module_level_only: bool = False) -> set[str]:
    """Every module named by an import in the file (lazy imports included, unless
    `module_level_only`; imports under `if TYPE_CHECKING:` never run, so they are not);
    `from pkg import name` also names `pkg.name` (it may be a module)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts)
    package = package.removesuffix(".__init__") if path.name == "__init__.py" \
        else package.rpartition(".")[0]
    names: set[str] = set()
    tree = _parsed(path)
    for node in _import_nodes(tree.body, nested=not module_level_only):
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


def project_closure(root: Path, *modules: str) -> set[Path]:
    """Project files executed by importing `modules`: their imports, transitively, and every
    package `__init__.py` on the way (importing a.b.c runs a/__init__ and a/b/__init__)."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            path = _module_file(root, ".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(imports_of(root, path))
    return seen


def _parsed(path: Path) -> ast.Module:
    """The syntax tree of a file, parsed once per content (every stage of every pipeline
    walks the same files)."""
    stat = path.stat()
    return _parse(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4096)
def _parse(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(), filename=path)


def _imports_in_functions(path: Path, names: Iterable[str]) -> set[str]:
    tree = _parsed(path)
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in set(names):
            for inner in _import_nodes(node.body):
                if isinstance(inner, ast.Import):
                    found.update(alias.name for alias in inner.names)
                elif isinstance(inner, ast.ImportFrom) and inner.module:
                    found.add(inner.module)
                    found.update(f"{inner.module}.{alias.name}" for alias in inner.names)
    return found


def entry_point_closure(root: Path) -> set[Path]:
    """What `python -m tracerl run <stage>` runs besides the stage's flow: the CLI module
    with its module-level imports, the lazy imports of the functions on the `run` path (its
    other commands' lazy imports do not run), and the server module it starts."""
    cli = [root / "tracerl" / "__main__.py", root / "tracerl" / "cli.py"]
    names = set().union(*(imports_of(root, p, module_level_only=True) for p in cli))
    names |= _imports_in_functions(root / "tracerl" / "cli.py", RUN_PATH)
    names -= {"tracerl.cli", "tracerl.cli.app"}  # followed above, module level only
    return set(cli) | project_closure(root, "flows._runtime.server", *names)


@dataclass(frozen=True)
class StagePlan:
    """What one stage runs: its flow module, the kinds of named items it resolves
    (`tracerl.cli.STAGE_USES`) and the fixtures its params name."""

    module: str
    uses: Sequence[str] = ()
    fixtures: Sequence[str] = ()
    # Files its params name that it reads (external candidates' scored tables, the module of
    # an import-path policy outside the project's packages), relative to the project root:
    # data deps, so a new table reruns the stage.
    inputs: Sequence[str] = ()
    # Project modules its params name by import path (a policy factory under tracerl/):
    # their import closure joins its code deps.
    modules: Sequence[str] = ()


def loaded_closure(root: Path, uses: Iterable[str], fixtures: Iterable[str]) -> set[Path]:
    """Project files a stage loads by name: each fixture's declaration (with what it
    imports), and the modules of the items of the kinds in `uses`, the generic
    registries' and the fixtures'."""
    from tracerl.config import formats
    from tracerl.config.fixtures import PACKAGE, get_fixture
    from tracerl.config.registries import ENCODERS, VERIFIERS

    generic = {"encoders": ENCODERS, "verifiers": VERIFIERS}
    uses = list(uses)
    modules = [ref.module for use in uses if use in generic for ref in generic[use].refs()]
    if formats.USE in uses:  # every format's declaration and code (auto detects any)
        declared = [formats.FORMATS.get(name) for name in formats.FORMATS.names()]
        modules += [ref.module for ref in formats.FORMATS.refs()]
        modules += [ref.module for fmt in declared for ref in fmt.refs()]
    for name in fixtures:
        modules.append(f"{PACKAGE}.{name}")
        fixture = get_fixture(name)
        modules += [ref.module for use in uses for ref in fixture.refs(use)]
    return project_closure(root, *modules)


def stage_command(stage: dict) -> tuple[str, str | None]:
    """(stage name, params file or None) of a `python -m tracerl run <stage>` command."""
    cmd = str(stage["cmd"]).split()
    if cmd[:4] != ["python", "-m", "tracerl", "run"] or len(cmd) < 5:
        raise ValueError(f"not a tracerl stage command: {stage['cmd']!r}")
    params = cmd[cmd.index("--params") + 1] if "--params" in cmd else None
    return cmd[4], params


def is_code_dep(dep: str) -> bool:
    """A dep entry this generator owns: a path under one of the project's packages."""
    return not dep.startswith("${") and dep.split("/")[0] in PACKAGES


def _has_subpackage(folder: Path) -> bool:
    return any(sub.is_dir() and (sub / "__init__.py").is_file() for sub in folder.iterdir())


def whole_packages() -> tuple[str, ...]:
    """Packages declared as one dep with everything below them (paths relative to the
    root): the formats, whose packages are loaded by name — a new format package changes
    no dvc.yaml (DVC hashes the folder; .dvcignore keeps `__pycache__` out of the hash)."""
    from tracerl.config.formats import PACKAGE

    return (PACKAGE.replace(".", "/"),)


def code_dep_of(root: Path, path: Path) -> Path:
    """The dep that covers project file `path`: a whole package's directory
    (`whole_packages`) when it is below one; else its package's directory when that package
    is below a top-level package and has no sub-packages (DVC hashes it whole, recursively,
    so it must hold no other package), else the file itself."""
    rel = Path(_relpath(path.resolve(), root.resolve())).as_posix()
    for whole in whole_packages():
        if rel == whole or rel.startswith(whole + "/"):
            return root / whole
    folder = path.parent
    below_top = folder.resolve() != root.resolve() and \
        folder.resolve().parent != root.resolve()
    if below_top and (folder / "__init__.py").is_file() and not _has_subpackage(folder):
        return folder
    return path


def stage_plan_of(root: Path, stage: dict,
                  plan_of: Callable[[str, Path], StagePlan]) -> StagePlan:
    """What one `python -m tracerl run` stage runs.

    plan_of(stage_name, params_file) -> what that stage runs (`StagePlan`)."""
    name, params = stage_command(stage)
    return plan_of(name, root / (params or "params.yaml"))


def stage_code_deps(root: Path, pipeline: Path, stage: dict, plan: StagePlan) -> list[str]:
    """The sorted code deps of one stage (`code_dep_of` each file it runs), as paths
    relative to its wdir."""
    wdir = (pipeline.parent / stage.get("wdir", ".")).resolve()
    files = (project_closure(root, plan.module, *plan.modules) | entry_point_closure(root)
             | loaded_closure(root, plan.uses, plan.fixtures))
    units = {code_dep_of(root, f) for f in files}
    return sorted({Path(_relpath(u.resolve(), wdir)).as_posix() for u in units})


def stage_inputs(root: Path, pipeline: Path, stage: dict, plan: StagePlan) -> list[str]:
    """The files the stage's params name (`StagePlan.inputs`) as paths relative to its
    wdir, in the params' order."""
    wdir = (pipeline.parent / stage.get("wdir", ".")).resolve()
    return list(dict.fromkeys(Path(_relpath((root / p).resolve(), wdir)).as_posix()
                              for p in plan.inputs))


def _relpath(path: Path, start: Path) -> str:
    return os.path.relpath(path, start)


def pipelines(root: Path) -> list[Path]:
    """Every pipeline definition of the project: dvc.yaml and pipelines/*/dvc.yaml."""
    return [root / "dvc.yaml", *sorted(root.glob("pipelines/*/dvc.yaml"))]


def sync_deps(root: Path, plan_of: Callable[[str, Path], StagePlan], *,
              check: bool = False) -> dict[str, list[str]]:
    """Rewrite (or, with `check`, only compare) the code deps of every stage of every
    pipeline. Returns {"<dvc.yaml>:<stage>": [what differs]} for the stages that drifted."""
    yaml = _yaml()
    drift: dict[str, list[str]] = {}
    for pipeline in pipelines(root):
        doc = yaml.load(pipeline.read_text())
        changed = False
        for name, stage in doc["stages"].items():
            try:
                stage_command(stage)
            except ValueError:
                continue
            deps = stage.get("deps") or []
            data = [d for d in deps if not (isinstance(d, str) and is_code_dep(d))]
            current = [d for d in deps if isinstance(d, str) and is_code_dep(d)]
            plan = stage_plan_of(root, stage, plan_of)
            wanted = stage_code_deps(root, pipeline, stage, plan)
            # Files the params name are added, never removed: a data dep written by hand
            # looks the same, and one left behind only reruns the stage when it changes.
            inputs = [d for d in stage_inputs(root, pipeline, stage, plan) if d not in data]
            if current != wanted or inputs:
                rel = pipeline.relative_to(root).as_posix()
                extra = sorted(set(current) - set(wanted))
                lacking = [*inputs, *sorted(set(wanted) - set(current))]
                drift[f"{rel}:{name}"] = [f"+{d}" for d in lacking] + [f"-{d}" for d in extra] \
                    or ["(order)"]
                deps[:] = [*data, *inputs, *wanted]
                changed = True
        if changed and not check:
            with open(pipeline, "w", encoding="utf-8") as f:
                yaml.dump(doc, f)
    return drift


def _yaml():
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def render_pipeline(root: Path, pipeline: Path, params_file: Path, stages: Sequence,
                    plan_of: Callable[[str, Path], StagePlan], *,
                    inputs: Sequence[str] = (), header: str = "",
                    requires: str | None = None) -> str:
    """The dvc.yaml of a pipeline from its stage list (`tracerl.config.stages.StageSpec`s):
    each stage runs `python -m tracerl run <stage> --params <params_file>` from the
    repository root, with its data deps, params sections, outs, metrics and plots as the
    list says, and its code deps as `sync_deps` writes them (the same function), so
    `python -m tracerl deps` finds it current. `inputs` (paths relative to the root) are
    the first stage's extra data deps: the logs. `requires` (a version): the stages run an
    installed tracerl, that version only (`--tracerl VERSION`), and have no code deps."""
    import io

    from ruamel.yaml.comments import CommentedMap

    wdir = Path(os.path.relpath(root, pipeline.parent)).as_posix()
    params_rel = params_file.relative_to(root).as_posix()
    doc = CommentedMap()
    doc["stages"] = CommentedMap()
    for i, spec in enumerate(stages):
        stage = CommentedMap()
        stage["wdir"] = wdir
        stage["cmd"] = f"python -m tracerl run {spec.name} --params {params_rel}" + (
            f" --tracerl {requires}" if requires else "")
        data = [*(inputs if i == 0 else ()), *spec.deps]
        plan = stage_plan_of(root, stage, plan_of)
        data += [d for d in stage_inputs(root, pipeline, stage, plan) if d not in data]
        stage["deps"] = [*data, *([] if requires else
                                   stage_code_deps(root, pipeline, stage, plan))]
        stage["params"] = [{params_rel: list(spec.params)}]
        stage["outs"] = [o.path if o.cache else {o.path: {"cache": False}} for o in spec.outs]
        if spec.metrics:
            stage["metrics"] = [{m: {"cache": False}} for m in spec.metrics]
        if spec.plots:
            stage["plots"] = [{p: {"cache": False}} for p in spec.plots]
        doc["stages"][spec.name] = stage
        if spec.comment:
            doc["stages"].yaml_set_comment_before_after_key(
                spec.name, before=_wrap(spec.comment), indent=2)
    if any(o.path == "${paths.plots}/ope" for spec in stages for o in spec.outs):
        # The plot a reviewer compares across experiments: each candidate's headline
        # estimate beside the logged value (the ope stage's headline.json).
        doc["plots"] = [{"ope_headline": {
            "template": "bar_horizontal", "x": "estimate",
            "y": {f"{wdir}/${{paths.plots}}/ope/headline.json": "dataset_policy"},
            "title": "each candidate's headline estimate and the logged policy's value",
            "x_label": "estimated return (headline estimator)",
            "y_label": "dataset · policy"}}]
    out = io.StringIO()
    _yaml().dump(doc, out)
    import textwrap

    lines = [part for line in header.splitlines()
             for part in (textwrap.wrap(line, 86, subsequent_indent="  ") or [""])]
    return "".join(f"# {line}\n" if line else "#\n" for line in lines) + out.getvalue()


def _wrap(text: str, width: int = 88) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width - 4))
