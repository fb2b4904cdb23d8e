"""The guard (tracerl.guard) on logs built so the answer is known, on the support desk's
logs through the pipeline's adapter and encoder, and `tracerl guard serve` as a real
server on an ephemeral loopback port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import _free_port
from tracerl.config.guard import GuardSettings
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.envs.support_desk import chat, sim
from tracerl.guard import (
    ALLOW,
    BLOCK_LOW_VALUE,
    BLOCK_UNSEEN,
    WARN_UNSUPPORTED,
    ArgumentRanges,
    Guard,
    GuardedPolicy,
    GuardInputError,
    hook,
)
from tracerl.io.fileio import read_table
from tracerl.rl.encoding import encoder_for

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = {"role": "system", "content": "You are the shop's agent."}
USER = {"role": "user", "content": "Where is my order 7?"}


def _conversation(i: int, first_tool: str, reward: float) -> dict:
    """The agent calls `first_tool`, then answers; `reward` on the episode."""
    return {"id": f"c{i}", "task_id": "order_status", "reward": reward, "messages": [
        SYSTEM, USER,
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": first_tool, "arguments": json.dumps({"order_id": "7"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "Your order has shipped."}]}


def _steps(records: list[dict], tmp: Path):
    """Conversations through the openai-chat adapter (as ingest stores them), rewards of
    the non-final steps 0."""
    path = tmp / "logs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = ingest([path], tmp / "ingested", fmt="openai-chat", workers=1)
    assert summary.quarantined == 0
    steps = read_table(tmp / "ingested" / "steps")
    return steps.set_column(steps.schema.get_field_index("reward"), "reward",
                            pc.fill_null(steps.column("reward"), 0.0))


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """At the opening, get_order (always followed by success) is logged 61 times and
    cancel_order (always failure) 60 times; refund_order is logged once, second in a
    conversation, never at the opening."""
    tmp = tmp_path_factory.mktemp("shop")
    records = [_conversation(i, "get_order", 1.0) for i in range(60)]
    records += [_conversation(60 + i, "cancel_order", 0.0) for i in range(60)]
    late = _conversation(200, "get_order", 1.0)
    late["messages"][4:4] = [{"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_2", "type": "function", "function": {"name": "refund_order",
                                                          "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"ok": true}'}]
    records.append(late)
    steps = _steps(records, tmp)
    encoder = encoder_for([steps], "dialogue")
    guard = Guard.fit(encoder.transitions(steps), GuardSettings(), gamma=1.0)
    return tmp, steps, encoder, guard


def test_a_call_never_logged_in_that_state_is_unsupported(shop):
    *_, guard = shop
    # refund_order is in the logs' vocabulary, but never at the opening.
    score = guard.score([SYSTEM, USER], {"name": "refund_order", "arguments": {}})
    assert score["verdict"] == WARN_UNSUPPORTED and score["allowed"]
    assert score["support"] == {"supported": False, "count": 0, "state_count": 121,
                                "behavior_prob": 0.0, "behavior_model_prob": None}
    assert score["q"] is None and score["advantage"] is None
    assert "never logged at this state" in score["reason"]
    # A tool no log ever called: denied by default, saying so; allowed with a warning
    # only when params say `guard.unseen: warn`.
    score = guard.score([SYSTEM, USER], {"name": "delete_account", "arguments": "{}"})
    assert score["verdict"] == BLOCK_UNSEEN and not score["allowed"]
    assert "never called in the logs" in score["reason"]
    lenient = Guard(guard.table.__class__.fit(guard.encoder.transitions(shop[1]), GuardSettings(
        unseen="warn"), gamma=1.0))
    score = lenient.score([SYSTEM, USER], {"name": "delete_account", "arguments": "{}"})
    assert score["verdict"] == WARN_UNSUPPORTED and score["allowed"]


def test_arguments_outside_the_logged_ones_are_unseen_and_scored(shop):
    _, steps, encoder, _ = shop
    guard = Guard.fit(encoder.transitions(steps), GuardSettings(), gamma=1.0, steps=steps)
    known = guard.score([SYSTEM, USER], {"name": "get_order", "arguments": {"order_id": "9"}})
    assert known["verdict"] != BLOCK_UNSEEN and known["unseen"] == []  # strings: not judged
    extra = guard.score([SYSTEM, USER], {"name": "get_order",
                                         "arguments": {"order_id": "7", "force": True}})
    assert extra["verdict"] == BLOCK_UNSEEN and not extra["allowed"]
    assert "argument 'force' is never logged with get_order" in extra["reason"]


def test_a_call_worse_than_the_logging_policy_is_blocked_and_a_good_one_allowed(shop):
    *_, guard = shop
    good = guard.score([SYSTEM, USER], {"name": "get_order", "arguments": {"order_id": "7"}})
    bad = guard.score([SYSTEM, USER], {"name": "cancel_order",
                                       "arguments": {"order_id": "7"}})
    assert good["verdict"] == ALLOW and bad["verdict"] == BLOCK_LOW_VALUE
    assert not bad["allowed"]
    # By construction: Q = 1 after get_order, 0 after cancel_order, V = 61/121 at the opening.
    assert good["support"]["count"] == 61 and good["support"]["behavior_prob"] == pytest.approx(
        61 / 121)
    assert good["q"]["value"] == pytest.approx(1.0) and bad["q"]["value"] == pytest.approx(0.0)
    assert bad["advantage"]["value"] == pytest.approx(-61 / 121, abs=1e-9)
    for s in (good, bad):  # intervals hold the estimate and stay inside the range
        for part in ("q", "advantage"):
            assert s[part]["low"] <= s[part]["value"] <= s[part]["high"]
        assert s["q"]["low"] >= 0.0 and s["q"]["high"] <= 1.0
    assert bad["advantage"]["high"] < guard.settings.block_advantage


def test_the_guard_reads_the_one_step_credit(shop):
    """Q, V, the advantage, their intervals and the flags the guard answers are
    tracerl.rl.credit.step_credit's on the policy view (one-hot, logged frequencies)."""
    from tracerl.rl.credit import step_credit
    from tracerl.rl.features import OneHot

    _, steps, encoder, guard = shop
    tr = encoder.transitions(steps)
    view = tr.project(encoder.policy_variables)
    counts = np.zeros((view.n_states, view.n_actions))
    np.add.at(counts, (view.s, view.a), 1)
    s = guard.settings
    credit = step_credit(view, OneHot(tuple(guard.table.shape), view.n_actions),
                         counts / counts.sum(axis=1, keepdims=True), gamma=1.0,
                         level=s.confidence, value_range=guard.table.value_range,
                         min_count=s.min_count, min_behavior_prob=s.min_behavior_prob)
    at_view = np.zeros(view.n_states, dtype=np.int64)
    at_view[view.s] = tr.s  # a full state of each view state
    rows = np.asarray(tr.rows)[at_view[credit.pair_s]]
    j = guard.judge_rows(rows, credit.pair_a)
    np.testing.assert_allclose(j.q, credit.q)
    np.testing.assert_allclose(j.q_low, credit.q_low)
    np.testing.assert_allclose(j.q_high, credit.q_high)
    np.testing.assert_allclose(j.advantage, credit.advantage)
    np.testing.assert_allclose(j.advantage_low, credit.adv_low)
    np.testing.assert_allclose(j.advantage_high, credit.adv_high)
    np.testing.assert_allclose(j.v, credit.v[credit.pair_s])
    assert [tuple(f) for f in j.flags] == [tuple(f) for f in credit.flags]
    assert list(j.count) == list(credit.count)
    score = guard.score([SYSTEM, USER], {"name": "get_order", "arguments": {}})
    assert score["interval"].startswith("delta method") and score["flags"] == []


