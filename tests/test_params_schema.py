"""params.yaml is checked before any work: every mistake is one line naming the key and
the file (with "did you mean" in every section), exit status 2, and nothing is written;
every key has its default in the model, so a params file states only what differs."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.config.schema import Params, ParamsError, validate_params

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
    (lambda p: p["train"]["features"].update(nbits=3),
     "unknown key train.features.nbits (did you mean 'n_bits'?)"),
    (lambda p: p["train"].update(encoder="dialog"), "train.encoder: unknown state encoder "
                                                    "'dialog' (did you mean 'dialogue'?)"),
    (lambda p: p["train"].update(datasets=["gpt-4.2"]), "train.datasets: 'gpt-4.2' is not "
                                                        "one of datasets"),
    (lambda p: p["ope"].update(layer=["replay"]), "unknown key ope.layer (did you mean "
                                                  "'layers'?)"),
    (lambda p: p["datasets"]["gpt-4.1"].update(format="tua2"), "unknown format 'tua2' "
                                                               "(did you mean 'tau2'?)"),
    (lambda p: p.update(support_desk={}), "unknown key support_desk (the support_desk "
                                          "fixture's section"),
    (lambda p: p["coverage"].update(featurizer="calculator"), "coverage.featurizer: "
     "'calculator' is the calculator fixture's, which these params do not name"),
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
    with pytest.raises(ParamsError, match=re.escape(fragment)):
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


def test_a_params_file_states_only_what_differs():
    # Nothing at all: every section at its defaults, defined once, in the model.
    empty = validate_params({})
    assert empty.dump() == Params().dump()
    assert (empty.relabel.verifiers, empty.coverage.featurizer) == (["tau2_outcome@1"],
                                                                    "dialogue")
    # A pipeline on one's own logs: just where they are.
    mine = validate_params({"datasets": {"mine": {"inputs": ["logs/a.json"]}}})
    assert mine.dataset_names() == ["mine"] and mine.dataset("mine").format == "auto"
    assert mine.paths.ingested == Path("data/ingested") and mine.gamma == 1.0
    # A fixture's section takes its defaults too; only what has none must be stated.
    calc = validate_params({"fixture": "calculator", "calculator": {"datasets": ["a"]}})
    assert (calc.calculator.episodes, calc.calculator.behavior_of("a").op) == (3000, 0.62)
    with pytest.raises(ParamsError, match="missing section calculator"):
        validate_params({"fixture": "calculator"})
    desk = validate_params({"fixture": "support_desk"})
    assert desk.support_desk.truth.episodes == 200_000


def test_the_defaults_the_library_restates_agree_with_the_model():
    # The simulators' and ingest's own dataclass defaults (for notebook use) are the model's.
    from tracerl.config.data import Ingest
    from tracerl.config.options import ingest_options
    from tracerl.data.ingest.limits import Limits
    from tracerl.data.redact import Redactor
    from tracerl.envs.calculator.behavior import BehaviorSpec
    from tracerl.envs.calculator.fixture import behavior_spec
    from tracerl.envs.calculator.params import Behavior
    from tracerl.envs.support_desk import FixtureParams
    from tracerl.envs.support_desk.params import SupportDesk
    from tracerl.envs.support_desk.sim import ScriptedPolicy, SupportDeskParams

    assert behavior_spec(Behavior()) == BehaviorSpec()
    assert FixtureParams.of(SupportDesk()) == FixtureParams(SupportDeskParams(),
                                                            ScriptedPolicy())
    options = ingest_options(Ingest())
    assert options["limits"] == Limits() and options["redactor"] == Redactor()


def test_a_stage_needs_the_sections_it_reads():
    params = copy.deepcopy(PARAMS)
    params.pop("ope")
    validate_params(params)  # a pipeline may have no ope stage
    with pytest.raises(ParamsError, match="^params.yaml: missing section ope$"):
        validate_params(params, needs=("ope", "gamma"))


ONE_PER_SECTION = [
    ("gamma", lambda p: p.update(gama=0.9), "unknown key gama (did you mean 'gamma'?)"),
    ("calculator", lambda p: p["calculator"].update(episode=5),
     "unknown key calculator.episode (did you mean 'episodes'?)"),
    ("ingest", lambda p: p["ingest"].update(batch_line=5),
     "unknown key ingest.batch_line (did you mean 'batch_lines'?)"),
    ("ingest.redact", lambda p: p["ingest"]["redact"].update(enabeld=False),
     "unknown key ingest.redact.enabeld (did you mean 'enabled'?)"),
    ("validate", lambda p: p["validate"].update(reward_mx=1),
     "unknown key validate.reward_mx (did you mean 'reward_max'?)"),
    ("paths", lambda p: p["paths"].update(ingestd="x"),
     "unknown key paths.ingestd (did you mean 'ingested'?)"),
    ("relabel", lambda p: p["relabel"].update(verifiers=["calculator_exakt@1"]),
     "relabel.verifiers: unknown verifier 'calculator_exakt@1' (did you mean "
     "'calculator_exact@1'?)"),
    ("coverage", lambda p: p["coverage"].update(featurizer="calculater"),
     "coverage.featurizer: unknown state encoder 'calculater' (did you mean 'calculator'?)"),
    ("runtime", lambda p: p["runtime"].update(task_runner="daks"),
     "runtime.task_runner: input should be 'sequential' or 'dask', got 'daks' (did you mean "
     "'dask'?)"),
    ("nightly", lambda p: p["nightly"].update(dataset="good_coverag"),
     "nightly.dataset: 'good_coverag' is not one of datasets ['good_coverage', "
     "'no_mul_support'] (did you mean 'good_coverage'?)"),
    ("train", lambda p: p["train"].update(tie_brake="random"),
     "unknown key train.tie_brake (did you mean 'tie_break'?)"),
    ("table", lambda p: p["table"].update(mc_episode=5),
     "unknown key table.mc_episode (did you mean 'mc_episodes'?)"),
    ("ope", lambda p: p["ope"]["replay"].update(max_step=5),
     "unknown key ope.replay.max_step (did you mean 'max_steps'?)"),
    ("fixture", lambda p: p.update(fixture="calculater"),
     "fixture: unknown fixture 'calculater' (did you mean 'calculator'?)"),
    ("train.features", lambda p: p["train"]["features"].update(nbits=8),
     "unknown key train.features.nbits (did you mean 'n_bits'?)"),
    ("train.encoder", lambda p: p["train"].update(encoder="calculatr"),
     "train.encoder: unknown state encoder 'calculatr' (did you mean 'calculator'?)"),
    ("ope.critic", lambda p: p["ope"]["critic"].update(iteration=5),
     "unknown key ope.critic.iteration (did you mean 'iterations'?)"),
    ("ope.headline", lambda p: p["ope"].update(headline="critic/fq"),
     "ope.headline: expected one of"),
    ("report", lambda p: p.update(report={"titel": "x"}),
     "unknown key report.titel (did you mean 'title'?)"),
    ("compare", lambda p: p.update(compare={"n_bot": 5}),
     "unknown key compare.n_bot (did you mean 'n_boot'?)"),
]


@pytest.mark.parametrize("section, mutate, line", ONE_PER_SECTION,
                         ids=[m[0] for m in ONE_PER_SECTION])
def test_a_mistake_in_any_section_exits_2_with_one_line(tmp_path, monkeypatch, section,
                                                        mutate, line):
    params = copy.deepcopy(PARAMS)
    mutate(params)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "ingest"])
    assert result.exit_code == 2
    errors = [x for x in result.output.splitlines() if x.startswith("error: params.yaml")]
    assert len(errors) == 1 and errors[0].startswith(f"error: params.yaml: {line}"), \
        result.output


def test_a_stage_whose_section_is_missing_exits_2(tmp_path, monkeypatch):
    # The sections a stage reads are its `params:` in the dvc.yaml beside the params file.
    params = copy.deepcopy(PARAMS)
    params.pop("ope")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "dvc.yaml").write_text((Path(__file__).parents[1] / "dvc.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "ope"])
    assert result.exit_code == 2 and "params.yaml: missing section ope" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dvc.yaml", "params.yaml"]


@pytest.mark.integration
def test_the_dataset_formats_are_the_registry_s_and_checking_them_imports_no_reader():
    """A dataset's format is checked against the registry (tracerl.config.formats), by
    name: no reader is imported to check params."""
    import subprocess
    import sys

    code = ("import sys; from tracerl.config.data import Dataset; "
            "Dataset(format='tau2'); Dataset(format='mine.fmt:FORMAT'); "
            "print(any(m.endswith('.read') and m.startswith('tracerl.data.formats') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_no_flow_or_task_reads_params_by_key():
    # Past the boundary (flows._stage.stage_params) every stage reads the typed model:
    # no raw mapping, no second default (`get(params, key, default)`), no re-validation.
    import ast

    root = Path(__file__).parents[1]
    offenders = []
    for file in sorted([*root.glob("flows/*.py"), *root.glob("flows/_runtime/*.py"),
                        *root.glob("tasks/*.py")]):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("params", "config"):
                offenders.append(f"{file.name}:{node.lineno} {node.value.id}[...]")
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if name == "model_validate" or (name == "get" and node.args and isinstance(
                        node.args[0], ast.Name) and node.args[0].id in ("params", "config")):
                    offenders.append(f"{file.name}:{node.lineno} {name}(...)")
    assert not offenders, offenders


def test_a_section_is_a_model_not_a_mapping():
    from collections.abc import Mapping

    config = validate_params(copy.deepcopy(PARAMS))
    assert not isinstance(config, Mapping) and not isinstance(config.ope, Mapping)
    assert config.ope.critic.iterations == 1000 and config.train.encoder == "calculator"
