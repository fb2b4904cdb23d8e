"""Behaviour cloning: the logged action distribution, fitted on `Transitions`.

- `CountBC`: counts N(s, a) over a one-hot feature map (`tracerl.rl.features.OneHot`: the
  tabular case). ``act="argmax"`` is the chapter's BC: in each state seen in the data the
  most frequently logged *valid* action (ties by lowest index or at random; a state where
  only invalid actions were logged acts as if every valid action had count 0, listed in
  `unsupported_states_`). ``act="frequencies"`` is the empirical behaviour policy
  N(s, a) / N(s), the exact maximum-likelihood fit over one-hot features.
- `LogisticBC`: a multinomial logistic regression (scikit-learn) over any feature map's
  phi(s): BC for states that never repeat exactly. Fitted on a behaviour log it is also
  the *estimated behaviour model* pi_hat_b.

Both take per-step weights (`fit(tr, weights)`): a step counts `weight` times, so a 0/1
weight keeps the steps a filter selects (the SWiRL recipe's filtered BC) and exp(A / beta)
clones the logged actions in proportion to their advantage (advantage-weighted BC;
`tracerl.rl.learners`).

A state the data never showed gets the uniform distribution over its valid actions from a
one-hot model (it knows nothing there; every such lookup is counted in
`n_unseen_queries_`); a logistic model generalises. Both only put mass on the actions the
encoder says are valid.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from tracerl.rl.bellman import TIE_BREAKS, greedy
from tracerl.rl.features import FeatureMap, OneHot, matrix
from tracerl.rl.policy import Acting, uniform_valid
from tracerl.rl.transitions import Transitions


def masked(probs: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """`probs` restricted to the valid actions and renormalised (unchanged where every
    action is valid; uniform over the valid ones where the model gives them no mass)."""
    if valid.all():
        return probs
    kept = probs * valid
    total = kept.sum(axis=1, keepdims=True)
    return np.where(total > 0, kept / np.where(total > 0, total, 1.0), uniform_valid(valid))


def checked_weights(tr: Transitions, weights: np.ndarray | None) -> np.ndarray | None:
    """`weights` checked: one finite weight >= 0 per step of `tr` (its order), some > 0;
    None: every step once."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (tr.n,):
        raise ValueError(f"expected one weight per step ({tr.n}), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("step weights must be finite and >= 0")
    if tr.n and not np.any(w > 0):
        raise ValueError(f"every one of the {tr.n} steps has weight 0: nothing to clone "
                         "(did the filter keep no episode?)")
    return w


class OneHotModel(Acting):
    """What a policy over a one-hot feature map keeps of the data: the cells it saw (sorted),
    their labels, and lookups of rows into them."""

    features: OneHot
    encoder_: Any
    cells_: np.ndarray
    state_keys_: np.ndarray
    n_unseen_queries_: int

    def _keep(self, view: Transitions, seen: np.ndarray) -> np.ndarray:
        """Keep the seen states of `view` (a projection onto the map's variables), sorted by
        cell; return their indices into `view`."""
        keep = np.flatnonzero(seen)
        cells = self.features.cells(view.rows[keep])
        keep = keep[np.argsort(cells, kind="stable")]
        self.cells_ = np.sort(cells)
        self.state_keys_ = view.labels[keep]
        self.encoder_ = view.encoder
        self.n_unseen_queries_ = 0
        return keep

    def lookup(self, states: np.ndarray) -> np.ndarray:
        """Index of each row's cell among the seen cells, -1 where unseen."""
        cells = self.features.cells(np.asarray(states))
        pos = np.minimum(np.searchsorted(self.cells_, cells), max(len(self.cells_) - 1, 0))
        found = self.cells_[pos] == cells if len(self.cells_) else np.zeros(len(cells), bool)
        return np.where(found, pos, -1)

    def valid(self, states: np.ndarray) -> np.ndarray:
        """The encoder's valid actions (every action without an encoder)."""
        if self.encoder_ is None:
            return np.ones((len(states), len(self.actions_)), dtype=bool)
        return np.asarray(self.encoder_.valid_actions(np.asarray(states)), dtype=bool)

    def is_seen(self, states: np.ndarray) -> np.ndarray:
        """True where the state was seen in the training data."""
        return self.lookup(states) >= 0

    def _unseen_uniform(self, states: np.ndarray, probs: np.ndarray, row: np.ndarray) -> None:
        unseen = np.flatnonzero(row < 0)
        if len(unseen):
            probs[unseen] = uniform_valid(self.valid(np.asarray(states)[unseen]))
        self.n_unseen_queries_ += len(unseen)


class CountBC(OneHotModel):
    """Behaviour cloning by counts over a one-hot feature map (see the module docstring)."""

    def __init__(self, features: OneHot, act: str = "argmax", tie_break: str = "lowest_index",
                 seed: int = 0) -> None:
        self.features = features
        self.act_rule = act
        self.tie_break = tie_break
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        return {"act": self.act_rule, "tie_break": self.tie_break, "seed": self.seed}

    def fit(self, tr: Transitions, weights: np.ndarray | None = None) -> CountBC:
        """Count N(s, a) over the cells (each step `weights` times: see `checked_weights`);
        keep argmax_a N(s, a) over valid a."""
        if not self.features.one_hot:
            raise ValueError("count BC needs one-hot features (logistic BC fits any)")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}")
        if self.act_rule not in ("argmax", "frequencies"):
            raise ValueError(f"act must be argmax or frequencies, got {self.act_rule!r}")
        view = tr.project(self.features.used)
        n_s, n_a = view.n_states, view.n_actions
        w = checked_weights(tr, weights)
        n_sa = np.bincount(view.s.astype(np.int64) * n_a + view.a, weights=w,
                           minlength=n_s * n_a).reshape(n_s, n_a)
        if w is None or np.array_equal(n_sa, np.round(n_sa)):
            n_sa = n_sa.astype(np.int64)  # whole counts stay integers (and their artifact)
        seen = n_sa.sum(axis=1) > 0
        unsupported = ~(n_sa * view.valid).any(axis=1)
        action = greedy(n_sa.astype(np.float64), view.valid, self.tie_break,
                        np.random.default_rng(self.seed))
        keep = self._keep(view, seen)
        self.actions_ = view.actions
        self.action_ = action[keep].astype(np.int64)
        self.counts_ = n_sa[keep]
        self.unsupported_states_ = sorted(view.labels[seen & unsupported].tolist())
        return self

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """(m, n_actions): one-hot on the learned action (or the logged frequencies) where
        the state was seen; uniform over its valid actions where not."""
        states = np.asarray(states)
        row = self.lookup(states)
        seen = row >= 0
        probs = np.zeros((len(states), len(self.actions_)))
        if self.act_rule == "argmax":
            probs[np.flatnonzero(seen), self.action_[row[seen]]] = 1.0
        elif seen.any():
            counts = self.counts_[row[seen]] * self.valid(states[seen])
            probs[seen] = masked(counts / np.maximum(counts.sum(axis=1, keepdims=True), 1),
                                 self.valid(states[seen]))
        self._unseen_uniform(states, probs, row)
        return probs


