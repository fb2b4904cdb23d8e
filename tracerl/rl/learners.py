"""The learner vocabulary: what ``train.learners`` names, fitted on `Transitions`.

- ``bc``: behaviour cloning (`tracerl.rl.bc`): counts over one-hot features, acting by the
  most frequent valid action (``model: counts``, the chapter's BC), or a logistic
  regression acting by its probabilities (``model: logistic``);
- ``naive_fqi``: FQI over every valid action (`tracerl.rl.fqi`, ``support: none``);
- ``constrained_fqi``: FQI over the actions the logs support (``logged``: logged at the
  state, one-hot features; ``behavior``: the behaviour model gives them at least
  ``min_behavior_prob``);
- ``filtered_bc``: the SWiRL recipe's clone, the bc model (``train.bc``) fitted on exactly
  the steps the SFT export trains on (`tracerl.export.select.sft_weights`: the episodes the
  outcome filter keeps, a step failing the process check left out), each step at its SFT
  weight;
- ``advantage_weighted_bc``: the bc model fitted on every step, each weighted by its
  advantage under the logging policy's critic (`tracerl.rl.credit`: exp(A / beta) clipped
  at max_weight, or a 0/1 variant: `credit_weights`), the weighted-steps export's weights.

Both SWiRL clones act where the logs support them: a logistic clone smooths mass onto
actions the logger never takes at a state (the support desk's filtered clone: 0.9% of its
decisions, a reply the logger never makes there, in 9% of its conversations), which no
log can evaluate. They are constrained to the covered actions of `tracerl.ope.support`
(behaviour ratio at most 1 / MIN_BEHAVIOR_PROB under the behaviour model of the same log:
`LogisticBC.constrain`), as BCQ constrains its actions to the data's.

The last two read more than the transitions: `swirl_inputs` computes, from the step table,
the per-step SFT weights and the logging policy's step credit they need.

The *behaviour model* pi_hat_b of a log (`behavior_model`) is the maximum-likelihood fit of
the logged action distribution over a feature map: the frequencies N(s, a) / N(s) over
one-hot features, a logistic regression otherwise. `heldout_accuracy` measures BC on groups
(tasks) it never saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tracerl.config.export import SftExport, Weighting
from tracerl.config.learning import LEARNERS, MIN_BEHAVIOR_PROB
from tracerl.export.select import sft_weights
from tracerl.rl.bc import CountBC, LogisticBC
from tracerl.rl.credit import StepCredit, credit_weights, logging_credit
from tracerl.rl.encoding import step_order
from tracerl.rl.features import FeatureMap
from tracerl.rl.fqi import FittedQIteration
from tracerl.rl.transitions import Transitions


def behavior_model(tr: Transitions, features: FeatureMap, *, C: float = 1.0,
                   max_iter: int = 500, seed: int = 0, max_rows: int | None = None) -> Any:
    """pi_hat_b fitted on `tr` over `features` (see the module docstring)."""
    if features.one_hot:
        return CountBC(features, act="frequencies").fit(tr)
    return LogisticBC(features, C=C, max_iter=max_iter, max_rows=max_rows, seed=seed).fit(tr)


def make_bc(features: FeatureMap, bc: Any, tie_break: str, seed: int) -> Any:
    if bc.model == "counts":
        return CountBC(features, act="argmax", tie_break=tie_break, seed=seed)
    return LogisticBC(features, C=bc.C, max_iter=bc.max_iter, seed=seed)


def sft_selection(train: Any, export_sft: SftExport | None) -> SftExport:
    """What filtered_bc clones: `train.filtered_bc`, else the export section's sft (so the
    candidate is the policy the SFT export would train), else the export's defaults."""
    return train.filtered_bc or export_sft or SftExport()


def credit_weighting(train: Any, export_weighting: Weighting | None) -> Weighting:
    """advantage_weighted_bc's weights: `train.advantage_weighted_bc`, else the export
    section's weighting, else its defaults."""
    return train.advantage_weighted_bc or export_weighting or Weighting()


