"""Candidates from outside tracerl: a scored table, or a Python policy named by import path.

A team's new agent (a new model, prompt or agent version) is judged offline from what it
says about the logged histories. Two forms, declared in params (`ope.candidates.external`,
`tracerl.config.learning.External`), each made into the one `Candidate` OPE consumes
(`tracerl.ope.candidate`):

- a **scored table** (Parquet, or JSONL with one step per line), keyed by the step table's
  (``episode_id``, ``t``): ``target_logprob``, log pi_e(a_t | history_t) of the logged action
  (teacher forcing the candidate on the logged history); optionally ``target_probs``, the
  candidate's distribution over the action abstraction at that step ({action name: prob};
  names it leaves out have probability 0), which the critic and DR need; optionally
  ``action``, the logged action's name, checked against the logs. Scoring settings (model,
  temperature, top_p, how scored) come from params (`scoring:`) and/or the file's metadata:
  Parquet key-value metadata ``tracerl.scoring`` (a JSON object) and ``tracerl.dataset``;
  in JSONL a first line without ``episode_id``: ``{"dataset": ..., "scoring": {...}}``.
  They become the candidate's provenance with the file's sha256.
- **behaviour log-probs**: the logs' ``action_logprobs`` (the engine's default), or a second
  scored table of the behaviour (`behavior_scored`: same format, its ``target_logprob`` is
  log pi_b of the logged action), else estimated by the engine (and flagged so).
- a **Python policy**, ``package.module:factory`` called with `kwargs`, returning a
  `tracerl.rl.policy.Policy` over the encoder's state rows: `Candidate.of_policy`, so
  replay (where the fixture brings it), the critic and the IS family all use it.

Rows are aligned to the dataset's `Transitions` order (episode_id, then t); bad input is a
`ScoredTableError` naming the file, the record (1-based line of a JSONL file, 0-based row
of a Parquet table), the field and the reason. Work is vectorised: one join of the keys,
array checks, no Python loop over rows.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from tracerl.config.registry import Ref
from tracerl.ope.candidate import Candidate
from tracerl.rl.encoding import step_order
from tracerl.rl.policy import Policy
from tracerl.rl.transitions import Transitions

FORMAT = "tracerl.scored/1"
META_SCORING, META_DATASET = b"tracerl.scoring", b"tracerl.dataset"
PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
DATASET_PLACEHOLDER = "{dataset}"
_KEYS = ("episode_id", "t")


class ScoredTableError(ValueError):
    """A scored table (or a Python policy) that cannot be used; str() names the file, the
    record, the field and the reason."""


class ExternalPolicyError(ValueError):
    """A Python policy candidate that cannot be loaded or called."""


@dataclass(frozen=True)
class StepKeys:
    """The (episode_id, t) of every step of one dataset in its `Transitions` order, and the
    name of each logged action."""

    dataset: str
    episode_id: np.ndarray   # object (str)
    t: np.ndarray            # int64
    action: np.ndarray       # object (str): the logged action's name
    actions: tuple[str, ...]  # the action abstraction (the encoder's)
    # Every step of the dataset, the evaluated ones and those left out (another split): a
    # table may score them all; a record of no step at all is an error.
    known: pd.MultiIndex | None = None

    @classmethod
    def of(cls, dataset: str, steps: pa.Table, tr: Transitions,
           all_steps: pa.Table | None = None) -> StepKeys:
        """The keys of `steps` in the order every encoder gives its transitions;
        `all_steps`: the dataset's whole step table when `steps` is a part of it."""
        order = pa.array(step_order(steps), type=pa.int64())
        ids = steps.column("episode_id").take(order).to_numpy(zero_copy_only=False)
        t = steps.column("t").take(order).to_numpy(zero_copy_only=False).astype(np.int64)
        if len(ids) != tr.n:
            raise ValueError(f"dataset {dataset}: {len(ids)} steps but {tr.n} transitions")
        names = np.asarray(tr.actions, dtype=object)
        known = None if all_steps is None else pd.MultiIndex.from_arrays(
            [all_steps.column("episode_id").to_numpy(zero_copy_only=False),
             all_steps.column("t").to_numpy(zero_copy_only=False).astype(np.int64)])
        return cls(dataset, np.asarray(ids, dtype=object), t, names[tr.a], tr.actions, known)

    @property
    def n(self) -> int:
        return len(self.t)


