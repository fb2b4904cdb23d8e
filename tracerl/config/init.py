"""`tracerl init NAME --logs PATH...`: a working pipeline for one's own agent logs.

Writes, under the repository root:

- `pipelines/NAME/params.yaml`: every key the pipeline's stages read, with its default
  and the comment of its definition, both taken from the params models
  (tracerl.config.schema) — nothing here restates a default. init sets only what a
  pipeline on logs must name: its datasets, its paths and the generic pieces it runs (the
  dialogue featurizer and encoder, hashed features, the generic verifiers);
- `pipelines/NAME/dvc.yaml`: rendered from the stage list (tracerl.config.stages) by the
  generator of every pipeline's code deps (tracerl.config.deps);
- `pipelines/NAME/gx/`: the Great Expectations suite and one checkpoint per dataset.

Datasets (one per agent): each FILE given is a dataset named after it; a FOLDER given
holds one dataset per log file at its top level and one per sub-folder (all of its
files: one agent's logs split over many files); files another file's adapter reads with
it (a tau2 results file's `simulations/`), or a sub-folder named after a file beside it
(a Claude Code session's `<session>/subagents/`), belong to that file's dataset; the
top-level files of a format with one session per file (Claude Code) are one dataset,
named after the folder. `--dataset
NAME=PATH` names a dataset and its file or folder explicitly. Each dataset's format is
detected from its files (tracerl.data.formats.common.detect) and written into params; a file of
no known shape is refused here rather than quarantined record by record later.

The logs: copied under `data/NAME/raw/<dataset>/` and tracked by DVC (`dvc add`: git
holds the small `raw.dvc`, the logs go to the DVC cache and remote), so the pipeline runs
from a clone; logs already inside the repository, or `copy=False`, are referenced where
they are (deps of the ingest stage). The nightly deployment's inbox of the pipeline is
`data/NAME/inbox/` (flows/nightly.py, `pipeline=NAME`).
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import os
import re
import shutil
import textwrap
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from tracerl.config.formats import AUTO, get_format
from tracerl.config.stages import StageSpec, logs_stages, sections_read

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# What every stage of a pipeline shares, besides the sections its stages read.
SHARED_SECTIONS = ("paths", "runtime", "nightly")
# The generic pieces a pipeline on logs runs (no fixture): the registries' own items.
# The outcomes: the logged one (task_success, the reward), and for logs that carry none a
# coding session's last test/command status and explicit user feedback; and the two
# process components the SWiRL process filter reads by default
# (tracerl.data.relabel.PROCESS_COMPONENTS), weighted 0.
GENERIC_VERIFIERS = ["tau2_outcome@1", "command_exit_status@1", "user_feedback@1",
                     "format_valid@1", "tool_error_penalty@1"]


class InitError(ValueError):
    """`tracerl init` cannot write the pipeline: says which path or name, and why."""


@dataclass
class FoundDataset:
    name: str
    sources: list[Path]                 # files or folders, as given
    files: list[Path] = field(default_factory=list)  # the log files read (sidecars too)
    format: str = "auto"


def _log_files(folder: Path) -> list[Path]:
    from tracerl.data.ingest.reader import SUFFIXES

    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def _stem(path: Path) -> str:
    from tracerl.data.ingest.reader import SUFFIXES

    name = path.name
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return path.stem


def dataset_name(text: str) -> str:
    """A dataset name from a file or folder name: letters, digits, `.`, `-`, `_`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")
    return name or "logs"


def _format_of(files: list[Path], fmt: str) -> str:
    """The one format of a dataset's files (detected unless `fmt` names one); `auto` when
    they differ (each file is detected again at ingest)."""
    from tracerl.config.formats import check_format_name
    from tracerl.config.registry import UnknownName
    from tracerl.data.formats.common.detect import refusal

    if fmt != "auto":
        try:
            return check_format_name(fmt)
        except UnknownName as exc:
            raise InitError(str(exc)) from None
    found = {}
    for path in files:
        kind = _sniff(path)
        if kind is None:
            refused = refusal(path)
            why = "is not readable (permission denied)" if not os.access(path, os.R_OK) \
                else f"{refused.what}, so its format cannot be detected; {refused.hint}"
            raise InitError(f"{path}: {why}; or leave the file out")
        found[path] = kind
    kinds = set(found.values())
    return kinds.pop() if len(kinds) == 1 else "auto"


