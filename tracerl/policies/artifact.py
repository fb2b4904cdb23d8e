"""Save and load fitted tabular policies as deterministic JSON artifacts.

An artifact records what is needed to act again and to trace where the policy came from:
the class and its hyper-parameters, the featurizer, the learned table (state key ->
action probabilities, N(s, a), and the Q row for FQI), the training-data hash, the package
version and the step-schema version. The JSON has sorted keys and no timestamps, so the
same policy and inputs give the same bytes.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.schema import SCHEMA_VERSION
from tracerl.features import get_featurizer
from tracerl.io.fileio import atomic_path
from tracerl.policies.tabular import BehaviorCloning, FittedQIteration, TabularPolicyBase

ARTIFACT_FORMAT = 1
POLICY_CLASSES: dict[str, type[TabularPolicyBase]] = {
    cls.__name__: cls for cls in (BehaviorCloning, FittedQIteration)
}


def _feed(digest: Any, name: str, arr: pa.Array) -> None:
    """Hash an array's content (name, type, validity, values), never its buffer layout.

    Values under nulls and bytes outside a slice are not read, so equal tables built in
    different ways (sliced, re-chunked, read back from Parquet) hash the same.
    """
    kind = arr.type
    # Nested types are tagged by kind only: their children are fed with their own types,
    # and a list's item field name ("item" / Parquet's "element") is not content.
    tag = ("struct" if pa.types.is_struct(kind) else "map" if pa.types.is_map(kind)
           else "list" if pa.types.is_list(kind) or pa.types.is_large_list(kind)
           else str(kind))
    digest.update(f"{name}\x1f{tag}\x1f{len(arr)}\n".encode())
    digest.update(np.packbits(arr.is_valid().to_numpy(zero_copy_only=False)).tobytes())
    if pa.types.is_struct(kind):
        for field, child in zip(kind, arr.flatten(), strict=True):  # parent nulls merged in
            _feed(digest, f"{name}.{field.name}", child)
    elif pa.types.is_map(kind):
        entry = pa.struct([pa.field("key", kind.key_type, nullable=False),
                           pa.field("value", kind.item_type)])
        _feed(digest, name, arr.cast(pa.list_(entry)))
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy()
        digest.update(lengths.astype(np.int64).tobytes())
        _feed(digest, f"{name}[]", pc.list_flatten(arr))
    elif pa.types.is_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        filled = pc.fill_null(arr, "" if pa.types.is_string(kind)
                              or pa.types.is_large_string(kind) else b"")
        width = np.int64 if pa.types.is_large_string(kind) \
            or pa.types.is_large_binary(kind) else np.int32
        _, offsets_buf, data = filled.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=width)[
            filled.offset : filled.offset + len(filled) + 1]
        digest.update(np.diff(offsets).astype(np.int64).tobytes())
        if data is not None and len(filled):
            digest.update(memoryview(data)[offsets[0] : offsets[-1]])
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        zero = False if pa.types.is_boolean(kind) else 0
        digest.update(pc.fill_null(arr, zero).to_numpy(zero_copy_only=False).tobytes())
    else:  # other types do not occur in the step schema: hash their JSON text
        digest.update(orjson.dumps(arr.to_pylist(), default=str))


def table_hash(table: pa.Table) -> str:
    """sha256 hex over the table's column names, types, validity and values, in order.

    Depends only on content: chunking, slicing and schema metadata do not change it.
    """
    digest = hashlib.sha256()
    digest.update(f"tracerl.table_hash/1\x1f{table.num_columns}\n".encode())
    for name, column in zip(table.column_names, table.columns, strict=True):
        _feed(digest, name, column.combine_chunks())
    return digest.hexdigest()


@functools.cache
def code_version() -> dict[str, str]:
    """The tracerl package version. No git commit: an artifact's bytes must not change with
    a commit that changes nothing it depends on (the commit goes in the run's provenance)."""
    try:
        version = metadata.version("tracerl")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"tracerl": version}


