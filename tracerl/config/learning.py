"""The params of the learning half: the `train`, `ope` and `report` sections, one
vocabulary for every pipeline (the calculator's, tau2's, the support desk's), each default
defined here once.

Learners (``train.learners``): ``bc`` (behaviour cloning: counts over one-hot features, the
chapter's, or a logistic regression), ``naive_fqi`` (FQI over every valid action),
``constrained_fqi`` (FQI over the actions the logs support), and the SWiRL recipe's:
``filtered_bc`` (the bc model on the steps the SFT export trains on) and
``advantage_weighted_bc`` (the bc model, each step weighted by its advantage under the
logging policy's critic). Feature maps (``features``):
``one_hot`` (the tabular case) or ``hashed`` templates. Estimators (``ope.headline``):
``replay/return``, ``verifier/success``, ``critic/fqe``, ``importance/<is|pdis|wis|pdwis|dr|
wdr>``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tracerl.config.base import (
    NonNegativeInt,
    PositiveInt,
    Probability,
    Section,
    check_names,
    did_you_mean,
)
from tracerl.config.export import SftExport, Weighting

LEARNERS = ("bc", "naive_fqi", "constrained_fqi", "filtered_bc", "advantage_weighted_bc")
Learner = Literal["bc", "naive_fqi", "constrained_fqi", "filtered_bc", "advantage_weighted_bc"]
# The default list: the learners that read the transitions alone (no export section needed)
DEFAULT_LEARNERS = ("bc", "naive_fqi", "constrained_fqi")
OPE_LAYERS = ("replay", "verifier", "critic", "importance")
IS_ESTIMATORS = ("is", "pdis", "wis", "pdwis", "dr", "wdr")
ESTIMATORS = {"replay": ("return",), "verifier": ("success",), "critic": ("fqe",),
              "importance": IS_ESTIMATORS}
HEADLINES = tuple(f"{layer}/{e}" for layer, names in ESTIMATORS.items() for e in names)
# The one threshold of support (its only definition: tracerl.rl imports it): a decision is
# covered when pi_hat_b(a|s) >= MIN_BEHAVIOR_PROB x pi_e(a|s), i.e. its density ratio is at
# most 1 / MIN_BEHAVIOR_PROB (tracerl.ope.support); FQI's `support: behavior` keeps the
# actions pi_hat_b gives at least this.
MIN_BEHAVIOR_PROB = 0.05
Positive = Annotated[float, Field(gt=0.0)]
# The `train` section for real dialogue logs (`tracerl init`'s pipelines, `tracerl.evaluate`):
# no dialogue state repeats exactly, so hashed features (logistic BC, ridge FQI), and
# constrained FQI kept to the actions the estimated behaviour model supports.
LOGS_TRAIN: dict[str, Any] = {
    "encoder": "dialogue", "features": {"kind": "hashed"}, "bc": {"model": "logistic"},
    "naive_fqi": {"alpha": 1e-3}, "constrained_fqi": {"alpha": 1e-3, "support": "behavior"}}


class Features(Section):
    """A feature map over the encoder's state rows (tracerl.rl.features)."""

    kind: Literal["one_hot", "hashed"] = "one_hot"
    # one_hot: the variables (indices) it reads; default: those a policy reads (train) or
    # every variable (the critic)
    variables: list[NonNegativeInt] | None = None
    n_bits: Annotated[int, Field(ge=4, le=24)] = 12  # hashed: 2**n_bits columns
    templates: list[list[NonNegativeInt]] | None = None  # hashed; default: singles, pairs, all


class BC(Section):
    model: Literal["counts", "logistic"] = "counts"  # counts: argmax (one-hot features only)
    C: Positive = 1.0                 # logistic: inverse L2 strength
    max_iter: PositiveInt = 500       # logistic


class FQI(Section):
    iterations: PositiveInt = 50
    alpha: Annotated[float, Field(ge=0.0)] = 0.0  # ridge (hashed features need > 0)
    epsilon: Probability = 0.0        # mass spread over the allowed actions