class LogisticBC(Acting):
    """Behaviour cloning by multinomial logistic regression over phi(s)."""

    def __init__(self, features: FeatureMap, C: float = 1.0, max_iter: int = 500,
                 max_rows: int | None = None, seed: int = 0) -> None:
        self.features = features
        self.C = C
        self.max_iter = max_iter
        self.max_rows = max_rows  # fit on at most this many rows (a seeded sample)
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        return {"C": self.C, "max_iter": self.max_iter, "max_rows": self.max_rows,
                "seed": self.seed}

    def fit(self, tr: Transitions, weights: np.ndarray | None = None) -> LogisticBC:
        """Fit pi(a|s) to the logged actions (each step `weights` times: see
        `checked_weights`); learns model_, classes_, n_actions."""
        s, a = tr.s.astype(np.int64), tr.a.astype(np.int64)
        w = checked_weights(tr, weights)
        if w is not None:  # a step of weight 0 is not in the objective at all
            s, a, w = s[w > 0], a[w > 0], w[w > 0]
        if self.max_rows is not None and len(a) > self.max_rows:
            keep = np.sort(np.random.default_rng(self.seed).choice(
                len(a), self.max_rows, replace=False))
            s, a = s[keep], a[keep]
            w = None if w is None else w[keep]
        self.n_actions = tr.n_actions
        self.encoder_ = tr.encoder
        # Identical (state, action) rows give identical loss terms: fit each once, weighted
        # by its count (the same objective). States are sorted rows, so pairs in (s, a)
        # order are in the rows' lexicographic order.
        pair, inverse, counts = np.unique(s * tr.n_actions + a, return_inverse=True,
                                          return_counts=True)
        counts = counts.astype(np.float64) if w is None else \
            np.bincount(inverse.reshape(-1), weights=w, minlength=len(pair))
        rows, actions = tr.rows[pair // tr.n_actions], pair % tr.n_actions
        x = matrix(self.features.state_columns(rows), self.features.n_state_features)
        used = np.unique(x.indices)  # columns no row uses keep weight 0
        if len(np.unique(actions)) == 1:
            # One action ever logged (a tiny log): the clone takes it wherever it is valid;
            # a logistic model needs two classes.
            self.classes_, self.model_ = np.unique(actions).astype(np.int64), None
            self.n_iter_, self.converged_ = 0, True
            return self
        from sklearn.exceptions import ConvergenceWarning  # here: ~1 s of start-up otherwise
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=self.C, max_iter=self.max_iter, tol=1e-6)
        with threadpool_limits(1), warnings.catch_warnings():  # threads only contend here
            warnings.simplefilter("ignore", ConvergenceWarning)  # reported as converged_
            model.fit(x[:, used], actions, sample_weight=counts)
        self.classes_ = model.classes_.astype(np.int64)
        coef = np.zeros((model.coef_.shape[0], self.features.n_state_features))
        coef[:, used] = model.coef_
        model.coef_, model.n_features_in_ = coef, self.features.n_state_features
        self.model_ = model
        self.n_iter_ = int(np.max(model.n_iter_))
        self.converged_ = self.n_iter_ < self.max_iter
        return self

    support_model_: Any = None  # `constrain`: the behaviour model bounding its ratios
    min_behavior_prob_: float = 0.0

    def constrain(self, behavior: Any, min_behavior_prob: float) -> LogisticBC:
        """Act only where the logs support it: at each state, an action a whose ratio to
        the behaviour model would exceed 1 / min_behavior_prob (behavior(a|s) <
        min_behavior_prob x pi(a|s): the logger (almost) never takes it there, the
        regression's smoothing does) gets probability 0, the rest renormalised (kept as it
        was where that would leave nothing). The covered notion of tracerl.ope.support."""
        self.support_model_, self.min_behavior_prob_ = behavior, float(min_behavior_prob)
        return self

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """(m, n_actions); actions never logged get probability 0."""
        states = np.asarray(states)
        out = np.zeros((len(states), self.n_actions))
        x = matrix(self.features.state_columns(states), self.features.n_state_features)
        out[:, self.classes_] = 1.0 if self.model_ is None else self.model_.predict_proba(x)
        if self.support_model_ is not None:
            behavior = np.asarray(self.support_model_.action_probs(states))
            kept = np.where(behavior >= self.min_behavior_prob_ * out, out, 0.0)
            total = kept.sum(axis=1, keepdims=True)
            out = np.where(total > 0, kept / np.where(total > 0, total, 1.0), out)
        if self.encoder_ is None:
            return out
        return masked(out, np.asarray(self.encoder_.valid_actions(states), dtype=bool))

    def fitted(self) -> dict[str, Any]:
        out: dict[str, Any] = {"classes": self.classes_.tolist(), "n_actions": self.n_actions,
                               "columns": [], "coef": [], "intercept": []}
        if self.model_ is not None:
            coef = self.model_.coef_
            used = np.flatnonzero(np.any(coef != 0, axis=0))
            out.update(columns=used.tolist(), coef=coef[:, used].tolist(),
                       intercept=self.model_.intercept_.tolist())
        if self.support_model_ is not None:
            model = self.support_model_
            out["support"] = {"min_behavior_prob": self.min_behavior_prob_,
                              "params": model.get_params(), "fitted": model.fitted()}
        return out

    def restore(self, fitted: dict[str, Any], encoder: Any) -> LogisticBC:
        if "support" in fitted:  # `constrain`: the behaviour model, over the same features
            support = fitted["support"]
            behavior = LogisticBC(self.features, **support["params"]).restore(
                support["fitted"], encoder)
            self.constrain(behavior, support["min_behavior_prob"])
        classes = np.asarray(fitted["classes"], dtype=np.int64)
        if len(classes) == 1:
            self.model_, self.classes_ = None, classes
            self.n_actions, self.encoder_ = int(fitted["n_actions"]), encoder
            return self
        n = self.features.n_state_features
        coef = np.zeros((len(classes) if len(classes) > 2 else 1, n))
        coef[:, fitted["columns"]] = np.asarray(fitted["coef"], dtype=np.float64)
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=self.C, max_iter=self.max_iter)
        model.classes_ = classes
        model.coef_ = coef
        model.intercept_ = np.asarray(fitted["intercept"], dtype=np.float64)
        model.n_features_in_ = n
        self.model_, self.classes_ = model, classes
        self.n_actions, self.encoder_ = int(fitted["n_actions"]), encoder
        return self
