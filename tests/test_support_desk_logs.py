"""The support desk through its logs: chat JSONL -> the openai-chat adapter -> steps ->
the fixture's verifiers, state encoder and replay adapter (the fixture registry
itself: tests/test_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.envs import support_desk as sd
from tracerl.envs.support_desk import chat
from tracerl.envs.support_desk.encoder import DecodeError
from tracerl.envs.support_desk.features import to_transitions
from tracerl.envs.support_desk.replay import SupportDeskReplay
from tracerl.envs.support_desk.sim import (
    ACTIONS,
    CANCEL_ORDER,
    LOOKUP_CUSTOMER,
    SCRIPT,
    EscalateOnError,
    ScriptedPolicy,
    one_hot_policy,
    simulate,
)
from tracerl.io.fileio import read_table
from tracerl.ope.replay import EPISODE, ReplayLog, replay
from tracerl.rl.encoding import get_encoder

VERIFIERS = ["support_desk_success@1", "support_desk_tool_error@1",
             "support_desk_step_cost@1", "support_desk_escalate@1"]


def weights(env: sd.SupportDeskParams) -> dict[str, float]:
    """The relabel weights that make the verifiers' reward the simulator's."""
    return {"task_success": 1.0, "tool_error": env.error_cost, "step_cost": env.step_cost,
            "escalate": env.escalate_reward}


def logged_steps(ep: sd.Episodes, tmp: Path) -> pa.Table:
    """Episodes as the pipeline sees them: chat JSONL through `tracerl ingest`'s adapter."""
    path = chat.write_jsonl(ep, tmp / "logs.jsonl", behavior_policy="b", gamma=0.99)
    summary = ingest([path], tmp / "out", fmt="openai-chat")
    assert summary.quarantined == 0 and summary.episodes == ep.n_episodes
    return read_table(tmp / "out" / "steps")


@pytest.mark.parametrize("policy, exact_rewards", [
    (ScriptedPolicy(), True),                      # the logger: no escalation
    (EscalateOnError(ScriptedPolicy(), 0.5), False),  # escalations and violations too
])
def test_encoder_equals_the_simulation_through_the_adapter(tmp_path, policy, exact_rewards):
    ep = simulate(policy, 400, seed=11)
    assert ep.violation.any() and ep.error.any()
    steps = relabel(logged_steps(ep, tmp_path), VERIFIERS, weights(ep.params))
    # Any row order: the encoder orders by (episode, t) itself.
    shuffled = steps.take(pa.array(np.random.default_rng(0).permutation(steps.num_rows)))
    oracle = to_transitions(ep)
    for table in (steps, shuffled):
        tr = get_encoder("support_desk").transitions(table)
        for name in ("episode", "t", "a", "done", "s_next", "behavior_logp", "rows",
                     "labels"):
            np.testing.assert_array_equal(getattr(tr, name), getattr(oracle, name), name)
        np.testing.assert_array_equal(tr.states(), oracle.states())
        if exact_rewards:
            np.testing.assert_array_equal(tr.r, oracle.r)
        else:  # the same terms summed in another order
            np.testing.assert_allclose(tr.r, oracle.r, rtol=0, atol=1e-12)
        assert tr.n_actions == len(ACTIONS)


def test_success_verifier_judges_as_the_simulator(tmp_path):
    ep = simulate(EscalateOnError(ScriptedPolicy(p_skip_check=0.6), 0.3), 500, seed=12)
    steps = relabel(logged_steps(ep, tmp_path), ["support_desk_success@1"], {"task_success": 1})
    done = steps.filter(pc.field("done"))
    order = np.argsort(done.column("episode_id").to_numpy(zero_copy_only=False))
    success = done.column("reward").to_numpy()[order]
    np.testing.assert_array_equal(success, ep.success.astype(float))
    assert 0 < success.mean() < 1 and ep.violation.any()


def test_encoder_asks_for_relabelled_rewards_and_names_bad_steps(tmp_path):
    steps = logged_steps(simulate(ScriptedPolicy(), 50, seed=13), tmp_path)
    with pytest.raises(DecodeError, match="relabel"):
        get_encoder("support_desk").transitions(steps)  # only done rows carry a reward
    empty = get_encoder("support_desk").transitions(steps.slice(0, 0))
    assert empty.n == 0 and empty.states().shape == (0, 10)
    action = steps.column("action").combine_chunks()
    at_3 = pc.equal(steps.column("t"), 3).combine_chunks()
    changed = {"type": pc.if_else(at_3, "message", action.field("type")),
               "content": pc.if_else(at_3, "Have a nice day!", action.field("content"))}
    broken = steps.set_column(steps.schema.get_field_index("action"), "action",
                              pa.StructArray.from_arrays(
                                  [changed.get(f.name, action.field(f.name))
                                   for f in action.type], fields=list(action.type)))
    with pytest.raises(DecodeError, match=r"episode 'support_desk-\d+', t=3"):
        get_encoder("support_desk").transitions(broken)


