"""The compare stage in the tau2 pipeline (a temp copy, `dvc repro` there, the suite's own
Prefect server) with three synthetic agents beside the two real ones (five agents, ten pairs,
the report written): every pair's paired difference is in the
metrics, the stage's files, the UI artifacts and the report, and equals the numbers
recomputed from the raw tau2 JSON with the stdlib (scipy for the exact test)."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from html import escape
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from tests.conftest import copy_project, project_env

pytestmark = pytest.mark.integration

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
DVC = "pipelines/tau2/dvc.yaml"
PARAMS = "pipelines/tau2/params.yaml"
THIRD = "data/synthetic/third_airline.json"
# More agents of the same kind: (name, tasks dropped, task ids whose second trial succeeds)
MORE = {"fourth": (("1", "3"), 0), "fifth": (("4",), 1)}
REAL_AGENTS = ("gpt-4.1", "ft-gpt-4.1-sft")


def _run(project: Path, *cmd: str) -> str:
    out = subprocess.run(list(cmd), cwd=project, env=project_env(), capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _synthetic_agent(project: Path, path: str, dropped: tuple[str, ...] = ("2", "6"),
                     parity: int = 1) -> None:
    """gpt-4.1's file with `dropped` tasks left out, every other task run twice: the logged
    outcome, and a second trial that succeeds where the task id's parity is `parity` (the
    third agent: tasks 2 and 6 dropped, odd ids succeed)."""
    doc = json.loads((REAL / "tau2-bench" / "gpt-4.1_airline.json").read_text())
    kept = [s for s in doc["simulations"] if str(s["task_id"]) not in dropped]
    second = []
    for s in kept:
        copy = json.loads(json.dumps(s))
        copy["id"], copy["trial"] = f"{s['id']}-second", 1
        copy["reward_info"]["reward"] = float(int(s["task_id"]) % 2 == parity)
        second.append(copy)
    doc["simulations"] = kept + second
    (project / path).parent.mkdir(parents=True, exist_ok=True)
    (project / path).write_text(json.dumps(doc))


def _more_path(name: str) -> str:
    return f"data/synthetic/{name}_airline.json"


def _pairs() -> list[tuple[str, str]]:
    """Every (agent, baseline) pair in the stage's order: per baseline in the datasets'
    order, each agent after it."""
    agents = [*REAL_AGENTS, "third", *MORE]
    return [(agents[i], agents[j]) for j in range(len(agents))
            for i in range(j + 1, len(agents))]


def _raw(path: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for s in json.loads(path.read_text())["simulations"]:
        out[str(s["task_id"])].append(int(abs(s["reward_info"]["reward"] - 1) <= 1e-6))
    return out


def _exact_p(agent: dict[str, list[int]], baseline: dict[str, list[int]],
             common: list[str]) -> float:
    """The stratified exact test recomputed: per task the agent's successes are
    hypergeometric given the task's total; the null law of their sum is the convolution."""
    law, observed = np.ones(1), 0
    for t in common:
        a, b = agent[t], baseline[t]
        hyper = stats.hypergeom(len(a) + len(b), sum(a) + sum(b), len(a))
        law = np.convolve(law, hyper.pmf(np.arange(len(a) + 1)))
        observed += sum(a)
    return float(law[law <= law[observed] * (1 + 1e-7)].sum())


@pytest.fixture(scope="module")
def five_agents(tmp_path_factory, prefect_server):
    if not REAL.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    root = tmp_path_factory.mktemp("compare-tau2")
    (root / "shared").mkdir()
    (root / "shared" / "realdata").symlink_to(REAL.resolve())
    (root / "project").mkdir()
    project = copy_project(root / "project")
    _synthetic_agent(project, THIRD)
    params = yaml.safe_load((project / PARAMS).read_text())
    params["datasets"]["third"] = {"inputs": [THIRD], "format": "tau2"}
    for name, (dropped, parity) in MORE.items():
        _synthetic_agent(project, _more_path(name), dropped, parity)
        params["datasets"][name] = {"inputs": [_more_path(name)], "format": "tau2"}
    (project / PARAMS).write_text(yaml.safe_dump(params, sort_keys=False))
    _run(project, "python", "-m", "tracerl", "gx", "generate", "--params", PARAMS)
    _run(project, "dvc", "repro", f"{DVC}:compare")
    _run(project, "python", "-m", "tracerl", "run", "report", "--params", PARAMS)
    return project


