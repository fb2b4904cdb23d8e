"""External candidates (tracerl.ope.external): scored tables and Python policies, their
loading, alignment to the logs and their errors; the params that declare them."""

from __future__ import annotations

import math
import re

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracerl.config.learning import Ope
from tracerl.ope.external import (
    ExternalPolicyError,
    ScoredTableError,
    StepKeys,
    load_external,
    load_policy,
    load_scored,
    scored_files,
    sha256_of,
    write_scored,
)
from tracerl.rl.transitions import Transitions

ACTIONS = ("ask", "lookup", "reply")


class Tilted:
    """A policy over one state variable (0..2): mostly action `lean`, else uniform."""

    def __init__(self, lean: int = 1, p: float = 0.7) -> None:
        self.lean, self.p = lean, p

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        out = np.full((len(states), len(ACTIONS)), (1 - self.p) / 2)
        out[:, self.lean] = self.p
        out[np.asarray(states)[:, 0] == 2] = [0.0, 0.0, 1.0]  # the last state: reply
        return out


def tilted(lean: int = 1, p: float = 0.7) -> Tilted:
    return Tilted(lean, p)


def not_a_policy() -> object:
    return object()


def broken() -> Tilted:
    policy = Tilted()
    policy.action_probs = lambda states: np.full((len(states), len(ACTIONS)), 0.5)
    return policy


# Three episodes (ids sort as e1 < e2 < e3), the logs listed out of order.
EPISODES = ["e2", "e1", "e3", "e1", "e2", "e1", "e3"]
TS = [0, 0, 0, 1, 1, 2, 1]
STATE = [0, 0, 0, 1, 2, 2, 2]
ACTION = [0, 1, 0, 1, 2, 2, 2]


@pytest.fixture
def logged():
    steps = pa.table({"episode_id": EPISODES, "t": TS})
    code = {"e1": 0, "e2": 1, "e3": 2}
    tr = Transitions.build(episode=np.array([code[e] for e in EPISODES]), t=np.array(TS),
                           rows=np.array(STATE)[:, None], a=np.array(ACTION),
                           r=np.ones(len(TS)), done=np.array([False] * len(TS)),
                           actions=ACTIONS, variables=("stage",),
                           behavior_logp=np.full(len(TS), math.log(1 / 3)))
    return steps, tr, StepKeys.of("logs", steps, tr)


def _scored(keys: StepKeys, policy=None):
    """What a scoring job writes: per logged step (any order) the candidate's log-prob of
    the logged action and its distribution."""
    policy = policy or Tilted()
    probs = policy.action_probs(np.array(STATE)[:, None])
    names = [ACTIONS[a] for a in ACTION]
    logp = np.log(probs[np.arange(len(ACTION)), ACTION])
    return probs, names, logp


def test_a_jsonl_table_aligns_to_the_transitions_order(tmp_path, logged):
    steps, tr, keys = logged
    probs, names, logp = _scored(keys)
    path = write_scored(tmp_path / "cand.jsonl", EPISODES, TS, logp, actions=ACTIONS,
                        target_probs=probs, logged_action=names, dataset="logs",
                        scoring={"model": "new-model", "temperature": 0.0})
    c = load_scored("new", keys, str(path), scoring={"top_p": 1.0})
    expected = Tilted().action_probs(tr.rows)[tr.s]
    np.testing.assert_allclose(c.step_probs, expected)
    np.testing.assert_allclose(c.logged_logprob, np.log(expected[np.arange(tr.n), tr.a]))
    assert c.policy is None and c.behavior_logprob is None
    assert c.provenance["sha256"] == sha256_of(path)
    assert c.provenance["scoring"] == {"model": "new-model", "temperature": 0.0, "top_p": 1.0}
    assert c.provenance["distribution"] == "target_probs"


