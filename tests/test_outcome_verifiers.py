"""Outcomes for logs that lack them: a coding session's last test/command exit status,
explicit user feedback, a team's own verifier as a plugin, and a relabelled dataset whose
returns are all one value stopped with a message naming what to add."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracerl
from tracerl.config.data import Relabel
from tracerl.data.relabel import relabel
from tracerl.data.verifiers import (
    CommandExitStatus,
    ConstantRewards,
    UserFeedback,
    command_failed,
    feedback_value,
    get_verifier,
    require_varied_returns,
    return_summary,
)

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "claude-code-jsonl"


def _session(path: Path, calls: list[tuple[str, str]], feedback: str | None = None,
             episode: str = "s") -> Path:
    """An OpenAI-chat conversation of Bash calls (command, result), then the agent's answer
    and, when given, the user's reply to it."""
    messages: list[dict] = [{"role": "user", "content": "fix the failing test"}]
    for i, (command, result) in enumerate(calls):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{i}", "type": "function", "function": {
                "name": "Bash", "arguments": json.dumps({"command": command})}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": result}]
    messages.append({"role": "assistant", "content": "Done: the tests pass."})
    if feedback is not None:
        messages.append({"role": "user", "content": feedback})
    with path.open("a") as f:
        f.write(json.dumps({"id": episode, "messages": messages}) + "\n")
    return path


def _steps(path: Path):
    return tracerl.read_logs(str(path)).steps


def test_the_last_test_command_decides_a_coding_session(tmp_path):
    log = tmp_path / "sessions.jsonl"
    _session(log, [("pytest -q", "3 failed, 10 passed"), ("pytest -q", "13 passed"),
                   ("git status", "Exit code 128\nfatal: not a git repository")], episode="a")
    _session(log, [("go test ./...", "--- FAIL: TestX\nFAIL"), ("ls", "a b")], episode="b")
    _session(log, [("ls", "a b"), ("cat x", "Exit code 1\nno such file")], episode="c")
    _session(log, [], episode="d")
    steps = _steps(log)
    verifier = CommandExitStatus()
    score = verifier.score(steps)
    done = np.asarray(steps.column("done").to_pylist())
    by_episode = dict(zip(np.asarray(steps.column("episode_id").to_pylist())[done],
                          score[done], strict=True))
    # a: its last test passed (the later git error is no test); b: its test failed;
    # c: no test, its last command failed; d: no command
    assert by_episode == {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0}
    assert score[~done].tolist() == [0.0] * int((~done).sum())
    assert verifier.diagnostics(steps)["decided_by_tests"] == 2


def test_exit_status_reads_what_shells_and_runners_report():
    assert command_failed("Exit code 2\nusage: ...", None)
    assert not command_failed("exit status 0", "is_error set")  # the status wins
    assert command_failed("", "Permission denied")
    assert not command_failed("14 doctests, 297 tests, 0 failures", None)
    assert command_failed("Tests: 2 failed, 40 passed", None)