def find_datasets(logs: Sequence[Path], named: Sequence[tuple[str, Path]] = (),
                  fmt: str = "auto") -> list[FoundDataset]:
    """The datasets of `logs` (see the module docstring) and of the `named` (name, path)
    pairs, each with its files and format. InitError for a path that does not exist, holds
    no log file, is of no known format, or two datasets of one name."""
    from tracerl.data.ingest.run import sidecar_files

    found: list[FoundDataset] = []
    for name, path in named:
        if not NAME_RE.match(name):
            raise InitError(f"--dataset {name}={path}: a dataset name is letters, digits, "
                            f"'.', '-' and '_' (starting with a letter or digit)")
        _must_exist(path)
        found.append(FoundDataset(name, [path]))
    for path in logs:
        _must_exist(path)
        if path.is_file():
            found.append(FoundDataset(dataset_name(_stem(path)), [path]))
            continue
        top = sorted(p for p in path.iterdir() if p.is_file() and p in set(_log_files(path)))
        folders = sorted(p for p in path.iterdir() if p.is_dir() and _log_files(p))
        if not top and not folders:
            raise InitError(f"{path}: folder holds no log files")
        formats = {f: _sniff(f) for f in top}
        claimed = {os.path.realpath(s) for f in top if formats[f] is not None
                   for s in sidecar_files(f, formats[f])}
        top = [f for f in top if os.path.realpath(f) not in claimed]
        # a sub-folder named after a file beside it goes with it (Claude Code's
        # <session>/subagents/); files of one session each are one agent's
        companions = {_stem(f): [f] for f in top}
        # (a format of unit "file": one session a file)
        sessions = [f for f in top if formats[f] is not None
                    and get_format(formats[f]).unit == "file"]
        own = []
        for folder in folders:
            if all(os.path.realpath(f) in claimed for f in _log_files(folder)):
                continue  # e.g. a tau2 results file's simulations/
            if folder.name in companions:
                companions[folder.name].append(folder)
            else:
                own.append(FoundDataset(dataset_name(folder.name), [folder]))
        found += [FoundDataset(dataset_name(_stem(f)), companions[_stem(f)]) for f in top
                  if f not in sessions]
        if sessions:
            found.append(FoundDataset(dataset_name(path.resolve().name), [
                s for f in sessions for s in companions[_stem(f)]]))
        found += own
    seen: dict[str, FoundDataset] = {}
    for dataset in found:
        if dataset.name in seen:
            raise InitError(f"two datasets named {dataset.name!r}: {seen[dataset.name].sources[0]}"
                            f" and {dataset.sources[0]}; name them with --dataset NAME=PATH")
        seen[dataset.name] = dataset
        files = [f for s in dataset.sources for f in ([s] if s.is_file() else _log_files(s))]
        if not files:
            raise InitError(f"{dataset.sources[0]}: folder holds no log files")
        dataset.format = _format_of(files, fmt)
        kinds = {f: _sniff(f) or dataset.format for f in files}
        sidecars = [s for f in files if kinds[f] != AUTO for s in sidecar_files(f, kinds[f])]
        dataset.files = list(dict.fromkeys([*files, *sidecars]))
    if not found:
        raise InitError("no logs given: --logs PATH (a file or folder) or --dataset NAME=PATH")
    return found


@functools.lru_cache(maxsize=1 << 16)
def _sniff_cached(path: Path, mtime_ns: int, size: int) -> str | None:
    from tracerl.data.formats.common.detect import sniff

    return sniff(path)


