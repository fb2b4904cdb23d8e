"""A stage that fails after `dvc repro` removed its outputs leaves the last good outputs
in place: every one of them, cached by DVC or not (metrics, summaries, plots), with the
same bytes, whatever the failure (in the flow, in the params check before it, before the
server answers) and whichever runner wrote them (tasks on Dask workers included)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import copy_project, project_env

pytestmark = pytest.mark.integration

SMALL = {"calculator": {"episodes": 120}, "table": {"mc_episodes": 500},
         "ope": {"n_boot": 100, "critic": {"iterations": 100}}}


def _outputs(project: Path, stage: str) -> dict[str, bytes]:
    """Every file of the stage's outputs (outs, metrics, plots) as dvc.yaml lists them."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    spec = yaml.safe_load((project / "dvc.yaml").read_text())["stages"][stage]
    files = {}
    for kind in ("outs", "metrics", "plots"):
        for entry in spec.get(kind) or []:
            rel = next(iter(entry)) if isinstance(entry, dict) else entry
            rel = rel.replace("${paths.", "{").format(**params["paths"])
            root = project / rel
            for p in [root] if root.is_file() else sorted(root.rglob("*")):
                if p.is_file():
                    files[p.relative_to(project).as_posix()] = p.read_bytes()
    assert files, f"no outputs of {stage}"
    return files


def _set_params(project: Path, section: str, key: str, value: object) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params[section][key] = value
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _repro(project: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(["dvc", "repro", *targets], cwd=project, env=project_env(),
                          capture_output=True, text=True, timeout=900)


def test_a_stage_failing_after_dvc_removed_its_outputs_puts_all_of_them_back(
        tmp_path, prefect_server):
    project = copy_project(tmp_path, **SMALL)
    done = _repro(project)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    good = _outputs(project, "ope")
    assert any(k.startswith("metrics/") for k in good)  # cache: false outputs are in it
    assert any(k.startswith("plots/") for k in good)

    # Fails inside the flow: a mixture of a policy that does not exist.
    candidates = yaml.safe_load((project / "params.yaml").read_text())["ope"]["candidates"]
    _set_params(project, "ope", "candidates",
                {**candidates, "mixtures": [*candidates["mixtures"], ["bc", "no_such", 0.5]]})
    failed = _repro(project, "ope")
    assert failed.returncode != 0 and "no_such" in failed.stdout + failed.stderr
    assert _outputs(project, "ope") == good

    # Fails before the flow starts: params the schema refuses (the command exits 2).
    _set_params(project, "ope", "confidence", 1.5)
    failed = _repro(project, "ope")
    assert failed.returncode != 0 and "confidence" in failed.stdout + failed.stderr
    assert _outputs(project, "ope") == good


def test_outputs_written_by_dask_workers_come_back_too(tmp_path, prefect_server):
    project = copy_project(tmp_path, **SMALL,
                           runtime={"task_runner": "dask",
                                    "dask": {"address": None, "n_workers": 2,
                                             "threads_per_worker": 1}})
    done = _repro(project, "ingest")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Creating a new Dask cluster" in done.stdout + done.stderr
    good = _outputs(project, "ingest")
    assert any(k.startswith("data/ingested/") for k in good)
    for rel in ("data/ingested", "reports/ingest/summary.json", "metrics/ingest.json"):
        target = project / rel  # removed, as `dvc repro` does before the stage's command
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    with socket.socket() as squatter:  # the stage then fails: its server cannot start
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        ran = subprocess.run([sys.executable, "-m", "tracerl", "run", "ingest"], cwd=project,
                             env=project_env(PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
                                             PREFECT_SERVER_API_PORT=str(port)),
                             capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1, ran.stderr
    assert _outputs(project, "ingest") == good
