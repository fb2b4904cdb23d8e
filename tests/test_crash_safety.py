"""SIGKILL at any point leaves the old outputs or the new ones, never a mix; no process
of the killed run survives it by more than 5 s; the next run completes with the bytes of
an uninterrupted one."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tracerl.envs.calculator.logs import log_records, write_jsonl

ROOT = Path(__file__).resolve().parents[1]


def _tree_hashes(folder: Path) -> dict[str, str]:
    """Every visible output file under folder (hidden bookkeeping excluded)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def _kill_tree(proc: subprocess.Popen, after: float) -> list[int]:
    """SIGKILL proc (only proc) after `after` seconds; return the pids of its tree then."""
    time.sleep(after)
    try:
        family = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return family


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    alive = pids
    while time.monotonic() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return []
        time.sleep(0.1)
    return alive


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> tuple[Path, Path]:
    """A small log (the 'old' run) and one big enough to take seconds with 2 workers."""
    folder = tmp_path_factory.mktemp("logs")
    small, big = folder / "small.jsonl", folder / "big.jsonl"
    write_jsonl(small, log_records("good_coverage", 500, seed=1, test_fraction=0.2))
    write_jsonl(big, log_records("no_mul_support", 40_000, seed=2, test_fraction=0.2))
    return small, big


def _ingest(src: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tracerl", "ingest", str(src), "--out",
                             str(out), "--workers", "2", "--batch-lines", "5000"],
                            cwd=out.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.integration
def test_sigkill_during_ingest(tmp_path, logs):
    small, big = logs
    reference = tmp_path / "reference"
    assert _ingest(big, reference).wait() == 0
    new = _tree_hashes(reference)
    out = tmp_path / "out"
    assert _ingest(small, out).wait() == 0
    old = _tree_hashes(out)
    for after in (0.3, 1.0, 2.0, 3.0):
        family = _kill_tree(_ingest(big, out), after)
        assert not _gone_within(family, 5.0), f"workers outlived a kill at {after} s"
        assert _tree_hashes(out) in (old, new), f"mixed outputs after a kill at {after} s"
    assert _ingest(big, out).wait() == 0
    assert _tree_hashes(out) == new
    assert not [p for p in out.iterdir() if p.name.startswith(".ingest-staging")]