def _sniff(path: Path) -> str | None:
    """The detected format of a file (read once per content while init runs)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _sniff_cached(path, stat.st_mtime_ns, stat.st_size)


# What a pipeline's stages run and its dvc.yaml's code deps name in a tracerl checkout:
# its own packages (`python -m tracerl run STAGE` with flows/ and tasks/ beside it).
CHECKOUT_PACKAGES = ("tracerl", "flows", "tasks")


def is_checkout(root: Path) -> bool:
    """Whether `root` is the root of a tracerl checkout (its packages beside it)."""
    return all((root / p / "__init__.py").is_file() for p in CHECKOUT_PACKAGES)


def installed_version() -> str:
    """The version of the tracerl package this process runs (a wheel's, or a checkout's)."""
    from importlib import metadata

    return metadata.version("tracerl")


def _must_be_repository(root: Path) -> None:
    """Outside a tracerl checkout, the pipeline goes into a git repository of the team's own
    (DVC keeps its lock and the logs' .dvc files in git): refuse, before anything is
    written, a folder that is not the root of one."""
    if not (root / ".git").exists():
        raise InitError(f"{root} is not the root of a git repository: run `git init` there "
                        f"first (DVC tracks the pipeline and its logs in git), then tracerl "
                        f"init again")


def _prepare_repository(root: Path) -> None:
    """A team's repository made ready for the pipeline: `dvc init` when it has no .dvc/,
    and the local Prefect server's home (.prefect/) kept out of git."""
    if not (root / ".dvc").is_dir():
        from dvc.repo import Repo

        Repo.init(str(root)).close()
    ignore = root / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.is_file() else []
    if ".prefect/" not in lines:
        ignore.write_text("\n".join([*lines, ".prefect/"]) + "\n", encoding="utf-8")


def _must_exist(path: Path) -> None:
    if not path.exists():
        raise InitError(f"{path}: no such file or folder")


# -- params.yaml from the models


def field_comments(model: type[BaseModel]) -> dict[str, list[str]]:
    """name -> the comment lines of each field's definition in `model` and its bases (the
    block above it, then the one after it on its line): the one text of what a key means."""
    comments: dict[str, list[str]] = {}
    for cls in reversed([c for c in model.__mro__ if issubclass(c, BaseModel)
                         and c.__module__.startswith("tracerl.")]):
        try:
            source = textwrap.dedent(inspect.getsource(cls))
        except (OSError, TypeError):
            continue
        lines = source.splitlines()
        by_line = {tok.start[0]: tok.string.lstrip("#").strip()
                   for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                   if tok.type == tokenize.COMMENT}
        for node in ast.parse(source).body[0].body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            above, line = [], node.lineno - 1
            while line >= 1 and line in by_line and lines[line - 1].lstrip().startswith("#"):
                above.insert(0, by_line[line])
                line -= 1
            after = by_line.get(node.end_lineno) if not lines[
                node.end_lineno - 1].lstrip().startswith("#") else None
            comments[node.target.id] = [*above, *([after] if after else [])]
    return comments


def _doc(model: type[BaseModel]) -> list[str]:
    doc = inspect.getdoc(model) if model.__doc__ else None
    return [" ".join(doc.split("\n\n")[0].split())] if doc else []


def _flow(value: Any) -> str:
    """A value as one line of YAML (flow style)."""
    text = yaml.safe_dump([value], default_flow_style=True, sort_keys=False,
                          width=1 << 20, allow_unicode=True).strip()
    return text[1:-1]


def _line(indent: int, key: str, value: str | None, comments: list[str],
          column: int = 40) -> list[str]:
    head = " " * indent + (f"{key}: {value}" if value is not None else f"{key}:")
    if not comments:
        return [head]
    if len(comments) == 1:
        inline = f"{head.ljust(max(column, len(head) + 2))}# {comments[0]}"
        if len(inline) <= 100:
            return [inline]
    return [*_comment_block(comments, indent), head]


def _comment_block(comments: list[str], indent: int, width: int = 92) -> list[str]:
    """Comment lines (each wrapped to `width`) at `indent`."""
    pad = " " * indent
    return [f"{pad}# {part}" for c in comments
            for part in (textwrap.wrap(c, width - indent - 2) or [""])]


def _is_model(value: Any) -> bool:
    return isinstance(value, BaseModel) and bool(type(value).model_fields)


def _emit(model: BaseModel, dumped: dict, indent: int) -> list[str]:
    out: list[str] = []
    comments = field_comments(type(model))
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        value, plain = getattr(model, name), dumped[key]
        notes = comments.get(name, [])
        if _is_model(value):
            out += _line(indent, key, None, notes or _doc(type(value)))
            out += _emit(value, plain, indent + 2)
        elif isinstance(value, dict) and value and all(_is_model(v) for v in value.values()):
            out += _line(indent, key, None, notes)
            for k, v in value.items():
                out += _line(indent + 2, str(k), None, [])
                out += _emit(v, plain[k], indent + 4)
        else:
            out += _line(indent, key, _flow(plain), notes)
    return out


def render_params(config: BaseModel, sections: Sequence[str], header: str) -> str:
    """The YAML of every key of `sections` of the validated `config`, each with its value
    and the comment of its definition, under a header comment."""
    dumped = config.model_dump(mode="json", by_alias=True)
    fields = {(info.alias or name): name for name, info in type(config).model_fields.items()}
    comments = field_comments(type(config))
    lines = [f"# {part}" for line in header.splitlines()
             for part in (textwrap.wrap(line, 86, subsequent_indent="  ") or [""])]
    lines = [line.rstrip() for line in lines]
    for key in fields:  # the model's order
        if key not in sections:
            continue
        name = fields[key]
        value = getattr(config, name)
        lines.append("")
        doc = _doc(type(value)) if _is_model(value) else []
        notes = comments.get(name, [])
        if _is_model(value):
            lines += _comment_block(list(dict.fromkeys([*doc, *notes])), 0)
            lines.append(f"{key}:")
            lines += _emit(value, dumped[key], 2)
        elif isinstance(value, dict) and value and all(_is_model(v) for v in value.values()):
            lines += _comment_block(notes, 0)
            lines.append(f"{key}:")
            for k, v in value.items():
                lines.append(f"  {k}:")
                lines += _emit(v, dumped[key][k], 4)
        else:
            lines += _line(0, key, _flow(dumped[key]), notes)
    return "\n".join(lines) + "\n"


# -- the pipeline


@dataclass
class Written:
    pipeline: Path
    params: Path
    dvc: Path
    gx: list[Path]
    datasets: list[FoundDataset]
    copied: Path | None                 # where the logs were copied (None: in place)
    dvc_tracked: Path | None            # the .dvc file of the copied logs
    deployment: str | None = None       # its nightly deployment in prefect.yaml


def pipeline_choices(name: str, datasets: list[FoundDataset], inputs: dict[str, list[str]],
                     sources: dict[str, str] | None = None) -> dict[str, Any]:
    """What a pipeline on logs must name; every other key takes its model's default.
    sources: where a dataset's copied logs came from (datasets.<name>.source)."""
    sources = sources or {}
    from tracerl.config.learning import LOGS_TRAIN

    names = [d.name for d in datasets]
    data = f"data/{name}"
    return {
        "gamma": 1.0,  # episodic tasks: a policy's value is its expected outcome
        "datasets": {d.name: {"inputs": inputs[d.name], "format": d.format,
                              **({"source": sources[d.name]} if d.name in sources else {})}
                     for d in datasets},
        "paths": {"raw": f"{data}/raw", "ingested": f"{data}/ingested",
                  "labelled": f"{data}/labelled", "models": f"{data}/models",
                  "reports": f"reports/{name}", "metrics": f"metrics/{name}",
                  "plots": f"plots/{name}", "gx": f"pipelines/{name}/gx",
                  "inbox": f"{data}/inbox", "landed": f"{data}/landed",
                  "manifest": f"{data}/manifest.json"},
        "relabel": {"verifiers": GENERIC_VERIFIERS,
                    "weights": {"task_success": 1.0, "command_success": 1.0,
                                "user_feedback": 1.0, "format_valid": 0.0,
                                "tool_error_penalty": 0.0}},
        "coverage": {"featurizer": "dialogue"},
        "train": LOGS_TRAIN,
        # Every dataset's logs; with several agents, each one's policies on the others' logs.
        "ope": {"cross_agent": len(names) > 1},
        "report": {"title": f"{name}: logged agents and their policies"},
        "export": {"out": f"{data}/export"},
    }


def _header(name: str, datasets: list[FoundDataset], command: str) -> str:
    listed = "\n".join(f"  {d.name}: {', '.join(str(s) for s in d.sources)} ({d.format})"
                       for d in datasets)
    return (f"The pipeline on your own logs `{name}`, written by `{command}`.\n"
            f"Run it: dvc repro pipelines/{name}/dvc.yaml  (stages run from the repository "
            f"root, so\npaths here are relative to the root).\n"
            f"Every key is spelled out with its default and what it means: change what "
            f"differs;\na key left out takes its default (keep paths: their defaults are the "
            f"root pipeline's).\nAfter changing "
            f"datasets or validate: python -m tracerl gx generate "
            f"--params "
            f"pipelines/{name}/params.yaml\n\nDatasets found (one per agent):\n{listed}")


def _copy_logs(datasets: list[FoundDataset], raw: Path, root: Path) -> dict[str, list[str]]:
    """Each dataset's files under raw/<dataset>/ (a folder's layout kept, a file beside
    its sidecars); the inputs params name, relative to the root."""
    inputs: dict[str, list[str]] = {}
    for d in datasets:
        dest = raw / d.name
        for source in d.sources:
            if source.is_dir():  # a folder alone: its layout; beside others: under its name
                into = dest if len(d.sources) == 1 else dest / source.name
                for f in _log_files(source):
                    _copy(f, into / f.relative_to(source))
            else:
                _copy(source, dest / source.name)
                for f in d.files:
                    if f != source and source.parent in f.parents:
                        _copy(f, dest / f.relative_to(source.parent))
        inputs[d.name] = [dest.relative_to(root).as_posix()]
    return inputs


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def init_pipeline(root: Path, name: str, logs: Sequence[Path],
                  plan_of: Callable[[str, Path], Any], *,
                  named: Sequence[tuple[str, Path]] = (), fmt: str = "auto",
                  copy: bool = True, force: bool = False,
                  command: str = "tracerl init") -> Written:
    """Write pipelines/<name>/{params.yaml, dvc.yaml, gx/} for these logs (module
    docstring). plan_of: what a stage runs (tracerl.cli.stage_plan), for its code deps.
    InitError when the name is taken (unless `force`), or a path or format is unusable."""
    from tracerl.config.deps import render_pipeline
    from tracerl.config.schema import ParamsError, validate_params
    from tracerl.data.gx_project import generate

    if not NAME_RE.match(name):
        raise InitError(f"{name!r}: a pipeline name is letters, digits, '.', '-' and '_'")
    root = Path(root).resolve()
    checkout = is_checkout(root)
    if not checkout:
        _must_be_repository(root)
    pipeline = root / "pipelines" / name
    if (pipeline / "dvc.yaml").exists() and not force:
        raise InitError(f"{pipeline / 'dvc.yaml'} exists: pick another name, or --force to "
                        f"rewrite it")
    datasets = find_datasets(logs, named, fmt)
    stages = logs_stages(len(datasets))
    raw = root / "data" / name / "raw"
    in_repo = all(_inside(s, root) for d in datasets for s in d.sources)
    copied = copy and not in_repo
    if copied:
        if raw.exists():
            shutil.rmtree(raw)
        inputs = _copy_logs(datasets, raw, root)
        deps = [f"data/{name}/raw"]
    else:
        inputs = {d.name: [_rel(s, root) for s in d.sources] for d in datasets}
        deps = list(dict.fromkeys(_rel(f, root) for d in datasets for f in d.files))
    sources = {d.name: f"copied by tracerl init from {', '.join(map(str, d.sources))}"
               for d in datasets} if copied else {}
    choices = pipeline_choices(name, datasets, inputs, sources)
    sections = [*sections_read(stages), *SHARED_SECTIONS]
    params_file = pipeline / "params.yaml"
    try:
        config = validate_params(choices, params_file)
    except ParamsError as exc:  # a default init sets that the models no longer accept
        raise InitError(f"internal: the generated params do not validate: {exc}") from None
    text = render_params(config, sections, _header(name, datasets, command))
    written = yaml.safe_load(text)
    try:
        validate_params(written, params_file)
    except ParamsError as exc:
        raise InitError(f"internal: the written params do not validate: {exc}") from None
    if not checkout:
        _prepare_repository(root)
    pipeline.mkdir(parents=True, exist_ok=True)
    params_file.write_text(text, encoding="utf-8")
    for folder in ("landed", "inbox"):
        _keep_empty(root / "data" / name / folder)
    gx = generate(root / written["paths"]["gx"], float(written["validate"]["reward_min"]),
                  float(written["validate"]["reward_max"]), list(written["datasets"]))
    dvc_file = pipeline / "dvc.yaml"
    dvc_file.write_text(render_pipeline(
        root, dvc_file, params_file, stages, plan_of, inputs=deps,
        header=_dvc_header(name, stages, None if checkout else installed_version()),
        requires=None if checkout else installed_version()), encoding="utf-8")
    tracked = _dvc_add(root, raw) if copied else None
    deployment = nightly_deployment(root, name)
    return Written(pipeline, params_file, dvc_file, gx, datasets, raw if copied else None,
                   tracked, deployment)


def nightly_deployment(root: Path, name: str, cron: str = "0 3 * * *") -> str | None:
    """The pipeline's nightly deployment in prefect.yaml (`nightly-<name>`: the nightly
    flow with `pipeline: <name>`, on the root deployment's work pool), added unless there;
    `make nightly` deploys it with the others. Its name, or None without a prefect.yaml
    holding a nightly deployment to follow."""
    from ruamel.yaml import YAML

    path = root / "prefect.yaml"
    if not path.is_file():
        return None
    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 4096
    rt.indent(mapping=2, sequence=4, offset=2)
    doc = rt.load(path.read_text(encoding="utf-8"))
    deployments = doc.get("deployments") or []
    base = next((d for d in deployments if d.get("name") == "nightly"), None)
    if base is None:
        return None
    wanted = f"nightly-{name}"
    if not any(d.get("name") == wanted for d in deployments):
        deployments.append({
            "name": wanted,
            "description": f"The nightly run of pipelines/{name} (tracerl init): land the new "
                           f"files of data/{name}/inbox/, then dvc repro its dvc.yaml",
            "tags": ["nightly", name], "entrypoint": base["entrypoint"],
            "parameters": {"force": False, "pipeline": name},
            "work_pool": {"name": base["work_pool"]["name"]},
            "schedules": [{"cron": cron, "timezone": "UTC"}]})
        with open(path, "w", encoding="utf-8") as f:
            rt.dump(doc, f)
    return wanted


def _dvc_header(name: str, stages: Sequence[StageSpec], requires: str | None = None) -> str:
    chain = " → ".join(s.name for s in stages)
    code = ("Code deps are generated: python -m tracerl deps." if requires is None else
            f"Stages run the installed tracerl {requires} (`--tracerl {requires}`: another "
            f"version refuses to run;\nafter an upgrade, `tracerl init {name} --force` and the "
            f"stages rerun).")
    return (f"The pipeline on your own logs `{name}` (tracerl init): {chain}.\n"
            f"Run it: dvc repro pipelines/{name}/dvc.yaml. Stages run from the repository "
            f"root (wdir)\nwith --params pipelines/{name}/params.yaml. {code}")


def _rel(path: Path, root: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), root)).as_posix()


def _keep_empty(folder: Path) -> None:
    """A folder git keeps while empty of anything but what it ignores (DVC needs the
    landed folder to exist: it is a dep of ingest)."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n!.gitignore\n", encoding="utf-8")


def _dvc_add(root: Path, raw: Path) -> Path | None:
    """`dvc add` of the copied logs when the root is a DVC repository (else None)."""
    if not (root / ".dvc").is_dir():
        return None
    import contextlib

    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo:  # DVC resolves paths from cwd
        repo.add([str(raw.relative_to(root))])
    return raw.with_name(raw.name + ".dvc")