def test_a_parquet_table_and_a_python_policy_are_the_same_candidate(tmp_path, logged):
    steps, tr, keys = logged
    probs, names, logp = _scored(keys)
    write_scored(tmp_path / "cand.parquet", EPISODES, TS, logp, actions=ACTIONS,
                 target_probs=probs, scoring={"model": "m"})
    table = load_scored("new", keys, str(tmp_path / "cand.parquet"))
    policy = load_policy("new", tr, f"{__name__}:tilted", {"lean": 1, "p": 0.7})
    np.testing.assert_array_equal(table.logged_logprob, policy.logged_logprob)
    np.testing.assert_allclose(table.step_probs, policy.step_probs, rtol=0, atol=1e-15)
    assert table.provenance["scoring"] == {"model": "m"}
    assert policy.provenance == {"source": "python policy", "policy": f"{__name__}:tilted",
                                 "kwargs": {"lean": 1, "p": 0.7}}


def test_only_logprobs_give_no_distribution_and_a_behavior_table_is_read(tmp_path, logged):
    steps, tr, keys = logged
    _, _, logp = _scored(keys)
    (tmp_path / "cand.jsonl").write_bytes(b"".join(
        orjson.dumps({"episode_id": e, "t": t, "target_logprob": float(lp)}) + b"\n"
        for e, t, lp in zip(EPISODES, TS, logp, strict=True)))
    write_scored(tmp_path / "behavior.jsonl", EPISODES, TS, np.full(7, math.log(0.25)))
    c = load_scored("new", keys, str(tmp_path / "cand.jsonl"),
                    behavior_scored=str(tmp_path / "behavior.jsonl"))
    assert c.step_probs is None
    np.testing.assert_allclose(c.behavior_logprob, math.log(0.25))
    assert c.provenance["behavior"]["sha256"] == sha256_of(tmp_path / "behavior.jsonl")


def test_a_never_taken_logged_action_round_trips_through_jsonl(tmp_path, logged):
    steps, tr, keys = logged
    probs, names, logp = _scored(keys, Tilted(lean=0, p=1.0))  # never looks up
    assert np.isneginf(logp).any()
    write_scored(tmp_path / "c.jsonl", EPISODES, TS, logp, actions=ACTIONS, target_probs=probs)
    c = load_scored("c", keys, str(tmp_path / "c.jsonl"))
    assert np.array_equal(np.exp(c.logged_logprob) == 0, np.isneginf(logp)[np.argsort(
        [f"{e}{t}" for e, t in zip(EPISODES, TS, strict=True)])])


def _lines(rows, header=None) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in ([header] if header else []) + rows)


def _rows(keys: StepKeys):
    probs, names, logp = _scored(keys)
    return [{"episode_id": e, "t": t, "target_logprob": float(lp),
             "target_probs": dict(zip(ACTIONS, map(float, p), strict=True))}
            for e, t, lp, p in zip(EPISODES, TS, logp, probs, strict=True)]


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows[:-1], "1 step(s) of dataset logs have no record, e.g. episode e3 t 1"),
    (lambda rows: rows + [rows[2]], "record line 8, field episode_id, t: duplicate key"),
    (lambda rows: [{**rows[0], "target_logprob": 0.5}, *rows[1:]],
     "record line 1, field target_logprob: 0.5 > 0"),
    (lambda rows: [{**rows[0], "target_logprob": None}, *rows[1:]],
     "record line 1, field target_logprob: null"),
    (lambda rows: [*rows[:3], {**rows[3], "target_probs": {"ask": 0.1, "refund": 0.9}},
                   *rows[4:]], "record line 4, field target_probs: unknown action 'refund'"),
    (lambda rows: [*rows[:1], {**rows[1], "target_probs": {"ask": 0.5, "lookup": 0.3}},
                   *rows[2:]], "record line 2, field target_probs: sums to 0.8"),
    (lambda rows: [{**rows[0], "target_probs": {"ask": 0.7, "lookup": 0.15, "reply": 0.15}},
                   *rows[1:]], "field target_probs: gives the logged action 'ask' probability"),
    (lambda rows: [*rows, {**rows[0], "episode_id": "e9"}],
     "record line 8, field episode_id, t: (episode e9, t 0) is not a step of dataset logs"),
    (lambda rows: [{**rows[0], "action": "reply"}, *rows[1:]],
     "record line 1, field action: 'reply', but the logs took 'ask' at episode e2 t 0"),
    (lambda rows: [{k: v for k, v in r.items() if k != "target_logprob"} for r in rows],
     "field target_logprob missing"),
])
def test_bad_tables_name_file_record_field_and_reason(tmp_path, logged, change, message):
    steps, tr, keys = logged
    path = tmp_path / "bad.jsonl"
    path.write_bytes(_lines(change(_rows(keys))))
    with pytest.raises(ScoredTableError) as err:
        load_scored("c", keys, str(path))
    assert str(err.value).startswith(str(path)), err.value
    assert message in str(err.value), err.value