def test_thresholds_come_from_params(shop):
    _, steps, encoder, _ = shop
    strict = Guard.fit(encoder.transitions(steps), GuardSettings(min_count=62),
                       gamma=1.0)
    score = strict.score([SYSTEM, USER], {"name": "get_order", "arguments": {}})
    assert score["verdict"] == WARN_UNSUPPORTED and "fewer than 62" in score["reason"]
    lenient = Guard.fit(encoder.transitions(steps), GuardSettings(block_advantage=-0.9),
                        gamma=1.0)
    assert lenient.score([SYSTEM, USER], {"name": "cancel_order", "arguments": {}})[
        "verdict"] == ALLOW


def test_context_gives_what_a_chat_history_lacks(shop):
    """An encoder that reads the task id: the chat history alone cannot be placed (no
    task), the same history with its task in `context` is."""
    _, steps, _, _ = shop
    parts = ["prev_action", "n_calls", "last_error", "after_user", "task"]
    encoder = encoder_for([steps], "dialogue", parts=parts)
    guard = Guard.fit(encoder.transitions(steps), GuardSettings(), gamma=1.0)
    call = {"name": "get_order", "arguments": {}}
    alone = guard.score([SYSTEM, USER], call)
    # an unplaceable history is not "allowed": nothing in the logs vouches for the call
    assert alone["verdict"] == BLOCK_UNSEEN and "cannot place" in alone["reason"]
    assert not alone["allowed"]
    placed = guard.score([SYSTEM, USER], call, {"task": "order_status"})
    assert placed["verdict"] == ALLOW and placed["support"]["count"] == 61
    assert "task=order_status" in placed["state"]
    with pytest.raises(GuardInputError, match="context"):
        guard.score([SYSTEM, USER], call, {"tenant": "x"})


