"""Policies over features (function approximation) for states that never repeat exactly.

Same verbs as the tabular learners: ``fit(transitions)``, ``action_probs(states)``,
``act(states, rng)``; states are rows of a fixture's int-coded observable state, featurized
by a `HashedFeaturizer` the policy holds.

- `LogisticBC`: behaviour cloning, a multinomial logistic regression (scikit-learn) over
  phi(s). Fitted on a behaviour log it is also the *estimated behaviour model* pi_hat_b.
- `FittedQRegressor`: fitted Q iteration with a ridge regressor over phi(s, a):
      Q_{k+1} = argmin_w sum_t (phi(s_t, a_t).w - y_t)^2 + alpha |w|^2,
      y_t = r_t + gamma (1 - done_t) max_{a' in A(s'_t)} Q_k(s'_t, a')
  (closed form; the Gram matrix is factorised once, each iteration is one solve).
  support="none": A(s) is every action (naive FQI). support="behavior": A(s) is the actions
  whose estimated behaviour probability pi_hat_b(a|s) >= min_behavior_prob (a `LogisticBC`
  fitted on the log), for the bootstrap max and for acting; a state where no action passes
  falls back to its most probable behaviour action. `epsilon` spreads that much mass
  uniformly over A(s) (a stochastic target).

Artifacts (`save_fa_policy` / `load_fa_policy`) are JSON: class, params, featurizer,
fitted coefficients (sparse: indices and values), the training-data hash and the package
version. No pickle: loading rebuilds the objects from numbers.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from tracerl.hashed_features import HashedFeaturizer, column_positions, row_sums
from tracerl.io.fileio import atomic_path
from tracerl.ope.fa_data import FATransitions
from tracerl.policies.artifact import code_version

FA_ARTIFACT_FORMAT = "tracerl.fa_policy/1"
SUPPORTS = ("none", "behavior")


class _Acting:
    n_actions: int
    seed: int

    def act(self, states: np.ndarray, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """One action per state, drawn from action_probs (rng, default: `seed`)."""
        probs = self.action_probs(states)
        rng = np.random.default_rng(self.seed if rng is None else rng)
        cum = np.cumsum(probs, axis=1)
        u = rng.random(len(probs)) * cum[:, -1]
        return np.minimum((cum <= u[:, None]).sum(axis=1), probs.shape[1] - 1)

    def action_probs(self, states: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError


class LogisticBC(_Acting):
    """Behaviour cloning by multinomial logistic regression over phi(s)."""

    def __init__(self, featurizer: HashedFeaturizer, C: float = 10.0, max_iter: int = 500,
                 max_rows: int | None = None, seed: int = 0) -> None:
        self.featurizer = featurizer
        self.C = C
        self.max_iter = max_iter
        self.max_rows = max_rows  # fit on at most this many rows (a seeded sample)
        self.seed = seed

    def get_params(self) -> dict:
        return {"C": self.C, "max_iter": self.max_iter, "max_rows": self.max_rows,
                "seed": self.seed}

    def fit(self, tr: FATransitions) -> LogisticBC:
        """Fit pi(a|s) to the logged actions; learns model_, classes_, n_actions."""
        states, actions = tr.states, tr.actions
        if self.max_rows is not None and len(actions) > self.max_rows:
            rows = np.sort(np.random.default_rng(self.seed).choice(
                len(actions), self.max_rows, replace=False))
            states, actions = states[rows], actions[rows]
        self.n_actions = tr.n_actions
        # Identical (state, action) rows give identical loss terms: fit each once, weighted
        # by its count (exactly the same objective; all rows when none repeat).
        rows, counts = np.unique(np.column_stack([states, actions]), axis=0,
                                 return_counts=True)
        x = self.featurizer.transform(rows[:, :-1])
        used = np.unique(x.indices)  # hashed columns no row uses keep weight 0
        model = LogisticRegression(C=self.C, max_iter=self.max_iter, tol=1e-6)
        with threadpool_limits(1), warnings.catch_warnings():  # threads only contend here
            warnings.simplefilter("ignore", ConvergenceWarning)  # reported as converged_
            model.fit(x[:, used], rows[:, -1], sample_weight=counts.astype(np.float64))
        self.classes_ = model.classes_.astype(np.int64)
        coef = np.zeros((model.coef_.shape[0], self.featurizer.n_features))
        coef[:, used] = model.coef_
        model.coef_, model.n_features_in_ = coef, self.featurizer.n_features
        self.model_ = model
        self.n_iter_ = int(np.max(model.n_iter_))
        self.converged_ = self.n_iter_ < self.max_iter
        return self

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """(m, n_actions); actions never logged get probability 0."""
        out = np.zeros((len(states), self.n_actions))
        out[:, self.classes_] = self.model_.predict_proba(self.featurizer.transform(states))
        return out

    def _fitted(self) -> dict:
        coef = self.model_.coef_
        used = np.flatnonzero(np.any(coef != 0, axis=0))
        return {"classes": self.classes_.tolist(), "n_actions": self.n_actions,
                "columns": used.tolist(), "coef": coef[:, used].tolist(),
                "intercept": self.model_.intercept_.tolist()}

    @classmethod
    def _rebuild(cls, params: dict, featurizer: HashedFeaturizer, fitted: dict) -> LogisticBC:
        pol = cls(featurizer, **params)
        classes = np.asarray(fitted["classes"], dtype=np.int64)
        coef = np.zeros((len(classes) if len(classes) > 2 else 1, featurizer.n_features))
        coef[:, fitted["columns"]] = np.asarray(fitted["coef"], dtype=np.float64)
        model = LogisticRegression(C=pol.C, max_iter=pol.max_iter)
        model.classes_ = classes
        model.coef_ = coef
        model.intercept_ = np.asarray(fitted["intercept"], dtype=np.float64)
        model.n_features_in_ = featurizer.n_features
        pol.model_, pol.classes_, pol.n_actions = model, classes, int(fitted["n_actions"])
        return pol


class FittedQRegressor(_Acting):
    """Fitted Q iteration with a ridge regressor over hashed phi(s, a), naive or
    support-constrained by an estimated behaviour model."""

    def __init__(self, featurizer: HashedFeaturizer, gamma: float = 0.99,
                 n_iterations: int = 60, alpha: float = 1e-3, support: str = "none",
                 behavior_model: LogisticBC | None = None, min_behavior_prob: float = 0.01,
                 epsilon: float = 0.0, tol: float = 1e-9, seed: int = 0) -> None:
        self.featurizer = featurizer
        self.tol = tol
        self.gamma = gamma
        self.n_iterations = n_iterations
        self.alpha = alpha
        self.support = support
        self.behavior_model = behavior_model
        self.min_behavior_prob = min_behavior_prob
        self.epsilon = epsilon
        self.seed = seed

    def get_params(self) -> dict:
        return {"gamma": self.gamma, "n_iterations": self.n_iterations, "alpha": self.alpha,
                "support": self.support, "min_behavior_prob": self.min_behavior_prob,
                "epsilon": self.epsilon, "tol": self.tol, "seed": self.seed}

    def allowed(self, states: np.ndarray) -> np.ndarray:
        """(m, n_actions) bool: the actions the policy may take (and back up over)."""
        if self.support == "none":
            return np.ones((len(states), self.n_actions), dtype=bool)
        pb = self.behavior_model.action_probs(states)
        ok = pb >= self.min_behavior_prob
        none = ~ok.any(axis=1)
        ok[np.flatnonzero(none), pb[none].argmax(axis=1)] = True
        return ok

    def fit(self, tr: FATransitions) -> FittedQRegressor:
        """Run n_iterations of FQI; learns theta_ (dense over the hashed columns)."""
        if self.support not in SUPPORTS:
            raise ValueError(f"support must be one of {SUPPORTS}, got {self.support!r}")
        if self.support == "behavior" and self.behavior_model is None:
            raise ValueError("support='behavior' needs a fitted behavior_model")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")
        self.n_actions = tr.n_actions
        f = self.featurizer
        cols = f.sa_index(f.codes(tr.states), tr.actions)  # (N, k)
        used, inverse = np.unique(cols, return_inverse=True)
        n, k = cols.shape
        phi = sp.csr_matrix((np.ones(n * k), inverse.reshape(-1), np.arange(0, n * k + 1, k)),
                            shape=(n, len(used)))
        gram = (phi.T @ phi + self.alpha * sp.identity(len(used))).tocsc()
        solve = spla.factorized(gram)
        next_codes = f.codes(tr.next_states)
        boot = np.flatnonzero(tr.has_next & ~tr.done)  # rows that bootstrap
        allowed_next = self.allowed(tr.next_states[boot])
        # phi(s', a') columns of every action at the next states, as positions in `used`
        # (len(used): a column the data never showed, whose weight is 0), computed once.
        next_cols = [column_positions(used, f.sa_index(next_codes[boot], a))
                     for a in range(self.n_actions)]
        w = np.zeros(len(used) + 1)
        residual = np.inf
        self.n_iter_ = 0
        for _ in range(self.n_iterations):  # iterations, each one vectorised solve
            q_next = np.column_stack([row_sums(w, c) for c in next_cols])
            y = tr.rewards.copy()
            y[boot] += self.gamma * np.where(allowed_next, q_next, -np.inf).max(axis=1)
            new = np.append(solve(phi.T @ y), 0.0)
            residual = float(np.max(np.abs(new - w)))
            w = new
            self.n_iter_ += 1
            if residual <= self.tol:
                break
        theta = np.zeros(f.n_features)
        theta[used] = w[:-1]
        self.theta_ = theta
        self.bellman_residual_ = residual
        return self

    def _q(self, codes: np.ndarray, theta: np.ndarray) -> np.ndarray:
        f = self.featurizer
        return np.stack([theta[f.sa_index(codes, a)].sum(axis=1)
                         for a in range(self.n_actions)], axis=1)  # over actions

    def q_values(self, states: np.ndarray) -> np.ndarray:
        """(m, n_actions) learned Q."""
        return self._q(self.featurizer.codes(states), self.theta_)

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        """Greedy over the allowed actions, with epsilon spread uniformly over them."""
        allowed = self.allowed(states)
        q = np.where(allowed, self.q_values(states), -np.inf)
        probs = allowed / allowed.sum(axis=1, keepdims=True) * self.epsilon
        probs[np.arange(len(q)), q.argmax(axis=1)] += 1.0 - self.epsilon
        return probs

    def _fitted(self) -> dict:
        nz = np.flatnonzero(self.theta_)
        out = {"n_actions": self.n_actions, "columns": nz.tolist(),
               "theta": self.theta_[nz].tolist(), "bellman_residual": self.bellman_residual_}
        if self.behavior_model is not None:
            out["behavior_model"] = policy_to_dict(self.behavior_model, data_hash="")
        return out

    @classmethod
    def _rebuild(cls, params: dict, featurizer: HashedFeaturizer,
                 fitted: dict) -> FittedQRegressor:
        behavior = (policy_from_dict(fitted["behavior_model"])
                    if "behavior_model" in fitted else None)
        pol = cls(featurizer, behavior_model=behavior, **params)
        theta = np.zeros(featurizer.n_features)
        theta[fitted["columns"]] = np.asarray(fitted["theta"], dtype=np.float64)
        pol.theta_, pol.n_actions = theta, int(fitted["n_actions"])
        pol.bellman_residual_ = fitted["bellman_residual"]
        return pol


FA_POLICY_CLASSES = {c.__name__: c for c in (LogisticBC, FittedQRegressor)}


def policy_to_dict(policy: LogisticBC | FittedQRegressor, data_hash: str) -> dict[str, Any]:
    """The JSON-ready artifact of a fitted FA policy."""
    name = type(policy).__name__
    if name not in FA_POLICY_CLASSES:
        raise ValueError(f"not an FA policy: {name}")
    return {"artifact_format": FA_ARTIFACT_FORMAT, "class": name,
            "params": policy.get_params(), "featurizer": policy.featurizer.get_params(),
            "fitted": policy._fitted(), "data_hash": data_hash,
            "code_version": code_version()}


def policy_from_dict(d: dict[str, Any]) -> LogisticBC | FittedQRegressor:
    """Rebuild a policy that acts like the one saved."""
    if d.get("artifact_format") != FA_ARTIFACT_FORMAT:
        raise ValueError(f"unsupported artifact format {d.get('artifact_format')!r}")
    cls = FA_POLICY_CLASSES[d["class"]]
    return cls._rebuild(d["params"], HashedFeaturizer.from_params(d["featurizer"]), d["fitted"])


def save_fa_policy(policy: LogisticBC | FittedQRegressor, path: str | Path,
                   data_hash: str) -> Path:
    """Write the artifact atomically (sorted keys, no timestamps: same inputs, same bytes)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(orjson.dumps(policy_to_dict(policy, data_hash),
                                     option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
                                     | orjson.OPT_SERIALIZE_NUMPY))
    return path


def load_fa_policy(path: str | Path) -> LogisticBC | FittedQRegressor:
    """Read an artifact written by `save_fa_policy`."""
    return policy_from_dict(orjson.loads(Path(path).read_bytes()))
