"""`tracerl init`: datasets found the way a user of several agents' logs expects, the
params written from the models (every default, commented, validating), the dvc.yaml from
the stage list, and a clear error for a path that is missing or of no known format. The
run of a generated pipeline: tests/test_init_pipeline.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tracerl.cli import STAGES, stage_plan
from tracerl.config.init import (
    InitError,
    field_comments,
    find_datasets,
    init_pipeline,
    pipeline_choices,
    render_params,
)
from tracerl.config.schema import validate_params
from tracerl.config.stages import LOGS_STAGES, logs_stages, sections_read

ROOT = Path(__file__).resolve().parents[1]
TAU2 = ROOT / ".." / "shared" / "realdata" / "tau2-bench"


def _chat(path: Path, n: int = 3, model: str = "a") -> Path:
    """An OpenAI-chat JSONL file: n tool-calling conversations with a 0/1 reward."""
    rows = []
    for i in range(n):
        rows.append({"id": f"{model}-{i}", "task_id": str(i), "reward": float(i % 2),
                     "messages": [
                         {"role": "user", "content": f"look up order {i}"},
                         {"role": "assistant", "content": None, "tool_calls": [{
                             "id": f"c{i}", "type": "function", "function": {
                                 "name": "lookup", "arguments": json.dumps({"order": i})}}]},
                         {"role": "tool", "tool_call_id": f"c{i}", "content": "shipped"},
                         {"role": "assistant", "content": "It has shipped."}]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_file_is_a_dataset_and_a_folder_holds_one_per_file_and_per_sub_folder(tmp_path):
    _chat(tmp_path / "logs" / "agent-a.jsonl")
    _chat(tmp_path / "logs" / "agent-b.jsonl", model="b")
    _chat(tmp_path / "logs" / "agent-c" / "day1.jsonl", model="c")
    _chat(tmp_path / "logs" / "agent-c" / "day2.jsonl", model="c2")
    (tmp_path / "logs" / "README.md").write_text("not a log")
    found = find_datasets([tmp_path / "logs"])
    assert [(d.name, d.format, len(d.files)) for d in found] == [
        ("agent-a", "openai-chat", 1), ("agent-b", "openai-chat", 1),
        ("agent-c", "openai-chat", 2)]
    one = find_datasets([tmp_path / "logs" / "agent-a.jsonl"])
    assert [d.name for d in one] == ["agent-a"]


def test_named_datasets_and_a_forced_format(tmp_path):
    _chat(tmp_path / "x" / "1.jsonl")
    _chat(tmp_path / "x" / "2.jsonl")
    found = find_datasets([], [("mine", tmp_path / "x")], fmt="openai-chat")
    assert [(d.name, d.format, len(d.files)) for d in found] == [("mine", "openai-chat", 2)]
    with pytest.raises(InitError, match="unknown format 'chat'"):
        find_datasets([tmp_path / "x"], fmt="chat")


def test_a_tau2_results_file_keeps_its_simulations_folder(tmp_path):
    sims = tmp_path / "run" / "simulations"
    sims.mkdir(parents=True)
    (tmp_path / "run" / "results.json").write_text(json.dumps(
        {"info": {}, "tasks": [], "simulation_index": ["s1"]}))
    (sims / "s1.json").write_text(json.dumps({"id": "s1", "task_id": "1", "messages": []}))
    found = find_datasets([tmp_path / "run"])
    assert [(d.name, d.format) for d in found] == [("results", "tau2")]
    assert sims / "s1.json" in found[0].files


def test_missing_and_undetectable_logs_are_refused_naming_the_path(tmp_path):
    with pytest.raises(InitError, match=r"nowhere\.json: no such file or folder"):
        find_datasets([tmp_path / "nowhere.json"])
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(InitError, match=r"odd\.json: its first record \(keys: hello\) "
                                        r"is of no known log format, so its format "
                                        r"cannot be detected; nearest formats: .*--format"):
        find_datasets([odd])
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(InitError, match=r"empty\.jsonl: is empty"):
        find_datasets([tmp_path / "empty.jsonl"])
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("x")
    with pytest.raises(InitError, match="folder holds no log files"):
        find_datasets([tmp_path / "docs"])


def test_two_datasets_of_one_name_are_refused(tmp_path):
    _chat(tmp_path / "a" / "agent.jsonl")
    _chat(tmp_path / "b" / "agent.jsonl")
    with pytest.raises(InitError, match="two datasets named 'agent'.*--dataset NAME=PATH"):
        find_datasets([tmp_path / "a" / "agent.jsonl", tmp_path / "b" / "agent.jsonl"])


def test_comments_come_from_the_model_definitions(tmp_path):
    config, _ = _config(tmp_path)
    comments = field_comments(type(config.ingest))
    assert comments["max_record_bytes"] == ["a longer line is quarantined unread"]
    assert comments["reward_attribute"][0].startswith("OpenTelemetry / Langfuse")


def _config(tmp_path, names=("a", "b")):
    for n in names:
        _chat(tmp_path / f"{n}.jsonl")
    found = find_datasets([tmp_path / f"{n}.jsonl" for n in names])
    choices = pipeline_choices("mine", found, {d.name: [f"data/{d.name}"] for d in found})
    return validate_params(choices, "params.yaml"), logs_stages(len(found))


def test_params_spell_out_every_default_of_what_the_stages_read(tmp_path):
    config, stages = _config(tmp_path)
    sections = [*sections_read(stages), "paths", "runtime", "nightly"]
    text = render_params(config, sections, "header")
    written = yaml.safe_load(text)
    validate_params(written, "params.yaml")
    assert sorted(written) == sorted(sections)
    dumped = config.model_dump(mode="json", by_alias=True)
    assert written == {k: dumped[k] for k in sections}  # every key, with its value
    assert "# a longer line is quarantined unread" in text
    assert "# paired bootstrap resamples over tasks" in text


def test_one_dataset_runs_no_compare_and_the_report_does_not_wait_for_it():
    names = [s.name for s in logs_stages(1)]
    assert "compare" not in names and names[-2:] == ["report", "export"]
    report = next(s for s in logs_stages(1) if s.name == "report")
    assert "${paths.reports}/compare" not in report.deps
    assert [s.name for s in logs_stages(2)] == [s.name for s in LOGS_STAGES]
    assert set(names) <= set(STAGES)


def test_scored_tables_are_data_deps_of_the_ope_stage_only():
    stages = {s.name: s for s in logs_stages(2, ["data/scored/new/a.jsonl"])}
    assert stages["ope"].deps[-1] == "data/scored/new/a.jsonl"
    assert all("data/scored/new/a.jsonl" not in s.deps for n, s in stages.items() if n != "ope")


def test_the_tau2_pipeline_follows_the_stage_list():
    """The one contract of each stage: pipelines/tau2/dvc.yaml's data deps, params, outs,
    metrics and plots are the stage list's (its logs are the ingest stage's extra deps)."""
    from tracerl.config.schema import load_config
    from tracerl.ope.external import scored_files

    doc = yaml.safe_load((ROOT / "pipelines" / "tau2" / "dvc.yaml").read_text())["stages"]
    params = "pipelines/tau2/params.yaml"
    config = load_config(ROOT / params)
    # The scored tables of external candidates (ope.candidates.external) are ope data deps.
    stages = logs_stages(len(config.datasets), scored_files(
        config.ope.candidates.external, config.ope.datasets or config.dataset_names()))
    assert list(doc) == [s.name for s in stages]
    for spec in stages:
        stage = doc[spec.name]
        data = [d for d in stage["deps"] if not d.startswith(("tracerl/", "flows/", "tasks/",
                                                              "../../"))]
        expected = list(spec.deps)
        if spec.name == "ingest":  # tau2 has no inbox; its logs come first
            expected = [d for d in expected if d != "${paths.landed}"]
            data = [d for d in data if not d.startswith("../shared/")]
        assert data == expected, spec.name
        assert stage["params"] == [{params: list(spec.params)}], spec.name
        outs = [o.path if o.cache else {o.path: {"cache": False}} for o in spec.outs]
        assert stage["outs"] == outs, spec.name
        assert stage.get("metrics", []) == [{m: {"cache": False}} for m in spec.metrics]
        assert stage.get("plots", []) == [{p: {"cache": False}} for p in spec.plots]


def _project(tmp_path: Path) -> Path:
    """The project's code (what the deps generator reads) in a folder without DVC."""
    root = tmp_path / "project"
    for part in ("tracerl", "flows", "tasks"):
        shutil.copytree(ROOT / part, root / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_init_writes_params_dvc_yaml_and_gx_and_refuses_to_overwrite(tmp_path):
    root = _project(tmp_path)
    _chat(tmp_path / "logs" / "a.jsonl")
    _chat(tmp_path / "logs" / "b.jsonl", model="b")
    done = init_pipeline(root, "mine", [tmp_path / "logs"], stage_plan)
    params = yaml.safe_load(done.params.read_text())
    assert params["datasets"]["a"]["inputs"] == ["data/mine/raw/a"]
    assert params["datasets"]["a"]["format"] == "openai-chat"
    assert (root / "data/mine/raw/a/a.jsonl").read_bytes() == (
        tmp_path / "logs" / "a.jsonl").read_bytes()
    assert done.dvc_tracked is None  # no DVC repository here: nothing to `dvc add`
    assert params["paths"]["inbox"] == "data/mine/inbox"
    dvc = yaml.safe_load(done.dvc.read_text())["stages"]
    assert list(dvc) == [s.name for s in LOGS_STAGES]
    assert dvc["ingest"]["deps"][:2] == ["data/mine/raw", "${paths.landed}"]
    assert "flows/ingest.py" in dvc["ingest"]["deps"]
    assert (root / "data/mine/landed/.gitignore").is_file()
    assert sorted(p.name for p in (root / "pipelines/mine/gx/checkpoints").iterdir()) == [
        "a_checkpoint.json", "b_checkpoint.json"]
    with pytest.raises(InitError, match="exists: pick another name, or --force"):
        init_pipeline(root, "mine", [tmp_path / "logs"], stage_plan)


def test_logs_inside_the_repository_are_referenced_in_place(tmp_path):
    root = _project(tmp_path)
    _chat(root / "logs" / "a.jsonl")
    done = init_pipeline(root, "here", [root / "logs" / "a.jsonl"], stage_plan)
    assert done.copied is None
    params = yaml.safe_load(done.params.read_text())
    assert params["datasets"]["a"]["inputs"] == ["logs/a.jsonl"]
    dvc = yaml.safe_load(done.dvc.read_text())["stages"]
    assert dvc["ingest"]["deps"][0] == "logs/a.jsonl"
    assert "compare" not in dvc


@pytest.mark.skipif(not TAU2.is_dir(), reason="no tau2-bench logs at ../shared/realdata")
def test_the_cli_names_what_it_found_and_exits_2_on_bad_logs(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from tracerl.cli import app

    root = _project(tmp_path)
    monkeypatch.chdir(root)
    runner = CliRunner()
    out = runner.invoke(app, ["init", "t", "--logs", str(TAU2 / "gpt-4.1_airline.json")])
    assert out.exit_code == 0, out.output
    assert "dataset gpt-4.1_airline: 1 file(s), format tau2" in out.output
    assert "run it: dvc repro pipelines/t/dvc.yaml" in out.output
    bad = runner.invoke(app, ["init", "u", "--logs", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "missing: no such file or folder" in bad.output
    odd = runner.invoke(app, ["init", "u", "--dataset", "nopath"])
    assert odd.exit_code == 2 and "expected NAME=PATH" in odd.output


def test_claude_code_sessions_of_one_folder_are_one_agent(tmp_path):
    def session(path: Path, sid: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"type": "user", "sessionId": sid, "uuid": f"{sid}-1",
                                    "parentUuid": None, "message": {
                                        "role": "user", "content": "hi"}}) + "\n")

    project = tmp_path / "my-project"
    session(project / "s1.jsonl", "s1")
    session(project / "s2.jsonl", "s2")
    session(project / "s1" / "subagents" / "agent-x.jsonl", "s1")
    found = find_datasets([project])
    assert [(d.name, d.format, len(d.files)) for d in found] == [
        ("my-project", "claude-code", 3)]
    root = _project(tmp_path)
    done = init_pipeline(root, "cc", [project], stage_plan)
    raw = root / "data/cc/raw/my-project"
    assert sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*.jsonl")) == [
        "s1.jsonl", "s1/subagents/agent-x.jsonl", "s2.jsonl"]
    assert "compare" not in yaml.safe_load(done.dvc.read_text())["stages"]


def test_a_folder_that_is_no_checkout_nor_git_repository_is_refused_before_anything_is_written(
        tmp_path):
    _chat(tmp_path / "logs" / "a.jsonl")
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    with pytest.raises(InitError, match=r"not the root of a git repository: run `git init`"):
        init_pipeline(elsewhere, "mine", [tmp_path / "logs"], stage_plan)
    assert list(elsewhere.iterdir()) == []


def test_in_a_teams_own_repository_the_stages_run_the_installed_tracerl_of_its_version(
        tmp_path):
    from dulwich.repo import Repo as GitRepo

    from tracerl.config.init import installed_version

    _chat(tmp_path / "logs" / "a.jsonl")
    repo = tmp_path / "team"
    repo.mkdir()
    GitRepo.init(str(repo)).close()
    done = init_pipeline(repo, "mine", [tmp_path / "logs"], stage_plan)
    stages = yaml.safe_load(done.dvc.read_text())["stages"]
    version = installed_version()
    for name, stage in stages.items():
        assert stage["cmd"] == (f"python -m tracerl run {name} --params "
                                f"pipelines/mine/params.yaml --tracerl {version}")
        assert not [d for d in stage["deps"] if d.split("/")[0] in ("tracerl", "flows",
                                                                     "tasks")], name
    assert stages["ingest"]["deps"][0] == "data/mine/raw"
    assert (repo / ".dvc").is_dir() and (repo / "data/mine/raw.dvc").is_file()
    assert ".prefect/" in (repo / ".gitignore").read_text().splitlines()