def sha256_of(path: Path) -> str:
    """sha256 of a file's bytes, or of a Parquet folder's files (names in order, then bytes)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(f.relative_to(path).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ScoredTable:
    """One scored file as read: its table, its metadata and how to name a row in errors."""

    path: Path
    table: pa.Table
    scoring: dict[str, Any]
    dataset: str | None
    jsonl: bool
    first_line: int  # line number of the table's row 0 (JSONL: 1, or 2 after a header)

    def record(self, row: int) -> str:
        """How an error names row `row` of the table."""
        return (f"line {self.first_line + row}" if self.jsonl else f"row {row}")

    def where(self, row: int, field: str) -> str:
        return f"{self.path}: record {self.record(row)}, field {field}"


def read_scored(path: Path | str) -> ScoredTable:
    """A scored table (Parquet file or folder, or JSONL) with its metadata."""
    path = Path(path)
    if not path.exists():
        raise ScoredTableError(f"{path}: no such scored table")
    if path.is_dir() or path.suffix.lower() in PARQUET_SUFFIXES:
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise ScoredTableError(f"{path}: not a readable Parquet table: {exc}") from None
        meta = table.schema.metadata or {}
        scoring = _json_meta(path, meta.get(META_SCORING), META_SCORING.decode())
        dataset = meta.get(META_DATASET)
        return ScoredTable(path, table.replace_schema_metadata(None), scoring or {},
                           None if dataset is None else dataset.decode(), False, 0)
    if path.suffix.lower() not in JSONL_SUFFIXES:
        raise ScoredTableError(f"{path}: a scored table is Parquet ({', '.join(PARQUET_SUFFIXES)}"
                               f") or JSONL ({', '.join(JSONL_SUFFIXES)})")
    data = path.read_bytes()
    first, _, rest = data.partition(b"\n")
    header: dict[str, Any] = {}
    first_line = 1
    try:
        head = orjson.loads(first) if first.strip() else None
    except orjson.JSONDecodeError as exc:
        raise ScoredTableError(f"{path}: record line 1: not JSON: {exc}") from None
    if isinstance(head, dict) and "episode_id" not in head:
        unknown = sorted(set(head) - {"dataset", "scoring", "format"})
        if unknown:
            raise ScoredTableError(f"{path}: record line 1, field {unknown[0]}: a header line "
                                   "holds only dataset, scoring and format (a step needs "
                                   "episode_id)")
        if not isinstance(head.get("scoring", {}), dict):
            raise ScoredTableError(f"{path}: record line 1, field scoring: expected an object")
        header, data, first_line = head, rest, 2
    if not data.strip():
        raise ScoredTableError(f"{path}: no scored steps")
    schema = pa.schema([("episode_id", pa.string()), ("t", pa.int64()),
                        ("target_logprob", pa.float64()), ("action", pa.string())])
    try:  # one block: types are inferred from every line, not the first block's
        table = pajson.read_json(
            io.BytesIO(data), read_options=pajson.ReadOptions(block_size=len(data) + 1),
            parse_options=pajson.ParseOptions(explicit_schema=schema,
                                              unexpected_field_behavior="infer",
                                              newlines_in_values=False))
    except pa.ArrowInvalid as exc:
        raise ScoredTableError(_json_error(path, str(exc), first_line)) from None
    return ScoredTable(path, table, dict(header.get("scoring") or {}), header.get("dataset"),
                       True, first_line)


def _json_error(path: Path, message: str, first_line: int) -> str:
    """Arrow's JSON error as file, record (line), field and reason."""
    row = re.search(r" in row (\d+)", message)
    column = re.search(r"Column\(/([^)]*)\)", message)
    reason = re.sub(r"^JSON parse error: | in row \d+$", "", message)
    reason = re.sub(r"Column\(/[^)]*\) changed from (\w+) to (\w+)", r"expected a \1, got a \2",
                    reason)
    where = f"record line {first_line + int(row.group(1))}" if row else "records"
    field = f", field {column.group(1)}" if column else ""
    return f"{path}: {where}{field}: {reason} (JSON lines of scored steps expected)"