def test_bad_input_is_an_error_naming_the_field(shop):
    *_, guard = shop
    with pytest.raises(GuardInputError, match="call.arguments: not valid JSON"):
        guard.score([SYSTEM, USER], {"name": "get_order", "arguments": "{oops"})
    with pytest.raises(GuardInputError, match="call: expected an object"):
        guard.score([SYSTEM, USER], {"arguments": {}})
    with pytest.raises(GuardInputError, match="messages"):
        guard.score([{"role": "wizard", "content": "hi"}], {"name": "get_order"})


def test_hook_denies_blocked_calls_and_optionally_unsupported_ones(shop):
    *_, guard = shop
    check = hook(guard)
    assert check([SYSTEM, USER], {"name": "get_order", "arguments": {}}).allowed
    denied = check([SYSTEM, USER], {"name": "cancel_order", "arguments": {}})
    assert not denied.allowed and denied.verdict == BLOCK_LOW_VALUE
    assert "denied by the tracerl guard" in denied.message
    assert check([SYSTEM, USER], {"name": "refund_order", "arguments": {}}).allowed
    assert not hook(guard, deny_unsupported=True)(
        [SYSTEM, USER], {"name": "refund_order", "arguments": {}}).allowed


# --- the support desk: histories as the agent has them, states as the pipeline's -----------

VERIFIERS = ["support_desk_success@1", "support_desk_tool_error@1",
             "support_desk_step_cost@1", "support_desk_escalate@1"]
WEIGHTS = {"task_success": 1.0, "tool_error": 0.02, "step_cost": 0.01, "escalate": 0.2}


