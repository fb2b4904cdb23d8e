"""Stage plumbing every stage flow shares: the stage's typed config, paths, metrics,
provenance, markdown artifacts, and the run's identity.


Run identity: what a reviewer sees of a flow run before opening it.
Each stage's flow run is named `<stage> · <datasets> · <date>`, tagged with the stage,
its datasets, the git commit, the params hash and where it came from (nightly, dvc, test,
manual), and shows as its parameters the params sections the stage reads (the `params:`
of its `dvc.yaml` stage, the one place that list lives).

A stage run by the nightly flow (through `dvc repro`, in another process) is attached to
the nightly run as a subflow: `run_stage` creates the stage's flow run under a task run of
the nightly run named after the stage, so the nightly run's page lists its stage runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact

from tracerl.config.params import get, load_params, stage_param_keys
from tracerl.config.schema import Params, load_config
from tracerl.io.fileio import write_json

PARAMS_ENV = "TRACERL_PARAMS"  # a second pipeline's own params file (`tracerl run --params`)


def params_file() -> Path:
    """params.yaml, or the file TRACERL_PARAMS names."""
    return Path(os.environ.get(PARAMS_ENV, "params.yaml"))


def stage_params() -> Params:
    """The stage's typed config: its params file, checked (`tracerl run` checked it before
    the flow started), every default filled in."""
    return load_config(params_file())


def path(params: Params, key: str) -> Path:
    """paths.<key>; an error naming it when the pipeline sets none (e.g. paths.inbox)."""
    value = getattr(params.paths, key)
    if value is None:
        raise ValueError(f"{params_file()}: paths.{key} is not set")
    return Path(value)


def datasets(params: Params) -> list[str]:
    """The pipeline's dataset names (`Params.dataset_names`)."""
    return params.dataset_names()


def write_metrics(params: Params, stage: str, metrics: dict[str, Any]) -> Path:
    """The stage's scalar metrics (`paths.metrics`/<stage>.json, committed to git so
    `dvc metrics diff` and `dvc exp show` compare revisions). Leaves must be numbers."""
    _check_scalar(metrics, stage)
    out = params.paths.metrics / f"{stage}.json"
    write_json(out, _rounded(metrics))
    return out


def _rounded(node: Any) -> Any:
    """Floats to 6 decimals: diffs between revisions show changes, not float noise."""
    if isinstance(node, dict):
        return {k: _rounded(v) for k, v in node.items()}
    return round(node, 6) if isinstance(node, float) else node


def _check_scalar(node: Any, where: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _check_scalar(value, f"{where}.{key}")
    elif isinstance(node, bool) or not isinstance(node, int | float):
        raise TypeError(f"metric {where} is {node!r}: metrics hold numbers only")


def params_hash(params: Params) -> str:
    """sha256 of the config as canonical JSON, defaults filled in (what a run was
    configured with)."""
    return hashlib.sha256(orjson.dumps(params.dump(), option=orjson.OPT_SORT_KEYS)).hexdigest()


# What "+dirty" is about: the code that ran. A stage run by `dvc repro` itself changes
# tracked files (dvc.lock, the metrics and plots DVC removes before a stage writes them),
# which say nothing about the code (25 of 27 stages of a clean `make run` were tagged dirty).
BUILD_FILES = ("pyproject.toml", "requirements.lock")


def git_commit(code: Sequence[Path] | None = None) -> str:
    """HEAD of the checkout, with "+dirty" when its tracked code (`code`: the tracerl, flows
    and tasks packages, when they are the checkout's, and its build files) differs from HEAD
    ("unknown" outside git). An installed tracerl is its version (provenance's `tracerl`)."""
    packages = Path(__file__).resolve().parents[1]  # where flows/ is, tracerl/ and tasks/ are
    folders = code if code is not None else [packages / p for p in ("tracerl", "flows",
                                                                     "tasks")]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"],
                                   capture_output=True, text=True, timeout=10,
                                   check=True).stdout.strip()).resolve()
        ours = [str(f) for f in folders if Path(f).resolve().is_relative_to(root)]
        dirty = bool(ours) and subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *ours,
             *(str(root / f) for f in BUILD_FILES)],
            capture_output=True, text=True, timeout=30, cwd=root).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def record_provenance(params: Params, stage: str) -> dict[str, str]:
    """Which code and params produced this stage's outputs, kept OUT of the outputs (so
    their bytes do not change with every commit): a git-ignored sidecar that no stage
    depends on, and the flow run's log."""
    try:
        version = metadata.version("tracerl")
    except metadata.PackageNotFoundError:
        version = "unknown"
    info = {"stage": stage, "git_commit": git_commit(), "tracerl": version,
            "params_sha256": params_hash(params),
            "finished_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    write_json(params.paths.reports / "provenance" / f"{stage}.json", info)
    get_run_logger().info("provenance: %s", info)
    return info


def publish(key: str, markdown: str, description: str) -> None:
    """A markdown artifact in the Prefect UI (keys: lowercase letters, digits, dashes)."""
    create_markdown_artifact(key=re.sub(r"[^a-z0-9-]+", "-", key.lower()), markdown=markdown,
                             description=description)


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)

# Set by the nightly flow for the `dvc repro` it runs: the stage runs become its children.
PARENT_ENV = "TRACERL_PARENT_FLOW_RUN"
# Where a run came from: nightly | dvc | test | manual (tagged `origin:<value>`).
ORIGIN_ENV = "TRACERL_ORIGIN"