class ConstrainedFQI(FQI):
    support: Literal["logged", "behavior"] = "logged"  # logged: one-hot features only
    min_behavior_prob: Probability = MIN_BEHAVIOR_PROB


class HeldOut(Section):
    """BC's accuracy on groups it did not see (grouped k-fold)."""

    group_by: str = "task"            # the step column a fold groups by
    n_folds: Annotated[int, Field(ge=2)] = 5


class Train(Section):
    encoder: str                      # a registered state encoder (tracerl.rl.encoding)
    encoder_params: dict[str, Any] = {}
    datasets: list[str] | None = None  # default: every dataset
    split: Literal["train", "validation", "test"] | None = None  # None: every step
    data_filter: Literal["all", "process", "outcome", "process+outcome"] = "all"
    features: Features = Field(default_factory=lambda: Features())
    learners: Annotated[list[Learner], Field(min_length=1)] = list(DEFAULT_LEARNERS)
    seed: NonNegativeInt = 7
    tie_break: Literal["lowest_index", "random"] = "lowest_index"
    bc: BC = Field(default_factory=lambda: BC())
    naive_fqi: FQI = Field(default_factory=lambda: FQI())
    constrained_fqi: ConstrainedFQI = Field(default_factory=lambda: ConstrainedFQI())
    # filtered_bc: the episodes and step weights it clones; None: the export section's sft
    # (the policy the SFT export would train), else the export's defaults
    filtered_bc: SftExport | None = None
    # advantage_weighted_bc: weight of a step from its advantage; None: the export
    # section's weighting, else its defaults (exp: min(exp(A / beta), max_weight))
    advantage_weighted_bc: Weighting | None = None
    heldout: HeldOut | None = None

    @field_validator("encoder")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        check_names("encoders", [name], info)  # the generic ones and the params' fixtures'
        return name


class Critic(Section):
    # default: the train features over every variable
    features: Features | None = None
    alpha: Annotated[float, Field(ge=0.0)] = 1e-6  # ridge of the linear solve
    iterations: PositiveInt = 1000    # one-hot: backups until the change is below 1e-10
    # auto: a one-hot critic refitted per resample where the log's distinct transitions
    # allow (tracerl.ope.grouped.refit_affordable), else the delta method's interval
    interval: Literal["auto", "refit", "delta"] = "auto"


class Replay(Section):
    """A stochastic candidate is replayed ceil(min_draws / episodes) times per logged
    episode, at most max_samples times; each replay at most max_steps steps."""

    min_draws: PositiveInt = 24_000
    max_samples: PositiveInt = 8
    max_steps: PositiveInt = 50