@pytest.fixture(scope="module")
def desk(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("desk")
    ep = sim.simulate(sim.ScriptedPolicy(), 800, seed=31)
    path = chat.write_jsonl(ep, tmp / "logs.jsonl", behavior_policy="b", gamma=0.99)
    ingest([path], tmp / "ingested", fmt="openai-chat", workers=1)
    steps = relabel(read_table(tmp / "ingested" / "steps"), VERIFIERS, WEIGHTS)
    encoder = encoder_for([steps], "support_desk")
    guard = Guard.fit(encoder.transitions(steps), GuardSettings(), gamma=0.99,
                      value_range=(-1.2, 1.0))
    return ep, steps, guard


def test_support_desk_history_is_scored_at_the_simulators_state(desk):
    ep, _, guard = desk
    records = list(chat.records(ep, behavior_policy="b", gamma=0.99))
    table = guard.table
    unlogged_seen = 0
    for e, record in enumerate(records[:40]):  # a few conversations, every tool call
        messages = record["messages"]
        assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        states = ep.states[ep.episode == e]
        for t, i in enumerate(assistant):
            calls = messages[i].get("tool_calls")
            if not calls:
                continue
            f = calls[0]["function"]
            score = guard.score(messages[:i], {"name": f["name"], "arguments": f["arguments"]})
            # the state the guard read is the simulator's own state before that step
            assert score["state"] == guard.encoder.labels(states[t][None, :])[0]
            assert score["support"]["count"] >= 1  # it is a logged step
            # a tool never logged at this state: unsupported, by the table's own counts
            row = table.lookup(states[t][None, :])[0]
            for a, name in enumerate(table.actions):
                if table.counts[row, a] == 0 and name in ("lookup_customer", "lookup_order",
                                                          "check_policy", "issue_refund",
                                                          "cancel_order", "update_address"):
                    other = guard.score(messages[:i], {"name": name, "arguments": {}})
                    assert other["verdict"] == WARN_UNSUPPORTED
                    assert other["support"]["count"] == 0
                    unlogged_seen += 1
    assert unlogged_seen > 0


def test_a_refunds_amount_changes_the_answer(desk):
    ep, steps, guard = desk
    argued = Guard(guard.table, arguments=ArgumentRanges.fit(steps))
    records = list(chat.records(ep, behavior_policy="b", gamma=0.99))
    for record in records:
        messages = record["messages"]
        at = next((i for i, m in enumerate(messages) if m["role"] == "assistant"
                   and (m.get("tool_calls") or [{}])[0].get("function", {}).get("name")
                   == "issue_refund"), None)
        if at is not None:
            break
    logged = json.loads(messages[at]["tool_calls"][0]["function"]["arguments"])
    answers = {}
    for amount in (logged["amount"], 0, 1e12):
        call = {"name": "issue_refund", "arguments": {**logged, "amount": amount}}
        answers[amount] = argued.score(messages[:at], call)
    assert answers[logged["amount"]]["unseen"] == []
    assert answers[logged["amount"]]["arguments"]["amount"]["inside"]
    huge = answers[1e12]
    assert huge["verdict"] == BLOCK_UNSEEN and not huge["allowed"]
    assert huge["arguments"]["amount"]["quantile"] == 1.0
    assert "argument amount=1e+12 is outside the logged range" in huge["reason"]
    assert answers[0]["arguments"]["amount"]["quantile"] < huge["arguments"]["amount"][
        "quantile"]
    # the table alone (no arguments judged) answers both alike
    plain = [guard.score(messages[:at], {"name": "issue_refund",
                                         "arguments": {**logged, "amount": a}})
             for a in (0, 1e12)]
    assert plain[0]["verdict"] == plain[1]["verdict"]


def test_guarded_policy_resamples_blocked_draws(desk):
    ep, _, guard = desk
    states = np.unique(ep.states, axis=0)
    base = sim.ScriptedPolicy()
    p = base.action_probs(states)
    blocked = guard.table.blocked(states)
    assert blocked.any()  # the logger's refund without a policy check, at least
    for draws in (1, 3):
        g = GuardedPolicy(base, guard.table, draws).action_probs(states)
        np.testing.assert_allclose(g.sum(axis=1), 1.0)
        mass = (p * blocked).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(np.where(blocked, g, 0).sum(axis=1, keepdims=True),
                                   mass ** draws)
    np.testing.assert_allclose(GuardedPolicy(base, guard.table, 1).action_probs(states), p)


# --- tracerl guard serve ----------------------------------------------------------------


@pytest.fixture
def served(shop, tmp_path):
    """A params file whose paths hold the shop's labelled steps and encoder."""
    _, steps, encoder, _ = shop
    (tmp_path / "labelled" / "shop" / "steps").mkdir(parents=True)
    pq.write_table(steps, tmp_path / "labelled" / "shop" / "steps" / "part-0.parquet")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "encoder.json").write_text(json.dumps(encoder.spec()))
    params = tmp_path / "params.yaml"
    params.write_text(
        f"gamma: 1.0\ndatasets:\n  shop: {{format: openai-chat}}\n"
        f"paths:\n  labelled: {tmp_path / 'labelled'}\n  models: {tmp_path / 'models'}\n"
        f"guard: {{min_count: 1, log: {tmp_path / 'guard.log'}}}\n")
    return params


