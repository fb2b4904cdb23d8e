"""The SWiRL learners (tracerl.rl.learners): filtered BC clones exactly the steps the SFT
export trains on and beats the logger in the support desk's Monte Carlo truth;
advantage-weighted BC clones by the weighted-steps export's weights; both are saved and
loaded as policy artifacts with their recipe."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from tracerl.config.schema import load_config
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.envs.support_desk import chat, generate
from tracerl.envs.support_desk.fixture import fixture_params
from tracerl.envs.support_desk.truth import mc_truth
from tracerl.export.run import export_dataset
from tracerl.feature_maps import critic_features, train_features
from tracerl.io.fileio import read_table
from tracerl.report.learning import cloned
from tracerl.rl.artifact import dumps_policy, policy_from_dict
from tracerl.rl.credit import credit_weights
from tracerl.rl.encoding import encoder_for
from tracerl.rl.learners import fit_learners, swirl_inputs

PARAMS = Path(__file__).resolve().parent.parent / "pipelines" / "support_desk" / "params.yaml"


@pytest.fixture(scope="module")
def desk(tmp_path_factory):
    """A small support-desk log (400 conversations of the scripted logger, a seed not in
    params) the pipeline's way: chat JSONL -> ingest -> relabel; the pipeline's train
    section with both SWiRL learners, fitted."""
    tmp = tmp_path_factory.mktemp("desk")
    params = load_config(PARAMS)
    fp = fixture_params(params)
    path = chat.write_jsonl(generate(fp, n=400, seed=31337), tmp / "logs.jsonl",
                            behavior_policy=fp.behavior.name, gamma=params.gamma)
    assert ingest([path], tmp / "ingested", fmt="openai-chat").quarantined == 0
    steps = relabel(read_table(tmp / "ingested" / "steps"), params.relabel.verifiers,
                    params.relabel.weights)
    train = params.train.model_copy(update={"learners": ["bc", "filtered_bc",
                                                         "advantage_weighted_bc"]})
    encoder = encoder_for([steps], train.encoder, **train.encoder_params)
    tr = encoder.transitions(steps)
    filters = params.relabel.filters
    swirl = swirl_inputs(steps, tr, train, sft=params.export.sft,
                         weighting=params.export.weighting, process=filters.process,
                         outcome=filters.outcome,
                         critic_features=critic_features(params.ope, train, encoder),
                         ope=params.ope, gamma=params.gamma)
    policies = fit_learners(tr, train_features(train, encoder), train, params.gamma, **swirl)
    return {"params": params, "steps": steps, "tr": tr, "swirl": swirl,
            "policies": policies, "tmp": tmp}


def test_filtered_bc_clones_the_steps_the_sft_export_trains_on(desk):
    params, steps, swirl = desk["params"], desk["steps"], desk["swirl"]
    config = params.export.model_copy(update={"formats": ["sft_openai"]})
    manifest = export_dataset(steps, desk["tmp"] / "export", config,
                              process=params.relabel.filters.process,
                              outcome=params.relabel.filters.outcome)
    trained = sum(manifest["exports"]["sft"]["trained_messages"].values())
    # One step per assistant message on the support desk: the export's trained messages
    # are the steps filtered BC clones.
    assert int(np.sum(swirl["sft_weight"] > 0)) == trained > 0
    assert np.sum(swirl["sft_weight"] > 0) < desk["tr"].n  # the filter drops steps
    recipe = desk["policies"]["filtered_bc"].recipe_
    assert recipe["steps_cloned"] == trained
    assert recipe["selection"]["episodes"] == params.export.sft.episodes


def test_filtered_bc_beats_the_logger_in_truth(desk):
    params = desk["params"]
    fp = fixture_params(params)
    truth = {name: mc_truth(policy, gamma=params.gamma, n=20_000, seed=4711,
                            params=fp.env)
             for name, policy in (("logger", fp.behavior),
                                  ("filtered_bc", desk["policies"]["filtered_bc"]))}
    gap = truth["filtered_bc"]["value"] - truth["logger"]["value"]
    se = np.hypot(truth["filtered_bc"]["se"], truth["logger"]["se"])
    assert gap > 0.2 and gap > 4 * se, truth


def test_advantage_weighted_bc_clones_by_the_weighted_export_weights(desk):
    swirl, tr = desk["swirl"], desk["tr"]
    w = swirl["weighting"]
    weights = credit_weights(swirl["credit"], w.rule, w.beta, w.max_weight)
    assert weights.shape == (tr.n,) and weights.max() <= w.max_weight
    assert weights.std() > 0  # the advantage moves the weights
    policy = desk["policies"]["advantage_weighted_bc"]
    assert policy.recipe_["weighting"] == w.dump()
    states = tr.rows
    assert not np.allclose(policy.action_probs(states),
                           desk["policies"]["bc"].action_probs(states))


@pytest.mark.parametrize("learner", ["filtered_bc", "advantage_weighted_bc"])
def test_a_swirl_policy_is_an_artifact_with_its_recipe(desk, learner):
    policy, tr = desk["policies"][learner], desk["tr"]
    data = dumps_policy(policy, tr.data_hash())
    saved = orjson.loads(data)
    assert saved["recipe"]["learner"] == learner
    assert saved["data_hash"] == tr.data_hash() and saved["code_version"]["tracerl"]
    loaded = policy_from_dict(saved)
    np.testing.assert_array_equal(loaded.action_probs(tr.rows), policy.action_probs(tr.rows))
    assert dumps_policy(loaded, tr.data_hash()) == data
    # the report's train table says what it cloned
    assert ("SFT export" if learner == "filtered_bc" else "advantage") in cloned(
        loaded.recipe_)


def test_a_swirl_learner_without_its_inputs_says_what_it_needs(desk):
    tr, params = desk["tr"], desk["params"]
    train = params.train.model_copy(update={"learners": ["filtered_bc"]})
    features = train_features(train, tr.encoder)
    with pytest.raises(ValueError, match="SFT weight"):
        fit_learners(tr, features, train, params.gamma)
    with pytest.raises(ValueError, match="weight 0"):
        fit_learners(tr, features, train, params.gamma, sft_weight=np.zeros(tr.n))


def test_the_sft_weight_of_a_parallel_turn_is_its_worst_call(tmp_path):
    # tau2 logs whose answers are known (tests.test_export), and a success whose parallel
    # turn has one erring call: the message fails the process check, both its rows weigh 0
    # (the export trains on whole messages, filtered BC on their rows).
    from tests.test_export import (
        OUTCOME,
        PROCESS,
        SIMS,
        TAU2_VERIFIERS,
        TAU2_WEIGHTS,
        _a,
        _call,
        _sim,
        _tool,
        _u,
        config,
        labelled_table,
        tau2_file,
    )
    from tracerl.config.export import SftExport
    from tracerl.export.select import sft_weights

    sims = [*SIMS, _sim("s7", "t4", 1.0, [
        _u("Two things."), _a(None, _call("c1", "get_user", user_id="u1"),
                              _call("c2", "get_flights", date="bad")),
        _tool("c1", '{"name": "Ann"}'), _tool("c2", "Error: bad date", error=True),
        _a(None, _call("c3", "get_flights", date="2024-05-01")), _tool("c3", "[1]"),
        _a("Done.")])]
    steps = labelled_table(tmp_path, tau2_file(tmp_path / "r.json", sims), "tau2",
                           TAU2_VERIFIERS, TAU2_WEIGHTS)
    w = sft_weights(steps, SftExport(), PROCESS, OUTCOME)
    episode = np.asarray(steps.column("episode_id").to_pylist())
    t = steps.column("t").to_numpy()
    s7 = w[episode == "s7"][np.argsort(t[episode == "s7"])]
    assert s7.tolist() == [0.0, 0.0, 1.0, 1.0]  # the parallel turn, then two good messages
    manifest = export_dataset(steps, tmp_path / "export", config(
        split_method="shuffle", splits={"train": 0.5, "test": 0.5}, formats=["sft"]),
        process=PROCESS, outcome=OUTCOME)
    turn = steps.column("turn").to_pylist()
    trained_turns = {(e, tn if tn is not None else -i)
                     for i, (e, tn) in enumerate(zip(episode, turn, strict=True)) if w[i] > 0}
    assert len(trained_turns) == sum(manifest["exports"]["sft"]["trained_messages"].values())
