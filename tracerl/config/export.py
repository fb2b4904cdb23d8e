"""params `export:`: what the export stage writes (tracerl.export), and how it chooses.

The SWiRL filters read the components `relabel.filters` names (process: the per-step
check, outcome: the episode's success); this section says which episodes and which steps
each export takes, how tasks are split, and where the files go.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tracerl.config.base import NonNegativeInt, Section

EPISODE_FILTERS = ("all", "process", "outcome", "process+outcome")  # tracerl.data.relabel.MODES
EpisodeFilter = Literal["all", "process", "outcome", "process+outcome"]
# A step's label (KTO, PRM): it passed the process check, its episode succeeded, or both.
StepLabel = Literal["process", "outcome", "process+outcome"]
# weighted and pairs read the logging policy's critic (tracerl.rl.credit): the ope
# section's critic over the train section's encoder and features.
FORMATS = ("sft", "sft_parquet", "sft_openai", "kto", "prm", "weighted", "pairs")


class SftExport(Section):
    """Fine-tuning conversations (TRL conversational JSONL and Parquet, OpenAI JSONL)."""

    episodes: EpisodeFilter = "outcome"   # SWiRL for SFT: episodes that ended correct...
    weight: Literal["process", "none"] = "process"  # ...a step failing the check: weight 0


class KtoExport(Section):
    """Unpaired preference: one record per assistant turn, its label from the verifiers."""

    episodes: EpisodeFilter = "all"
    label: StepLabel = "process+outcome"
    # conversation: one record per conversation, each assistant message with its `label`
    # (tracerl.export.expand.kto_examples gives TRL's records; the file grows with the
    # log); turn: TRL's {prompt, completion, label} per assistant turn, each repeating the
    # conversation before it (the file grows with the log times the turns).
    records: Literal["conversation", "turn"] = "conversation"


class PrmExport(Section):
    """Stepwise supervision: one record per episode, one label per assistant turn."""

    episodes: EpisodeFilter = "all"
    label: StepLabel = "process"


class Weighting(Section):
    """The weight of each assistant step in the weighted-steps export, from its advantage A
    under the logging policy: exp: min(exp(A / beta), max_weight) (advantage-weighted
    regression); positive: 1 where A > 0, else 0; positive_ci: 1 where A's interval lies
    above 0, else 0. A turn takes the smallest weight of its steps."""

    rule: Literal["exp", "positive", "positive_ci"] = "exp"
    beta: Annotated[float, Field(gt=0.0)] = 1.0
    max_weight: Annotated[float, Field(gt=0.0)] = 20.0


class Credit(Section):
    """Step credit (tracerl.rl.credit) and what the report shows of it."""

    min_count: Annotated[int, Field(ge=1)] = 5  # below: flagged few_observations, not ranked
    top: Annotated[int, Field(ge=1)] = 10       # (state, action) pairs and episodes shown


class Pairs(Section):
    """Preference pairs mined from logged alternatives: two logged steps at one encoded
    state whose actions differ and whose Q intervals do not overlap. within: both in one
    dataset; across: in two datasets (agents), on the same task."""

    scope: Annotated[list[Literal["within", "across"]], Field(min_length=1)] = [
        "within", "across"]
    min_count: Annotated[int, Field(ge=1)] = 5  # logged steps each side needs at the state
    # conversation: one record per conversation holding its pairs (tracerl.export.expand.
    # pair_examples gives TRL's and OpenAI's records); pair: a TRL and an OpenAI record per
    # pair, each repeating the conversation before it.
    records: Literal["conversation", "pair"] = "conversation"


class Export(Section):
    out: str                                  # folder: <out>/<dataset>/, <out>/manifest.json
    formats: Annotated[list[Literal["sft", "sft_parquet", "sft_openai", "kto", "prm",
                                    "weighted", "pairs"]],
                       Field(min_length=1)] = list(FORMATS)
    # Share of tasks per split (no task is in two splits); episodes without a task are
    # split one by one.
    splits: dict[Literal["train", "validation", "test"], Annotated[float, Field(ge=0.0)]] = {
        "train": 0.8, "validation": 0.1, "test": 0.1}
    # hash: a task's split depends on the seed and the task alone (it never moves as logs
    # grow; shares are expected, not exact); shuffle: a seeded permutation of the tasks
    # cut at the shares (exact counts; a new task can move others).
    split_method: Literal["hash", "shuffle"] = "hash"
    seed: NonNegativeInt = 0
    tool_definitions: str | None = None       # JSON file: a list of OpenAI-style tools
    sft: SftExport = Field(default_factory=lambda: SftExport())
    kto: KtoExport = Field(default_factory=lambda: KtoExport())
    prm: PrmExport = Field(default_factory=lambda: PrmExport())
    weighting: Weighting = Field(default_factory=lambda: Weighting())
    credit: Credit = Field(default_factory=lambda: Credit())
    pairs: Pairs = Field(default_factory=lambda: Pairs())

    @model_validator(mode="after")
    def _shares(self) -> Export:
        total = sum(self.splits.values())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"splits: the shares must sum to 1, got {total:g}")
        if len(set(self.formats)) != len(self.formats):
            raise ValueError(f"formats: a format appears twice in {self.formats}")
        return self

