"""`dvc repro` of the export stage in fresh copies of the project (the suite's own Prefect
server): the tau2 pipeline on the real logs, the support desk and the calculator on
simulated ones. Every file is checked against the published formats, the conversations
against the raw logs, and the counts against the SWiRL filters recomputed from the raw
logs (tests/export_checks.py, tests/test_export.py's oracles)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import copy_project, project_env
from tests.export_checks import assert_same_conversation, check_export_folder, tau2_expected
from tests.test_export import _raw_expectations

pytestmark = pytest.mark.integration

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"


def _repro(project: Path, target: str) -> str:
    run = subprocess.run(["dvc", "repro", target], cwd=project, env=project_env(),
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def _all(found: dict, fmt: str) -> list[dict]:
    return [r for records in found.get(fmt, {}).values() for r in records]


def _tasks_in_one_split(folders: list[Path]) -> None:
    seen: dict[str, set] = {}
    for folder in folders:
        for fmt in check_export_folder(folder).values():
            for split, records in fmt.items():
                for r in records:
                    seen.setdefault(r["provenance"]["task"], set()).add(split)
    assert seen and all(len(s) == 1 for s in seen.values()), seen


@pytest.mark.xdist_group("tau2_pipeline_run")
def test_tau2_pipeline_exports_the_real_logs(tau2_pipeline_run):
    project, stdout = tau2_pipeline_run.project, tau2_pipeline_run.stdout
    assert "Running stage 'pipelines/tau2/dvc.yaml:export'" in stdout
    out = project / "data/tau2/export"
    manifest = json.loads((out / "manifest.json").read_text())
    metrics = json.loads((project / "metrics/tau2/export.json").read_text())
    from tracerl.data.redact import Redactor

    redactor = Redactor()

    def redact(value):
        return redactor.record(value)[0]

    for agent in ("gpt-4.1", "ft-gpt-4.1-sft"):
        sims = {s["id"]: s for s in json.loads(
            (REAL / "tau2-bench" / f"{agent}_airline.json").read_text())["simulations"]}
        want = _raw_expectations(list(sims.values()))
        found = check_export_folder(out / agent)
        sft = {r["provenance"]["episode_id"]: r for r in _all(found, "sft")}
        assert sorted(sft) == sorted(e for e, w in want.items() if w["success"] and any(w["ok"]))
        for e, r in sft.items():
            assert_same_conversation(r["messages"], tau2_expected(sims[e], redact), e, redact)
        kto = _all(found, "kto")
        assert len(kto) == sum(len(w["ok"]) - (not w["first_has_prompt"]) for w in want.values())
        assert sum(r["label"] for r in kto) == sum(
            sum(w["ok"][k] and w["success"] for k in range(len(w["ok"]))
                if k or w["first_has_prompt"]) for w in want.values())
        assert sorted(r["provenance"]["episode_id"] for r in _all(found, "prm")) == sorted(sims)
        entry = manifest["datasets"][agent]
        assert entry == json.loads((out / agent / "manifest.json").read_text())
        assert metrics[agent]["sft_records"] == len(sft)
        # Weighted steps: one record per episode, every assistant turn with its credit.
        weighted = _all(found, "weighted")
        assert sorted(r["provenance"]["episode_id"] for r in weighted) == sorted(sims)
        assert sum(len(r["credit"]) for r in weighted) == sum(len(w["ok"])
                                                              for w in want.values())
        for r in weighted:
            assert_same_conversation(r["messages"], tau2_expected(
                sims[r["provenance"]["episode_id"]], redact), r["provenance"]["episode_id"],
                redact)
        assert sum(entry["exports"]["pairs"]["records"].values()) == len(_all(found, "pairs"))
    _tasks_in_one_split([out / "gpt-4.1", out / "ft-gpt-4.1-sft"])  # one assignment for both
    credit = json.loads((project / "reports/tau2/export/credit.json").read_text())
    assert sorted(credit["datasets"]) == ["ft-gpt-4.1-sft", "gpt-4.1"]
    for s in credit["datasets"].values():
        assert all(w["n"] >= s["min_count"] and w["advantage"] < 0 for w in s["worst_pairs"])


@pytest.mark.xdist_group("support_desk_pipeline_run")
def test_support_desk_pipeline_exports_its_conversations(support_desk_pipeline_run):
    project = support_desk_pipeline_run.project
    out = project / "data/support_desk/export/scripted"
    found = check_export_folder(out)
    from tracerl.data.redact import Redactor

    redactor = Redactor()  # the conversations hold e-mail addresses: ingest redacted them
    raw = [redactor.record(json.loads(line))[0] for line in
           (project / "data/support_desk/raw/scripted.jsonl").read_text().splitlines()]
    by_id = {}
    for record in raw:
        calls_erred = {m["tool_call_id"] for m in record["messages"] if m["role"] == "tool"
                       and "error" in json.loads(m["content"])}
        ok = [not any(c["id"] in calls_erred for c in m.get("tool_calls") or [])
              for m in record["messages"] if m["role"] == "assistant"]
        by_id[record["info"]["episode_id"]] = (record, ok, record["reward"] > 0)
    sft = {r["provenance"]["episode_id"]: r for r in _all(found, "sft_openai")}
    assert sorted(sft) == sorted(e for e, (_, ok, success) in by_id.items()
                                 if success and any(ok))
    for e, r in sft.items():
        record, ok, _ = by_id[e]
        last = max(i for i, m in enumerate(record["messages"]) if m["role"] == "assistant")
        logged = record["messages"][:last + 1]
        assert [m["role"] for m in r["messages"]] == [m["role"] for m in logged], e
        for got, want in zip(r["messages"], logged, strict=True):
            if want["role"] == "assistant":
                for c, w in zip(got.get("tool_calls") or [], want.get("tool_calls") or [],
                                strict=True):
                    assert (c["id"], c["function"]["name"]) == (w["id"], w["function"]["name"])
                    assert json.loads(c["function"]["arguments"]) == json.loads(
                        w["function"]["arguments"])
                assert (got["content"] or None) == (want.get("content") or None), e
            elif want["role"] == "tool":
                assert json.loads(got["content"]) == json.loads(want["content"])
            else:
                assert got["content"] == want["content"]
        assert [m["weight"] for m in r["messages"] if m["role"] == "assistant"] == \
            [int(v) for v in ok]
    kto = _all(found, "kto")
    assert len(kto) == sum(len(ok) for _, ok, _ in by_id.values())  # the system prompt first
    assert sum(r["label"] for r in kto) == sum(sum(ok) for _, ok, s in by_id.values() if s)
    weighted = _all(found, "weighted")  # one per conversation, every turn with its credit
    assert sorted(r["provenance"]["episode_id"] for r in weighted) == sorted(by_id)
    assert sum(len(r["credit"]) for r in weighted) == len(kto)
    _tasks_in_one_split([out])


def test_calculator_pipeline_exports_native_steps(tmp_path, prefect_server):
    project = copy_project(tmp_path, calculator={"episodes": 200})
    _repro(project, "export")
    for name in ("good_coverage", "no_mul_support"):
        found = check_export_folder(project / "data/export" / name)
        for r in _all(found, "sft"):
            assert r["messages"][0]["role"] == "user"
            assert r["messages"][-1]["tool_calls"][0]["function"]["name"] == "final"
        assert sum(len(v) for v in found["prm"].values()) == 200
    _tasks_in_one_split([project / "data/export" / n for n in ("good_coverage",
                                                                 "no_mul_support")])
