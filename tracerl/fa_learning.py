"""Feature-based (function approximation) learning on any encoded step table: the learners
a pipeline asks for by params, and behaviour cloning's accuracy on tasks it never saw.

- `hashed_featurizer`: the `HashedFeaturizer` over an encoder's state variables (every
  single variable, every pair, and all of them together: coarse templates generalise, the
  full one is the state's identity).
- `fit_learners`: ``bc`` (`LogisticBC`), ``fqi`` (naive `FittedQRegressor`),
  ``fqi_constrained`` (FQI restricted to actions the BC behaviour model gives at least
  `min_behavior_prob`).
- `grouped_folds` / `heldout_accuracy`: a k-fold split over groups (task ids) so a test fold
  holds only tasks the training folds never contained; accuracy of the cloned policy's most
  probable action against the logged one on the held-out steps, beside the majority-action
  baseline of the training folds (what "accuracy" must beat to mean anything).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from tracerl.hashed_features import HashedFeaturizer
from tracerl.ope.fa_data import FATransitions
from tracerl.policies.sklearn_policies import FittedQRegressor, LogisticBC

LEARNERS = ("bc", "fqi", "fqi_constrained")


def default_templates(n_vars: int) -> tuple[tuple[int, ...], ...]:
    """Every single variable, every pair, and all variables together."""
    singles = [(i,) for i in range(n_vars)]
    pairs = list(combinations(range(n_vars), 2))
    full = [tuple(range(n_vars))] if n_vars > 2 else []
    return tuple(singles + pairs + full)


def hashed_featurizer(name: str, cardinality: Sequence[int], n_actions: int, n_bits: int = 12,
                      templates: Sequence[Sequence[int]] | None = None) -> HashedFeaturizer:
    """The hashed featurizer of an encoder's states (state and state-action features)."""
    templates = (default_templates(len(cardinality)) if templates is None
                 else tuple(tuple(t) for t in templates))
    for t in templates:
        if not t or any(not 0 <= c < len(cardinality) for c in t):
            raise ValueError(f"template {list(t)} names a state variable outside "
                             f"0..{len(cardinality) - 1}")
    return HashedFeaturizer(name=name, cardinalities=tuple(int(c) for c in cardinality),
                            templates=templates, n_bits=int(n_bits), n_actions=int(n_actions))


def make_bc(featurizer: HashedFeaturizer, hyper: Mapping[str, Any], seed: int) -> LogisticBC:
    return LogisticBC(featurizer, C=float(hyper.get("C", 1.0)),
                      max_iter=int(hyper.get("max_iter", 500)), seed=seed)


def fit_learners(tr: FATransitions, featurizer: HashedFeaturizer, learners: Sequence[str],
                 hyper: Mapping[str, Mapping[str, Any]], gamma: float, seed: int
                 ) -> dict[str, LogisticBC | FittedQRegressor]:
    """The requested learners fitted on `tr` (bc is fitted once and is also the behaviour
    model that constrains fqi_constrained)."""
    unknown = sorted(set(learners) - set(LEARNERS))
    if unknown:
        raise ValueError(f"unknown learners {unknown}; expected some of {list(LEARNERS)}")
    out: dict[str, LogisticBC | FittedQRegressor] = {}
    bc = None
    if "bc" in learners or "fqi_constrained" in learners:
        bc = make_bc(featurizer, hyper.get("bc", {}), seed).fit(tr)
    for name in learners:  # over the few learners
        if name == "bc":
            out[name] = bc
            continue
        h = hyper.get(name, {})
        constrained = name == "fqi_constrained"
        out[name] = FittedQRegressor(
            featurizer, gamma=gamma, n_iterations=int(h.get("n_iterations", 60)),
            alpha=float(h.get("alpha", 1e-3)), support="behavior" if constrained else "none",
            behavior_model=bc if constrained else None,
            min_behavior_prob=float(h.get("min_behavior_prob", 0.05)),
            epsilon=float(h.get("epsilon", 0.0)), seed=seed).fit(tr)
    return out


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


def heldout_accuracy(tr: FATransitions, groups: Sequence[Any], featurizer: HashedFeaturizer,
                     bc_hyper: Mapping[str, Any], n_folds: int, seed: int) -> dict[str, Any]:
    """BC's action accuracy on held-out groups (grouped k-fold over episodes).

    groups: one per episode of `tr` (e.g. its task id). Returns the pooled accuracy over
    every held-out step, the majority-action baseline, and per fold the groups and counts.
    """
    fold = grouped_folds(groups, n_folds, seed)
    groups = np.asarray(groups, dtype=object).astype(str)
    hits = baseline_hits = n_test = 0
    folds = []
    for k in range(int(fold.max()) + 1):  # over folds
        test = fold == k
        train_tr, test_tr = tr.select_episodes(~test), tr.select_episodes(test)
        bc = make_bc(featurizer, bc_hyper, seed).fit(train_tr)
        predicted = bc.action_probs(test_tr.states).argmax(axis=1)
        majority = np.bincount(train_tr.actions, minlength=tr.n_actions).argmax()
        h = int(np.sum(predicted == test_tr.actions))
        b = int(np.sum(test_tr.actions == majority))
        hits, baseline_hits, n_test = hits + h, baseline_hits + b, n_test + test_tr.n_steps
        folds.append({"fold": k, "test_groups": sorted(set(groups[test])),
                      "train_episodes": train_tr.n_episodes, "test_episodes": test_tr.n_episodes,
                      "test_steps": test_tr.n_steps,
                      "accuracy": h / test_tr.n_steps if test_tr.n_steps else None,
                      "majority_baseline": b / test_tr.n_steps if test_tr.n_steps else None})
    return {"accuracy": hits / n_test if n_test else None,
            "majority_baseline": baseline_hits / n_test if n_test else None,
            "test_steps": n_test, "n_folds": len(folds), "n_groups": len(set(groups)),
            "folds": folds}