def test_a_nan_logprob_in_parquet_is_refused(tmp_path, logged):
    steps, tr, keys = logged
    _, _, logp = _scored(keys)
    logp[4] = np.nan
    pq.write_table(pa.table({"episode_id": EPISODES, "t": TS, "target_logprob": logp}),
                   tmp_path / "c.parquet")
    with pytest.raises(ScoredTableError, match=r"record row 4, field target_logprob: NaN"):
        load_scored("c", keys, str(tmp_path / "c.parquet"))


def test_a_table_for_another_dataset_or_disagreeing_settings_are_refused(tmp_path, logged):
    steps, tr, keys = logged
    path = tmp_path / "c.jsonl"
    path.write_bytes(_lines(_rows(keys), {"dataset": "other", "scoring": {"model": "a"}}))
    with pytest.raises(ScoredTableError, match="scored on dataset 'other', evaluated here"):
        load_scored("c", keys, str(path))
    path.write_bytes(_lines(_rows(keys), {"dataset": "logs", "scoring": {"model": "a"}}))
    with pytest.raises(ScoredTableError, match=r"scoring.model: the file says 'a', params"):
        load_scored("c", keys, str(path), scoring={"model": "b"})
    assert load_scored("c", keys, str(path)).provenance["scoring"] == {"model": "a"}


def test_a_behavior_table_cannot_give_the_logged_action_probability_zero(tmp_path, logged):
    steps, tr, keys = logged
    write_scored(tmp_path / "c.jsonl", EPISODES, TS, np.zeros(7))
    bad = np.full(7, -1.0)
    bad[2] = -np.inf
    pq.write_table(pa.table({"episode_id": EPISODES, "t": TS, "target_logprob": bad}),
                   tmp_path / "b.parquet")
    with pytest.raises(ScoredTableError, match=r"b.parquet: record row 2, field "
                                               r"target_logprob: -inf: the behaviour took"):
        load_scored("c", keys, str(tmp_path / "c.jsonl"),
                    behavior_scored=str(tmp_path / "b.parquet"))


@pytest.mark.parametrize("target, message", [
    ("tests.test_external_candidates", "expected 'package.module:factory'"),
    ("tests.no_such_module:f", "cannot import tests.no_such_module"),
    (f"{__name__}:missing", "has no 'missing'"),
    (f"{__name__}:not_a_policy", "returned object, which has no action_probs"),
    (f"{__name__}:broken", "is not a distribution"),
])
def test_bad_python_policies_say_why(logged, target, message):
    steps, tr, keys = logged
    with pytest.raises(ExternalPolicyError, match=message):
        load_policy("c", tr, target)


def test_params_declare_both_forms_and_name_the_field_in_errors(tmp_path, logged):
    steps, tr, keys = logged
    probs, names, logp = _scored(keys)
    write_scored(tmp_path / "logs.jsonl", EPISODES, TS, logp, actions=ACTIONS,
                 target_probs=probs)
    ope = Ope.model_validate({"candidates": {"external": {
        "table": {"scored": str(tmp_path / "{dataset}.jsonl"), "scoring": {"model": "m"}},
        "code": {"policy": f"{__name__}:tilted", "kwargs": {"p": 0.7}},
        "elsewhere": {"policy": f"{__name__}:tilted", "datasets": ["other"]}}}})
    spec = ope.candidates.external
    found = load_external(spec, "logs", steps, tr)
    assert list(found) == ["table", "code"]
    np.testing.assert_allclose(found["table"].step_probs, found["code"].step_probs)
    assert scored_files(spec, ["logs", "other"]) == [str(tmp_path / "logs.jsonl"),
                                                     str(tmp_path / "other.jsonl")]
    for bad, field in [({"x": {}}, "exactly one of scored"),
                       ({"x": {"scored": "a", "policy": "m:f"}}, "exactly one of scored"),
                       ({"x": {"policy": "no_colon"}}, "package.module:factory"),
                       ({"bc": {"scored": "a"}}, "not behavior or a learner's"),
                       ({"x": {"policy": "m:f", "scoring": {"model": "m"}}},
                        "scoring: only with scored"),
                       ({"x": {"scored": "a", "sored": 1}}, "sored")]:
        with pytest.raises(ValueError, match=field) as err:
            Ope.model_validate({"candidates": {"external": bad}})
        assert "candidates.external" in str(err.value) or "external" in str(err.value)


