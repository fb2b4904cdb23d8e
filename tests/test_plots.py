"""`tracerl plots`: DVC plots as a page that renders with no network."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import vl_convert

from tests.conftest import project_env
from tracerl.report.plots import offline_template, vega_lite_version

REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc\s*=\s*[\"']?\s*(https?:)?//", re.IGNORECASE)


def test_the_template_inlines_vega_and_loads_nothing_remote(tmp_path):
    html = offline_template(tmp_path / "t.html").read_text()
    assert "{plot_divs}" in html and "{scripts}" not in html
    assert not REMOTE_SCRIPT.search(html)
    assert "vegaEmbed" in html and len(html) > 300_000  # the libraries themselves


@pytest.mark.integration
def test_a_dvc_repo_plot_renders_from_the_page_alone(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = project_env()
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    rows = [{"step": i, "value": round(0.5 + 0.125 * i, 3)} for i in range(5)]
    (repo / "curve.json").write_text(json.dumps(rows))
    (repo / "dvc.yaml").write_text("plots:\n  - curve.json:\n      x: step\n      y: value\n")

    ran = subprocess.run([sys.executable, "-m", "tracerl", "plots"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    page = (repo / "dvc_plots" / "index.html").read_text()
    assert not REMOTE_SCRIPT.search(page)
    assert "vegaEmbed" in page

    # The plot's spec, with its data, is in the page; the Vega-Lite it is written for
    # compiles and renders it to marks (vl-convert runs the same libraries the page inlines).
    specs = re.findall(r"var spec = (\{.*?\});\s*vegaEmbed", page, re.DOTALL)
    assert len(specs) == 1
    spec = json.loads(specs[0])
    values = spec["data"]["values"]
    assert [(v["step"], v["value"]) for v in values] == [(r["step"], r["value"]) for r in rows]
    svg = vl_convert.vegalite_to_svg(spec, vl_version=vega_lite_version())
    assert svg.startswith("<svg") and "mark-line" in svg