def swirl_inputs(steps: pa.Table, tr: Transitions, train: Any, *,
                 sft: SftExport | None = None, weighting: Weighting | None = None,
                 process: Mapping[str, float] | None = None, outcome: str | None = None,
                 critic_features: FeatureMap | None = None, ope: Any = None,
                 gamma: float = 1.0) -> dict[str, Any]:
    """The keyword arguments of `fit_learners` its SWiRL learners need, for the learners
    `train.learners` names, per step of `tr` (made from `steps` by its encoder):
    filtered_bc's SFT weights (`sft_selection(train, sft)`, the filters reading the
    components `process` / `outcome`: relabel.filters) and advantage_weighted_bc's step
    credit (`tracerl.rl.credit.logging_credit` over `critic_features`, the `ope` section's
    critic) with its weighting (`credit_weighting(train, weighting)`). `sft` /
    `weighting`: the export section's, which the train section's override."""
    out: dict[str, Any] = {}
    if "filtered_bc" in train.learners:
        selection = sft_selection(train, sft)
        out["sft"] = {**selection.dump(), "process": None if process is None else
                      dict(process), "outcome": outcome}
        out["sft_weight"] = sft_weights(steps, selection, process, outcome)[step_order(steps)]
    if "advantage_weighted_bc" in train.learners:
        if critic_features is None or ope is None:
            raise ValueError("advantage_weighted_bc needs the critic's features and the ope "
                             "section (its critic)")
        out["credit"] = logging_credit(tr, critic_features, train, ope, gamma=gamma)
        out["weighting"] = credit_weighting(train, weighting)
    return out


def fit_learners(tr: Transitions, features: FeatureMap, train: Any, gamma: float, *,
                 sft_weight: np.ndarray | None = None, sft: Mapping[str, Any] | None = None,
                 credit: StepCredit | None = None, weighting: Weighting | None = None
                 ) -> dict[str, Any]:
    """The learners `train.learners` names (typed `train` params,
    tracerl.config.learning.Train), fitted on `tr`. constrained_fqi with ``support:
    behavior`` is constrained by the logistic bc when one is fitted, else by
    `behavior_model`. filtered_bc reads `sft_weight` (and records `sft`, its selection),
    advantage_weighted_bc `credit` and `weighting` (`swirl_inputs` makes them); each keeps
    what made it in `recipe_`, which its artifact saves."""
    unknown = sorted(set(train.learners) - set(LEARNERS))
    if unknown:
        raise ValueError(f"unknown learners {unknown}; expected some of {list(LEARNERS)}")
    out: dict[str, Any] = {}
    if "bc" in train.learners:
        out["bc"] = make_bc(features, train.bc, train.tie_break, train.seed).fit(tr)
    behavior = None

    def supported(policy: Any) -> Any:
        """A logistic clone constrained to the log's support (module docstring)."""
        nonlocal behavior
        if not isinstance(policy, LogisticBC):
            return policy  # counts: it only ever takes actions logged at the state
        if behavior is None:
            behavior = out["bc"] if isinstance(out.get("bc"), LogisticBC) else \
                behavior_model(tr, features, C=train.bc.C, max_iter=train.bc.max_iter,
                               seed=train.seed)
        return policy.constrain(behavior, MIN_BEHAVIOR_PROB)

    if "filtered_bc" in train.learners:
        if sft_weight is None:
            raise ValueError("filtered_bc needs the SFT weight of every step (swirl_inputs)")
        policy = supported(make_bc(features, train.bc, train.tie_break, train.seed).fit(
            tr, sft_weight))
        policy.recipe_ = {"learner": "filtered_bc", "selection": dict(sft or {}),
                          "steps": tr.n, "steps_cloned": int(np.sum(sft_weight > 0))}
        out["filtered_bc"] = policy
    if "advantage_weighted_bc" in train.learners:
        if credit is None or credit.tr.n != tr.n:
            raise ValueError("advantage_weighted_bc needs the logging policy's credit of "
                             "every step (swirl_inputs)")
        weighting = weighting or credit_weighting(train, None)
        weights = credit_weights(credit, weighting.rule, weighting.beta, weighting.max_weight)
        policy = supported(make_bc(features, train.bc, train.tie_break, train.seed).fit(
            tr, weights))
        policy.recipe_ = {"learner": "advantage_weighted_bc", "weighting": weighting.dump(),
                          "steps": tr.n, "weight_mean": float(weights.mean()),
                          "critic_converged": credit.converged}
        out["advantage_weighted_bc"] = policy
    for name in ("naive_fqi", "constrained_fqi"):  # over the few learners
        if name not in train.learners:
            continue
        h = getattr(train, name)
        support = getattr(h, "support", "none")
        model = None
        if support == "behavior":
            model = out.get("bc") if isinstance(out.get("bc"), LogisticBC) else \
                behavior_model(tr, features, C=train.bc.C, max_iter=train.bc.max_iter,
                               seed=train.seed)
        out[name] = FittedQIteration(
            features, gamma=gamma, n_iterations=h.iterations, alpha=h.alpha, support=support,
            behavior_model=model,
            min_behavior_prob=getattr(h, "min_behavior_prob", MIN_BEHAVIOR_PROB),
            epsilon=h.epsilon, tie_break=train.tie_break, seed=train.seed).fit(tr)
    return {name: out[name] for name in train.learners}