def test_a_scored_table_and_its_python_policy_give_identical_estimates(tmp_path):
    """The support desk's mixture of the logger and its script: scored from the simulator's
    own episodes (episode ids as its chat logs name them, rows shuffled), against the same
    policy by import path; every layer's value and interval equal."""
    from tracerl.envs import support_desk as sd
    from tracerl.envs.support_desk.candidates import fixed_candidate
    from tracerl.envs.support_desk.features import critic_features, to_transitions
    from tracerl.envs.support_desk.sim import ACTIONS as DESK
    from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates

    ep = sd.generate(sd.FixtureParams(), 100, seed=4)
    tr = to_transitions(ep)
    ids = np.array([f"support_desk-{i:08d}" for i in ep.episode], dtype=object)
    steps = pa.table({"episode_id": ids, "t": ep.t})
    probs = fixed_candidate("mix_script_25").action_probs(ep.states)
    shuffle = np.random.default_rng(0).permutation(len(ep.t))
    write_scored(tmp_path / "desk.jsonl", ids[shuffle], ep.t[shuffle],
                 np.log(probs[np.arange(len(ep.t)), ep.action])[shuffle], actions=DESK,
                 target_probs=probs[shuffle], dataset="desk", scoring={"model": "mix"})
    ope = Ope.model_validate({"n_boot": 50, "seed": 3, "return_range": [-1.2, 1.0],
                              "layers": ["critic", "importance"], "candidates": {"external": {
        "table": {"scored": str(tmp_path / "{dataset}.jsonl")},
        "code": {"policy": "tracerl.envs.support_desk.candidates:fixed_candidate",
                 "kwargs": {"name": "mix_script_25"}}}}})
    found = load_external(ope.candidates.external, "desk", steps, tr)
    settings = Settings.of(ope, gamma=0.99, verifiers=[], weights={}, n_episodes=tr.n_episodes)
    # The logger itself as the behaviour model, a small hashed critic: milliseconds.
    data = LoggedData.prepare(tr, critic_features(n_bits=8), fixed_candidate("behavior"),
                              settings, 3)
    by_table = evaluate_candidates(data, {"c": found["table"]}, settings, 3)["c"]
    by_code = evaluate_candidates(data, {"c": found["code"]}, settings, 3)["c"]
    assert [(e.layer, e.estimator) for e in by_table] == [(e.layer, e.estimator)
                                                          for e in by_code]
    assert len(by_table) == 7 and all(e.value is not None for e in by_table)
    for a, b in zip(by_table, by_code, strict=True):
        assert (a.value, a.ci_low, a.ci_high, a.support, a.flags) == \
            (b.value, b.ci_low, b.ci_high, b.support, b.flags), a.estimator