def test_every_pair_is_in_the_metrics_and_recomputes_from_the_raw_json(five_agents):
    raw = {"gpt-4.1": _raw(REAL / "tau2-bench" / "gpt-4.1_airline.json"),
           "ft-gpt-4.1-sft": _raw(REAL / "tau2-bench" / "ft-gpt-4.1-sft_airline.json"),
           "third": _raw(five_agents / THIRD),
           **{name: _raw(five_agents / _more_path(name)) for name in MORE}}
    metrics = json.loads((five_agents / "metrics/tau2/compare.json").read_text())
    expected_pairs = _pairs()
    assert len(expected_pairs) == 10
    assert sorted(metrics["pairs"]) == sorted(f"{a}_vs_{b}" for a, b in expected_pairs)
    for agent, baseline in expected_pairs:
        got = metrics["pairs"][f"{agent}_vs_{baseline}"]
        a, b = raw[agent], raw[baseline]
        common = sorted(set(a) & set(b))
        diffs = [sum(a[t]) / len(a[t]) - sum(b[t]) / len(b[t]) for t in common]
        assert got["n_tasks"] == len(common)
        assert got["difference"] == pytest.approx(sum(diffs) / len(common), abs=1e-6)
        assert got["ci_low"] <= got["difference"] <= got["ci_high"]
        assert got["p_value"] == pytest.approx(_exact_p(a, b, common), abs=1e-6)
    pair = metrics["pairs"]["ft-gpt-4.1-sft_vs_gpt-4.1"]
    assert (pair["agent_score"], pair["baseline_score"], pair["difference"]) == (0.65, 0.5, 0.15)
    assert pair["p_value"] == pytest.approx(stats.binomtest(6, 9, 0.5).pvalue, abs=1e-6)
    assert metrics["leaderboard"]["third"]["pass_2"] == pytest.approx(
        np.mean([v[0] * v[1] for v in raw["third"].values()]), abs=1e-6)

    stage = json.loads((five_agents / "reports/tau2/compare/compare.json").read_text())
    assert [(p["agent"], p["baseline"]) for p in stage["pairs"]] == expected_pairs
    assert stage["pairs"][1]["tasks_only_baseline"] == ["2", "6"]
    md = (five_agents / "reports/tau2/compare/compare.md").read_text()
    assert all(f"{a} vs {b}" in md for a, b in expected_pairs)


def test_every_pair_is_in_the_report_first(five_agents):
    html = (five_agents / "reports/tau2/report/index.html").read_text()
    assert html.index('<section id="compare"') < html.index('<section id="ingest"')
    stage = json.loads((five_agents / "reports/tau2/compare/compare.json").read_text())
    section = html[html.index('<section id="compare"'):]
    section = section[:section.index("</section>")]
    for p in stage["pairs"]:
        row = re.search(rf"<tr><td>{re.escape(escape(p['agent']))}</td><td>"
                        rf"{re.escape(escape(p['baseline']))}</td>(.*?)</tr>", section)
        assert row and f"{p['difference']:.3f}" in row.group(1), p["agent"]


def test_the_ui_shows_the_summary_first_and_one_artifact_per_pair(five_agents):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterId,
    )
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        (run,) = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(
            any_=["compare"])), sort=FlowRunSort.START_TIME_DESC, limit=1)
        assert run.state.is_completed()
        artifacts = client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
    keys = [a.key for a in sorted(artifacts, key=lambda a: a.created)]
    # artifact keys carry the pipeline (tau2-...), so two pipelines' artifacts never mix
    assert keys[0] == "tau2-compare-summary"
    assert {f"tau2-compare-{k}" for k in ("leaderboard", "ft-gpt-4-1-sft-vs-gpt-4-1",
            "third-vs-gpt-4-1", "third-vs-ft-gpt-4-1-sft")} <= set(keys)
    summary = next(a.data for a in artifacts if a.key == "tau2-compare-summary")
    assert "10 pairs compared" in summary
    assert summary.count("\n| third |") == 2 and "| ft-gpt-4.1-sft | gpt-4.1 | 20 |" in summary