def policy_to_dict(policy: TabularPolicyBase, data_hash: str) -> dict[str, Any]:
    """The artifact of a fitted policy as a JSON-ready dict."""
    name = type(policy).__name__
    if name not in POLICY_CLASSES or not hasattr(policy, "action_"):
        raise ValueError(f"not a fitted tabular policy: {name}")
    probs = policy.action_probs(policy.state_keys_)  # all seen: adds no unseen queries
    table = {}
    for i, key in enumerate(policy.state_keys_.tolist()):
        entry: dict[str, Any] = {
            "action": policy.actions_[int(policy.action_[i])],
            "probs": probs[i].tolist(),
            "counts": policy.counts_[i].astype(int).tolist(),
        }
        if isinstance(policy, FittedQIteration):
            entry["q"] = policy.q_[i].tolist()
        table[key] = entry
    fitted: dict[str, Any] = {"unsupported_states": list(policy.unsupported_states_)}
    if isinstance(policy, FittedQIteration):
        fitted["bellman_residual"] = policy.bellman_residual_
    return {
        "artifact_format": ARTIFACT_FORMAT,
        "class": name,
        "params": policy.get_params(),
        "featurizer": {"name": policy.featurizer_.name,
                       "params": policy.featurizer_.get_params()},
        "actions": list(policy.actions_),
        "table": table,
        "fitted": fitted,
        "data_hash": data_hash,
        "code_version": code_version(),
        "schema_version": SCHEMA_VERSION,
    }


def dumps_policy(policy: TabularPolicyBase, data_hash: str) -> bytes:
    """Canonical artifact bytes: sorted keys, 2-space indent, trailing newline."""
    return orjson.dumps(policy_to_dict(policy, data_hash),
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2
                        | orjson.OPT_APPEND_NEWLINE)


def save_policy(policy: TabularPolicyBase, path: str | Path, data_hash: str) -> Path:
    """Write the artifact atomically; return its path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(dumps_policy(policy, data_hash))
    return path


def policy_from_dict(artifact: dict[str, Any]) -> TabularPolicyBase:
    """Rebuild a fitted policy that acts like the one saved."""
    if artifact.get("artifact_format") != ARTIFACT_FORMAT:
        raise ValueError(f"unsupported artifact format {artifact.get('artifact_format')!r}")
    cls = POLICY_CLASSES[artifact["class"]]
    policy = cls(**artifact["params"])
    featurizer = get_featurizer(artifact["featurizer"]["name"],
                                **artifact["featurizer"]["params"])
    actions = tuple(artifact["actions"])
    if tuple(featurizer.actions) != actions:
        raise ValueError("artifact actions differ from its featurizer's actions")
    keys = sorted(artifact["table"])
    rows = [artifact["table"][k] for k in keys]
    n_a = len(actions)
    policy.actions_ = actions
    policy.state_keys_ = np.asarray(keys, dtype=str)
    probs = np.array([r["probs"] for r in rows], dtype=np.float64).reshape(-1, n_a)
    policy.action_ = probs.argmax(axis=1).astype(np.int64)
    policy.counts_ = np.array([r["counts"] for r in rows], dtype=np.int64).reshape(-1, n_a)
    policy.unsupported_states_ = list(artifact["fitted"]["unsupported_states"])
    policy.featurizer_ = featurizer
    policy.n_unseen_queries_ = 0
    if isinstance(policy, FittedQIteration):
        policy.q_ = np.array([r["q"] for r in rows], dtype=np.float64).reshape(-1, n_a)
        valid = np.zeros((len(keys), n_a), dtype=bool)
        for i, key in enumerate(keys):
            valid[i, list(featurizer.valid_actions(key))] = True
        policy.support_ = (policy.counts_ > 0) & valid
        policy.bellman_residual_ = artifact["fitted"]["bellman_residual"]
    return policy


def load_policy(path: str | Path) -> TabularPolicyBase:
    """Read an artifact written by `save_policy`."""
    return policy_from_dict(orjson.loads(Path(path).read_bytes()))