class Softened(Section):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _eps(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            raise ValueError("expected a mapping policy -> list of epsilons")
        for policy, eps in values.items():
            if not isinstance(eps, list) or not all(
                    isinstance(e, int | float) and not isinstance(e, bool) and 0 <= e <= 1
                    for e in eps):
                raise ValueError(f"{policy}: expected a list of epsilons in [0, 1], got {eps!r}")
        return values


class External(Section):
    """A candidate from outside tracerl (tracerl.ope.external): either a scored table of
    the logged steps (`scored`: Parquet or JSONL; ``{dataset}`` in the path is the
    evaluated dataset's name) with, optionally, the behaviour's scored table and the
    scoring settings, or a Python policy (`policy`: ``package.module:factory``, called with
    `kwargs`)."""

    scored: str | None = None
    behavior_scored: str | None = None  # None: the logs' action_logprobs, else estimated
    scoring: dict[str, Any] = {}        # model, temperature, top_p, how scored, ...
    policy: str | None = None
    kwargs: dict[str, Any] = {}
    datasets: list[str] | None = None   # the datasets it is evaluated on; default: every one
    # |sum of target_probs - 1|, |exp(target_logprob) - target_probs[logged]|, logprob > 0
    prob_tolerance: Annotated[float, Field(gt=0.0, le=0.01)] = 1e-5

    @field_validator("policy")
    @classmethod
    def _import_path(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", value):
            raise ValueError(f"expected 'package.module:factory', got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> External:
        if (self.scored is None) == (self.policy is None):
            raise ValueError("give exactly one of scored (a scored table) and policy (an "
                             "import path)")
        wrong = ([k for k in ("behavior_scored", "scoring") if getattr(self, k)]
                 if self.policy is not None else (["kwargs"] if self.kwargs else []))
        if wrong:
            raise ValueError(f"{wrong[0]}: only with "
                             f"{'scored' if self.policy is not None else 'policy'}")
        return self


class Candidates(Section):
    """Policies derived from the trained ones (tracerl.rl.policy.derived), and candidates
    from outside (`external`: name -> `External`)."""

    softened: Softened = Field(default_factory=lambda: Softened())
    mixtures: list[Annotated[tuple[str, str, Probability], Field(strict=False)]] = []
    external: dict[str, External] = {}

    @field_validator("external")
    @classmethod
    def _names(cls, value: dict[str, External]) -> dict[str, External]:
        for name in value:
            if name in (*LEARNERS, "behavior") or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"{name!r}: an external candidate's name is letters, digits, "
                                 "'.', '-' and '_', and not behavior or a learner's")
        return value


class Ope(Section):
    datasets: list[str] | None = None  # the logs evaluated on; default: every dataset
    split: Literal["all", "train", "validation", "test"] = "all"
    cross_agent: bool = False         # also the policies trained on the other datasets
    layers: list[Literal["replay", "verifier", "critic", "importance"]] = list(OPE_LAYERS)
    headline: str = "critic/fqe"      # reported per candidate in metrics/<pipeline>/ope.json
    is_estimators: list[Literal["is", "pdis", "wis", "pdwis", "dr", "wdr"]] = \
        list(IS_ESTIMATORS)
    critic: Critic = Field(default_factory=lambda: Critic())
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    n_boot: PositiveInt = 2000
    boot_chunk: PositiveInt = 500     # critic refits per task (same outputs for any value)
    seed: NonNegativeInt = 2026
    min_support: Probability = 0.95   # below: flagged low_support, never ranked first
    min_behavior_prob: Probability = MIN_BEHAVIOR_PROB
    # Support (tracerl.ope.support): a logged episode whose density ratio pi_e / pi_b
    # exceeds max(this, episodes / min_n_eff) stands for more of the candidate's episodes
    # than the data can vouch for (this floor: 1 / min_ess_fraction).
    max_episode_ratio: Annotated[float, Field(ge=1.0)] = 10.0
    min_ess_fraction: Probability = 0.1
    # 30 effective observations with no sign of an outcome: one of probability 10% would
    # have shown with probability 1 - 0.9^30 = 0.96; below, the interval leans on the prior.
    min_n_eff: Positive = 30.0
    dr_folds: Annotated[int, Field(ge=2)] = 2
    # (worst, best) discounted return from any step to the end; None: the logged extremes
    return_range: Annotated[tuple[float, float], Field(strict=False)] | None = None
    success_component: str = "task_success"  # the reward component the verifier layer reads
    replay: Replay = Field(default_factory=lambda: Replay())
    candidates: Candidates = Field(default_factory=lambda: Candidates())

    @field_validator("headline")
    @classmethod
    def _headline(cls, value: str) -> str:
        if value not in HEADLINES:
            raise ValueError(f"expected one of {', '.join(HEADLINES)}, got {value!r}"
                             f"{did_you_mean(value, HEADLINES)}")
        return value

    @model_validator(mode="after")
    def _ordered_range(self) -> Ope:
        if self.return_range is not None and self.return_range[0] > self.return_range[1]:
            raise ValueError(f"return_range: worst {self.return_range[0]} > best "
                             f"{self.return_range[1]}")
        return self


class Report(Section):
    title: str = "tracerl pipeline report"
