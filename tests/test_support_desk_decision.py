"""Issue 31's acceptance on the default support-desk run, at library level: the pipeline's
log (params' size and seed: 3,000 conversations of the scripted logger from seed
20261130) the pipeline's way (chat JSONL -> ingest -> relabel), its train section (every
learner, the SWiRL clones among them) and its ope section (critic and importance layers,
the headline critic/fqe): the answer is "deploy filtered_bc", its interval covering
filtered_bc's Monte Carlo truth, which the test computes. The pick is the highest lower
bound among the unblocked candidates (`tracerl.ope.select`); support is the candidate's
effective episodes per task (`tracerl.ope.support`).

On other seeds at 3,000 the pick is filtered_bc or advantage_weighted_bc (truly better by
about 0.02), whichever the data bound tighter; at 1,000 conversations neither clone has
its effective episodes per task (support 0.7-0.9) and the answer is the logged agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracerl.config.schema import load_config
from tracerl.data.ingest import ingest
from tracerl.data.relabel import relabel
from tracerl.envs.support_desk import chat, generate
from tracerl.envs.support_desk.fixture import fixture_params
from tracerl.envs.support_desk.truth import mc_truth
from tracerl.feature_maps import critic_features, train_features
from tracerl.io.fileio import read_table
from tracerl.ope.evaluate import LoggedData, Settings, evaluate_candidates, logged_value
from tracerl.ope.records import record
from tracerl.ope.select import select
from tracerl.report.answer import DEPLOY, answers
from tracerl.rl.encoding import encoder_for
from tracerl.rl.learners import behavior_model, fit_learners, swirl_inputs

# Minutes of in-process fitting (3,000 conversations, every learner, both OPE layers): out
# of the unit loop (make test-fast), in make test; one xdist worker for both tests, so the
# module's fixture is fitted once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("support_desk_decision")]

PARAMS = Path(__file__).resolve().parent.parent / "pipelines" / "support_desk" / "params.yaml"
EPISODES, SEED = 3000, 20261130  # the default run: support_desk.episodes and .seed


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decision")
    params = load_config(PARAMS)
    fp = fixture_params(params)
    path = chat.write_jsonl(generate(fp, n=EPISODES, seed=SEED), tmp / "logs.jsonl",
                            behavior_policy=fp.behavior.name, gamma=params.gamma)
    assert ingest([path], tmp / "ingested", fmt="openai-chat", workers=1,
                  strict=False).quarantined == 0
    steps = relabel(read_table(tmp / "ingested" / "steps"), params.relabel.verifiers,
                    params.relabel.weights)
    train, ope = params.train, params.ope
    encoder = encoder_for([steps], train.encoder, **train.encoder_params)
    tr = encoder.transitions(steps)
    features = critic_features(ope, train, encoder)
    filters = params.relabel.filters
    swirl = swirl_inputs(steps, tr, train, sft=params.export.sft,
                         weighting=params.export.weighting, process=filters.process,
                         outcome=filters.outcome, critic_features=features, ope=ope,
                         gamma=params.gamma)
    policies = fit_learners(tr, train_features(train, encoder), train, params.gamma, **swirl)
    settings = Settings.of(ope.model_copy(update={"layers": ["critic", "importance"]}),
                           gamma=params.gamma, verifiers=[], weights={},
                           n_episodes=tr.n_episodes)
    # the ope stage's behaviour model: the train stage's logistic bc over the same features
    bc = policies["bc"]
    behavior = bc if bc.features == features else behavior_model(
        tr, features, C=train.bc.C, max_iter=train.bc.max_iter, seed=train.seed)
    data = LoggedData.prepare(tr, features, behavior, settings, ope.seed)
    candidates = {"behavior": fp.behavior, **policies}
    estimates = evaluate_candidates(data, candidates, settings, ope.seed)
    records = [record("scripted", name, e, None) for name, es in estimates.items()
               for e in es]
    logged = {"scripted": logged_value(tr, gamma=params.gamma, seed=ope.seed,
                                       n_boot=ope.n_boot, level=ope.confidence).to_dict()}
    found = answers(records, select(records, ope.min_support), logged, ope.headline,
                    ope.min_support)[0]
    return {"answer": found, "policies": policies, "params": params, "records": records}


def test_the_support_desk_answer_deploys_filtered_bc_covering_its_truth(decided):
    found, params = decided["answer"], decided["params"]
    assert (found.decision, found.candidate) == (DEPLOY, "filtered_bc"), found.line()
    truth = mc_truth(decided["policies"]["filtered_bc"], gamma=params.gamma, n=20_000,
                     seed=4712, params=fixture_params(params).env)
    assert truth["se"] < 0.005
    assert found.ci_low <= truth["value"] <= found.ci_high, (found.line(), truth)
    assert found.ci_low > found.logged_high  # deploy: the intervals do not overlap


def test_the_swirl_clones_are_supported_and_the_logger_fully(decided):
    heads = {r["policy"]: r for r in decided["records"]
             if (r["layer"], r["estimator"]) == ("critic", "fqe")}
    for name in ("behavior", "filtered_bc", "advantage_weighted_bc"):
        flags = " ".join(heads[name]["flags"])
        assert heads[name]["support"] >= 0.95, (name, heads[name]["support"])
        assert "unsupported_actions" not in flags and "low_support" not in flags, name
    # support counts effective episodes: the logger's own play rests on all of them
    assert heads["behavior"]["support"] == 1.0
