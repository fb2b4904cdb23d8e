"""The suite owns its Prefect server and home: the server `make run` uses (prefect.toml) is
never reached, from this process or from the stage commands it starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import ROOT, copy_project, flow_run_count, project_api_url, project_env

_SETTINGS = ("import json; from prefect.settings import get_current_settings as g; s = g(); "
             "print(json.dumps({'api': str(s.api.url), 'ui': str(s.ui_url), 'home': str(s.home),"
             " 'db': s.server.database.connection_url.get_secret_value()}))")


def _settings_seen_from(cwd: Path, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _SETTINGS], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_a_subprocess_in_the_project_root_resolves_to_the_suites_server():
    """prefect.toml in the project root says 4200 and .prefect/; the suite's environment
    wins, for every process it starts there."""
    seen = _settings_seen_from(ROOT, project_env())
    home = Path(os.environ["PREFECT_HOME"])
    assert seen["api"] == os.environ["PREFECT_API_URL"] != project_api_url()
    assert seen["ui"] == os.environ["PREFECT_API_URL"].removesuffix("/api")
    assert Path(seen["home"]) == home and home.resolve() != (ROOT / ".prefect").resolve()
    assert seen["db"].endswith(str(home / "prefect.db"))


@pytest.mark.integration
def test_without_the_isolation_the_suite_refuses_to_run(monkeypatch, tmp_path):
    """The guard the suite runs at start-up: were the environment to leave Prefect to
    prefect.toml, it stops the session instead of touching the user's server. (Run on a
    copy of prefect.toml: reading the settings makes their home folder.)"""
    shutil.copy2(ROOT / "prefect.toml", tmp_path / "prefect.toml")
    for var in conftest.ISOLATION_VARS:
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(pytest.exit.Exception, match="refusing to run"):
        conftest._refuse_the_project_server(tmp_path)
    monkeypatch.undo()
    conftest._refuse_the_project_server(ROOT)  # the environment restored: no objection


@pytest.mark.integration
def test_a_stage_command_runs_on_the_suites_server(tmp_path, prefect_server):
    from prefect.client.orchestration import get_client

    project = copy_project(tmp_path, calculator={"episodes": 40})
    before = flow_run_count(prefect_server)
    ran = subprocess.run([sys.executable, "-m", "tracerl", "run", "generate"], cwd=project,
                         env=project_env(), capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert "starting the local one" not in ran.stderr  # found the suite's server answering
    assert not (project / ".prefect").exists()  # and made no home of its own
    assert flow_run_count(prefect_server) == before + 1
    with get_client(sync_client=True) as client:
        assert "generate" in {f.name for f in client.read_flows()}

    shown = subprocess.run([sys.executable, "-m", "tracerl", "results"], cwd=project,
                           env=project_env(), capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    ui = prefect_server.removesuffix("/api")
    assert f"Prefect UI (flow runs, artifacts): {ui}" in shown.stdout
