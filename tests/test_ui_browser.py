"""The Prefect UI as a reviewer sees it: headless Chromium renders the page of a completed
ope run and of its summary artifact; the rendered DOM holds the run's name, tags,
parameters and the summary table's rows. (`make test` installs Debian's chromium.)"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import copy_project
from tests.own_prefect import own_server

pytestmark = pytest.mark.integration

SMALL = {"calculator": {"episodes": 120}, "table": {"mc_episodes": 500},
         "ope": {"n_boot": 100, "critic": {"iterations": 100}}}


def test_ui_shows_run_identity_and_summary_table(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows._runtime.ui_check import dump_dom, review_pages, screenshot

    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project", **SMALL)
    with own_server(tmp_path / "prefect-home") as env:
        done = subprocess.run(["dvc", "repro", "ope"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        ui = env["PREFECT_API_URL"].removesuffix("/api")
        with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
                get_client(sync_client=True) as client:
            pages = review_pages(ui, client)
            run = client.read_flow_run(pages["run"].rsplit("/", 1)[1])

        dom = dump_dom(pages["run"])
        assert run.name.startswith("ope · good_coverage+no_mul_support · ")
        assert run.name in dom
        for tag in run.tags:
            assert tag in dom, tag
        assert {"stage:ope", "dataset:good_coverage", "dataset:no_mul_support"} <= set(run.tags)
        assert any(t.startswith("params:") for t in run.tags)

        dom = dump_dom(pages["parameters"])
        for name in ("min_support", "n_boot", "calculator.datasets", "calculator.behavior"):
            assert name in dom, name

        dom = dump_dom(pages["ope-summary"])
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", dom)
        assert "good_coverage" in cells and "no_mul_support" in cells
        assert "pick (critic/fqe)" in dom and "ope: " in dom

        dom = dump_dom(pages["ope-plot"])
        assert 'src="data:image/png;base64,' in dom  # the plot itself, not a path
        shot = screenshot(pages["ope-summary"], tmp_path / "summary.png")
        assert shot.stat().st_size > 10_000