def grouped_folds(groups: Sequence[Any], n_folds: int, seed: int) -> np.ndarray:
    """Fold (0..k-1) of each item, k = min(n_folds, distinct groups): the distinct groups
    are shuffled with `seed` and dealt round-robin, so a group lies in one fold only."""
    groups = np.asarray(groups, dtype=object).astype(str)
    distinct, inverse = np.unique(groups, return_inverse=True)
    k = min(int(n_folds), len(distinct))
    if k < 2:
        raise ValueError(f"a grouped split needs at least 2 groups, got {len(distinct)}")
    fold_of_group = np.empty(len(distinct), dtype=np.int64)
    fold_of_group[np.random.default_rng(seed).permutation(len(distinct))] = \
        np.arange(len(distinct)) % k
    return fold_of_group[inverse.reshape(-1)]


def heldout_accuracy(tr: Transitions, groups: Sequence[Any], features: FeatureMap, bc: Any,
                     tie_break: str, n_folds: int, seed: int) -> dict[str, Any]:
    """BC's action accuracy on held-out groups (grouped k-fold over episodes).

    groups: one per episode of `tr` (e.g. its task id). Returns the pooled accuracy over
    every held-out step (the cloned policy's most probable action against the logged one),
    the majority-action baseline of the training folds (what accuracy must beat to mean
    anything), and per fold the groups and counts."""
    fold = grouped_folds(groups, n_folds, seed)
    groups = np.asarray(groups, dtype=object).astype(str)
    hits = baseline_hits = n_test = 0
    folds = []
    for k in range(int(fold.max()) + 1):  # over folds
        test = fold == k
        train_tr, test_tr = tr.select_episodes(~test), tr.select_episodes(test)
        model = make_bc(features, bc, tie_break, seed).fit(train_tr)
        predicted = model.action_probs(test_tr.states()).argmax(axis=1)
        majority = np.bincount(train_tr.a, minlength=tr.n_actions).argmax()
        h = int(np.sum(predicted == test_tr.a))
        b = int(np.sum(test_tr.a == majority))
        hits, baseline_hits, n_test = hits + h, baseline_hits + b, n_test + test_tr.n
        folds.append({"fold": k, "test_groups": sorted(set(groups[test])),
                      "train_episodes": train_tr.n_episodes, "test_episodes": test_tr.n_episodes,
                      "test_steps": test_tr.n,
                      "accuracy": h / test_tr.n if test_tr.n else None,
                      "majority_baseline": b / test_tr.n if test_tr.n else None})
    return {"accuracy": hits / n_test if n_test else None,
            "majority_baseline": baseline_hits / n_test if n_test else None,
            "test_steps": n_test, "n_folds": len(folds), "n_groups": len(set(groups)),
            "folds": folds}
