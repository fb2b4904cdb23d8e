"""params.yaml is checked before any work: every mistake is one line naming the key and
the file, exit status 2, and nothing is written."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.config.schema import ParamsError, validate_params

PARAMS = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())


def test_the_project_params_are_valid():
    validate_params(PARAMS)


def test_the_tau2_pipeline_params_are_valid():
    path = Path(__file__).parents[1] / "pipelines" / "tau2" / "params.yaml"
    validate_params(yaml.safe_load(path.read_text()), path)


SUPPORT_DESK = Path(__file__).parents[1] / "pipelines" / "support_desk" / "params.yaml"


@pytest.mark.parametrize("mutate, fragment", [
    (lambda p: None, None),
    (lambda p: p.update(fixture="support_dsk"), "fixture: unknown fixture 'support_dsk' "
                                                "(did you mean 'support_desk'?)"),
    (lambda p: p["datasets"]["scripted"].update(fixture="calculater"),
     "datasets.scripted.fixture: unknown fixture 'calculater'"),
    (lambda p: p["support_desk"]["behavior"].update(p_scrpt=0.5),
     "unknown key support_desk.behavior.p_scrpt (did you mean 'p_script'?)"),
    (lambda p: p["support_desk"]["env"].update(p_answer=1.5), "support_desk.env.p_answer"),
    (lambda p: p["support_desk"]["env"].update(intent_probs=[0.5, 0.5, 0.5, 0.5]),
     "intent_probs: must sum to 1"),
    (lambda p: p["support_desk"].update(episodes=0), "support_desk.episodes"),
])
def test_the_support_desk_pipeline_params(mutate, fragment):
    params = yaml.safe_load(SUPPORT_DESK.read_text())
    mutate(params)
    if fragment is None:
        validate_params(params, SUPPORT_DESK)
        return
    with pytest.raises(ParamsError, match=re.escape(fragment)):
        validate_params(params, SUPPORT_DESK)


@pytest.mark.parametrize("mutate, fragment", [
    (lambda p: p["datasets"]["gpt-4.1"].update(fromat="tau2"), "datasets.gpt-4.1.fromat"),
    (lambda p: p["datasets"]["gpt-4.1"].update(format="csv"), "datasets.gpt-4.1.format"),
    (lambda p: p["coverage"]["cross_agent"][0].update(reference="gpt-5"), "gpt-5"),
    (lambda p: p["validate"].update(hallucinated_tools="ignore"), "hallucinated_tools"),
    (lambda p: p["ingest"].update(strict="no"), "ingest.strict"),
    # the train / ope / report sections (one vocabulary for every pipeline)
    (lambda p: p["train"].update(learners=["bc", "dqn"]), "train.learners.1"),
    (lambda p: p["train"].update(nbits=3), "unknown key train.nbits"),
    (lambda p: p["train"]["heldout"].update(n_folds=1), "train.heldout.n_folds"),
    (lambda p: p["train"]["constrained_fqi"].update(min_behavior_prob=2.0),
     "train.constrained_fqi.min_behavior_prob"),
    (lambda p: p["train"].update(fqi_constrained={}), "unknown key train.fqi_constrained"),
    (lambda p: p["train"]["features"].update(kind="tabular"), "train.features.kind"),
    (lambda p: p["ope"].update(headline="critic/lstdq"), "ope.headline"),
    (lambda p: p["ope"].update(datasets="gpt-4.1"), "ope.datasets"),
    (lambda p: p["ope"]["replay"].update(max_steps=0) if "replay" in p["ope"]
     else p["ope"].update(replay={"max_steps": 0}), "ope.replay.max_steps"),
    (lambda p: p["report"].update(kind="pdf"), "report.kind"),
])
def test_a_logs_pipeline_mistake_names_the_key(mutate, fragment):
    path = Path(__file__).parents[1] / "pipelines" / "tau2" / "params.yaml"
    params = yaml.safe_load(path.read_text())
    mutate(params)
    with pytest.raises(ParamsError, match=fragment.replace(".", r"\.")):
        validate_params(params, path)


def _rename(section: str, old: str, new: str):
    def mutate(p):
        node = p[section] if section else p
        node[new] = node.pop(old)
    return mutate


def _set(path: str, value):
    def mutate(p):
        *parents, last = path.split(".")
        node = p
        for k in parents:
            node = node[k]
        node[last] = value
    return mutate


def _drop(key: str):
    return lambda p: p.pop(key)


# (mistake, the key the one line must name, a fragment of it)
MISTAKES = [
    (_rename("calculator", "datasets", "dataset"), "calculator.dataset", "did you mean 'datasets'"),
    (_set("ingest.max_bad_fracton", 0.1), "ingest.max_bad_fracton",
     "did you mean 'max_bad_fraction'"),
    (_set("calculator.episodes", "many"), "calculator.episodes", "valid integer, got 'many'"),
    (_drop("ope"), "ope", "missing section ope"),
    (_drop("paths"), "paths", "missing section paths"),
    (_set("ope.split", "bogus"), "ope.split", "got 'bogus'"),
    (_rename("", "gamma", "gama"), "gama", "did you mean 'gamma'"),
    (_set("gamma", 1.5), "gamma", "less than or equal to 1"),
    (_set("calculator.behavior.good_coverage.op", 1.2), "calculator.behavior.good_coverage.op",
     "less than or equal to 1"),
    (_set("calculator.behavior.good_coverge", {"op": 0.5}), "calculator.behavior.good_coverge",
     "did you mean 'good_coverage'"),
    (_set("calculator.behavior.no_mul_support.ops", ["add", "div"]),
     "calculator.behavior.no_mul_support.ops", "got 'div'"),
    (_set("train.tie_break", "first"), "train.tie_break", "got 'first'"),
    (_set("ope.headline", "critc/fqe"), "ope.headline", "critc/fqe"),
    (_set("ope.n_boot", 0), "ope.n_boot", "greater than 0"),
    (_set("table.mc_episodes", True), "table.mc_episodes", "valid integer"),
    (_set("coverage.featurizer", "calculatr"), "coverage.featurizer", "did you mean 'calculator'"),
    (_set("relabel.verifiers", ["format_valid@2"]), "relabel.verifiers", "format_valid@1"),
    (_set("ingest.redact.disable", ["emails"]), "ingest.redact.disable", "did you mean 'email'"),
    (_set("validate.reward_min", 2.0), "validate", "reward_min 2.0 > reward_max"),
]


@pytest.mark.parametrize("mutate,key,fragment", MISTAKES,
                         ids=[m[1] + ":" + m[2][:20] for m in MISTAKES])
def test_each_mistake_is_one_line_naming_the_key(mutate, key, fragment):
    params = copy.deepcopy(PARAMS)
    mutate(params)
    with pytest.raises(ParamsError) as caught:
        validate_params(params, "params.yaml")
    lines = str(caught.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("params.yaml: ")
    assert key in lines[0] and fragment in lines[0], lines[0]


@pytest.mark.parametrize("stage", ["train", "ingest", "ope"])
def test_a_stage_refuses_bad_params_before_touching_anything(tmp_path, monkeypatch, stage):
    params = copy.deepcopy(PARAMS)
    params["calculator"]["dataset"] = params["calculator"].pop("datasets")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", stage])
    assert result.exit_code == 2
    assert "params.yaml: unknown key calculator.dataset (did you mean 'datasets'?)" \
        in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_ingest_checks_its_params_file(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("")
    runner = CliRunner()
    missing = runner.invoke(app, ["ingest", str(src), "--out", str(tmp_path / "o"),
                                  "--params", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "nope.yaml: no such params file" in missing.output
    typo = tmp_path / "p.yaml"
    typo.write_text("ingest:\n  max_bad_fracton: 0.5\n")
    bad = runner.invoke(app, ["ingest", str(src), "--out", str(tmp_path / "o"),
                              "--params", str(typo)])
    assert bad.exit_code == 2
    assert "unknown key ingest.max_bad_fracton (did you mean 'max_bad_fraction'?)" in bad.output
    assert not (tmp_path / "o").exists()
    broken = tmp_path / "b.yaml"
    broken.write_text("ingest: [unclosed\n")
    assert runner.invoke(app, ["ingest", str(src), "--out", str(tmp_path / "o"),
                               "--params", str(broken)]).exit_code == 2
