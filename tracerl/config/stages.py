"""The stage list of a pipeline on logs: what each DVC stage reads and writes.

One entry per stage of `tracerl run <stage>` (tracerl.cli.STAGES), in chain order:
ingest → validate → relabel → coverage → compare → train → ope → report → export. Paths are
written with `${paths.<key>}` (DVC interpolates them from the params.yaml beside the
dvc.yaml); `params` are the top-level sections the stage reads (DVC reruns the stage when
one changes). `tracerl init` renders a pipeline's dvc.yaml from this list
(tracerl.config.deps.render_pipeline), and a test holds the tau2 pipeline's dvc.yaml to
it, so a stage's contract is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Out:
    path: str
    cache: bool = True  # False: small files committed to git (summaries, metrics, plots)


@dataclass(frozen=True)
class StageSpec:
    name: str
    deps: tuple[str, ...]               # data deps; code deps are generated (deps.py)
    params: tuple[str, ...]             # top-level params sections the stage reads
    outs: tuple[Out, ...]
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    comment: str | None = None          # above the stage in dvc.yaml
    min_datasets: int = 1               # the stage is left out of a pipeline with fewer


def _summary(stage: str) -> Out:
    return Out(f"${{paths.reports}}/{stage}/summary.json", cache=False)


def _detail(stage: str) -> Out:
    """A stage's own metrics file: an output in git, not a declared metric (the declared
    metrics are the report's few headline figures, so `dvc metrics show` fits a screen)."""
    return Out(f"${{paths.metrics}}/{stage}.json", cache=False)


LOGS_STAGES: tuple[StageSpec, ...] = (
    StageSpec("ingest", ("${paths.landed}",), ("datasets", "ingest"),
              (Out("${paths.ingested}"), _summary("ingest"), _detail("ingest")),
              comment="Each dataset's logs (and the nightly inbox's landed partitions) into "
                      "a step table; bad records quarantined with their reason."),
    StageSpec("validate", ("${paths.ingested}", "${paths.gx}"), ("datasets", "validate"),
              (Out("${paths.reports}/validate/datasets"), _summary("validate"),
               _detail("validate")),
              comment="The gate: relabel depends on this stage's verdict, and a failed suite "
                      "stops the chain."),
    StageSpec("relabel", ("${paths.ingested}", "${paths.reports}/validate/summary.json"),
              ("datasets", "relabel"),
              (Out("${paths.labelled}"), _summary("relabel"), _detail("relabel"))),
    StageSpec("coverage", ("${paths.labelled}",), ("datasets", "coverage"),
              (Out("${paths.reports}/coverage"), _detail("coverage"),
               Out("${paths.plots}/coverage", cache=False))),
    StageSpec("compare", ("${paths.labelled}",), ("datasets", "compare"),
              (Out("${paths.reports}/compare"), _detail("compare")),
              comment="The logged agents on the tasks they share: paired difference (agent "
                      "minus baseline) with a bootstrap interval over tasks, the exact test, "
                      "pass^k, the tasks where they disagree, and a leaderboard.",
              min_datasets=2),
    StageSpec("train", ("${paths.labelled}",),
              # the SWiRL learners read the export's selection and weighting, the relabel
              # filters and the logging policy's critic settings
              ("gamma", "datasets", "train", "relabel.filters", "export.sft",
               "export.weighting", "ope.critic", "ope.confidence", "ope.return_range",
               "ope.min_behavior_prob"),
              (Out("${paths.models}"), _summary("train"), _detail("train"))),
    StageSpec("ope", ("${paths.labelled}", "${paths.models}"),
              ("gamma", "datasets", "relabel", "train", "ope"),
              (Out("${paths.reports}/ope"), _detail("ope"),
               Out("${paths.plots}/ope", cache=False))),
    StageSpec("report", ("${paths.reports}/ingest/summary.json",
                         "${paths.reports}/validate/summary.json",
                         "${paths.reports}/relabel/summary.json",
                         "${paths.reports}/coverage", "${paths.reports}/compare",
                         "${paths.reports}/train/summary.json", "${paths.reports}/ope",
                         "${paths.reports}/export/credit.json"),
              ("report",), (Out("${paths.reports}/report/index.html"),),
              ("${paths.metrics}/headline",)),
    StageSpec("export", ("${paths.labelled}",),
              ("gamma", "datasets", "relabel.filters", "train", "ope", "export"),
              (Out("${export.out}"), _detail("export"),
               Out("${paths.reports}/export/credit.json", cache=False)),
              comment="Fine-tuning data from the labelled steps (tracerl/export): SFT, KTO "
                      "and PRM records per task-disjoint split, weighted steps and "
                      "preference pairs from the logging policy's critic, each with its "
                      "provenance; the step credit the report shows."),
)


def logs_stages(n_datasets: int, ope_inputs: Sequence[str] = ()) -> list[StageSpec]:
    """The stages of a pipeline on `n_datasets` datasets; a data dep on the outputs of a
    stage left out (compare, with one dataset) is dropped. `ope_inputs`: the files the
    external candidates read (scored tables: tracerl.ope.external.scored_files), data deps
    of the ope stage."""
    kept = [s for s in LOGS_STAGES if n_datasets >= s.min_datasets]
    dropped = [s for s in LOGS_STAGES if s not in kept]
    made_by_dropped = {o.path for s in dropped for o in s.outs}
    extra = {"ope": tuple(ope_inputs)}
    return [StageSpec(s.name, tuple(d for d in s.deps if d not in made_by_dropped)
                      + extra.get(s.name, ()), s.params, s.outs, s.metrics, s.plots,
                      s.comment, s.min_datasets) for s in kept]


def sections_read(stages: Sequence[StageSpec]) -> list[str]:
    """Every top-level params section some stage reads (or reads a key of), in first-use
    order."""
    return list(dict.fromkeys(p.split(".")[0] for s in stages for p in s.params))
