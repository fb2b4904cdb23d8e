"""The `tracerl` command: ingest logs, run pipeline stages, manage the local server."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from tracerl.config.data import Ingest
from tracerl.config.formats import FORMATS

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Offline RL and off-policy evaluation on logged agent traces.")


def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        typer.echo(f"tracerl {metadata.version('tracerl')}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and exit.")] = False) -> None:
    """Offline RL and off-policy evaluation on logged agent traces."""
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
    "export": ("flows.export", "export_flow"),
}


# The kinds of item each stage looks up by name (tracerl.config.fixtures.COLLECTIONS and
# ITEMS): the generic registries' and its fixtures'. Its DVC deps hold their code (`python
# -m tracerl deps`); a stage that resolves a kind not listed here fails, naming it.
STAGE_USES: dict[str, tuple[str, ...]] = {
    "generate": ("generate_logs",),
    "ingest": ("formats",),
    "validate": (),
    "relabel": ("verifiers",),
    "coverage": ("encoders",),
    "compare": (),
    "train": ("encoders",),
    "table": ("encoders",),
    "ope": ("encoders", "verifiers", "replay_adapter", "behavior_policy", "truth",
            "truth_metrics"),
    "report": (),
    "export": ("encoders",),
}


def flow_of(stage: str) -> tuple[str, str]:
    """(flows module, flow function) that `tracerl run <stage>` runs: one per stage, for
    every pipeline."""
    return STAGES[stage]


def stage_plan(stage: str, params_file: Path):
    """What `tracerl run <stage> --params <params_file>` runs (for its DVC deps)."""
    from tracerl.config.deps import StagePlan
    from tracerl.config.schema import load_config

    config = load_config(params_file)
    inputs: list[str] = []
    modules: list[str] = []
    if stage == "ope":
        inputs, modules = _candidate_sources(config, Path.cwd())
    if stage == "relabel":  # a team's verifier plugins (package.module:attr)
        inputs, modules = _import_path_sources(
            (v for v in config.relabel.verifiers if ":" in v), Path.cwd())
    return StagePlan(flow_of(stage)[0], STAGE_USES[stage], config.fixture_names(),
                     inputs=inputs, modules=modules)


def _candidate_sources(config, root: Path) -> tuple[list[str], list[str]]:
    """What the external candidates (ope.candidates.external) read: their scored tables
    (data deps), and each import-path policy's code — a project module's import closure, or
    the project folder (or file) outside the packages that defines it; an installed package
    is no dep of the checkout."""
    from tracerl.ope.external import scored_files

    spec = config.ope.candidates.external
    inputs = scored_files(spec, config.ope.datasets or config.dataset_names())
    code, modules = _import_path_sources(
        (c.policy for c in spec.values() if c.policy is not None), root)
    return list(dict.fromkeys([*inputs, *code])), modules


def _import_path_sources(targets: Iterable[str], root: Path) -> tuple[list[str], list[str]]:
    """The code of objects named by import path (`package.module:attr`): a project
    module's import closure (modules), or the folder (or file) outside the packages that
    defines it (inputs); an installed package is no dep of the checkout."""
    from tracerl.config.deps import PACKAGES

    inputs: list[str] = []
    modules: list[str] = []
    for target in targets:
        module = target.partition(":")[0]
        top = module.split(".")[0]
        if top in PACKAGES:
            modules.append(module)
        elif (root / top).is_dir() or (root / f"{top}.py").is_file():
            inputs.append(top if (root / top).is_dir() else f"{top}.py")
    return list(dict.fromkeys(inputs)), modules


def _checked_config(params_file: Path, stage: str | None = None):
    """The params file as the checked model, before any work; a mistake exits 2 naming
    the key. stage: its sections (the `params:` of its stage in the dvc.yaml beside the
    file) must be present."""
    from tracerl.config.params import stage_param_keys
    from tracerl.config.schema import ParamsError, load_config

    keys = stage_param_keys(Path(params_file).parent / "dvc.yaml", stage) if stage else None
    try:
        return load_config(params_file, needs=[k.split(".")[0] for k in keys or []])
    except ParamsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _default(knob: str) -> object:
    return Ingest.model_fields[knob].default


@app.command()
def ingest(
    inputs: Annotated[list[Path], typer.Argument(help="log files or folders")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")],
    max_bad_fraction: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, help="fail when quarantined/read exceeds this [default: "
        f"ingest.max_bad_fraction in params.yaml, else {_default('max_bad_fraction')}]")] = None,
    batch_lines: Annotated[int | None, typer.Option(min=1, help="records per batch [default: "
        f"ingest.batch_lines, else {_default('batch_lines')}]")] = None,
    workers: Annotated[int | None, typer.Option(
        min=0, help="parser processes (0 = one per core for large inputs) [default: "
        f"ingest.workers, else {_default('workers')}]")] = None,
    params_file: Annotated[Path | None, typer.Option(
        "--params", help="params file [default: params.yaml when present]")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help=f"{' | '.join(FORMATS.names())} | module:FORMAT (your own) | "
                         "auto (detect each file)")] = "auto",
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
    from tracerl.io.lean import pyarrow_without_pandas

    pyarrow_without_pandas()  # this process only ingests (start-up: tracerl.io.lean)
    from tracerl.config.options import ingest_options
    from tracerl.data.ingest import InputError
    from tracerl.data.ingest import ingest as run_ingest

    if params_file is None and Path("params.yaml").is_file():
        params_file = Path("params.yaml")
    knobs = _checked_config(params_file).ingest if params_file is not None else Ingest()
    given = {"batch_lines": batch_lines, "max_bad_fraction": max_bad_fraction,
             "workers": workers, "strict": strict or None}  # the command line over params
    options = {**ingest_options(knobs), "fmt": fmt,
               **{k: v for k, v in given.items() if v is not None}}
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
    for path, reason in summary.refused_files.items():  # one line per file no format reads
        typer.echo(f"refused: {path}: {reason}", err=True)
    for warning in summary.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if summary.internal_errors:
        typer.echo(f"error: {summary.internal_errors} record(s) hit an internal error (see "
                   f"{out / 'quarantine.jsonl'}, field <internal>); please report it", err=True)
        raise typer.Exit(3)
    if not summary.passed:
        typer.echo(f"see {out / 'quarantine.jsonl'} for each rejected record and its reason",
                   err=True)
        raise typer.Exit(1)


@app.command("export")
def export_cmd(
    steps: Annotated[Path, typer.Argument(help="a labelled step table (a Parquet folder)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")],
    params_file: Annotated[Path | None, typer.Option(
        "--params", help="params file: its `export:` section and `relabel.filters` "
                         "[default: params.yaml when present]")] = None,
) -> None:
    """Write fine-tuning data from a relabelled step table: OUT/sft/ (TRL conversational
    JSONL and Parquet), OUT/sft_openai/ (OpenAI JSONL, weight 0/1), OUT/kto/, OUT/prm/,
    OUT/weighted/ (every conversation in the SFT shape, each assistant message weighted
    by its advantage under the logging policy, that credit beside it), OUT/pairs/ and
    OUT/pairs_openai/ (preference pairs mined from logged alternatives), one file per split,
    OUT/credit/episodes.jsonl and OUT/manifest.json.

    Exit status: 0 ok; 2 unusable input (params, table, tool definitions)."""
    from tracerl.config.export import Export
    from tracerl.export.run import (
        ExportError,
        export_dataset,
        load_tool_definitions,
        source_sha256,
    )
    from tracerl.io.fileio import read_table

    if params_file is None and Path("params.yaml").is_file():
        params_file = Path("params.yaml")
    checked = _checked_config(params_file) if params_file is not None else None
    filters = checked.relabel.filters if checked is not None else None
    try:
        config = (checked.export.model_copy(update={"out": str(out)})
                  if checked is not None and checked.export is not None
                  else Export(out=str(out)))
        table = read_table(steps)
        plan = None
        if {"weighted", "pairs"} & set(config.formats):  # the logging policy's credit
            from tracerl.config.learning import LOGS_TRAIN, Ope, Train
            from tracerl.export.run import plan_credit

            plan = plan_credit(
                {"steps": table}, config,
                (checked.train if checked is not None and checked.train is not None
                 else Train.model_validate(LOGS_TRAIN)),
                (checked.ope if checked is not None and checked.ope is not None else Ope()),
                checked.gamma if checked is not None else 1.0)
        manifest = export_dataset(
            table, out, config, process=filters.process if filters else None,
            outcome=filters.outcome if filters else None,
            tool_definitions=load_tool_definitions(config.tool_definitions),
            source={"steps": str(steps), "sha256": source_sha256(steps)},
            credit=plan.credits["steps"] if plan else None,
            pairs=plan.pairs["steps"] if plan else (), chosen=plan.chosen if plan else None)
    except (ExportError, FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for rel, entry in manifest["files"].items():
        typer.echo(f"{out / rel}: {entry['records']} records")
    typer.echo(f"manifest: {out / 'manifest.json'}")


guard_app = typer.Typer(no_args_is_help=True, help="Vet proposed tool calls against the logs.")
app.add_typer(guard_app, name="guard")


@guard_app.command("serve")
def guard_serve(
    params_file: Annotated[Path, typer.Option(
        "--params", help="the pipeline's params file: its guard: section, paths, gamma")
    ] = Path("params.yaml"),
    dataset: Annotated[str | None, typer.Option(
        help="whose logs judge [default: guard.dataset, else the first dataset]")] = None,
    host: Annotated[str | None, typer.Option(
        help="a loopback address [default: guard.host]")] = None,
    port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="[default: guard.port]")] = None,
) -> None:
    """Serve the guard on loopback: POST /score {messages, call: {name, arguments}} ->
    verdict, support, Q and advantage with intervals; GET /health. Stops on Ctrl-C or
    SIGTERM.

    Exit status: 0 stopped; 2 unusable params, artifacts or host."""
    from tracerl.guard import Guard
    from tracerl.guard.serve import is_loopback, serve

    checked = _checked_config(params_file)
    settings = checked.guard
    host = host or settings.host
    if not is_loopback(host):
        typer.echo(f"error: host {host!r} is not a loopback address: the guard serves this "
                   "machine only", err=True)
        raise typer.Exit(2)
    try:
        guard = Guard.from_params(checked, dataset)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    import os

    token = os.environ.get(settings.token_env) or None
    log_file = Path(settings.log)
    typer.echo(f"guard of {guard.source.get('dataset')} ({guard.table.n_states} states): "
               f"http://{host}:{port or settings.port}/score"
               f"{f' (bearer token: ${settings.token_env})' if token else ''}; "
               f"log: {log_file}", err=True)
    serve(guard, host, port or settings.port, token=token,
          max_body_bytes=settings.max_body_bytes, log_file=log_file)


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
        requires: Annotated[str | None, typer.Option(
            "--tracerl", help="the tracerl version the pipeline was written for (tracerl "
                              "init outside a checkout): another one refuses to run")] = None,
        ) -> None:
    """Run one pipeline stage as a Prefect flow on the local server (started if needed)."""
    import os
    from importlib import metadata  # (not tracerl.config.init: every stage's deps import it)

    installed = metadata.version("tracerl")
    if requires is not None and requires != installed:
        typer.echo(f"error: stage {stage} not started: its pipeline was written for tracerl "
                   f"{requires}, and tracerl {installed} is installed: "
                   f"install tracerl=={requires}, or rewrite the pipeline for this one "
                   f"(tracerl init NAME --force) and its stages rerun", err=True)
        raise typer.Exit(2)
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
        config = _checked_config(params_file or Path("params.yaml"), stage)
    except typer.Exit:
        typer.echo(f"error: stage {stage} not started: its params are invalid{put_back()}",
                   err=True)
        raise
    if stage == "ingest":  # the logs it reads from outside the repository
        from tracerl.data.sources import missing_inputs, missing_message

        missing = missing_inputs(config.dump())
        if missing:
            text = missing_message(str(params_file or "params.yaml"), missing)
            typer.echo(f"error: stage ingest not started: {text}{put_back()}", err=True)
            raise typer.Exit(2)
    from flows._runtime.server import ensure_server

    try:
        ensure_server()  # this checkout's own server, chosen before Prefect is imported
    except RuntimeError as exc:
        typer.echo(f"error: stage {stage} not started: {exc}{put_back()}", err=True)
        raise typer.Exit(1) from None
    from flows._stage import run_stage
    from tracerl.io.staging import stage_outputs

    try:
        module, name = flow_of(stage)
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


def _checkout_server(start: bool) -> str:
    """Point this process at its checkout's own Prefect server (before Prefect is
    imported) and return its API URL; a refusal (another checkout's server) exits 1."""
    from flows._runtime.server import use_checkout_server

    try:
        return use_checkout_server(start=start)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@server_app.command("start")
def server_start() -> None:
    """Start this checkout's Prefect server in the background, unless it is running."""
    from flows._runtime.server import ui_url

    _checkout_server(start=True)
    typer.echo(f"Prefect server running: UI at {ui_url()}")


@server_app.command("stop")
def server_stop() -> None:
    """Stop this checkout's Prefect server."""
    from flows._runtime.server import stop_server

    _checkout_server(start=False)
    stop_server()


@server_app.command("status")
def server_status() -> None:
    """Say whether this checkout's Prefect server answers."""
    from flows._runtime.server import is_healthy, ui_url

    _checkout_server(start=False)
    if is_healthy():
        typer.echo(f"running: UI at {ui_url()}")
    else:
        typer.echo("not running")
        raise typer.Exit(1)


@server_app.command("url")
def server_url() -> None:
    """Print this checkout's Prefect API URL (for `prefect` commands: PREFECT_API_URL)."""
    typer.echo(_checkout_server(start=False))


worker_app = typer.Typer(no_args_is_help=True, help="The nightly deployment's worker.")
app.add_typer(worker_app, name="worker")


@worker_app.command("start")
def worker_start(pool: Annotated[str, typer.Option(help="work pool")] = "tracerl-local"
                 ) -> None:
    """Start a worker on POOL in a session of its own (it outlives this shell)."""
    _checkout_server(start=True)
    from flows._runtime.worker import pid_file, start_worker

    pid = start_worker(pool)
    typer.echo(f"worker {pid} on pool {pool} (log: {pid_file().with_name('worker.log')})")


@worker_app.command("stop")
def worker_stop(grace: Annotated[float, typer.Option(help="seconds before SIGKILL")] = 20.0
                ) -> None:
    """Stop the worker for certain: SIGTERM, wait, then SIGKILL its process group."""
    _checkout_server(start=False)
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

    config = _checked_config(params_file)
    rules = config.validate_
    for written in generate(gx_dir or config.paths.gx, rules.reward_min, rules.reward_max,
                            config.dataset_names()):
        typer.echo(f"wrote {written}")


@app.command()
def plots(
    revisions: Annotated[list[str] | None, typer.Argument(
        help="git revisions to compare (`dvc plots diff`); none: the workspace")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path(
        "dvc_plots"),
    template_only: Annotated[bool, typer.Option(
        "--template-only", help="only write the offline page template that .dvc/config's "
                                "plots.html_template names (make setup)")] = False,
) -> None:
    """Render the DVC plots to OUT/index.html with Vega inlined: it opens offline."""
    import subprocess

    from tracerl.report.plots import CONFIGURED_TEMPLATE, offline_template, show

    if template_only:
        typer.echo(f"plots template: {offline_template(CONFIGURED_TEMPLATE)}")
        return
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


def _pipeline_inputs(root: Path) -> list[tuple[Path, Path, list]]:
    """(dvc.yaml, its params file, missing inputs) of every pipeline of the project."""
    import yaml

    from tracerl.config.deps import pipelines, stage_command
    from tracerl.config.params import load_params
    from tracerl.data.sources import missing_inputs

    found = []
    for dvc_file in pipelines(root):
        stages = (yaml.safe_load(dvc_file.read_text()) or {}).get("stages") or {}
        params_file = next((p for s in stages.values() if (p := stage_command(s)[1])),
                           "params.yaml")
        params = load_params(root / params_file)  # the YAML only: which files it names
        found.append((dvc_file.relative_to(root), Path(params_file),
                      missing_inputs(params, root)))
    return found


@app.command()
def inputs(
    runnable: Annotated[bool, typer.Option(
        "--runnable", help="print the dvc.yaml of each pipeline whose inputs are all present "
                           "(the targets of `dvc repro` in `make run`)")] = False,
    require: Annotated[bool, typer.Option(
        "--require", help="exit 1 when a pipeline's inputs are missing (else: a warning, "
                          "and the pipeline is left out)")] = False,
) -> None:
    """Check the logs each pipeline reads from outside the repository (params
    `datasets.<name>.inputs`): name what is missing and how to get it."""
    from tracerl.data.sources import missing_message

    found = _pipeline_inputs(Path.cwd())
    for dvc_file, params_file, missing in found:
        if missing:
            text = missing_message(str(params_file), missing)
            typer.echo(f"error: pipeline {dvc_file}: {text}" if require else
                       f"warning: pipeline {dvc_file} is skipped: {text}\n  (`make run "
                       "REQUIRE_INPUTS=1` fails instead of skipping it)", err=True)
    if runnable:
        typer.echo(" ".join(str(d) for d, _, missing in found if not missing))
    if require and any(missing for _, _, missing in found):
        raise typer.Exit(1)


@app.command()
def results(
    reports: Annotated[Path | None, typer.Option(
        help="reports folder [default: paths.reports of the params, else reports]")] = None,
    metrics: Annotated[Path | None, typer.Option(
        help="metrics folder [default: paths.metrics of the params, else metrics]")] = None,
    params_file: Annotated[Path | None, typer.Option(
        "--params", help="the pipeline's params file: its fixtures print their own results "
                         "[default: params.yaml when present]")] = None,
) -> None:
    """Print what the last pipeline run produced, and where to look in the Prefect UI."""
    _checkout_server(start=False)
    from flows._runtime.server import ui_url
    from tracerl.config.fixtures import get_fixture
    from tracerl.config.learning import Ope
    from tracerl.config.pipeline import Paths
    from tracerl.data.sources import missing_inputs, missing_message
    from tracerl.report.answer import answer_lines_of, verdict_lines_of
    from tracerl.report.terminal import print_results

    if params_file is None and Path("params.yaml").is_file():
        params_file = Path("params.yaml")
    config = _checked_config(params_file) if params_file is not None else None
    missing = missing_inputs(config.dump()) if config is not None else []
    if missing:  # said first: older results below (if any) are not of these logs
        typer.echo(f"warning: {params_file}: {missing_message(str(params_file), missing)}",
                   err=True)
    names = config.fixture_names() if config is not None else []
    views = [view for name in names if (view := get_fixture(name).result_view) is not None]
    paths = config.paths if config is not None else Paths()
    ope = (config.ope if config is not None else None) or Ope()
    reports = reports or paths.reports
    answer = answer_lines_of(reports / "ope", ope.headline, ope.min_support)
    answer += verdict_lines_of(reports / "ope", ope.headline, ope.min_support)
    print_results(reports, ui_url=ui_url(), metrics=metrics or paths.metrics, views=views,
                  answer=answer, answer_title=f"answer ({ope.headline} pick against the "
                                              "logged policy)")
