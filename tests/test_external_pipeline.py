"""External candidates through the ope stage (`dvc repro` in a temp copy, the suite's own
Prefect server): on the tau2 logs, a scored table of the trained BC's distribution (as a
scoring job writes it, rows shuffled) and a Python policy by import path are judged beside
the trained candidates; the table gives BC's estimates, its provenance reaches the records,
the summary and the report, and a changed table reruns the stage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from tests.conftest import copy_project, project_env

pytestmark = pytest.mark.integration

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
DVC = "pipelines/tau2/dvc.yaml"
TABLE = "data/tau2/scored/bc_clone/gpt-4.1.jsonl"

POLICY = '''import numpy as np


class Chatty:
    def __init__(self, actions, respond):
        self.actions, self.respond = list(actions), respond

    def action_probs(self, states):
        k = len(self.actions)
        out = np.full((len(states), k), (1 - self.respond) / (k - 1))
        out[:, self.actions.index("respond")] = self.respond
        return out


def make_policy(actions, respond=0.5):
    return Chatty(actions, respond)
'''


def _run(project: Path, *args: str) -> str:
    out = subprocess.run(args, cwd=project, env=project_env(), capture_output=True, text=True,
                         timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _score_bc(project: Path) -> list[str]:
    """What a scoring job writes for the trained BC on gpt-4.1's logs; the actions."""
    from tasks.train import load_encoder
    from tracerl.io.fileio import read_table
    from tracerl.ope.external import write_scored
    from tracerl.rl.artifact import load_policy
    from tracerl.rl.encoding import step_order

    models = project / "data" / "tau2" / "models"
    encoder = load_encoder(models)
    steps = read_table(project / "data" / "tau2" / "labelled" / "gpt-4.1" / "steps")
    tr = encoder.transitions(steps)
    probs = np.asarray(load_policy(models / "gpt-4.1" / "bc.json", encoder)
                       .action_probs(tr.rows))[tr.s]
    order = pa.array(step_order(steps))
    ids = np.asarray(steps.column("episode_id").take(order).to_pylist(), dtype=object)
    t = np.asarray(steps.column("t").take(order).to_pylist())
    k = np.random.default_rng(1).permutation(tr.n)
    write_scored(project / TABLE, ids[k], t[k], np.log(probs[np.arange(tr.n), tr.a])[k],
                 actions=encoder.actions, target_probs=probs[k], dataset="gpt-4.1",
                 logged_action=[encoder.actions[a] for a in tr.a[k]],
                 scoring={"model": "bc of gpt-4.1", "temperature": 1.0})
    return list(encoder.actions)


@pytest.fixture(scope="module")
def external_run(tmp_path_factory, prefect_server):
    if not REAL.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    root = tmp_path_factory.mktemp("external")
    (root / "shared").mkdir()
    (root / "shared" / "realdata").symlink_to(REAL.resolve())
    (root / "project").mkdir()
    project = copy_project(root / "project")
    _run(project, "dvc", "repro", f"{DVC}:train")
    actions = _score_bc(project)
    (project / "my_team").mkdir()
    (project / "my_team" / "__init__.py").write_text("")
    (project / "my_team" / "policies.py").write_text(POLICY)
    params_file = project / "pipelines" / "tau2" / "params.yaml"
    params = yaml.safe_load(params_file.read_text())
    params["ope"]["candidates"] = {"external": {
        "bc_clone": {"scored": "data/tau2/scored/bc_clone/{dataset}.jsonl",
                     "datasets": ["gpt-4.1"], "scoring": {"top_p": 1.0}},
        "chatty": {"policy": "my_team.policies:make_policy",
                   "kwargs": {"actions": actions, "respond": 0.5}}}}
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    dvc_file = project / DVC
    doc = yaml.safe_load(dvc_file.read_text())
    doc["stages"]["ope"]["deps"].insert(2, TABLE)
    dvc_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    _run(project, "dvc", "repro", f"{DVC}:report")
    return project


def test_external_candidates_are_judged_beside_the_trained_ones(external_run):
    records = json.loads((external_run / "reports/tau2/ope/estimates.json").read_text())
    mine = {(r["policy"], r["layer"], r["estimator"]): r for r in records
            if r["dataset"] == "gpt-4.1"}
    for layer, estimator in [("critic", "fqe"), ("importance", "wis"), ("importance", "dr")]:
        bc, clone = mine[("bc", layer, estimator)], mine[("bc_clone", layer, estimator)]
        assert clone["value"] == pytest.approx(bc["value"], abs=1e-9)
        assert clone["support"] == pytest.approx(bc["support"], abs=1e-9)
    chatty = mine[("chatty", "critic", "fqe")]
    assert chatty["value"] is not None and chatty["flags"]  # mass where the logs show none
    provenance = mine[("bc_clone", "critic", "fqe")]["provenance"]
    assert provenance["source"] == "scored table" and len(provenance["sha256"]) == 64
    assert provenance["scoring"] == {"model": "bc of gpt-4.1", "temperature": 1.0,
                                     "top_p": 1.0}
    assert mine[("chatty", "critic", "fqe")]["provenance"]["policy"] == \
        "my_team.policies:make_policy"
    metrics = json.loads((external_run / "metrics/tau2/ope.json").read_text())["gpt-4.1"]
    assert {"bc", "bc_clone", "chatty"} <= set(metrics)
    assert metrics["bc_clone"]["estimate"] == pytest.approx(metrics["bc"]["estimate"])
    info = json.loads((external_run / "reports/tau2/ope/datasets.json").read_text())
    assert set(info["gpt-4.1"]["external"]) == {"bc_clone", "chatty"}
    html = (external_run / "reports/tau2/report/index.html").read_text()
    assert "from outside: bc_clone: scored table data/tau2/scored/bc_clone/gpt-4.1.jsonl" \
        in html


def test_a_changed_table_reruns_the_stage_and_a_bad_one_fails_naming_it(external_run):
    status = _run(external_run, "dvc", "status", f"{DVC}:ope")
    assert "changed" not in status
    path = external_run / TABLE
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # one logged step left unscored
    status = _run(external_run, "dvc", "status", f"{DVC}:ope")
    assert TABLE in status
    out = subprocess.run(["dvc", "repro", f"{DVC}:ope"], cwd=external_run, env=project_env(),
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode != 0
    assert f"{TABLE}: 1 step(s) of dataset gpt-4.1 have no record" in out.stdout + out.stderr