@pytest.mark.skipif(not REAL.is_dir(), reason="no ../shared/realdata")
def test_a_real_claude_code_session_is_scored_by_its_last_test_run():
    steps = _steps(REAL / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    verifier = CommandExitStatus()
    assert verifier.diagnostics(steps)["decided_by_tests"] == 1  # its `mix test` runs
    assert verifier.score(steps).sum() == 1.0  # the last one: 297 tests, 0 failures


@pytest.mark.parametrize(("text", "value"), [
    ("that worked, thanks!", 1.0), ("Thanks, it works now", 1.0), ("👍", 1.0),
    ("Perfect, thank you", 1.0), ("it still doesn't work", -1.0), ("That's wrong.", -1.0),
    ("👎 no", -1.0), ("now add a test for the parser", 0.0), ("thank you", 0.0),
    ("No, that’s all I needed. Thanks for your help!", 0.0),  # tau2's users close so
    ("It doesn’t work", -1.0),
    ("that worked " + "but " * 80, 0.0)])
def test_explicit_feedback_only(text, value):
    assert feedback_value(text) == value


def test_user_feedback_lands_on_the_turn_it_answers(tmp_path):
    log = tmp_path / "chat.jsonl"
    _session(log, [("pytest", "ok")], feedback="that worked, thanks", episode="good")
    _session(log, [("pytest", "ok")], feedback="no, that's wrong", episode="bad")
    _session(log, [("pytest", "ok")], episode="silent")
    steps = _steps(log)
    score = UserFeedback().score(steps)
    ids = np.asarray(steps.column("episode_id").to_pylist())
    assert {e: score[ids == e].sum() for e in ("good", "bad", "silent")} == {
        "good": 1.0, "bad": -1.0, "silent": 0.0}


PLUGIN = textwrap.dedent('''
    import numpy as np

    def deployed(steps):
        """1.0 on every done row: the team's deploy log says each change shipped."""
        return np.asarray(steps.column("done").to_pylist(), dtype=float)

    deployed.component = "shipped"
    deployed.version = "3"
''')


def test_a_teams_verifier_is_a_plugin_named_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "team_checks").mkdir()
    (tmp_path / "team_checks" / "__init__.py").write_text("")
    (tmp_path / "team_checks" / "outcomes.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "team_checks.outcomes:deployed"
    section = Relabel(verifiers=[name], weights={"shipped": 1.0})  # params accept it
    log = _session(tmp_path / "chat.jsonl", [("ls", "a")])
    labelled = relabel(_steps(log), section.verifiers, section.weights)
    assert get_verifier(name).id == "deployed@3"
    assert labelled.column("verifier_version")[0].as_py() == "deployed@3"
    assert sum(labelled.column("reward").to_pylist()) == 1.0
    with pytest.raises(ValueError, match=r"verifier plugin 'team_checks.missing:x': no "
                                         r"module 'team_checks.missing' on the path"):
        from tracerl.config.schema import validate_params

        validate_params({"datasets": {"a": {"inputs": ["x.jsonl"]}},
                         "relabel": {"verifiers": ["team_checks.missing:x"],
                                     "weights": {"x": 1.0}}}, Path("params.yaml"))


def test_constant_returns_stop_relabel_naming_what_to_add(tmp_path):
    log = _session(tmp_path / "chat.jsonl", [("ls", "a")], episode="one")
    _session(log, [("cat x", "Exit code 1")], episode="two")
    labelled = relabel(_steps(log), ["format_valid@1"], {"format_valid": 0.0})
    summaries = {"chat": {"returns": return_summary(labelled)}}
    with pytest.raises(ConstantRewards) as caught:
        require_varied_returns(summaries, ["format_valid@1"])
    message = str(caught.value)
    assert "every episode's return is 0 (2 episode(s) of chat" in message
    for named in ("command_exit_status@1", "user_feedback@1", "package.module:verifier"):
        assert named in message
    with pytest.raises(ConstantRewards, match=r"command_exit_status@1, user_feedback@1 found "
                                              r"no shell command or explicit feedback.*Add to "
                                              r"relabel.verifiers .* your own outcome verifier"):
        require_varied_returns(summaries, ["command_exit_status@1", "user_feedback@1"])
    varied = relabel(_steps(log), ["command_exit_status@1"], {"command_success": 1.0})
    require_varied_returns({"chat": {"returns": return_summary(varied)},
                            "other": {"returns": {"episodes": 1, "min": 0.0, "max": 0.0}}},
                           ["command_exit_status@1"])


def test_a_plugin_in_the_repository_is_a_dep_of_the_relabel_stage(tmp_path, monkeypatch):
    from tracerl.cli import stage_plan

    (tmp_path / "team_checks").mkdir()
    (tmp_path / "team_checks" / "__init__.py").write_text("")
    (tmp_path / "team_checks" / "outcomes.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "params.yaml"
    params.write_text("datasets: {a: {inputs: [x.jsonl]}}\nrelabel:\n  verifiers: "
                      "[team_checks.outcomes:deployed, format_valid@1]\n"
                      "  weights: {shipped: 1.0, format_valid: 0.0}\n")
    assert stage_plan("relabel", params).inputs == ["team_checks"]
    assert stage_plan("coverage", params).inputs == []
