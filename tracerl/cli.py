"""The `tracerl` command: ingest logs, run pipeline stages, manage the local server."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from tracerl.config.params import dataset_names, get, load_params

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Offline RL and off-policy evaluation on logged agent traces.")
server_app = typer.Typer(no_args_is_help=True, help="The local Prefect server.")
app.add_typer(server_app, name="server")

# stage name → flows module and flow function; dvc.yaml runs `python -m tracerl run <stage>`.
STAGES = {
    "generate": ("flows.generate", "generate_flow"),
    "ingest": ("flows.ingest", "ingest_flow"),
    "validate": ("flows.validate", "validate_flow"),
    "relabel": ("flows.relabel", "relabel_flow"),
    "coverage": ("flows.coverage", "coverage_flow"),
    "compare": ("flows.compare", "compare_flow"),
    "train": ("flows.train", "train_flow"),
    "table": ("flows.table", "table_flow"),
    "ope": ("flows.ope", "ope_flow"),
    "report": ("flows.report", "report_flow"),
}


# The kinds of item each stage looks up by name (tracerl.config.fixtures.COLLECTIONS and
# ITEMS): the generic registries' and its fixtures'. Its DVC deps hold their code (`python
# -m tracerl deps`); a stage that resolves a kind not listed here fails, naming it.
STAGE_USES: dict[str, tuple[str, ...]] = {
    "generate": ("generate_logs",),
    "ingest": (),
    "validate": (),
    "relabel": ("verifiers",),
    "coverage": ("encoders",),
    "compare": (),
    "train": ("encoders",),
    "table": ("encoders",),
    "ope": ("encoders", "verifiers", "replay_adapter", "behavior_policy", "truth",
            "truth_metrics"),
    "report": (),
}


def flow_of(stage: str, params: dict) -> tuple[str, str]:
    """(flows module, flow function) that `tracerl run <stage>` runs: one per stage, for
    every pipeline."""
    return STAGES[stage]


def stage_plan(stage: str, params_file: Path):
    """What `tracerl run <stage> --params <params_file>` runs (for its DVC deps)."""
    from tracerl.config.deps import StagePlan
    from tracerl.config.fixtures import fixtures_named

    params = load_params(params_file)
    return StagePlan(flow_of(stage, params)[0], STAGE_USES[stage], fixtures_named(params))


def _checked_params(params_file: Path, *, partial: bool = False) -> dict:
    """The params file, validated before any work; a mistake exits 2 naming the key."""
    from tracerl.config.schema import ParamsError, check_params_file

    try:
        return check_params_file(params_file, partial=partial)
    except ParamsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def ingest(
    inputs: Annotated[list[Path], typer.Argument(help="log files or folders")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")],
    max_bad_fraction: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, help="fail when quarantined/read exceeds this [default: "
        "ingest.max_bad_fraction in params.yaml, else 0.01]")] = None,
    batch_lines: Annotated[int | None, typer.Option(min=1, help="records per batch")] = None,
    workers: Annotated[int | None, typer.Option(
        min=0, help="parser processes (0 = one per core for large inputs)")] = None,
    params_file: Annotated[Path | None, typer.Option(
        "--params", help="params file [default: params.yaml when present]")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="jsonl (native steps) | tau2 | openai-chat | anthropic | atif | "
                         "claude-code | langfuse | otel-genai | auto (detect each file)"
                         )] = "auto",
    strict: Annotated[bool, typer.Option(
        "--strict", help="reject records with fields the step schema does not name "
                         "(default: ingest.strict in params, else keep them under "
                         "`extra`)")] = False,
) -> None:
    """Read agent logs (native JSONL steps, tau2-bench results, OpenAI chat and Anthropic
    Messages conversations, ATIF trajectories, Claude Code sessions, Langfuse traces,
    OpenTelemetry GenAI spans) into OUT/steps/ (Parquet), OUT/quarantine.jsonl and
    OUT/ingest_summary.json.

    Exit status: 0 ok; 1 quarantined/read over max_bad_fraction; 2 unreadable input or
    unusable arguments (params, output folder in use); 3 internal error."""
    from tracerl.data.adapters import ReadOptions
    from tracerl.data.ingest import InputError
    from tracerl.data.ingest import ingest as run_ingest
    from tracerl.data.ingest.limits import Limits
    from tracerl.data.redact import Redactor

    if params_file is None and Path("params.yaml").is_file():
        params_file = Path("params.yaml")
    params = _checked_params(params_file, partial=True) if params_file is not None else {}
    if max_bad_fraction is None:
        max_bad_fraction = float(get(params, "ingest.max_bad_fraction", 0.01))
    if batch_lines is None:
        batch_lines = int(get(params, "ingest.batch_lines", 25_000))
    if workers is None:
        workers = int(get(params, "ingest.workers", 0))
    options = {"batch_lines": batch_lines, "max_bad_fraction": max_bad_fraction,
               "workers": workers, "fmt": fmt,
               "strict": strict or bool(get(params, "ingest.strict", False)),
               "limits": Limits.from_params(get(params, "ingest")),
               "read_options": ReadOptions.from_params(get(params, "ingest")),
               "redactor": Redactor.from_params(get(params, "ingest.redact"))}
    try:
        if sys.stderr.isatty():
            summary = _ingest_with_progress(inputs, out, options)
        else:
            summary = run_ingest(inputs, out, **options)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except Exception as exc:  # noqa: BLE001 - one line, a documented status, no traceback
        _internal_error(exc)
    typer.echo(summary.line())
    if summary.internal_errors:
        typer.echo(f"error: {summary.internal_errors} record(s) hit an internal error (see "
                   f"{out / 'quarantine.jsonl'}, field <internal>); please report it", err=True)
        raise typer.Exit(3)
    if not summary.passed:
        typer.echo(f"see {out / 'quarantine.jsonl'} for each rejected record and its reason",
                   err=True)
        raise typer.Exit(1)


def _ingest_with_progress(inputs: list[Path], out: Path, options: dict):
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from tracerl.data.ingest import ingest as run_ingest
    from tracerl.data.ingest.reader import find_inputs

    total = sum(p.stat().st_size for p in find_inputs(inputs))
    columns = (TextColumn("ingest"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TextColumn("{task.fields[records]:,} records"), TimeRemainingColumn())
    with Progress(*columns, transient=True) as bar:
        job = bar.add_task("ingest", total=total, records=0)
        return run_ingest(inputs, out, **options,
                          progress=lambda n, b: bar.update(job, completed=b, records=n))


def _internal_error(exc: BaseException) -> None:
    """Exit 3 with one line; the traceback goes to a file, not the terminal."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="tracerl-error-", suffix=".txt",
                                     delete=False) as f:
        traceback.print_exception(exc, file=f)
    typer.echo(f"internal error: {type(exc).__name__}: {exc} (traceback in {f.name})", err=True)
    raise typer.Exit(3) from None