def test_the_readme_example_table_loads(tmp_path):
    """The JSONL example of README.md's "Bring your own candidate" loads against a log of
    those three steps."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("## Bring your own candidate"):]
    block = section[section.index("```text\n") + 8:]
    (tmp_path / "gpt-4.1.jsonl").write_text(block[:block.index("```")])
    names = ("book_reservation", "get_reservation_details", "get_user_details", "respond")
    episode = "b762699f-cf72-4a2f-b500-5bbe1258209c"
    tr = Transitions.build(episode=np.zeros(3), t=np.arange(3), rows=np.arange(3)[:, None],
                           a=np.array([2, 3, 3]), r=np.zeros(3),
                           done=np.array([False, False, True]), actions=names,
                           variables=("t",))
    keys = StepKeys.of("gpt-4.1", pa.table({"episode_id": [episode] * 3, "t": [0, 1, 2]}), tr)
    c = load_scored("new_prompt", keys, str(tmp_path / "{dataset}.jsonl"),
                    scoring={"top_p": 1.0})
    np.testing.assert_allclose(np.exp(c.logged_logprob), [0.9, 0.1, 0.95], atol=1e-6)
    assert c.step_probs[2].tolist() == [0.05, 0.0, 0.0, 0.95]
    assert c.provenance["scoring"] == {"model": "gpt-4.1-2025-04-14", "temperature": 0.0,
                                       "top_p": 1.0}


def test_records_of_steps_outside_the_evaluated_split_are_ignored(tmp_path, logged):
    steps, tr, keys = logged
    probs, names, logp = _scored(keys)
    # Evaluated: episodes e1 and e3 (one split); the table also scores e2 (another split).
    keep = np.array([e != "e2" for e in EPISODES])
    part = steps.filter(pa.array(keep))
    code = {"e1": 0, "e3": 1}
    sub = Transitions.build(episode=np.array([code[e] for e in np.array(EPISODES)[keep]]),
                            t=np.array(TS)[keep], rows=np.array(STATE)[keep][:, None],
                            a=np.array(ACTION)[keep], r=np.ones(keep.sum()),
                            done=np.zeros(keep.sum(), bool), actions=ACTIONS,
                            variables=("stage",))
    write_scored(tmp_path / "c.jsonl", EPISODES, TS, logp, actions=ACTIONS, target_probs=probs)
    with pytest.raises(ScoredTableError, match="is not a step of dataset logs"):
        load_scored("c", StepKeys.of("logs", part, sub), str(tmp_path / "c.jsonl"))
    c = load_scored("c", StepKeys.of("logs", part, sub, steps), str(tmp_path / "c.jsonl"))
    np.testing.assert_allclose(c.step_probs, Tilted().action_probs(sub.rows)[sub.s])


@pytest.mark.parametrize("lines, message", [
    (b'{"episode_id": "e1", "t": "x", "target_logprob": -1}\n',
     "record line 1, field t: expected a number, got a string"),
    (b'{"dataset": "logs"}\n{"episode_id": "e1", "t": 0, "target_logprob": -1}\nnot json\n',
     "record line 3: Invalid value"),
    (b"", "no scored steps"),
    (b'{"dataset": "logs", "model": "m"}\n', "record line 1, field model: a header line"),
])
def test_unreadable_jsonl_names_the_line_and_field(tmp_path, logged, lines, message):
    steps, tr, keys = logged
    (tmp_path / "c.jsonl").write_bytes(lines)
    with pytest.raises(ScoredTableError, match=re.escape(message)):
        load_scored("c", keys, str(tmp_path / "c.jsonl"))


def test_a_distribution_that_is_not_an_object_is_refused(tmp_path, logged):
    steps, tr, keys = logged
    rows = [{**r, "target_probs": list(r["target_probs"].values())} for r in _rows(keys)]
    (tmp_path / "c.jsonl").write_bytes(_lines(rows))
    with pytest.raises(ScoredTableError, match=re.escape(
            "field target_probs: expected an object {action name: probability}")):
        load_scored("c", keys, str(tmp_path / "c.jsonl"))


def test_an_external_candidate_naming_no_dataset_of_the_pipeline_is_an_error():
    from tracerl.ope.external import external_names

    spec = Ope.model_validate({"candidates": {"external": {
        "a": {"policy": "m:f", "datasets": ["logs"]}, "b": {"policy": "m:f"}}}}
    ).candidates.external
    assert external_names(spec, "logs", ["logs", "other"]) == ["a", "b"]
    assert external_names(spec, "other", ["logs", "other"]) == ["b"]
    with pytest.raises(ValueError, match=r"ope.candidates.external.a.datasets: 'logs' is not"):
        external_names(spec, "other", ["other"])