def test_behaviour_logprobs_missing_from_the_log_are_nan(tmp_path):
    ep = simulate(ScriptedPolicy(), 30, seed=14)
    recs = list(chat.records(ep, behavior_policy="b", gamma=0.99))
    for rec in recs[::2]:
        del rec["info"]["behavior_logprobs"]
    import orjson

    (tmp_path / "logs.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    ingest([tmp_path / "logs.jsonl"], tmp_path / "out", fmt="openai-chat")
    steps = relabel(read_table(tmp_path / "out" / "steps"), VERIFIERS, weights(ep.params))
    tr = get_encoder("support_desk").transitions(steps)
    logged = tr.episode % 2 == 1
    np.testing.assert_array_equal(tr.behavior_logp[logged], ep.logp[logged])
    assert np.isnan(tr.behavior_logp[~logged]).all()


def test_replay_serves_recorded_calls_and_stops_at_unrecorded_ones(tmp_path):
    steps = logged_steps(simulate(ScriptedPolicy(), 200, seed=15), tmp_path)
    adapter = SupportDeskReplay()
    log = ReplayLog(steps, adapter)
    state = adapter.initial_state(log.first)
    # An episode whose logged agent looked the customer up with the real email, and never
    # called cancel_order.
    tool = pc.struct_field(steps.column("action"), "tool")
    cancelled = set(steps.filter(pc.equal(tool, "cancel_order")).column("episode_id")
                    .to_pylist())
    calls = steps.filter(pc.and_(pc.equal(tool, "lookup_customer"),
                                 pc.invert(pc.match_substring(pc.struct_field(
                                     steps.column("observation"), "tool_result"), "error"))))
    k = next(k for k, e in enumerate(calls.column("episode_id").to_pylist())
             if e not in cancelled)
    episode_id = calls.column("episode_id")[k].as_py()
    recorded = calls.column("observation")[k].as_py()["tool_result"]
    i = log.first.column("episode_id").to_pylist().index(episode_id)
    rows = np.array([i])
    state["email_known"][i] = 1
    for action, expect in ((LOOKUP_CUSTOMER, recorded), (CANCEL_ORDER, None)):
        text = adapter.arguments(state, rows, np.array([action]))
        args = log.args_index.get_indexer(np.asarray(text, dtype=object))
        args = np.where(args < 0, log.n_args - 1, args)
        hit = log.lookup(rows, np.array([action]), args, np.array([EPISODE], dtype=object))
        if expect is None:  # this episode never cancelled with these arguments
            assert hit[0] == -1
        else:
            assert log.result_values[log.result_code[hit[0]]] == expect


def test_replaying_the_logging_script_follows_its_log(tmp_path):
    ep = simulate(SCRIPT, 300, seed=16)
    steps = logged_steps(ep, tmp_path)
    log = ReplayLog(steps, SupportDeskReplay())
    result = replay(log, SCRIPT, seed=0, max_steps=40)
    # Deterministic and served the same answers (the k-th question gets the k-th reply):
    # every episode replays to its end with the logged number of decisions.
    assert result.complete.all() and not result.unsupported.any()
    assert result.decisions == len(ep.action)
    # A policy that cancels at once sends made-up arguments no episode recorded.
    cancel = one_hot_policy(lambda s: np.full(len(s), CANCEL_ORDER))
    result = replay(log, cancel, seed=0, max_steps=40)
    assert result.unsupported.all() and not result.complete.any()
    assert set(result.unsupported_calls) == {'cancel_order({"order_id":"000000"})'}


def test_a_verified_session_is_served_answers_recorded_after_verification(tmp_path):
    # The logger often looks the order up before verifying ("authentication required") and
    # again after: the replayed script, which verifies first, must get the second answer.
    steps = logged_steps(simulate(ScriptedPolicy(), 300, seed=17), tmp_path)
    result = replay(ReplayLog(steps, SupportDeskReplay()), SCRIPT, seed=0,
                    max_steps=40)
    assert not result.truncated.any()  # no loop on a stale answer
    assert result.complete.mean() > 0.5
    trace = result.steps.to_pylist()
    verified: set[str] = set()
    served_after_login = 0
    for row in trace:
        tool, answer = row["action"]["tool"], row["observation"]["tool_result"]
        if tool == "lookup_customer" and "error" not in answer:
            verified.add(row["episode_id"])
        if tool == "lookup_order" and row["episode_id"] in verified:
            assert "authentication required" not in answer
            served_after_login += 1
    assert served_after_login > 100


def test_a_deterministic_candidate_replayed_over_its_own_logs_is_scored_as_logged(tmp_path):
    # Replay writes every action as a call; the fixture gives the trace back as its logs
    # record it (messages by text, the user's replies in the events), so the verifiers
    # score it and the replay estimate is the simulator's return of those episodes.
    from tracerl.config.learning import Ope
    from tracerl.envs.support_desk.features import critic_features
    from tracerl.ope.evaluate import LoggedData, Settings, replay_estimates

    ep = simulate(SCRIPT, 300, seed=18)
    steps = relabel(logged_steps(ep, tmp_path), VERIFIERS, weights(ep.params))
    result = replay(ReplayLog(steps, SupportDeskReplay()), SCRIPT, seed=0,
                    max_steps=40)
    assert result.complete.all()
    trace = get_encoder("support_desk").transitions(
        relabel(result.steps, VERIFIERS, weights(ep.params)))
    logged = get_encoder("support_desk").transitions(steps)
    # Distinct trajectories only: compare each with the episode it stands for.
    kept = np.isin(logged.episode, np.unique(result.trajectory_of, return_index=True)[1])
    np.testing.assert_array_equal(trace.states(), logged.states()[kept])
    np.testing.assert_array_equal(trace.a, logged.a[kept])
    np.testing.assert_array_equal(trace.r, logged.r[kept])

    s = Settings.of(Ope(n_boot=200, seed=3, replay={"max_steps": 40}), gamma=0.99,
                    verifiers=VERIFIERS, weights=weights(ep.params), n_episodes=logged.n_episodes)
    data = LoggedData.prepare(logged, critic_features(), ScriptedPolicy(), s, 3, steps,
                              SupportDeskReplay())
    records = replay_estimates(data, SCRIPT, s, seed=3, support=1.0, decisions=1.0)
    by_layer = {e.layer: e for e in records}
    assert set(by_layer) == {"replay", "verifier"}
    for e in records:
        assert e.applicable and not e.flags and e.details["replayed_share"] == 1.0
        assert e.details["replays_per_episode"] == 1  # deterministic: one replay says all
        assert e.ci_low <= e.value <= e.ci_high
    np.testing.assert_allclose(by_layer["replay"].value, ep.returns(0.99).mean(), rtol=0,
                               atol=1e-12)
    assert by_layer["verifier"].value == ep.success.mean()


def test_the_truth_of_a_candidate_comes_from_params_and_agrees_with_its_replay(tmp_path):
    # The fixture's truth (what the ope stage puts beside every estimate): Monte Carlo of
    # support_desk.truth.episodes rollouts from support_desk.truth.seed. A fully supported
    # deterministic candidate's replay over 1,000 logged episodes of itself must agree
    # with it within the two standard errors.
    from tracerl.config.fixtures import get_fixture
    from tracerl.config.schema import validate_params

    fixture = get_fixture("support_desk")
    raw = {"gamma": 0.99, "fixture": "support_desk",
           "support_desk": {"truth": {"episodes": 40_000, "seed": 5}}}
    params = validate_params(raw)
    truth = fixture.truth_metrics(SCRIPT, params)
    assert truth == fixture.truth_metrics(SCRIPT, params)  # same params, same truth
    other = fixture.truth_metrics(SCRIPT, validate_params({**raw, "support_desk": {"truth": {
        "episodes": 40_000, "seed": 6}}}))
    assert other["return"] != truth["return"]
    assert 0 < truth["return_se"] < 0.01 and 0 < truth["success"] <= 1
    # the rollouts ask the policy once per distinct state: the same probabilities
    from tracerl.envs.support_desk.truth import _OnDistinctStates

    states = simulate(ScriptedPolicy(), 300, seed=20).states
    np.testing.assert_array_equal(_OnDistinctStates(ScriptedPolicy()).action_probs(states),
                                  ScriptedPolicy().action_probs(states))

    ep = simulate(SCRIPT, 1000, seed=19)
    steps = relabel(logged_steps(ep, tmp_path), VERIFIERS, weights(ep.params))
    result = replay(ReplayLog(steps, SupportDeskReplay()), SCRIPT, seed=0,
                    max_steps=40)
    trace = relabel(result.steps, VERIFIERS, weights(ep.params))
    t = trace.column("t").to_numpy()
    ret = np.bincount(result.episode_index, weights=trace.column("reward").to_numpy()
                      * 0.99 ** t)[result.trajectory_of]
    se = np.hypot(truth["return_se"], ret.std(ddof=1) / np.sqrt(len(ret)))
    assert abs(ret.mean() - truth["return"]) < 4 * se