def _one_numeric_thread() -> None:
    """BLAS/OpenMP pools split sums by their thread count, which changes the last digits of
    a stage's floats with the machine's cores and the task runner (Dask workers run one
    thread). One thread in this process and in every process it starts: same params, same
    bytes, anywhere."""
    import os

    from threadpoolctl import threadpool_limits

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    threadpool_limits(1)


@app.command()
def run(stage: Annotated[str, typer.Argument(help=f"one of: {', '.join(STAGES)}")],
        params_file: Annotated[Path | None, typer.Option(
            "--params", help="the pipeline's params file [default: params.yaml]")] = None,
        ) -> None:
    """Run one pipeline stage as a Prefect flow on the local server (started if needed)."""
    import os

    _one_numeric_thread()
    if params_file is not None:  # read by flows._stage.stage_params
        os.environ["TRACERL_PARAMS"] = str(params_file)
    if stage not in STAGES:
        typer.echo(f"error: unknown stage {stage!r}; stages: {', '.join(STAGES)}", err=True)
        raise typer.Exit(2)
    # staging journal and snapshot per pipeline: both pipelines have an `ingest` stage
    key = stage if params_file is None else (
        f"{stage}@{'_'.join(Path(params_file).with_suffix('').parts)}")
    from tracerl.io.staging import restore_missing

    def put_back() -> str:
        """The stage's last good outputs that `dvc repro` removed before this command, put
        back (every one: DVC-cached or not); says which, for the error message."""
        restored = restore_missing(key)
        return f" (its previous outputs are back: {', '.join(restored)})" if restored else ""

    try:
        params = _checked_params(params_file or Path("params.yaml"))
    except typer.Exit:
        typer.echo(f"error: stage {stage} not started: its params are invalid{put_back()}",
                   err=True)
        raise
    from flows._runtime.server import ensure_server
    from flows._stage import run_stage

    try:
        ensure_server()
    except RuntimeError as exc:
        typer.echo(f"error: stage {stage} not started: {exc}{put_back()}", err=True)
        raise typer.Exit(1) from None
    from tracerl.io.staging import stage_outputs

    try:
        module, name = flow_of(stage, params)
        flow = getattr(importlib.import_module(module), name)
        from prefect import tags

        from flows._runtime.watchdog import mark_orphaned_runs_crashed, run_tags, watch_server

        for crashed in mark_orphaned_runs_crashed():
            typer.echo(f"flow run {crashed} was left running by a process that is gone: "
                       "marked Crashed", err=True)
        from tracerl.config.registry import stage_uses

        watch_server(stage, on_failure=lambda: restore_missing(key))
        # all of its outputs, or none; it looks up by name only what its deps hold
        with tags(*run_tags()), stage_outputs(key), stage_uses(stage, STAGE_USES[stage]):
            run_stage(stage, flow)
    except Exception as exc:  # the flow run, if it started, is already marked failed
        typer.echo(f"error: stage {stage} failed: {exc}{put_back()}", err=True)
        raise typer.Exit(1) from exc


