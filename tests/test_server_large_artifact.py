"""The server tracerl starts stays up when a stage publishes a large report.

`prefect server start --background` pipes the server's output to a parent that has exited:
its first large write ("Refusing to publish event of size ...", logged for any artifact
over Prefect's 1.5 MB event limit) failed, the request got HTTP 500 and the server died
(a 3 MB report, three times out of three). tracerl's own start (`tracerl server start`)
logs to <home>/server.log, and its publishing never sends an event over the limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import BIN
from tests.own_prefect import free_port, prefect_env

pytestmark = pytest.mark.integration

TEN_MB = 10 * 1024 * 1024

PUBLISH = """
import sys
from pathlib import Path
from prefect import flow
from prefect.artifacts import create_markdown_artifact
from flows._publish import report_links

@flow
def publish(page: str) -> dict:
    shown = report_links("report", {"html": Path(page)})
    # the same size sent raw: an event the server refuses, and logs
    create_markdown_artifact(key="raw-ten-mb", markdown="x" * int(sys.argv[2]))
    return shown

print(publish(sys.argv[1])["html"])
"""


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_a_ten_mb_report_leaves_the_server_answering(tmp_path: Path) -> None:
    home = tmp_path / ".prefect"
    env = {**prefect_env(home, free_port()), "DVC_ROOT": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    url = env["PREFECT_API_URL"]
    page = tmp_path / "report.html"
    page.write_text("<html><body><table>" + "<tr><td>row</td></tr>" * (TEN_MB // 20)
                    + "</table></body></html>")
    subprocess.run([str(BIN / "python"), "-m", "tracerl", "server", "start"], env=env,
                   cwd=tmp_path, check=True, capture_output=True, timeout=180)
    try:
        pid = int((home / "server.pid").read_text())
        done = subprocess.run([sys.executable, "-c", PUBLISH, str(page), str(TEN_MB)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert _answers(url), (home / "server.log").read_text()[-3000:]
        os.kill(pid, 0)  # the process that was started is the one answering
        log = (home / "server.log").read_text()
        assert "Refusing to publish event" in log  # the raw one: logged, to the file
        assert f"Refusing to publish event of size {page.stat().st_size}" not in log
        artifact_id = done.stdout.strip().rsplit("/", 1)[-1]
        with urllib.request.urlopen(f"{url}/artifacts/{artifact_id}", timeout=10) as resp:
            artifact = json.loads(resp.read())
        assert artifact["type"] == "markdown"
        assert page.as_uri() in artifact["data"] and len(artifact["data"]) < 10_000
    finally:
        subprocess.run([str(BIN / "python"), "-m", "tracerl", "server", "stop"], env=env,
                       cwd=tmp_path, capture_output=True, timeout=60)


def test_dirty_means_the_code_differs_not_what_a_stage_rewrites(tmp_path, monkeypatch):
    """dvc repro rewrites dvc.lock and removes the tracked metrics before a stage writes
    them again: neither makes the run's commit "+dirty"; a changed module does."""
    from flows._stage import git_commit

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ope.json").write_text("{}\n")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "metrics" / "ope.json").unlink()
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    assert not git_commit([tmp_path / "pkg"]).endswith("+dirty")
    (tmp_path / "pkg" / "__init__.py").write_text("x = 2\n")
    assert git_commit([tmp_path / "pkg"]).endswith("+dirty")
