"""The generic dialogue encoder by hand, the grouped held-out split, and the OPE layers'
honesty (estimated propensities flagged, no fixture -> not applicable, flagged estimates
never picked)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tasks.ope import no_truth_reason, replay_adapter_of
from tests.test_dialogue_features import USER
from tracerl.config.fixtures import Fixture
from tracerl.config.learning import BC, Ope
from tracerl.data.ingest.parse import records_to_table
from tracerl.ope.estimate import Estimate
from tracerl.ope.evaluate import (
    LoggedData,
    Settings,
    evaluate_policy,
    logged_value,
    not_applicable,
    replay_estimates,
)
from tracerl.ope.records import headline_metrics, record
from tracerl.ope.select import pick_of, select, verdict_against_logged
from tracerl.rl.bc import LogisticBC
from tracerl.rl.encoding import DialogueEncoder, encoder_for, episode_groups, get_encoder
from tracerl.rl.features import Hashed, default_templates
from tracerl.rl.learners import grouped_folds, heldout_accuracy
from tracerl.rl.transitions import Transitions


def _row(episode, t, tool=None, error=None, events=None, goal=None, domain="airline",
         reward=0.0, done=False, logp=None):
    action = {"type": "tool_call", "tool": tool, "arguments": {}} if tool else \
        {"type": "message", "content": "ok"}
    return {"episode_id": episode, "t": t, "done": done, "reward": reward, "action": action,
            "observation": {"error": error, "events": events}, "action_logprobs": logp,
            "state": {"user_goal": goal}, "episode": {"domain": domain}, "task": episode}


def _log(with_x: bool = True, reward_b1: float | None = 0.5) -> pa.Table:
    rows = [
        _row("a", 0, goal="hi", events=[USER], logp=-0.5),
        _row("a", 1, tool="get_user", error="boom"),
        _row("a", 2, tool="get_user", events=[USER]),
        _row("a", 3, reward=1.0, done=True),
        _row("b", 1, domain="retail", reward=reward_b1, done=True),  # rows in any order
        _row("b", 0, tool="x" if with_x else "get_user", domain="retail"),
    ]
    return records_to_table(rows, "log.jsonl", list(range(1, len(rows) + 1)))


def test_encoder_states_actions_rewards_by_hand():
    enc = encoder_for([_log()], "dialogue")
    # vocabularies sorted; prev_action's extra value "start" is the last code
    assert enc.actions == ("get_user", "respond", "x")
    assert enc.values == {"domain": ["airline", "retail"]}
    assert enc.cardinality == (4, 6, 2, 2, 2)
    tr = enc.transitions(_log())
    #        prev   calls err user domain
    want = [[3, 0, 0, 1, 0],   # a0: start, goal logged
            [1, 0, 0, 1, 0],   # a1: after respond, the user spoke in a0's observation
            [0, 1, 1, 0, 0],   # a2: one call so far, and it erred
            [0, 2, 0, 1, 0],   # a3: two calls, the latest fine, user spoke
            [3, 0, 0, 0, 1],   # b0 (logged second): start, no goal, retail
            [2, 1, 0, 0, 1]]   # b1: after x
    assert tr.states().tolist() == want
    assert tr.a.tolist() == [1, 0, 0, 1, 2, 1]
    assert tr.episode.tolist() == [0, 0, 0, 0, 1, 1] and tr.t.tolist() == [0, 1, 2, 3, 0, 1]
    assert tr.r.tolist() == [0, 0, 0, 1.0, 0, 0.5]
    assert tr.done.tolist() == [False, False, False, True, False, True]
    assert (tr.s_next >= 0).tolist() == [True, True, True, False, True, False]
    assert tr.rows[tr.s_next[[0, 1, 2, 4]]].tolist() == [want[1], want[2], want[3], want[5]]
    assert tr.behavior_logp[0] == -0.5 and np.isnan(tr.behavior_logp[1:]).all()
    assert tr.n_actions == 3
    assert tr.labels[tr.s[0]] == "prev=start|calls=0|err=0|user=1|domain=airline"


def test_encoder_shares_one_vocabulary_and_names_the_row_outside_it():
    small = encoder_for([_log(with_x=False)], "dialogue")
    with pytest.raises(ValueError, match=r"action 'x' is not in .*log\.jsonl record 6"):
        small.transitions(_log())
    both = encoder_for([_log(with_x=False), _log()], "dialogue")
    assert both.transitions(_log(with_x=False)).n_actions == both.transitions(_log()).n_actions
    again = get_encoder("dialogue", **both.get_params())  # rebuilt from the saved params
    assert again.transitions(_log()).states().tolist() == \
        both.transitions(_log()).states().tolist()


def test_encoder_refuses_rewards_that_were_never_labelled():
    enc = encoder_for([_log()], "dialogue")
    with pytest.raises(ValueError, match=r"reward is null .*record 5 .*relabel"):
        enc.transitions(_log(reward_b1=None))


def test_encoder_groups_are_the_task_of_each_encoded_episode():
    steps = _log().take([4, 5, 0, 1, 2, 3])  # episode b's rows first
    enc = encoder_for([steps], "dialogue")
    assert episode_groups(steps).tolist() == ["a", "b"]  # ascending episode_id, as encoded
    tr = enc.transitions(steps)
    assert tr.episode.tolist() == [0, 0, 0, 0, 1, 1] and tr.t.tolist() == [0, 1, 2, 3, 0, 1]
    assert tr.r.tolist() == [0, 0, 0, 1.0, 0, 0.5]
    assert isinstance(enc, DialogueEncoder)


@pytest.mark.parametrize("n_groups,n_folds", [(20, 5), (7, 3), (3, 5)])
def test_grouped_split_never_shares_a_group_between_train_and_test(n_groups, n_folds):
    rng = np.random.default_rng(n_groups)
    groups = rng.integers(0, n_groups, size=200).astype(str)
    fold = grouped_folds(groups, n_folds, seed=3)
    assert fold.max() + 1 == min(n_folds, len(set(groups)))
    for k in range(fold.max() + 1):
        test, train = set(groups[fold == k]), set(groups[fold != k])
        assert test and not test & train
    assert (fold == grouped_folds(groups, n_folds, seed=3)).all()  # seeded
    with pytest.raises(ValueError, match="at least 2 groups"):
        grouped_folds(["t"] * 5, 5, seed=0)


def _transitions(n_episodes: int, rng: np.random.Generator, *, logp: bool,
                 action_of_state: bool) -> Transitions:
    """Episodes of 3 steps over states of 2 variables; the action is the first variable
    (action_of_state) or uniform; reward 1 on the last step when its action is 1."""
    n = n_episodes * 3
    states = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 4, n)])
    actions = states[:, 0].copy() if action_of_state else rng.integers(0, 3, n)
    t = np.tile(np.arange(3), n_episodes)
    last = t == 2
    return Transitions.build(episode=np.repeat(np.arange(n_episodes), 3), t=t, rows=states,
                             a=actions, r=(last & (actions == 1)).astype(float), done=last,
                             actions=("a0", "a1", "a2"), variables=("u", "v"),
                             behavior_logp=np.full(n, np.log(1 / 3)) if logp else None)


FEATURES = Hashed((3, 4), default_templates(2), n_bits=8, n_actions=3)


def test_heldout_accuracy_holds_out_whole_tasks_and_measures_generalisation():
    rng = np.random.default_rng(0)
    groups = np.repeat([f"task{i}" for i in range(10)], 6)  # 10 tasks x 6 episodes
    bc = BC(model="logistic", C=10.0)
    learnable = heldout_accuracy(_transitions(60, rng, logp=False, action_of_state=True),
                                 groups, FEATURES, bc, "lowest_index", 5, seed=1)
    random = heldout_accuracy(_transitions(60, rng, logp=False, action_of_state=False),
                              groups, FEATURES, bc, "lowest_index", 5, seed=1)
    tested = [g for fold in learnable["folds"] for g in fold["test_groups"]]
    assert sorted(tested) == sorted(set(groups))  # every task tested once, in one fold
    assert learnable["test_steps"] == 180
    assert learnable["accuracy"] == 1.0  # the rule depends on the state, not the task
    assert random["accuracy"] < 0.6      # chance is 1/3: nothing to learn


def _settings(tr: Transitions, **ope) -> Settings:
    return Settings.of(Ope(**{"n_boot": 50, "return_range": (0.0, 1.0), **ope}), gamma=1.0,
                       verifiers=["tool_error_penalty@1"],
                       weights={"tool_error_penalty": 1.0}, n_episodes=tr.n_episodes)


def _evaluate(tr: Transitions) -> list[Estimate]:
    bc = LogisticBC(FEATURES, C=1.0).fit(tr)
    s = _settings(tr)
    return evaluate_policy(LoggedData.prepare(tr, FEATURES, bc, s, seed=0), bc, s, seed=0)


def test_importance_flags_estimated_propensities_only_when_none_were_logged():
    rng = np.random.default_rng(1)
    estimated = _evaluate(_transitions(40, rng, logp=False, action_of_state=False))
    logged = _evaluate(_transitions(40, rng, logp=True, action_of_state=False))
    is_est = [e for e in estimated if e.layer == "importance"]
    is_log = [e for e in logged if e.layer == "importance"]
    assert len(is_est) == 6 and all("estimated_propensities" in e.flags for e in is_est)
    assert is_log and not any("estimated_propensities" in e.flags for e in is_log)


def test_replay_and_verifier_are_not_applicable_without_a_fixture_that_replays():
    for fixture, reason in ((None, "no fixture"),
                            (Fixture(name="toy"), "toy fixture brings no replay")):
        adapter, why = replay_adapter_of(fixture, ("a0", "a1", "a2"))
        assert adapter is None and reason in why
        records = {e.layer: e for e in not_applicable(why, ["replay", "verifier", "critic"],
                                                      20, 0.95)}
        assert set(records) == {"replay", "verifier"}
        for e in records.values():
            assert e.value is None and e.ci_low is None
            assert e.flags[0].startswith("not_applicable") and reason in e.flags[0]
    assert "no truth: real logs" in no_truth_reason(None)


def test_logged_value_is_the_mean_episode_return():
    rng = np.random.default_rng(3)
    tr = _transitions(30, rng, logp=True, action_of_state=False)
    e = logged_value(tr, gamma=1.0, seed=0, n_boot=200, level=0.9)
    per_episode = [tr.r[tr.episode == i].sum() for i in range(30)]
    assert e.value == pytest.approx(np.mean(per_episode))
    assert e.ci_low <= e.value <= e.ci_high and e.support == 1.0


def _record(policy, value, flags=(), support=1.0, ci=(0.0, 1.0)):
    return {"dataset": "d", "policy": policy, "layer": "critic", "estimator": "fqe",
            "value": value, "flags": list(flags), "support": support, "ci_low": ci[0],
            "ci_high": ci[1], "truth": None}


def test_the_pick_is_never_a_flagged_estimate():
    records = [_record("best_but_flagged", 0.9, ["low_support"]), _record("ok", 0.4),
               _record("worse", 0.3), _record("na", None, ["not_applicable: why"])]
    assert pick_of(select(records, 0.95), "d", "critic/fqe")[0] == "ok"
    chosen, why = pick_of(select(records[:1] + records[3:], 0.95), "d", "critic/fqe")
    assert chosen is None and "best_but_flagged" in why


def test_verdict_says_not_enough_support_with_the_numbers():
    logged = {"value": 0.5, "ci_low": 0.3, "ci_high": 0.7}
    low = verdict_against_logged(_record("c", 0.9, ["low_support"], support=0.28), logged,
                                 0.95)
    assert low.startswith("not enough support") and "0.28" in low and "0.95" in low
    assert verdict_against_logged(_record("c", 0.9, ci=(0.8, 0.95)), logged, 0.95) \
        .startswith("better")
    assert verdict_against_logged(_record("c", 0.55, ci=(0.4, 0.7)), logged, 0.95) \
        .startswith("cannot tell")


class _ToyReplay:
    """A replay adapter whose state is the number of calls served so far (one int var)."""

    actions = ("lookup", "final", "refund")
    tool_scope = {"lookup": "episode", "final": "terminal", "refund": "episode"}

    def initial_state(self, first_steps: pa.Table) -> dict[str, np.ndarray]:
        return {"calls": np.zeros(first_steps.num_rows, dtype=np.int64)}

    def state_codes(self, state, rows):
        distinct, code = np.unique(state["calls"][rows], return_inverse=True)
        return code.reshape(-1), distinct[:, None]  # the encoder's int rows

    def arguments(self, state, rows, actions):
        return np.full(len(rows), "{}", dtype=object)

    def apply(self, state, rows, actions, results):
        state["calls"][rows] += 1


class _Scripted:
    """Acts on int state rows: `script[calls]` (the last entry once past its end)."""

    def __init__(self, *script: int) -> None:
        self.script = np.asarray(script)

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        act = self.script[np.minimum(states[:, 0], len(self.script) - 1)]
        return np.eye(3)[act]


def _replay_log() -> pa.Table:
    def call(episode, t, tool, error=None, done=False):
        return {"episode_id": episode, "t": t, "done": done, "reward": 0.0,
                "action": {"type": "tool_call", "tool": tool, "arguments": {}},
                "observation": {"tool_result": None if error else "ok", "error": error}}
    rows = [call("e0", 0, "lookup"), call("e0", 1, "final", done=True),
            call("e1", 0, "lookup", error="boom", done=True)]
    return records_to_table(rows, "log.jsonl", [1, 2, 3])


def _toy(steps: pa.Table, adapter=None) -> tuple[LoggedData, Settings]:
    tr = Transitions.build(episode=np.array([0, 0, 1]), t=np.array([0, 1, 0]),
                           rows=np.array([[0], [1], [0]]), a=np.array([0, 1, 0]),
                           r=np.array([0.0, 0.0, -1.0]), done=np.array([False, True, True]),
                           actions=_ToyReplay.actions, variables=("calls",),
                           behavior_logp=np.zeros(3))
    s = _settings(tr, n_boot=200, return_range=(-1.0, 0.0), min_support=0.95)
    features = Hashed((4,), ((0,),), n_bits=6, n_actions=3)
    data = LoggedData.prepare(tr, features, _Scripted(0, 1), s, 0,
                              steps if adapter else None, adapter)
    return data, s


def test_replay_serves_recorded_calls_and_bounds_what_it_cannot_replay():
    data, s = _toy(_replay_log(), _ToyReplay())

    def replayed(policy):
        return {e.layer: e for e in replay_estimates(data, policy, s, seed=0, support=1.0,
                                                     decisions=1.0)}
    # lookup then final: e0 ends well (0), e1's lookup errs as logged (-1) -> -0.5
    both = replayed(_Scripted(0, 1))
    assert both["replay"].value == pytest.approx(-0.5)
    assert both["replay"].details["replayed_share"] == 1.0
    assert both["verifier"].value is None and "no 'task_success' component" in \
        both["verifier"].flags[0]
    assert replayed(_Scripted(1))["replay"].value == 0.0  # final at once: no error
    # refund was never logged: no episode can be replayed, only the bounds are known
    never = replayed(_Scripted(2))["replay"]
    assert never.value is None and never.details["replayed_share"] == 0.0
    assert never.ci_low == pytest.approx(-1.0) and never.ci_high == pytest.approx(0.0)
    assert any(f.startswith("unreplayed_calls") for f in never.flags)


def test_a_fixture_that_replays_gets_replay_rows_instead_of_not_applicable():
    fixture = Fixture(name="toy", replay_adapter=_ToyReplay)
    adapter, reason = replay_adapter_of(fixture, _ToyReplay.actions)
    assert reason is None
    data, s = _toy(_replay_log(), adapter)
    replay = next(e for e in evaluate_policy(data, _Scripted(0, 1), s, seed=0)
                  if e.layer == "replay")
    assert replay.value == pytest.approx(-0.5)
    adapter, reason = replay_adapter_of(fixture, ("a", "b", "c"))
    assert adapter is None and "other actions than the encoder" in reason


def test_truth_sits_beside_each_estimate_and_its_error_is_in_the_metrics():
    def est(layer, estimator, value):
        return Estimate(layer, estimator, value, None, None, 0.95, 1.0, 10)

    truth = {"a": {"return": 0.375, "return_se": 0.001, "success": 0.8, "success_se": 0.002},
             "b": {"return": 0.0, "return_se": 0.003, "success": 0.0, "success_se": 0.0}}
    estimates = [("a", est("replay", "return", 0.5)), ("a", est("verifier", "success", 0.75)),
                 ("a", est("critic", "fqe", 0.25)), ("b", est("critic", "fqe", None))]
    out = [record("d", p, e, truth[p]) for p, e in estimates]
    # the verifier layer estimates success, the others the return: each beside its truth
    assert [(r["metric"], r["truth"], r["truth_se"]) for r in out] == [
        ("return", 0.375, 0.001), ("success", 0.8, 0.002), ("return", 0.375, 0.001),
        ("return", 0.0, 0.003)]
    metrics = headline_metrics(out, {"d": {"value": 0.1}}, "critic/fqe")
    assert metrics["d"]["a"]["minus_truth"] == pytest.approx(0.25 - 0.375)
    assert metrics["d"]["a"]["truth_se"] == 0.001
    assert "b" not in metrics["d"]  # no estimate: nothing to compare
    # real logs: no truth anywhere, and the reason says so
    none = [record("d", p, e, None) for p, e in estimates]
    assert all(r["truth"] is None and r["truth_se"] is None for r in none)
    assert all("minus_truth" not in v for v in headline_metrics(
        none, {"d": {"value": 0.1}}, "critic/fqe")["d"].values())
    assert "real logs" in no_truth_reason(None)
    assert "brings none" in no_truth_reason(Fixture(name="toy"))
    assert no_truth_reason(Fixture(name="toy", truth_metrics=lambda p, q: {})) is None
