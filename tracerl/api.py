"""The notebook API: the few entry points `import tracerl` gives (loaded on first use).

    logs = tracerl.read_logs("results.json")           # any format `tracerl ingest` reads
    tracerl.validate(logs, reward_min=0, reward_max=1)  # the Great Expectations suite
    labelled = tracerl.relabel(logs, ["tau2_outcome@1"], {"task_success": 1.0})
    tracerl.coverage(labelled, "dialogue")              # needs a reward on every row
    tracerl.compare({"a": labelled_a, "b": labelled_b}) # agents on the tasks they share
    tracerl.evaluate(labelled_a, {"a": labelled_a, "b": labelled_b})  # OPE of learnt policies

Every function takes a step table as a `Logs`, a `pyarrow.Table`, or the path of a
Parquet steps folder (a pipeline's `data/.../labelled/<dataset>/steps`), and returns a
result with `to_pandas()`. These are the pipeline stages' own library calls, without
Prefect or DVC; settings a function does not take are the params model's defaults.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tracerl.data.compare import Comparison
    from tracerl.data.coverage import CoverageReport
    from tracerl.data.validation import ValidationReport

__all__ = ["Evaluation", "Logs", "compare", "coverage", "evaluate", "read_logs", "relabel",
           "validate"]


@dataclass(frozen=True, eq=False)
class Logs:
    """Logs read into a step table (`tracerl.data.schema`: one row per agent action).

    steps: the table; quarantine: each rejected record with its source file, record
    number, field and reason; summary: read, accepted, quarantined, episodes, formats
    (``read == accepted + quarantined``)."""

    steps: pa.Table
    quarantine: list[dict[str, Any]]
    summary: dict[str, Any]

    @property
    def episodes(self) -> int:
        return int(self.summary["episodes"])

    def to_pandas(self) -> pd.DataFrame:
        """The step table as a DataFrame (nested fields as dicts, JSON fields as text)."""
        return self.steps.to_pandas()

    def __repr__(self) -> str:
        s = self.summary
        return (f"Logs({self.steps.num_rows} steps, {s['episodes']} episodes; read "
                f"{s['read']}, accepted {s['accepted']}, quarantined {s['quarantined']})")


def read_logs(*paths: str | Path, format: str = "auto", strict: bool = False,
              redact: bool = True, out: str | Path | None = None) -> Logs:
    """Read log files or folders into a step table, as `tracerl ingest` does.

    format: "auto" (each file detected), "jsonl" (native steps), "tau2" (tau2-bench
    results), "openai-chat" (chat-completions conversations). Bad records are quarantined
    (see `Logs.quarantine`), never raised; unreadable input raises
    `tracerl.data.ingest.InputError`. strict: a field the step schema does not name rejects
    its record instead of being kept under `extra`. redact: secrets and personal data
    become placeholders (`tracerl.data.redact`). out: also keep the Parquet dataset there
    (`out/steps/`, `quarantine.jsonl`, `ingest_summary.json`); by default a temporary
    folder is used and removed."""
    import orjson

    from tracerl.data.ingest import ingest
    from tracerl.data.redact import Redactor
    from tracerl.io.fileio import read_table

    if not paths:
        raise ValueError("read_logs needs at least one file or folder")
    with tempfile.TemporaryDirectory(prefix="tracerl-logs-") as tmp:
        folder = Path(out) if out is not None else Path(tmp)
        summary = ingest(list(paths), folder, max_bad_fraction=1.0, fmt=format, strict=strict,
                         redactor=Redactor(enabled=redact))
        steps = read_table(folder / "steps")
        lines = (folder / "quarantine.jsonl").read_bytes().splitlines()
    return Logs(steps, [orjson.loads(line) for line in lines if line.strip()],
                summary.to_dict())


def _steps(steps: Logs | pa.Table | str | Path, columns: Sequence[str] | None = None
           ) -> pa.Table:
    """A step table from a `Logs`, a table, or a Parquet steps folder."""
    import pyarrow as pa

    if isinstance(steps, Logs):
        return steps.steps
    if isinstance(steps, pa.Table):
        return steps
    if isinstance(steps, str | Path):
        from tracerl.io.fileio import read_table

        return read_table(Path(steps), columns)
    raise TypeError(f"expected Logs, a pyarrow.Table or a steps folder, got "
                    f"{type(steps).__name__}")


def validate(steps: Logs | pa.Table | str | Path, *, reward_min: float, reward_max: float,
             tools: list[str] | None = None, hallucinated_tools: str = "count"
             ) -> ValidationReport:
    """Run the validate stage's Great Expectations suite over a step table.

    reward_min, reward_max: the range every reward must lie in. tools: the tools an agent
    may call (None: any it was offered). hallucinated_tools: "count" (a call to a tool not
    offered is counted as a warning) or "fail". The report's `success` is the verdict,
    `failure_message()` names the failed expectations and a few offending rows, and
    `to_pandas()` has one row per expectation. (Great Expectations loads on first call:
    a few seconds.)"""
    from tracerl.data.validation import validate_steps

    return validate_steps(_steps(steps), float(reward_min), float(reward_max), tools=tools,
                          hallucinated_tools=hallucinated_tools)


def relabel(steps: Logs | pa.Table | str | Path, verifiers: Sequence[str],
            weights: Mapping[str, float]) -> pa.Table:
    """Recompute every row's reward with versioned verifiers (the relabel stage).

    verifiers: registered ids such as "tau2_outcome@1", "tau2_action_match@1",
    "tool_error_penalty@1", "format_valid@1", "cost_penalty@1", or a fixture's such as
    "calculator_exact@1" (found by name). weights: per reward component, e.g.
    {"task_success": 1.0}: reward = sum of weight x component. The logged reward is kept
    in `reward_logged`. Returns the labelled step table (`.to_pandas()`)."""
    from tracerl.data.relabel import relabel as relabel_steps

    return relabel_steps(_steps(steps), list(verifiers), dict(weights))


def coverage(steps: Logs | pa.Table | str | Path, featurizer: str = "dialogue",
             **featurizer_params: Any) -> CoverageReport:
    """Which (state, action) pairs the logs support: N(s), N(s, a), the behaviour policy
    estimated from counts, valid actions never logged, coverage by task.

    Relabel first: coverage builds the logged transitions (state, action, reward, next
    state) the learners use, and a reward must be known on every row; real logs carry one
    on the episode's last row only, `relabel` gives every row its verified reward.
    featurizer: a state encoder by name (tracerl.rl.encoding): "dialogue" (tau2, OpenAI
    chat; params: parts, max_calls) or a fixture's, such as "calculator". `to_pandas()`:
    one row per (state, action) logged or valid; `to_markdown()`, `plot(path)` as the stage
    writes them."""
    from tracerl.data.coverage import coverage_report
    from tracerl.rl.encoding import policy_view

    table = _labelled(_steps(steps), "coverage")
    return coverage_report(policy_view(table, featurizer, featurizer_params))


def compare(agents: Mapping[str, Logs | pa.Table | str | Path],
            pairs: str | Sequence[tuple[str, str]] = "all", **settings: Any) -> Comparison:
    """Logged agents compared on the tasks they share (the compare stage).

    agents: name -> step table (labelled, or as read: the value is the episode's summed
    reward). pairs: "all" (each agent against every earlier one, the earlier the baseline)
    or (agent, baseline) pairs. settings: any key of the params section `compare`
    (tracerl.config.schema.Compare: value, success_threshold, confidence, n_boot, seed,
    max_k, min_tasks, exclude_terminations), defaults as there.

    Returns a `Comparison`: `to_pandas()` has one row per pair (the paired difference
    agent minus baseline, its bootstrap interval over tasks, the exact test's p-value);
    `.pairs[i].to_pandas()` one row per common task; `.leaderboard.to_pandas()` one row per
    agent; `.pairs[i].disagreements()` the tasks where they disagree."""
    from tracerl.config.schema import Compare
    from tracerl.data.compare import COLUMNS, agent_episodes, compare_datasets

    config = Compare.model_validate({**settings, "pairs": "all"}).model_dump()
    config.pop("pairs")
    value, excluded = config.pop("value"), config.pop("exclude_terminations")
    episodes = [agent_episodes(_steps(steps, COLUMNS), name, value=value,
                               exclude_terminations=excluded)
                for name, steps in agents.items()]
    return compare_datasets(episodes, pairs if pairs == "all" else [tuple(p) for p in pairs],
                            **config)


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Off-policy estimates of candidate policies on one logged dataset (the ope stage's).

    records: one dict per (candidate, layer/estimator) as in the stage's
    `reports/.../ope/records.json` (value, interval, support, effective sample size, flags
    saying what an estimate lacks); logged: the logged behaviour's own value with its
    interval; headline: the estimator `ope.headline` names."""

    records: list[dict[str, Any]]
    logged: dict[str, Any]
    headline: str

    def to_pandas(self) -> pd.DataFrame:
        """One row per record: policy, trained_on, estimator (layer/name), value, ci_low,
        ci_high, support, ess, flags (joined); an estimator that does not apply has no
        value and says why in `flags`."""
        import pandas as pd

        rows = [{"policy": r["policy"], "trained_on": r["trained_on"],
                 "estimator": f"{r['layer']}/{r['estimator']}", "value": r["value"],
                 "ci_low": r["ci_low"], "ci_high": r["ci_high"], "support": r["support"],
                 "ess": r["ess"], "flags": ", ".join(r["flags"])} for r in self.records]
        return pd.DataFrame(rows, columns=["policy", "trained_on", "estimator", "value",
                                           "ci_low", "ci_high", "support", "ess", "flags"])

    def headlines(self) -> pd.DataFrame:
        """The headline estimator's row of every candidate."""
        frame = self.to_pandas()
        return frame[frame["estimator"] == self.headline].reset_index(drop=True)


def evaluate(steps: Logs | pa.Table | str | Path,
             trained_on: Mapping[str, Logs | pa.Table | str | Path] | None = None, *,
             gamma: float = 1.0, train: Mapping[str, Any] | None = None,
             filters: Mapping[str, Any] | None = None, **ope: Any) -> Evaluation:
    """Would a policy learnt from logs beat the logged agent? The ope stage on one dataset:
    the learners of `train` fitted on each of `trained_on`, evaluated on `steps` by every
    layer that applies (critic, importance sampling; replay and verifier need a fixture's
    simulator, so on real logs they say why not).

    steps: the labelled logs to evaluate on (relabel first: every row needs a reward).
    trained_on: name -> labelled logs the candidates learn from (default: `steps`
    itself); a candidate is named by its learner, prefixed `<name>/` when trained on other
    logs than `steps`. One encoding (the state encoder's vocabularies) is fitted on all of
    them, as the train stage does. gamma: the discount. train: keys of the params section
    `train` (tracerl.config.learning.Train: encoder, features, learners, bc, naive_fqi,
    constrained_fqi, seed, ...) over those of a pipeline on dialogue logs
    (`tracerl.config.learning.LOGS_TRAIN`: the dialogue encoder, hashed features; each key
    given replaces that key). filters: the reward components the SWiRL filters read
    (params relabel.filters: ``{"process": {component: good value}, "outcome":
    component}``; default: the library's), which a filtered_bc learner needs. ope: keys
    of the section `ope` (layers, headline, confidence,
    n_boot, seed, min_support, return_range, ...; `candidates={"external": {name: {...}}}`
    adds candidates from outside, scored tables or Python policies: tracerl.ope.external,
    the dataset named as `trained_on` names `steps`, else "logs"). Other defaults are the
    params models'.
    Returns an `Evaluation` (`to_pandas()`, `headlines()`)."""
    from tracerl.config.learning import LOGS_TRAIN, Ope, Train
    from tracerl.data.relabel import select_training_data
    from tracerl.feature_maps import critic_features, train_features
    from tracerl.ope.evaluate import (
        LoggedData,
        Settings,
        evaluate_candidates,
        logged_value,
        not_applicable,
    )
    from tracerl.ope.external import load_external
    from tracerl.ope.records import record
    from tracerl.rl.encoding import encoder_for
    from tracerl.rl.learners import behavior_model, fit_learners, swirl_inputs

    train_cfg = Train.model_validate({**LOGS_TRAIN, **(train or {})})
    ope_cfg = Ope.model_validate(ope)
    table = _labelled(_steps(steps), "evaluate")
    sources = {name: _labelled(_steps(s), "evaluate") for name, s in
               (trained_on or {"logs": table}).items()}
    own = [name for name, s in sources.items() if s is table]
    tables = [*sources.values(), *([] if own else [table])]
    encoder = encoder_for(tables, train_cfg.encoder, **train_cfg.encoder_params)
    features = train_features(train_cfg, encoder)
    critic = critic_features(ope_cfg, train_cfg, encoder)
    candidates, where = {}, {}
    for name in sorted(sources, key=lambda n: n not in own):  # its own learners first
        source = select_training_data(sources[name], train_cfg.data_filter)
        tr = encoder.transitions(source)
        swirl = swirl_inputs(source, tr, train_cfg, process=(filters or {}).get("process"),
                             outcome=(filters or {}).get("outcome"), critic_features=critic,
                             ope=ope_cfg, gamma=gamma)
        for learner, policy in fit_learners(tr, features, train_cfg, gamma, **swirl).items():
            key = learner if name in own else f"{name}/{learner}"
            candidates[key], where[key] = policy, name
    tr = encoder.transitions(table)
    settings = Settings.of(ope_cfg, gamma=gamma, verifiers=[], weights={},
                           n_episodes=tr.n_episodes)
    behavior = behavior_model(tr, critic, C=train_cfg.bc.C, max_iter=train_cfg.bc.max_iter,
                              seed=train_cfg.seed)
    data = LoggedData.prepare(tr, critic, behavior, settings, ope_cfg.seed)
    dataset = own[0] if own else "logs"
    outside = load_external(ope_cfg.candidates.external, dataset, table, tr)
    candidates.update(outside)
    where.update(dict.fromkeys(outside, dataset))
    records = []
    for name, estimates in evaluate_candidates(data, candidates, settings,
                                               ope_cfg.seed).items():
        estimates = not_applicable(
            "no simulator: a candidate's tool calls that the log did not make have no "
            "recorded response", settings.layers, data.n, settings.level,
            estimates[0].support if estimates else float("nan")) + estimates
        provenance = outside[name].provenance if name in outside else None
        records += [record(dataset, name, e, None, where[name], provenance)
                    for e in estimates]
    logged = logged_value(tr, gamma=gamma, seed=ope_cfg.seed, n_boot=ope_cfg.n_boot,
                          level=ope_cfg.confidence).to_dict()
    return Evaluation(records, logged, ope_cfg.headline)


def _labelled(table: pa.Table, what: str) -> pa.Table:
    """The table, when every row has a reward (else: relabel first)."""
    reward = table.column("reward")
    if reward.null_count:
        raise ValueError(f"{what} needs a reward on every row and {reward.null_count} of "
                         f"{table.num_rows} have none: relabel first (tracerl.relabel), "
                         "which scores every row with the verifiers")
    return table