def _json_meta(path: Path, raw: bytes | None, key: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ScoredTableError(f"{path}: metadata {key}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ScoredTableError(f"{path}: metadata {key}: expected a JSON object")
    return value


def _column(st: ScoredTable, name: str, *, required: bool = True) -> pa.ChunkedArray | None:
    if name not in st.table.column_names:
        if required:
            raise ScoredTableError(f"{st.path}: field {name} missing (columns: "
                                   f"{', '.join(st.table.column_names)})")
        return None
    column = st.table.column(name)
    if len(column) and column.null_count == len(column):  # JSONL: no line has it
        if required:
            raise ScoredTableError(f"{st.path}: field {name} missing (no record has it)")
        return None
    if column.null_count and required:
        row = int(np.flatnonzero(~column.is_valid().to_numpy(zero_copy_only=False))[0])
        raise ScoredTableError(f"{st.where(row, name)}: null ({column.null_count} record(s))")
    return column


def _floats(st: ScoredTable, name: str) -> np.ndarray:
    column = _column(st, name)
    try:
        return column.cast(pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise ScoredTableError(f"{st.path}: field {name}: expected numbers, got "
                               f"{column.type}") from None


def align(st: ScoredTable, keys: StepKeys) -> np.ndarray:
    """The table's row of each step of `keys` (its Transitions order); errors for duplicate
    keys, rows that are no step of the dataset, steps without a row, a table written for
    another dataset, and a logged action that is not the dataset's."""
    if st.dataset is not None and st.dataset != keys.dataset:
        raise ScoredTableError(f"{st.path}: metadata dataset: the table was scored on "
                               f"dataset {st.dataset!r}, evaluated here on {keys.dataset!r}")
    ids = _column(st, "episode_id")
    if not pa.types.is_string(ids.type) and not pa.types.is_large_string(ids.type):
        ids = ids.cast(pa.string())
    t_col = _column(st, "t")
    if not pa.types.is_integer(t_col.type):
        raise ScoredTableError(f"{st.path}: field t: expected integers, got {t_col.type}")
    table_index = pd.MultiIndex.from_arrays(
        [ids.to_numpy(zero_copy_only=False), t_col.to_numpy().astype(np.int64)])
    dup = np.flatnonzero(table_index.duplicated())
    if len(dup):
        row = int(dup[0])
        raise ScoredTableError(f"{st.where(row, 'episode_id, t')}: duplicate key "
                               f"(episode {table_index[row][0]}, t {table_index[row][1]}); "
                               f"{len(dup)} duplicate row(s)")
    step_index = pd.MultiIndex.from_arrays([keys.episode_id, keys.t])
    extra = np.flatnonzero((keys.known if keys.known is not None else step_index)
                           .get_indexer(table_index) < 0)
    if len(extra):
        row = int(extra[0])
        raise ScoredTableError(
            f"{st.where(row, 'episode_id, t')}: (episode {table_index[row][0]}, t "
            f"{table_index[row][1]}) is not a step of dataset {keys.dataset} ({len(extra)} "
            f"such record(s)): a table scored on another dataset, split or version of the "
            f"logs?")
    at = table_index.get_indexer(step_index)
    missing = np.flatnonzero(at < 0)
    if len(missing):
        k = int(missing[0])
        raise ScoredTableError(f"{st.path}: {len(missing)} step(s) of dataset {keys.dataset} "
                               f"have no record, e.g. episode {keys.episode_id[k]} t "
                               f"{keys.t[k]}: score every logged step")
    action = _column(st, "action", required=False)
    if action is not None:
        named = np.asarray(action.to_numpy(zero_copy_only=False), dtype=object)[at]
        wrong = np.flatnonzero((named != keys.action) & pd.notna(named))
        if len(wrong):
            k = int(wrong[0])
            raise ScoredTableError(
                f"{st.where(int(at[k]), 'action')}: {named[k]!r}, but the logs took "
                f"{keys.action[k]!r} at episode {keys.episode_id[k]} t {keys.t[k]} "
                f"({len(wrong)} record(s)): a table for another dataset?")
    return at


def _logprobs(st: ScoredTable, at: np.ndarray, tolerance: float, *, behavior: bool
              ) -> np.ndarray:
    """`target_logprob` per step: finite or -inf (a target that never takes the logged
    action; a behaviour must have taken it), <= 0 (up to `tolerance`, then set to 0)."""
    lp = _floats(st, "target_logprob")
    bad = np.isnan(lp)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ScoredTableError(f"{st.where(row, 'target_logprob')}: NaN ({int(bad.sum())} "
                               "record(s))")
    positive = lp > math.log1p(tolerance)
    if positive.any():
        row = int(np.flatnonzero(positive)[0])
        raise ScoredTableError(f"{st.where(row, 'target_logprob')}: {lp[row]} > 0: not a "
                               f"log-probability ({int(positive.sum())} record(s))")
    if behavior and np.isneginf(lp).any():
        row = int(np.flatnonzero(np.isneginf(lp))[0])
        raise ScoredTableError(f"{st.where(row, 'target_logprob')}: -inf: the behaviour took "
                               "this action, so its probability cannot be 0")
    return np.minimum(lp, 0.0)[at]


def _probs(st: ScoredTable, at: np.ndarray, keys: StepKeys, tolerance: float
           ) -> np.ndarray | None:
    """`target_probs` as (steps, actions) in the encoder's action order, or None."""
    column = _column(st, "target_probs", required=False)
    if column is None:
        return None
    column = column.combine_chunks()
    n, names = len(column), keys.actions
    matrix = np.zeros((n, len(names)))
    if pa.types.is_struct(column.type):
        fields = [column.type.field(i).name for i in range(column.type.num_fields)]
        unknown = [f for f in fields if f not in names]
        if unknown:
            col = column.field(unknown[0])
            rows = np.flatnonzero(col.is_valid().to_numpy(zero_copy_only=False))
            row = int(rows[0]) if len(rows) else 0
            raise ScoredTableError(
                f"{st.where(row, 'target_probs')}: unknown action {unknown[0]!r}; the "
                f"dataset's actions: {', '.join(names)}")
        for f in fields:
            values = column.field(f)
            try:
                values = values.cast(pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise ScoredTableError(f"{st.path}: field target_probs.{f}: expected numbers"
                                       f", got {values.type}") from None
            matrix[:, names.index(f)] = pc.fill_null(values, 0.0).to_numpy(
                zero_copy_only=False)
    elif pa.types.is_map(column.type):
        # As a list of (key, value) structs: list kernels do not take maps in every Arrow.
        try:
            pairs = column.cast(pa.list_(pa.struct([("key", pa.string()),
                                                    ("value", pa.float64())])))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise ScoredTableError(f"{st.path}: field target_probs: expected a map of action "
                                   f"name to number, got {column.type}") from None
        parents = pc.list_parent_indices(pairs).to_numpy()
        flat = pc.list_flatten(pairs)
        flat_keys = np.asarray(flat.field("key").to_numpy(zero_copy_only=False), dtype=object)
        values = pc.fill_null(flat.field("value"), np.nan).to_numpy(zero_copy_only=False)
        code = pd.Index(names).get_indexer(flat_keys)
        if (code < 0).any():
            j = int(np.flatnonzero(code < 0)[0])
            raise ScoredTableError(
                f"{st.where(int(parents[j]), 'target_probs')}: unknown action "
                f"{flat_keys[j]!r}; the dataset's actions: {', '.join(names)}")
        if len(pd.MultiIndex.from_arrays([parents, code]).duplicated().nonzero()[0]):
            j = int(np.flatnonzero(pd.MultiIndex.from_arrays([parents, code]).duplicated())[0])
            raise ScoredTableError(f"{st.where(int(parents[j]), 'target_probs')}: action "
                                   f"{flat_keys[j]!r} given twice")
        matrix[parents, code] = values
    else:
        raise ScoredTableError(f"{st.path}: field target_probs: expected an object {{action "
                               f"name: probability}} per record, got {column.type}")
    null = ~column.is_valid().to_numpy(zero_copy_only=False)
    if null.any():
        row = int(np.flatnonzero(null)[0])
        raise ScoredTableError(f"{st.where(row, 'target_probs')}: null ({int(null.sum())} "
                               "record(s)): give the distribution at every step or none")
    bad = ~np.isfinite(matrix) | (matrix < -tolerance) | (matrix > 1 + tolerance)
    if bad.any():
        row, j = (int(x[0]) for x in np.nonzero(bad))
        raise ScoredTableError(f"{st.where(row, f'target_probs.{names[j]}')}: {matrix[row, j]}"
                               " is not a probability")
    total = matrix.sum(axis=1)
    off = np.abs(total - 1.0) > tolerance
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise ScoredTableError(f"{st.where(row, 'target_probs')}: sums to {total[row]:.9g}, not"
                               f" 1 within {tolerance:g} ({int(off.sum())} record(s))")
    # Rows off by rounding only are kept bit for bit (a table and the policy it scored give
    # the same estimates); the others, within the tolerance, are renormalised.
    total = np.where(np.abs(total - 1.0) > 1e-12, total, 1.0)
    return np.clip(matrix, 0.0, 1.0)[at] / total[at, None]


def _merge_scoring(path: Path, from_table: Mapping[str, Any], from_params: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """The scoring settings of the file and of params; a setting both give must agree."""
    for key in sorted(set(from_table) & set(from_params)):
        if from_table[key] != from_params[key]:
            raise ScoredTableError(f"{path}: metadata scoring.{key}: the file says "
                                   f"{from_table[key]!r}, params say {from_params[key]!r}")
    return {**dict(from_table), **dict(from_params)}


def scored_path(template: str, dataset: str) -> Path:
    """The file of `dataset`: ``{dataset}`` in the declared path is the dataset's name."""
    return Path(template.replace(DATASET_PLACEHOLDER, dataset))


def load_scored(name: str, keys: StepKeys, scored: str, *,
                behavior_scored: str | None = None, scoring: Mapping[str, Any] | None = None,
                tolerance: float = 1e-5) -> Candidate:
    """The candidate of a scored table (and the behaviour's, if given) on one dataset."""
    path = scored_path(scored, keys.dataset)
    st = read_scored(path)
    at = align(st, keys)
    logged = _logprobs(st, at, tolerance, behavior=False)
    probs = _probs(st, at, keys, tolerance)
    if probs is not None:
        at_logged = probs[np.arange(keys.n), pd.Index(keys.actions).get_indexer(keys.action)]
        gap = np.abs(at_logged - np.exp(logged))
        off = gap > tolerance
        if off.any():
            k = int(np.flatnonzero(off)[0])
            raise ScoredTableError(
                f"{st.where(int(at[k]), 'target_probs')}: gives the logged action "
                f"{keys.action[k]!r} probability {at_logged[k]:.9g}, but exp(target_logprob) "
                f"= {math.exp(logged[k]):.9g} ({int(off.sum())} record(s))")
    provenance: dict[str, Any] = {
        "source": "scored table", "format": FORMAT, "file": str(path),
        "sha256": sha256_of(path), "records": st.table.num_rows,
        "scoring": _merge_scoring(path, st.scoring, scoring or {}),
        "distribution": "target_probs" if probs is not None else None}
    behavior = None
    if behavior_scored is not None:
        bpath = scored_path(behavior_scored, keys.dataset)
        bt = read_scored(bpath)
        behavior = _logprobs(bt, align(bt, keys), tolerance, behavior=True)
        provenance["behavior"] = {"source": "scored table", "file": str(bpath),
                                  "sha256": sha256_of(bpath), "scoring": dict(bt.scoring)}
    else:
        provenance["behavior"] = {"source": "the logs' action_logprobs, else estimated"}
    return Candidate(name, None, logged, probs, behavior, provenance)


def load_factory(target: str) -> Any:
    """The callable `package.module:factory` names."""
    if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", target):
        raise ExternalPolicyError(f"policy {target!r}: expected 'package.module:factory'")
    try:
        factory = Ref(target).resolve()
    except ImportError as exc:
        raise ExternalPolicyError(f"policy {target!r}: cannot import "
                                  f"{target.partition(':')[0]}: {exc}") from None
    except AttributeError:
        raise ExternalPolicyError(f"policy {target!r}: module {target.partition(':')[0]} has "
                                  f"no {target.partition(':')[2]!r}") from None
    if not callable(factory):
        raise ExternalPolicyError(f"policy {target!r}: not callable")
    return factory


def load_policy(name: str, tr: Transitions, target: str, kwargs: Mapping[str, Any] | None = None,
                *, tolerance: float = 1e-5) -> Candidate:
    """The candidate of a Python policy: `target`(**kwargs), checked on the logged states."""
    policy = load_factory(target)(**dict(kwargs or {}))
    if not isinstance(policy, Policy):
        raise ExternalPolicyError(f"policy {target!r}: returned {type(policy).__name__}, which "
                                  "has no action_probs(states) (tracerl.rl.policy.Policy)")
    probs = np.asarray(policy.action_probs(tr.rows), dtype=np.float64)
    if probs.shape != (tr.n_states, tr.n_actions):
        raise ExternalPolicyError(f"policy {target!r}: action_probs gave shape {probs.shape} on"
                                  f" {tr.n_states} states, expected ({tr.n_states}, "
                                  f"{tr.n_actions}) over the actions {', '.join(tr.actions)}")
    bad = ~np.isfinite(probs) | (probs < -tolerance) | (np.abs(probs.sum(axis=1) - 1)
                                                        > tolerance)[:, None]
    if bad.any():
        state = int(np.nonzero(bad)[0][0])
        raise ExternalPolicyError(f"policy {target!r}: action_probs at state "
                                  f"{tr.labels[state]} is not a distribution: "
                                  f"{np.round(probs[state], 6).tolist()}")
    return Candidate.of_policy(name, policy, tr, provenance={
        "source": "python policy", "policy": target, "kwargs": dict(kwargs or {})})


def external_names(spec: Mapping[str, Any], dataset: str,
                   known: Sequence[str] | None = None) -> list[str]:
    """The external candidates declared for `dataset`, in params order; with `known` (the
    pipeline's datasets), a candidate naming another dataset is an error, not a candidate
    silently left out."""
    for name, c in spec.items():
        unknown = sorted(set(c.datasets or ()) - set(known if known is not None else
                                                      c.datasets or ()))
        if unknown:
            raise ValueError(f"ope.candidates.external.{name}.datasets: {unknown[0]!r} is not "
                             f"a dataset of this pipeline ({', '.join(known or [])})")
    return [name for name, c in spec.items() if c.datasets is None or dataset in c.datasets]


def load_external(spec: Mapping[str, Any], dataset: str, steps: pa.Table, tr: Transitions,
                  all_steps: pa.Table | None = None) -> dict[str, Candidate]:
    """Every external candidate declared for `dataset` (params `ope.candidates.external`)
    on its evaluated `steps` (`tr` their transitions); `all_steps`: the whole step table
    when `steps` is one split of it (records of the other splits are then ignored)."""
    keys = None
    out: dict[str, Candidate] = {}
    for name in external_names(spec, dataset):
        c = spec[name]
        if c.scored is not None:
            keys = keys or StepKeys.of(dataset, steps, tr, all_steps)
            out[name] = load_scored(name, keys, c.scored, behavior_scored=c.behavior_scored,
                                    scoring=c.scoring, tolerance=c.prob_tolerance)
        else:
            out[name] = load_policy(name, tr, c.policy, c.kwargs, tolerance=c.prob_tolerance)
    return out


def scored_files(spec: Mapping[str, Any], datasets: Sequence[str]) -> list[str]:
    """Every scored file the declared candidates read on `datasets` (the ope stage's data
    deps), in declaration order."""
    files: list[str] = []
    for c in spec.values():
        for template in (c.scored, c.behavior_scored):
            if template is None:
                continue
            for d in datasets if DATASET_PLACEHOLDER in template else [None]:
                if d is None or c.datasets is None or d in c.datasets:
                    files.append(template if d is None else str(scored_path(template, d)))
    return list(dict.fromkeys(files))


def write_scored(path: Path | str, episode_id: Sequence[str], t: Sequence[int],
                 target_logprob: Sequence[float], *, actions: Sequence[str] | None = None,
                 target_probs: np.ndarray | None = None, logged_action: Sequence[str] | None
                 = None, scoring: Mapping[str, Any] | None = None, dataset: str | None = None
                 ) -> Path:
    """A scored table in the format `read_scored` reads (Parquet or JSONL by suffix);
    `target_probs` (steps, len(actions)) is written as {action: prob}, zeros left out."""
    path = Path(path)
    columns: dict[str, Any] = {"episode_id": pa.array(list(episode_id), pa.string()),
                               "t": pa.array(np.asarray(t, dtype=np.int64)),
                               "target_logprob": pa.array(np.asarray(target_logprob, float))}
    if logged_action is not None:
        columns["action"] = pa.array(list(logged_action), pa.string())
    if target_probs is not None:
        if actions is None:
            raise ValueError("target_probs needs the action names")
        probs = np.asarray(target_probs, dtype=np.float64)
        nz = probs > 0
        offsets = np.r_[0, np.cumsum(nz.sum(axis=1))].astype(np.int32)
        names = np.asarray(list(actions), dtype=object)[np.nonzero(nz)[1]]
        columns["target_probs"] = pa.MapArray.from_arrays(
            pa.array(offsets), pa.array(names, pa.string()), pa.array(probs[nz]))
    table = pa.table(columns)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in PARQUET_SUFFIXES:
        meta = {META_SCORING: orjson.dumps(dict(scoring or {}))}
        if dataset is not None:
            meta[META_DATASET] = dataset.encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
        return path
    with open(path, "wb") as f:
        if scoring or dataset is not None:
            f.write(orjson.dumps({"format": FORMAT, **({"dataset": dataset} if dataset else {}),
                                  "scoring": dict(scoring or {})}) + b"\n")
        # JSON has no infinity: a logged action the candidate never takes gets the most
        # negative float, whose exp is 0 (read back as is).
        table = table.set_column(2, "target_logprob", pc.max_element_wise(
            table.column("target_logprob"), pa.scalar(-np.finfo(np.float64).max)))
        for row in table.to_pylist():  # JSON lines are written per record by nature
            if "target_probs" in row:
                row["target_probs"] = dict(row["target_probs"])
            f.write(orjson.dumps(row) + b"\n")
    return path


__all__ = ["ExternalPolicyError", "ScoredTable", "ScoredTableError", "StepKeys", "align",
           "external_names", "load_external", "load_factory", "load_policy", "load_scored",
           "read_scored", "scored_files", "scored_path", "sha256_of", "write_scored"]
