"""The learner vocabulary: what ``train.learners`` names, fitted on `Transitions`.

- ``bc``: behaviour cloning (`tracerl.rl.bc`): counts over one-hot features, acting by the
  most frequent valid action (``model: counts``, the chapter's BC), or a logistic
  regression acting by its probabilities (``model: logistic``);
- ``naive_fqi``: FQI over every valid action (`tracerl.rl.fqi`, ``support: none``);
- ``constrained_fqi``: FQI over the actions the logs support (``logged``: logged at the
  state, one-hot features; ``behavior``: the behaviour model gives them at least
  ``min_behavior_prob``).

The *behaviour model* pi_hat_b of a log (`behavior_model`) is the maximum-likelihood fit of
the logged action distribution over a feature map: the frequencies N(s, a) / N(s) over
one-hot features, a logistic regression otherwise. `heldout_accuracy` measures BC on groups
(tasks) it never saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tracerl.config.learning import MIN_BEHAVIOR_PROB
from tracerl.rl.bc import CountBC, LogisticBC
from tracerl.rl.features import FeatureMap
from tracerl.rl.fqi import FittedQIteration
from tracerl.rl.transitions import Transitions

LEARNERS = ("bc", "naive_fqi", "constrained_fqi")


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


def fit_learners(tr: Transitions, features: FeatureMap, train: Any, gamma: float
                 ) -> dict[str, Any]:
    """The learners `train.learners` names (typed `train` params,
    tracerl.config.learning.Train), fitted on `tr`. constrained_fqi with ``support:
    behavior`` is constrained by the logistic bc when one is fitted, else by
    `behavior_model`."""
    unknown = sorted(set(train.learners) - set(LEARNERS))
    if unknown:
        raise ValueError(f"unknown learners {unknown}; expected some of {list(LEARNERS)}")
    out: dict[str, Any] = {}
    if "bc" in train.learners:
        out["bc"] = make_bc(features, train.bc, train.tie_break, train.seed).fit(tr)
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
