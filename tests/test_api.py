"""The notebook API: `import tracerl` stays light, and the README's lines run as shown."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TAU2 = ROOT / ".." / "shared" / "realdata" / "tau2-bench"


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _loaded(code: str) -> set[str]:
    out = _python(code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))")
    assert out.returncode == 0, out.stderr
    return {m.split(".")[0] for m in json.loads(out.stdout.splitlines()[-1])}


@pytest.mark.integration
def test_import_tracerl_loads_nothing_heavy():
    bare = _loaded("")
    loaded = _loaded("import tracerl") - bare - set(sys.stdlib_module_names)
    assert loaded == {"tracerl"}, loaded  # not even numpy: the API loads on first use
    import tracerl

    assert {"read_logs", "validate", "relabel", "coverage", "compare"} <= set(dir(tracerl))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = tracerl.nope


@pytest.mark.integration
def test_using_the_api_loads_neither_prefect_nor_great_expectations():
    loaded = _loaded("import tracerl\nfor name in tracerl.__all__: getattr(tracerl, name)")
    assert not loaded & {"prefect", "great_expectations"}, loaded


def test_api_names_do_not_shadow_submodules():
    import tracerl

    modules = {p.stem for p in (ROOT / "tracerl").glob("*.py")} | {
        p.name for p in (ROOT / "tracerl").iterdir() if (p / "__init__.py").is_file()}
    assert not set(tracerl.__all__) & modules


def _readme_python() -> tuple[str, str]:
    """The python block of the README's API section and the output block after it."""
    text = (ROOT / "README.md").read_text()
    api = text[text.index("## From Python"):]
    api = api[:api.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", api, re.S).group(1)
    shown = re.search(r"prints\n\n```text\n(.*?)```", api, re.S).group(1)
    return code, shown


@pytest.mark.integration
def test_the_readme_lines_run_as_shown():
    if not TAU2.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    code, shown = _readme_python()
    out = _python(code)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout == shown


def test_results_convert_to_pandas(tmp_path):
    if not TAU2.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    import pandas as pd

    import tracerl

    logs = tracerl.read_logs(TAU2 / "gpt-4.1_airline.json", out=tmp_path / "out")
    assert logs.summary["read"] == logs.summary["accepted"] + logs.summary["quarantined"] == 20
    assert (tmp_path / "out" / "steps").is_dir() and logs.quarantine == []
    frame = logs.to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) == logs.steps.num_rows
    with pytest.raises(ValueError, match="relabel first"):
        tracerl.coverage(logs)
    labelled = tracerl.relabel(tmp_path / "out" / "steps", ["tau2_outcome@1"],
                               {"task_success": 1.0})
    states = tracerl.coverage(labelled).to_pandas()
    assert {"state", "action", "n", "never_logged"} <= set(states.columns)
    assert states["n"].sum() == labelled.num_rows
    checks = tracerl.validate(labelled, reward_min=0, reward_max=1).to_pandas()
    assert checks["success"].all() and len(checks) > 10
    pair = tracerl.compare({"a": labelled, "b": labelled}, n_boot=200)
    assert pair.to_pandas()["difference"].tolist() == [0.0]
    assert len(pair.pairs[0].to_pandas()) == 20
    with pytest.raises(ValueError, match="n_boot"):
        tracerl.compare({"a": labelled, "b": labelled}, n_boot=0)


def test_evaluate_gives_the_ope_stage_numbers():
    """tracerl.evaluate with the tau2 pipeline's train and ope params reproduces the ope
    stage's headline estimates (metrics/tau2/ope.json, the stage's committed output)."""
    if not TAU2.is_dir():
        pytest.skip("no tau2-bench logs at ../shared/realdata")
    import yaml

    import tracerl

    params = yaml.safe_load((ROOT / "pipelines/tau2/params.yaml").read_text())
    verifiers, weights = params["relabel"]["verifiers"], params["relabel"]["weights"]
    labelled = {a: tracerl.relabel(tracerl.read_logs(TAU2 / f"{a}_airline.json"), verifiers,
                                   weights) for a in ("gpt-4.1", "ft-gpt-4.1-sft")}
    with pytest.raises(ValueError, match="relabel first"):
        tracerl.evaluate(tracerl.read_logs(TAU2 / "gpt-4.1_airline.json"))
    ope = {k: v for k, v in params["ope"].items() if k not in ("datasets", "cross_agent")}
    result = tracerl.evaluate(labelled["gpt-4.1"], labelled, gamma=params["gamma"],
                              train=params["train"], filters=params["relabel"]["filters"],
                              **ope)
    stage = json.loads((ROOT / "metrics/tau2/ope.json").read_text())
    got = result.headlines().set_index("policy")
    assert sorted(got.index) == sorted(stage["gpt-4.1"])
    for policy, row in stage["gpt-4.1"].items():
        assert got.loc[policy, "value"] == pytest.approx(row["estimate"], abs=1e-6), policy
        assert got.loc[policy, "support"] == pytest.approx(row["support"], abs=1e-6), policy
    assert result.logged["value"] == stage["logged"]["gpt-4.1"]["value"]
    frame = result.to_pandas()
    assert {"replay/return", "critic/fqe", "importance/wis"} <= set(frame["estimator"])
    assert frame.loc[frame["estimator"] == "replay/return", "value"].isna().all()
