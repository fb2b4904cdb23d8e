"""The Great Expectations project under gx/: kept in the repo, generated from params, and
run as a checkpoint per dataset that builds Data Docs offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from tracerl.config.params import dataset_names, get, load_params
from tracerl.data.gx_project import DataDocs, generate, stale

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("params_file", ["params.yaml", "pipelines/tau2/params.yaml",
                                         "pipelines/support_desk/params.yaml"])
def test_the_kept_suite_and_checkpoints_are_what_params_generate(params_file):
    params = load_params(ROOT / params_file)
    gx_dir = ROOT / get(params, "paths.gx")
    assert stale(gx_dir, float(get(params, "validate.reward_min")),
                 float(get(params, "validate.reward_max")), dataset_names(params)) == [], \
        f"run `python -m tracerl gx generate --params {params_file}` and commit {gx_dir}"


def test_a_changed_bound_is_a_diff_of_the_suite_file(tmp_path):
    gx = tmp_path / "gx"
    shutil.copytree(ROOT / "gx", gx)
    assert stale(gx, -5.0, 1.0, ["good_coverage", "no_mul_support"]) == [
        "expectations/tracerl_step_table.json"]
    generate(gx, -5.0, 1.0, ["good_coverage"])
    suite = orjson.loads((gx / "expectations/tracerl_step_table.json").read_bytes())
    bounds = [e["kwargs"] for e in suite["expectations"]
              if e["kwargs"].get("column") == "reward"]
    assert bounds[-1]["min_value"] == -5.0
    assert sorted(p.name for p in (gx / "checkpoints").iterdir()) == [
        "good_coverage_checkpoint.json"]


def test_one_checkpoint_run_gives_the_verdict_report_and_data_docs(tmp_path):
    from tests.inbox_logs import inbox_log
    from tracerl.data.ingest import ingest
    from tracerl.data.validation import validate_steps
    from tracerl.io.fileio import read_table

    inbox_log(tmp_path / "log.jsonl", "docs", episodes=10)
    ingest([tmp_path / "log.jsonl"], tmp_path / "out")
    table = read_table(tmp_path / "out" / "steps")
    # A bound the best rewards break: the checkpoint must report the same failure, with
    # the same offending rows, as the suite run on its own.
    rewards = sorted(r for r in table.column("reward").to_pylist() if r is not None)
    bounds = (rewards[0], rewards[-1] - 1e-3)
    alone = validate_steps(table, *bounds)
    checked = validate_steps(table, *bounds,
                             data_docs=DataDocs(ROOT / "gx", "good_coverage", tmp_path / "docs"))
    assert not checked.success
    assert checked.to_dict() == alone.to_dict()
    index = tmp_path / "docs" / "index.html"
    assert index.is_file() and "good_coverage" in index.read_text()
    pages = list((tmp_path / "docs" / "validations").rglob("*.html"))
    assert len(pages) == 1, "one GX validation run, not one per purpose"