def _start(params: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tracerl", "guard", "serve", "--params",
                             str(params), "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait(url: str, proc: subprocess.Popen, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited {proc.returncode}: {proc.stderr.read()}")
        try:
            return httpx.get(f"{url}/health", timeout=2.0).raise_for_status().json()
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError("the guard server did not answer in time")


@pytest.mark.integration
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_on_loopback_refuses_bad_bodies_and_stops_cleanly(served, stop):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _start(served, port)
    try:
        health = _wait(url, proc)
        assert health["status"] == "ok" and health["source"]["dataset"] == "shop"
        body = {"messages": [SYSTEM, USER], "call": {"name": "cancel_order",
                                                     "arguments": {"order_id": "7"}}}
        answer = httpx.post(f"{url}/score", json=body, timeout=10).raise_for_status().json()
        assert answer["verdict"] == BLOCK_LOW_VALUE and answer["support"]["count"] == 60
        body["call"] = {"name": "refund_order", "arguments": {}}  # as it was logged
        assert httpx.post(f"{url}/score", json=body, timeout=10).json()["verdict"] == \
            WARN_UNSUPPORTED
        body["call"]["arguments"] = {"order_id": "7"}  # refund_order never had one
        unseen = httpx.post(f"{url}/score", json=body, timeout=10).json()
        assert unseen["verdict"] == BLOCK_UNSEEN and not unseen["allowed"]
        huge = httpx.post(f"{url}/score", content=b" " * 1_000_001,
                          headers={"content-type": "application/json"}, timeout=30)
        assert huge.status_code == 413 and "guard.max_body_bytes" in huge.text
        # malformed bodies: 4xx, with the reason
        not_json = httpx.post(f"{url}/score", content=b"{not json",
                              headers={"content-type": "application/json"}, timeout=10)
        assert not_json.status_code == 422 and "json" in not_json.text.lower()
        no_call = httpx.post(f"{url}/score", json={"messages": []}, timeout=10)
        assert no_call.status_code == 422 and "call" in no_call.text
        bad_args = httpx.post(f"{url}/score", json={"messages": [USER], "call": {
            "name": "get_order", "arguments": "{oops"}}, timeout=10)
        assert bad_args.status_code == 422
        assert "call.arguments: not valid JSON" in bad_args.json()["detail"]
        bad_role = httpx.post(f"{url}/score", json={"messages": [{"role": "wizard"}],
                                                    "call": {"name": "get_order"}}, timeout=10)
        assert bad_role.status_code == 422 and bad_role.json()["detail"].startswith("messages")
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == 0
        assert "Finished server process" in (served.parent / "guard.log").read_text()
        assert "Finished server process" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.integration
def test_serve_refuses_a_non_loopback_host(served):
    run = subprocess.run([sys.executable, "-m", "tracerl", "guard", "serve", "--params",
                          str(served), "--host", "0.0.0.0", "--port", str(_free_port())],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "not a loopback address" in run.stderr


@pytest.mark.integration
def test_serve_with_a_token_answers_only_requests_that_bear_it(served):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tracerl", "guard", "serve", "--params",
                             str(served), "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TRACERL_GUARD_TOKEN": "s3cret"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(f"{url}/health", timeout=2.0)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert answer.status_code == 401
        wrong = httpx.get(f"{url}/health", headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401
        right = httpx.get(f"{url}/health", headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200 and "s3cret" not in right.text
    finally:
        proc.terminate()
        proc.wait(30)