def stage_parameters(params: Params, stage: str) -> dict[str, Any]:
    """The params a stage reads, by their dotted names in its dvc.yaml (beside the params
    file), as JSON data; the whole config for a stage dvc.yaml does not list (nightly)."""
    keys = stage_param_keys(params_file().parent / "dvc.yaml", stage)
    values = params.dump()
    if not keys:
        return values
    return {key: get(values, key) for key in keys}


def origin() -> str:
    if os.environ.get(ORIGIN_ENV):
        return os.environ[ORIGIN_ENV]
    if os.environ.get(PARENT_ENV):
        return "nightly"
    if os.environ.get("PYTEST_CURRENT_TEST"):
        return "test"
    if os.environ.get("DVC_ROOT") or os.environ.get("DVC_STAGE"):
        return "dvc"
    return "manual"


def run_name(stage: str, datasets: list[str], when: datetime | None = None) -> str:
    day = (when or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M")
    return f"{stage} · {'+'.join(datasets) or 'all'} · {day}"


def pipeline_name(params_file: str | os.PathLike | None = None) -> str:
    """The pipeline a stage belongs to: the folder of its params file (`tau2` for
    pipelines/tau2/params.yaml), or, for the params.yaml at the checkout's root, the fixture
    it runs (`calculator`), else `main`."""
    file = Path(params_file or os.environ.get("TRACERL_PARAMS", "params.yaml"))
    root = Path.cwd().resolve()  # stages run from the top of the working tree (also in the
    folder = (root / file).resolve().parent  # temporary copy of a `dvc exp run --temp`)
    if folder != root and folder.name:
        return folder.name
    try:
        fixture = load_params(file).get("fixture")
    except (OSError, ValueError):
        fixture = None
    return str(fixture or "main")


def experiment_name() -> str | None:
    """The DVC experiment the stage runs in (`dvc exp run` names it in DVC_EXP_NAME)."""
    return os.environ.get("DVC_EXP_NAME") or None


def run_tags(stage: str, datasets: list[str], commit: str, params_sha: str) -> list[str]:
    """What a reviewer filters runs by: pipeline, stage, datasets, experiment, code and
    params; nothing that differs for every run (no process ids)."""
    exp = experiment_name()
    return [f"pipeline:{pipeline_name()}", f"stage:{stage}",
            *(f"dataset:{d}" for d in datasets), *([f"exp:{exp}"] if exp else []),
            f"commit:{commit[:12]}{'+dirty' if commit.endswith('+dirty') else ''}",
            f"params:{params_sha[:12]}", f"origin:{origin()}"]


def namer(stage: str):
    """A `flow_run_name` for the decorator: the run is named before its first log line."""

    def name() -> str:
        try:
            names = stage_params().dataset_names()
        except (OSError, ValueError):  # the flow says what is wrong with its params
            names = []
        return run_name(stage, names)

    return name


def identify(stage: str, params: Params, datasets: list[str]) -> dict[str, Any]:
    """Name, tag and parameterise the current flow run; log what it is at INFO."""
    from prefect import get_run_logger
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    from flows._stage import git_commit, params_hash

    commit, sha = git_commit(), params_hash(params)
    identity = {"name": run_name(stage, datasets), "tags": run_tags(stage, datasets, commit, sha),
                "parameters": stage_parameters(params, stage)}
    ctx = FlowRunContext.get()
    if ctx is not None and ctx.flow_run is not None:
        from flows._runtime.watchdog import process_id

        tags = sorted(set(ctx.flow_run.tags or []) | set(identity["tags"]))
        with get_client(sync_client=True) as client:
            # the process is kept as the run's infrastructure pid (not a tag): a run whose
            # process is gone is marked Crashed by the next `tracerl run`
            client.update_flow_run(ctx.flow_run.id, name=identity["name"], tags=tags,
                                   parameters={**(ctx.flow_run.parameters or {}),
                                               **identity["parameters"]},
                                   infrastructure_pid=ctx.flow_run.infrastructure_pid
                                   or process_id())
    get_run_logger().info("run %s: commit %s, params sha256 %s, tags %s", identity["name"],
                          commit, sha[:12], ", ".join(identity["tags"]))
    return identity


def run_stage(stage: str, flow: Any) -> Any:
    """Run a stage's flow; under a nightly run (PARENT_ENV set) as its subflow."""
    from flows._runtime.runner import with_runner

    flow = with_runner(flow, stage_params())
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return flow()
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import TaskRun
    from prefect.flow_engine import run_flow
    from prefect.states import Completed, Failed, Running

    with get_client(sync_client=True) as client:
        placeholder: TaskRun = client.create_task_run(
            task=_stage_task(stage), flow_run_id=UUID(parent), dynamic_key=f"stage-{stage}",
            name=f"stage {stage}", extra_tags=[f"stage:{stage}"], state=Running())
        child = client.create_flow_run(flow, parent_task_run_id=placeholder.id,
                                       tags=[f"stage:{stage}"])
        details = {"child_flow_run_id": child.id}
        client.set_task_run_state(placeholder.id, Running(state_details=details), force=True)
    try:
        result = run_flow(flow, flow_run=child)
    except BaseException as exc:
        with get_client(sync_client=True) as client:
            client.set_task_run_state(placeholder.id, Failed(
                message=f"stage {stage} failed: {exc}", state_details=details), force=True)
        raise
    with get_client(sync_client=True) as client:
        client.set_task_run_state(placeholder.id, Completed(state_details=details), force=True)
    return result


def _stage_task(stage: str):
    from prefect import task

    @task(name=f"stage-{stage}")
    def stage_task() -> None:  # a placeholder: the stage's flow run hangs under it
        return None

    return stage_task