@server_app.command("start")
def server_start() -> None:
    """Start the local Prefect server in the background, unless it is running."""
    from flows._runtime.server import ensure_server, ui_url

    ensure_server()
    typer.echo(f"Prefect server running: UI at {ui_url()}")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the local Prefect server."""
    from flows._runtime.server import stop_server

    stop_server()


@server_app.command("status")
def server_status() -> None:
    """Say whether the local Prefect server answers."""
    from flows._runtime.server import is_healthy, ui_url

    if is_healthy():
        typer.echo(f"running: UI at {ui_url()}")
    else:
        typer.echo("not running")
        raise typer.Exit(1)


worker_app = typer.Typer(no_args_is_help=True, help="The nightly deployment's worker.")
app.add_typer(worker_app, name="worker")


@worker_app.command("start")
def worker_start(pool: Annotated[str, typer.Option(help="work pool")] = "tracerl-local"
                 ) -> None:
    """Start a worker on POOL in a session of its own (it outlives this shell)."""
    from flows._runtime.worker import pid_file, start_worker

    pid = start_worker(pool)
    typer.echo(f"worker {pid} on pool {pool} (log: {pid_file().with_name('worker.log')})")


@worker_app.command("stop")
def worker_stop(grace: Annotated[float, typer.Option(help="seconds before SIGKILL")] = 20.0
                ) -> None:
    """Stop the worker for certain: SIGTERM, wait, then SIGKILL its process group."""
    from flows._runtime.worker import stop_worker

    try:
        typer.echo(stop_worker(grace))
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@app.command()
def init(
    name: Annotated[str, typer.Argument(help="the pipeline: pipelines/NAME/")],
    more_logs: Annotated[list[Path] | None, typer.Argument(
        help="more log files or folders (`--logs a.json b.json` reads both)",
        metavar="[PATH]...", show_default=False)] = None,
    logs: Annotated[list[Path] | None, typer.Option(
        "--logs", help="log files or folders: a file is a dataset, a folder holds one "
                       "dataset per top-level file and per sub-folder")] = None,
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="NAME=PATH: one dataset of that name, all the logs under PATH "
                          "(repeatable)")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="the logs' format for every dataset (default auto: detected "
                         "per dataset and written into params)")] = "auto",
    copy: Annotated[bool, typer.Option(
        "--copy/--in-place", help="copy the logs under data/NAME/raw/ (DVC-tracked) or "
                                  "reference them where they are (logs inside the "
                                  "repository always are)")] = True,
    force: Annotated[bool, typer.Option("--force", help="rewrite an existing pipeline")
                     ] = False,
) -> None:
    """Write a pipeline for your own logs: pipelines/NAME/params.yaml (every default,
    commented), its dvc.yaml and GX project. Then: dvc repro pipelines/NAME/dvc.yaml"""
    from tracerl.config.init import InitError, init_pipeline

    logs = [*(logs or []), *(more_logs or [])]
    named = []
    for item in dataset or []:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            typer.echo(f"error: --dataset {item!r}: expected NAME=PATH", err=True)
            raise typer.Exit(2)
        named.append((key, Path(value)))
    command = " ".join(["tracerl init", name, *(["--logs", *map(str, logs)] if logs else []),
                        *(f"--dataset {d}" for d in dataset or [])])
    try:
        done = init_pipeline(Path.cwd(), name, logs, stage_plan, named=named, fmt=fmt,
                             copy=copy, force=force, command=command)
    except InitError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    root = Path.cwd().resolve()
    for d in done.datasets:
        typer.echo(f"dataset {d.name}: {len(d.files)} file(s), format {d.format} "
                   f"({', '.join(str(s) for s in d.sources)})")
    if done.copied is not None:
        typer.echo(f"copied the logs to {done.copied.relative_to(root)}/"
                   + (f" (DVC-tracked: {done.dvc_tracked.relative_to(root)})"
                      if done.dvc_tracked else ""))
    for path in (done.params, done.dvc, *done.gx):
        typer.echo(f"wrote {path.relative_to(root)}")
    if done.deployment:
        typer.echo(f"nightly: deployment {done.deployment} in prefect.yaml (`make nightly` "
                   f"deploys it; it lands files dropped in data/{name}/inbox/)")
    typer.echo(f"run it: dvc repro {done.dvc.relative_to(root)}; then: tracerl results "
               f"--reports reports/{name} --metrics metrics/{name}")


gx_app = typer.Typer(no_args_is_help=True, help="The Great Expectations project under gx/.")
app.add_typer(gx_app, name="gx")


@gx_app.command("generate")
def gx_generate(
    params_file: Annotated[Path, typer.Option("--params", help="params file")] = Path(
        "params.yaml"),
    gx_dir: Annotated[Path | None, typer.Option(
        "--gx", help="GX project folder (default: paths.gx of the params file, else gx)")] = None,
) -> None:
    """Write <gx>/expectations/ (the suite) and <gx>/checkpoints/ (one per dataset) from
    params; commit them, so a changed expectation is reviewed as a diff."""
    from tracerl.data.gx_project import generate

    params = load_params(params_file)
    gx_dir = gx_dir or Path(get(params, "paths.gx", "gx"))
    for written in generate(gx_dir, float(get(params, "validate.reward_min")),
                            float(get(params, "validate.reward_max")),
                            dataset_names(params)):
        typer.echo(f"wrote {written}")


@app.command()
def plots(
    revisions: Annotated[list[str] | None, typer.Argument(
        help="git revisions to compare (`dvc plots diff`); none: the workspace")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path(
        "dvc_plots"),
) -> None:
    """Render the DVC plots to OUT/index.html with Vega inlined: it opens offline."""
    import subprocess

    from tracerl.report.plots import show

    try:
        page = show(out, revisions)
    except subprocess.CalledProcessError as exc:
        raise typer.Exit(exc.returncode or 1) from exc
    typer.echo(f"plots: {page} (no network needed)")


@app.command()
def deps(
    check: Annotated[bool, typer.Option(
        "--check", help="only compare: exit 1 naming each stage whose deps drifted")] = False,
) -> None:
    """Write every dvc.yaml stage's code deps: the import closure of the flow it runs."""
    from tracerl.config.deps import sync_deps

    drift = sync_deps(Path.cwd(), stage_plan, check=check)
    for where, changes in drift.items():
        typer.echo(f"{where}: {' '.join(changes[:6])}{' ...' if len(changes) > 6 else ''}")
    if check and drift:
        typer.echo("code deps drifted from the import closure: run `python -m tracerl deps`",
                   err=True)
        raise typer.Exit(1)
    if not drift:
        typer.echo("code deps are current")


@app.command()
def results(
    reports: Annotated[Path, typer.Option(help="reports folder")] = Path("reports"),
    metrics: Annotated[Path, typer.Option(help="metrics folder")] = Path("metrics"),
    params_file: Annotated[Path | None, typer.Option(
        "--params", help="the pipeline's params file: its fixtures print their own results "
                         "[default: params.yaml when present]")] = None,
) -> None:
    """Print what the last pipeline run produced, and where to look in the Prefect UI."""
    from flows._runtime.server import ui_url
    from tracerl.config.fixtures import fixtures_named, get_fixture
    from tracerl.report.terminal import print_results

    if params_file is None and Path("params.yaml").is_file():
        params_file = Path("params.yaml")
    params = load_params(params_file) if params_file is not None else {}
    views = [view for name in fixtures_named(params)
             if (view := get_fixture(name).result_view) is not None]
    print_results(reports, ui_url=ui_url(), metrics=metrics, views=views)
