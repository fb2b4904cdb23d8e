"""nightly: land the new raw logs of the inbox, then bring the chain up to date.

1. Every file in the inbox (`paths.inbox`) is hashed; files whose content the manifest
   (`paths.manifest`) has seen are skipped, the new ones are ingested — one task each,
   mapped over files — into partitions of their own under `paths.landed` (tracerl.data.inbox).
2. `dvc repro` then reruns what the new partitions (or changed params or code) touch. Its
   stages run as subflows of this run (flows._stage.run_stage), so this run's page lists
   them. A night with nothing new and nothing changed does almost nothing, and says so.
3. A failing stage fails this run, naming the stage and DVC's reason; the outputs of the
   stages after it are untouched, and the failed stage's cached outputs are restored from
   the last good run (`dvc checkout`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from prefect import flow, get_run_logger, unmapped
from prefect.context import FlowRunContext

from flows import _publish as publish
from flows._runtime.runner import task_runner
from flows._stage import ORIGIN_ENV, PARENT_ENV, identify, namer, path, stage_params
from tasks.nightly import land_file
from tracerl.data.inbox import load_manifest, new_files, save_manifest, scan

PREFECT_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \| ")


class StageFailed(RuntimeError):
    pass


def _dvc(args: list[str], env: dict[str, str], logger) -> tuple[int, list[str]]:
    process = subprocess.Popen(["dvc", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in process.stdout:  # stream, so a long stage shows progress in the UI
        line = line.rstrip()
        if line:
            lines.append(line)
            if not PREFECT_LOG_LINE.match(line):  # a stage's own lines are in its subflow
                logger.info(line)
    return process.wait(), lines


@flow(name="nightly", flow_run_name=namer("nightly"))
def nightly_flow(force: bool = False, pipeline: str | None = None) -> dict:
    """pipeline: a pipeline of pipelines/ (e.g. one `tracerl init` wrote): its params'
    inbox is landed and its dvc.yaml reproduced; None: the root pipeline (params.yaml)."""
    logger = get_run_logger()
    target = []
    if pipeline is not None:
        os.environ["TRACERL_PARAMS"] = f"pipelines/{pipeline}/params.yaml"
        target = [f"pipelines/{pipeline}/dvc.yaml"]
    config = stage_params()
    names = config.dataset_names()
    os.environ.setdefault(ORIGIN_ENV, "nightly")
    identify("nightly", config, names)
    inbox, landed = path(config, "inbox"), path(config, "landed")
    manifest_path = path(config, "manifest")

    found, skipped = scan(inbox, names, config.nightly.dataset or names[0])
    manifest = load_manifest(manifest_path)
    new, seen = new_files(found, manifest)
    logger.info("inbox %s: %d files, %d new, %d seen before, %d skipped", inbox, len(found),
                len(new), len(seen), len(skipped))
    for note in skipped:
        logger.warning("inbox: %s", note)
    land = land_flow.with_options(task_runner=task_runner(config))
    entries = land(new, landed, config.ingest.batch_lines,
                   config.ingest.max_bad_fraction) if new else []
    for entry in entries:
        manifest[entry["sha256"]] = entry
    if entries:
        save_manifest(manifest_path, manifest)
    for e in entries:
        logger.info("%s %s → %s: %d read, %d accepted, %d quarantined", e["status"], e["path"],
                    e["partition"] or "-", e["read"], e["accepted"], e["quarantined"])

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}", ORIGIN_ENV: "nightly"}
    ctx = FlowRunContext.get()
    if ctx is not None and ctx.flow_run is not None:
        env[PARENT_ENV] = str(ctx.flow_run.id)
    code, lines = _dvc(["repro", *target, *(["--force"] if force else [])], env, logger)
    ran = [line.split("'")[1] for line in lines if line.startswith("Running stage '")]
    landed_rows = sum(e["accepted"] for e in entries if e["status"] == "landed")
    rows = [[e["path"], e["dataset"], e["status"], e["read"], e["accepted"], e["quarantined"],
             e["episodes"]] for e in entries]
    rows += [[f.path, f.dataset, "seen before", "–", "–", "–", "–"] for f in seen]
    counts = [["files in inbox", len(found)], ["new files", len(new)],
              ["files landed", sum(e["status"] == "landed" for e in entries)],
              ["files rejected", sum(e["status"] == "rejected" for e in entries)],
              ["files seen before", len(seen)], ["files skipped", len(skipped)],
              ["rows landed", landed_rows], ["stages run", len(ran)]]
    notes = [f"stages run: {', '.join(ran) if ran else 'none (everything up to date)'}",
             *skipped, *(f"rejected {e['path']}: {e['reason']}" for e in entries
                         if e["status"] == "rejected")]
    if code != 0:
        failed = next((m.group(1) for line in lines
                       if (m := re.search(r"failed to reproduce '([^']+)'", line))), "unknown")
        reason = next((line for line in reversed(lines) if line.startswith("ERROR")),
                      f"dvc repro exited {code}")
        restored, _ = _dvc(["checkout", "--force", failed], env, logger) if failed != "unknown" \
            else (1, [])
        notes.append(f"stage {failed} failed: {reason}; its last good cached outputs "
                     f"{'restored' if restored == 0 else 'could not be restored'}")
        publish.summary("nightly", f"FAIL at stage {failed}", ["what", "count"], counts,
                     notes=notes, description="What the nightly run found, landed and ran")
        _files_table(rows)
        raise StageFailed(f"stage {failed} failed: {reason}")
    quiet = not new and not ran
    verdict = "nothing new: no files landed, nothing rerun" if quiet else publish.PASS
    publish.summary("nightly", verdict, ["what", "count"], counts, notes=notes,
                 links={"html report": config.paths.reports / "report" / "index.html"}
                 if (config.paths.reports / "report" / "index.html").is_file() else None,
                 description="What the nightly run found, landed and ran")
    _files_table(rows)
    return {"found": len(found), "new": len(new), "landed_rows": landed_rows, "ran": ran}


@flow(name="land", flow_run_name="land inbox files")
def land_flow(files: list, landed: Path, batch_lines: int, max_bad_fraction: float) -> list:
    """Each new inbox file ingested into its own partition: one task per file, on the task
    runner params ask for (runtime.task_runner)."""
    futures = land_file.map(files, unmapped(landed), unmapped(batch_lines),
                            unmapped(max_bad_fraction))
    return [f.result() for f in futures]


def _files_table(rows: list[list]) -> None:
    if rows:
        publish.detail("nightly-files", "Inbox files tonight",
                    ["file", "dataset", "status", "read", "accepted", "quarantined", "episodes"],
                    rows, "Each inbox file: landed, rejected or seen before")