@pytest.mark.integration
def test_a_killed_ingest_leaves_nothing_in_the_temp_folder(tmp_path, logs):
    """SIGKILL while workers parse: no folder or file is left in the system temp folder
    (forkserver's socket folder was; workers are now started by spawn)."""
    _, big = logs
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    out = tmp_path / "out"
    for after in (0.5, 1.5, 3.0):
        proc = subprocess.Popen([sys.executable, "-m", "tracerl", "ingest", str(big), "--out",
                                 str(out), "--workers", "2", "--batch-lines", "5000"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        family = _kill_tree(proc, after)
        assert not _gone_within(family, 10.0), f"workers outlived a kill at {after} s"
        time.sleep(0.5)  # the resource tracker's clean-up
        assert not list(temp.iterdir()), f"left in the temp folder after a kill at {after} s"


_STAGE = """
import sys, time
from pathlib import Path
from tracerl.io.fileio import write_json
from tracerl.io.staging import stage_outputs
version, n = sys.argv[1], int(sys.argv[2])
with stage_outputs("train"):
    for i in range(n):
        write_json(Path("models") / f"policy-{i:04d}.json", {"version": version, "i": i})
        if i % 50 == 0:
            time.sleep(0.01)
    write_json(Path("metrics") / "train.json", {"version": version})
"""


def _stage(project: Path, version: str, n: int = 1500) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", _STAGE, version, str(n)], cwd=project,
                            env=env)


def _versions(project: Path) -> set[str]:
    import json

    from tracerl.io.staging import recover

    recover(project)  # what the next stage (or a reader) does first
    return {json.loads(p.read_text())["version"] for d in ("models", "metrics")
            for p in (project / d).glob("*.json")}


@pytest.mark.integration
def test_sigkill_during_a_stage_leaves_old_or_new_outputs(tmp_path):
    """A stage with many outputs killed at many points, publish included: after the next
    start's recovery every output is of one run."""
    assert _stage(tmp_path, "old").wait() == 0
    assert _versions(tmp_path) == {"old"}
    seen = set()
    for k, after in enumerate([0.05, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 2.0]):
        _kill_tree(_stage(tmp_path, f"new{k}"), after)
        versions = _versions(tmp_path)
        assert len(versions) == 1, f"mixed outputs after a kill at {after} s: {versions}"
        seen |= versions
        if versions != {"old"}:
            assert _stage(tmp_path, "old").wait() == 0  # start each round from the old set
    assert not list((tmp_path / ".tracerl" / "staging").iterdir())
    assert _stage(tmp_path, "final").wait() == 0
    assert _versions(tmp_path) == {"final"}


def test_ingest_inside_a_stage_publishes_with_the_stage(tmp_path, logs, monkeypatch):
    """The library's own staging (hidden folders) is not redirected; its published
    outputs join the stage's and appear only when the stage commits."""
    from tracerl.data.ingest import ingest
    from tracerl.io.fileio import write_json
    from tracerl.io.staging import stage_outputs

    small, _ = logs
    monkeypatch.chdir(tmp_path)
    with stage_outputs("ingest"):
        summary = ingest([small], Path("data/ingested/x"), workers=1)
        write_json(Path("metrics/ingest.json"), {"read": summary.read})
        assert not Path("data/ingested/x/steps").exists()  # staged, not yet published
    assert Path("data/ingested/x/steps").is_dir()
    assert Path("data/ingested/x/ingest_summary.json").is_file()
    assert Path("metrics/ingest.json").is_file()
    assert not list(Path(".tracerl/staging").iterdir())


def _stage_hashes(project: Path, globs: list[str]) -> dict[str, str]:
    subprocess.run([sys.executable, "-c", "from tracerl.io.staging import recover; recover('.')"],
                   cwd=project, check=True)  # what the next `tracerl run` does first
    return {str(p.relative_to(project)): hashlib.sha256(p.read_bytes()).hexdigest()
            for g in globs for p in sorted(project.glob(g)) if p.is_file()}


@pytest.mark.integration
def test_sigkill_during_train_and_ope(tmp_path):
    """Real stages on a server of the test's own: killed at several points, the outputs
    are the previous run's or the new run's, the next run gives an uninterrupted run's
    bytes, and nothing of the killed run survives it by 5 s."""
    import socket

    import yaml

    from tests.conftest import copy_project, project_env

    project = copy_project(tmp_path, calculator={"episodes": 120})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = project_env(PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
                      PREFECT_SERVER_API_PORT=str(port))
    tracerl = [sys.executable, "-m", "tracerl"]

    def run(stage: str) -> None:
        done = subprocess.run([*tracerl, "run", stage], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr

    def set_params(iterations: int, n_boot: int) -> None:
        params = yaml.safe_load((project / "params.yaml").read_text())
        params["train"]["naive_fqi"]["iterations"] = iterations
        params["train"]["constrained_fqi"]["iterations"] = iterations
        params["ope"]["n_boot"] = n_boot
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    outputs = {"train": ["models/**/*.json", "reports/train/summary.json", "metrics/train.json"],
               "ope": ["reports/ope/*", "metrics/ope.json", "plots/ope/*.json"]}
    try:
        for stage in ("generate", "ingest", "validate", "relabel"):
            run(stage)
        for stage, points in (("train", [2.0, 4.0, 6.0, 8.0]), ("ope", [3.0, 8.0, 14.0, 20.0])):
            set_params(50, 400)
            if stage == "ope":
                run("train")
            run(stage)
            old = _stage_hashes(project, outputs[stage])
            set_params(7, 300)
            if stage == "ope":
                run("train")
            run(stage)
            new = _stage_hashes(project, outputs[stage])
            assert old != new
            set_params(50, 400)
            if stage == "ope":
                run("train")
            run(stage)
            assert _stage_hashes(project, outputs[stage]) == old
            set_params(7, 300)
            if stage == "ope":
                run("train")
            for after in points:
                proc = subprocess.Popen([*tracerl, "run", stage], cwd=project, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                family = _kill_tree(proc, after)
                assert not _gone_within(family, 5.0), f"{stage}: survivors after {after} s"
                assert _stage_hashes(project, outputs[stage]) in (old, new), \
                    f"{stage}: mixed outputs after a kill at {after} s"
            run(stage)
            assert _stage_hashes(project, outputs[stage]) == new
    finally:
        subprocess.run([*tracerl, "server", "stop"], cwd=project, env=env,
                       capture_output=True, timeout=120)


def test_a_stage_says_the_size_of_what_it_wrote_under_a_folder(tmp_path, monkeypatch):
    """`wrote` logs sizes from `written_under`: the files a stage staged inside a folder
    (written one by one, as the feature-based stages write their models), not the folder
    an earlier run left (0 bytes when there was none)."""
    from tracerl.io.fileio import write_json
    from tracerl.io.staging import stage_outputs, written_under

    monkeypatch.chdir(tmp_path)
    write_json(tmp_path / "models/old/bc.json", {"old": True})
    with stage_outputs("train"):
        for name in ("bc", "fqi"):
            write_json(Path("models/gpt-4.1") / f"{name}.json", {"policy": name})
        staged = written_under(Path("models/gpt-4.1"))
        assert sorted(p.name for p in staged) == ["bc.json", "fqi.json"]
        assert all(p.is_file() and ".tracerl" in p.parts for p in staged)
        assert written_under(Path("models/old")) == []  # not written by this stage
    assert written_under(Path("models/gpt-4.1")) == [Path("models/gpt-4.1")]  # outside: itself


def test_outputs_under_a_hidden_folder_are_staged_and_published(tmp_path, monkeypatch):
    """A folder the user names for outputs may be hidden (`.scratch/run`): a fresh project
    whose stage writes only there publishes (the journal's folder did not exist: the commit
    failed), the outputs appear only at the commit, and a second run replaces them.
    The library's own temporaries and tools' folders stay in place."""
    import pyarrow as pa

    from tracerl.io.fileio import read_table, write_json, write_table
    from tracerl.io.staging import _bookkeeping, stage_outputs

    monkeypatch.chdir(tmp_path)
    for run in (1, 2):
        with stage_outputs("scratch"):
            write_json(Path(".scratch/run/metrics.json"), {"run": run})
            write_table(pa.table({"run": [run]}), Path(".scratch/run/steps"))
            assert not Path(".scratch/run/metrics.json").exists() or run == 2
            assert read_table(Path(".scratch/run/steps")).column("run").to_pylist() == [run]
        assert json.loads(Path(".scratch/run/metrics.json").read_text()) == {"run": run}
        assert read_table(Path(".scratch/run/steps")).column("run").to_pylist() == [run]
    assert not list(Path(".tracerl/staging").iterdir())
    for rel in (".tracerl/staging/x", ".dvc/tmp/plots/offline.html", "data/.ingest-staging-7/a",
                ".ingest-staging-7/steps", ".steps.staging-7", ".x.abc.tmp", ".steps.old",
                ".publish.json", ".scratch/run/.steps.staging-7/part-00000.parquet"):
        assert _bookkeeping(Path(rel)), rel
    for rel in (".scratch/run/steps", ".scratch/metrics.json", "data/steps"):
        assert not _bookkeeping(Path(rel)), rel
