"""The one artifact format of a fitted policy: deterministic JSON, no pickle.

An artifact records what is needed to act again and to trace where the policy came from:
the learner class and its hyper-parameters (and a SWiRL learner's recipe: the selection
or weighting of the steps it cloned), the encoder (name and parameters: its
vocabularies and valid actions), the feature map, what was fitted (a one-hot policy: per
state seen, its label, cell, counts N(s, a) and Q row; a linear one: its sparse weights;
a logistic model: its coefficients), the training data's hash, the package version and
the step-schema version. Sorted keys and no timestamps: the same policy and inputs give
the same bytes. Loading rebuilds the objects from numbers.
"""

from __future__ import annotations

import functools
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracerl.data.schema import SCHEMA_VERSION
from tracerl.io.fileio import atomic_path
from tracerl.rl import features as fm
from tracerl.rl.bc import CountBC, LogisticBC
from tracerl.rl.encoding import encoder_of
from tracerl.rl.fqi import FittedQIteration

ARTIFACT_FORMAT = "tracerl.policy/2"
POLICY_CLASSES = {cls.__name__: cls for cls in (CountBC, LogisticBC, FittedQIteration)}


@functools.cache
def code_version() -> dict[str, str]:
    """The tracerl package version. No git commit: an artifact's bytes must not change with
    a commit that changes nothing it depends on (the commit goes in the run's provenance)."""
    try:
        version = metadata.version("tracerl")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"tracerl": version}


def _table(policy: Any) -> dict[str, Any]:
    """Per seen state of a one-hot policy: cell, action, counts (and Q, allowed)."""
    table = {}
    for i, key in enumerate(policy.state_keys_.tolist()):
        entry = {"cell": int(policy.cells_[i]), "action": policy.actions_[int(policy.action_[i])]
                 if hasattr(policy, "action_") else None,
                 "counts": policy.counts_[i].tolist()}  # weighted counts: floats
        if isinstance(policy, FittedQIteration):
            entry["q"] = policy.q_[i].tolist()
            entry["allowed"] = policy.allowed_[i].astype(int).tolist()
        if key in table:
            raise ValueError(f"two states share the label {key!r}")
        table[key] = entry
    return table


def fitted_of(policy: Any) -> dict[str, Any]:
    if isinstance(policy, LogisticBC):
        return policy.fitted()
    if policy.features.one_hot:
        out = {"table": _table(policy), "unsupported_states": list(policy.unsupported_states_),
               "actions": list(policy.actions_)}
    else:
        out = {"columns": policy.columns_.tolist(), "weights": policy.weights_.tolist(),
               "actions": list(policy.actions_)}
    if isinstance(policy, FittedQIteration):
        out.update(bellman_residual=policy.bellman_residual_, n_iter=policy.n_iter_)
        if policy.behavior_model is not None:
            out["behavior_model"] = policy_to_dict(policy.behavior_model, data_hash="")
    return out


def policy_to_dict(policy: Any, data_hash: str) -> dict[str, Any]:
    """The JSON-ready artifact of a fitted policy."""
    name = type(policy).__name__
    if name not in POLICY_CLASSES:
        raise ValueError(f"not a tracerl policy: {name}")
    out = {"artifact_format": ARTIFACT_FORMAT, "class": name, "params": policy.get_params(),
           "encoder": policy.encoder_.spec(), "features": policy.features.get_params(),
           "fitted": fitted_of(policy), "data_hash": data_hash,
           "code_version": code_version(), "schema_version": SCHEMA_VERSION}
    if getattr(policy, "recipe_", None):  # what a SWiRL learner fitted on (rl.learners)
        out["recipe"] = policy.recipe_
    return out


def policy_from_dict(d: dict[str, Any], encoder: Any = None) -> Any:
    """Rebuild a policy that acts like the one saved (`encoder`: the encoder it was fitted
    with, rebuilt from the artifact's spec when not given)."""
    if d.get("artifact_format") != ARTIFACT_FORMAT:
        raise ValueError(f"unsupported artifact format {d.get('artifact_format')!r}")
    encoder = encoder_of(d["encoder"]) if encoder is None else encoder
    features = fm.from_params(d["features"])
    fitted = d["fitted"]
    if d["class"] == "LogisticBC":
        policy = LogisticBC(features, **d["params"]).restore(fitted, encoder)
        if "recipe" in d:
            policy.recipe_ = d["recipe"]
        return policy
    params = dict(d["params"])
    if d["class"] == "FittedQIteration" and "behavior_model" in fitted:
        params["behavior_model"] = policy_from_dict(fitted["behavior_model"], encoder)
    policy = POLICY_CLASSES[d["class"]](features, **params)
    policy.actions_ = tuple(fitted["actions"])
    policy.n_actions = len(policy.actions_)
    policy.encoder_ = encoder
    policy.n_unseen_queries_ = 0
    if "recipe" in d:
        policy.recipe_ = d["recipe"]
    if isinstance(policy, FittedQIteration):
        policy.bellman_residual_, policy.n_iter_ = fitted["bellman_residual"], fitted["n_iter"]
        policy.converged_ = policy.bellman_residual_ <= policy.tol
    if not features.one_hot:
        policy.columns_ = np.asarray(fitted["columns"], dtype=np.int64)
        policy.weights_ = np.asarray(fitted["weights"], dtype=np.float64)
        return policy
    entries = sorted(fitted["table"].items(), key=lambda kv: kv[1]["cell"])
    n_a = len(policy.actions_)
    policy.state_keys_ = np.asarray([k for k, _ in entries], dtype=str)
    policy.cells_ = np.asarray([e["cell"] for _, e in entries], dtype=np.int64)
    counts = [e["counts"] for _, e in entries]
    whole = all(isinstance(c, int) for row in counts for c in row)
    policy.counts_ = np.asarray(counts, dtype=np.int64 if whole else np.float64).reshape(-1, n_a)
    policy.action_ = np.asarray([policy.actions_.index(e["action"]) for _, e in entries],
                                dtype=np.int64)
    policy.unsupported_states_ = list(fitted["unsupported_states"])
    if isinstance(policy, FittedQIteration):
        policy.q_ = np.asarray([e["q"] for _, e in entries], dtype=np.float64).reshape(-1, n_a)
        policy.allowed_ = np.asarray([e["allowed"] for _, e in entries],
                                     dtype=bool).reshape(-1, n_a)
    return policy


def dumps_policy(policy: Any, data_hash: str) -> bytes:
    """Canonical artifact bytes: sorted keys, trailing newline."""
    return orjson.dumps(policy_to_dict(policy, data_hash), option=orjson.OPT_SORT_KEYS
                        | orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def save_policy(policy: Any, path: str | Path, data_hash: str) -> Path:
    """Write the artifact atomically; return its path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(dumps_policy(policy, data_hash))
    return path


def load_policy(path: str | Path, encoder: Any = None) -> Any:
    """Read an artifact written by `save_policy`."""
    return policy_from_dict(orjson.loads(Path(path).read_bytes()), encoder)
