"""Offline reward relabelling with registered verifiers, and SWiRL-style episode filters.

relabel() recomputes reward_components and the scalar reward from the log alone, keeping
the logged reward in ``reward_logged``. The filters keep whole episodes: process-filtered
(every step judged good) or outcome-filtered (the episode ended correct), as in SWiRL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.schema import REWARD_COMPONENTS_TYPE, upgrade_table
from tracerl.data.verifiers import (
    Verifier,
    as_numpy,
    column,
    episode_codes,
    flatten_lists,
    get_verifier,
)

REWARD_SOURCE = "relabel"
MODES = ("all", "process", "outcome", "process+outcome")


def _resolve(verifiers: Sequence[str]) -> list[Verifier]:
    """Registered verifiers sorted by id (stable whatever order they were given in)."""
    if isinstance(verifiers, str):  # a bare id would otherwise be split into characters
        verifiers = [verifiers]
    resolved = [get_verifier(v) for v in sorted(set(verifiers))]
    seen: dict[str, str] = {}
    for v in resolved:
        if v.component in seen:
            raise ValueError(f"verifiers {seen[v.component]!r} and {v.id!r} both produce "
                             f"component {v.component!r}")
        seen[v.component] = v.id
    return resolved


@dataclass(frozen=True)
class Labels:
    """What relabel writes into a step table of n rows: the new reward and
    reward_components columns (row-aligned, n rows) and the verifiers' ids."""

    reward: pa.Array
    components: pa.Array
    verifier_version: str

    def apply(self, steps: pa.Table, offset: int = 0) -> pa.Table:
        """`steps` (rows offset .. offset + steps.num_rows of the scored table, schema v2)
        with the labels of those rows: reward, reward_components, reward_source
        "relabel", verifier_version, and reward_logged keeping the logged reward (an
        existing reward_logged is kept). Row order and every other column are unchanged;
        labelling a table part by part gives the same columns (and the same Parquet bytes)
        as labelling it whole."""
        n, total = steps.num_rows, len(self.reward)
        if offset < 0 or offset + n > total:
            raise ValueError(f"rows {offset}..{offset + n} are not within the {total} "
                             f"labelled rows")
        out = steps
        if "reward_logged" not in out.column_names:
            out = out.append_column(pa.field("reward_logged", pa.float64()),
                                    steps.column("reward"))
        replacements = {
            "reward": self.reward.slice(offset, n),
            "reward_components": self.components.slice(offset, n),
            "reward_source": _repeat(REWARD_SOURCE, n),
            "verifier_version": _repeat(self.verifier_version, n),
        }
        for name, arr in replacements.items():
            i = out.schema.get_field_index(name)
            out = out.set_column(i, out.schema.field(i), arr)
        return out


def _repeat(value: str, n: int) -> pa.Array:
    return pa.repeat(value, n).cast(pa.string())


def score(steps: pa.Table, verifiers: Sequence[str], weights: Mapping[str, float]) -> Labels:
    """The given verifiers' scores of `steps` as Labels (see `relabel`); `steps` needs only
    the columns the verifiers read (`columns_read`)."""
    steps = upgrade_table(steps)  # a v1 table comes out with the v2 columns (null)
    chosen = _resolve(verifiers)
    if not chosen:
        raise ValueError("relabel needs at least one verifier")
    missing = [v.component for v in chosen if v.component not in weights]
    if missing:
        raise KeyError(f"no weight for component(s) {missing}; weights has {sorted(weights)}")

    n, k = steps.num_rows, len(chosen)
    scores = np.empty((n, k))
    for j, v in enumerate(chosen):
        s = np.asarray(v.score(steps), dtype=np.float64)
        if s.shape != (n,):
            raise ValueError(f"verifier {v.id} returned shape {s.shape}, expected ({n},)")
        scores[:, j] = s
    w = np.array([float(weights[v.component]) for v in chosen])
    # Accumulate term by term in component order: the same float sum for every row.
    reward = np.zeros(n)
    for j in range(k):
        reward += w[j] * scores[:, j]

    names = pa.array([v.component for v in chosen], type=pa.string())
    components = pa.MapArray.from_arrays(
        pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)),
        names.take(np.tile(np.arange(k), n)),
        pa.array(scores.ravel()),
        type=REWARD_COMPONENTS_TYPE,
    )
    return Labels(pa.array(reward), components, ",".join(v.id for v in chosen))


def relabel(steps: pa.Table, verifiers: Sequence[str],
            weights: Mapping[str, float]) -> pa.Table:
    """Replace reward_components and reward with the given verifiers' scores.

    reward = sum over components of weights[component] * component (weights keyed by
    component; extra weights are ignored). reward_source becomes "relabel",
    verifier_version the comma-joined ids, and reward_logged keeps the logged reward (an
    existing reward_logged is kept, so relabelling twice does not lose it). Row order and
    every other column are unchanged.
    """
    steps = upgrade_table(steps)
    return score(steps, verifiers, weights).apply(steps)


# What the relabel stage reads besides the verifiers' inputs: the filters, diagnostics and
# return summary it reports (episode_codes, t, reward_components, reward, done).
# The columns relabel replaces are read too: the labels are applied to this lean table.
_REPORT_COLUMNS = ("episode_id", "t", "done", "reward", "reward_logged", "reward_components",
                   "reward_source", "verifier_version")


def columns_read(verifiers: Sequence[str], available: Sequence[str]) -> list[str] | None:
    """The step-table columns (top-level or dotted, as `read_table` takes them) that
    scoring with `verifiers` and the relabel stage's report read, among `available` (the
    table's own top-level names); None when a verifier does not declare its `columns`
    (then the whole table is read), or when `available` is empty."""
    if not available:
        return None
    wanted: list[str] = []
    for v in _resolve(verifiers):
        if v.columns is None:
            return None
        wanted += v.columns
    wanted += _REPORT_COLUMNS
    present = set(available)
    return sorted({c for c in wanted if c.partition(".")[0] in present})


def _component(steps: pa.Table, name: str) -> np.ndarray:
    """Per-row value of reward component `name` (its first entry); NaN where a row lacks it."""
    if steps.num_rows == 0:  # (an empty slice's map column can still hold a stray pair)
        return np.zeros(0)
    # Flattened key/value pairs beat pc.map_lookup several-fold on large tables.
    parent, pairs = flatten_lists(column(steps, "reward_components"))
    hit = as_numpy(pc.fill_null(pc.equal(pc.struct_field(pairs, "key"), name), False))
    hit = hit.astype(bool)
    rows = parent[hit]
    if steps.num_rows and rows.size == 0:
        raise ValueError(f"no row has reward component {name!r}; relabel the table with a "
                         f"verifier that produces it first")
    first = np.r_[True, rows[1:] != rows[:-1]]  # parents are sorted: keep each row's first
    out = np.full(steps.num_rows, np.nan)
    out[rows[first]] = as_numpy(pc.struct_field(pairs, "value"))[hit][first]
    return out


# The SWiRL filters' defaults: generic verifiers' components (params may name others).
PROCESS_COMPONENTS: dict[str, float] = {"format_valid": 1.0, "tool_error_penalty": 0.0}
OUTCOME_COMPONENT = "task_success"


def step_passes_process(steps: pa.Table,
                        process: Mapping[str, float] | None = None) -> np.ndarray:
    """Per row: the step was judged good, every `process` component (default
    PROCESS_COMPONENTS) at its good value. A row lacking a component is not good (NaN
    compares False)."""
    good = np.ones(steps.num_rows, dtype=bool)
    for name, value in (PROCESS_COMPONENTS if process is None else process).items():
        good &= _component(steps, name) == float(value)
    return good


def episode_succeeded(steps: pa.Table, outcome: str | None = None,
                      codes: tuple[np.ndarray, int] | None = None) -> np.ndarray:
    """Per row: its episode's last step (largest t) has component `outcome` (default
    OUTCOME_COMPONENT) > 0. `codes`: the table's episode_codes, when the caller has them."""
    codes_, n_ep = episode_codes(steps) if codes is None else codes
    success = _component(steps, outcome or OUTCOME_COMPONENT) > 0
    t = as_numpy(column(steps, "t")).astype(np.int64)
    last_t = np.full(n_ep, -1, dtype=np.int64)
    np.maximum.at(last_t, codes_, t)
    is_last = t == last_t[codes_]
    good_ep = np.bincount(codes_, weights=is_last & success, minlength=n_ep) > 0
    return good_ep[codes_]


def _all_steps_good(steps: pa.Table, codes: np.ndarray, n_ep: int,
                    process: Mapping[str, float] | None) -> np.ndarray:
    """Per row: every step of its episode passes the process check."""
    bad_per_ep = np.bincount(codes, weights=~step_passes_process(steps, process),
                             minlength=n_ep) > 0
    return ~bad_per_ep[codes]


def _keep(steps: pa.Table, mode: str, process: Mapping[str, float] | None = None,
          outcome: str | None = None) -> np.ndarray:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {list(MODES)}")
    keep = np.ones(steps.num_rows, dtype=bool)
    if mode == "all" or steps.num_rows == 0:
        return keep
    codes, n_ep = episode_codes(steps)
    if "process" in mode:
        keep &= _all_steps_good(steps, codes, n_ep, process)
    if "outcome" in mode:
        keep &= episode_succeeded(steps, outcome, (codes, n_ep))
    return keep


def episodes_kept(steps: pa.Table, mode: str, process: Mapping[str, float] | None = None,
                  outcome: str | None = None) -> np.ndarray:
    """Per row: its episode is kept by the SWiRL filter `mode` (see select_training_data)."""
    return _keep(steps, mode, process, outcome)


def episodes_by_filter(steps: pa.Table, process: Mapping[str, float] | None = None,
                       outcome: str | None = None) -> dict[str, int]:
    """Per SWiRL mode (MODES): how many episodes select_training_data keeps, counted on
    the row masks (no filtered copy of the table per mode)."""
    codes, _ = episode_codes(steps)
    return {mode: int(np.unique(codes[_keep(steps, mode, process, outcome)]).size)
            for mode in MODES}


def _filtered(steps: pa.Table, mode: str, process: Mapping[str, float] | None = None,
              outcome: str | None = None) -> pa.Table:
    keep = _keep(steps, mode, process, outcome)
    # Filtering copies every column; skip it when nothing is dropped.
    return steps if keep.all() else steps.filter(pa.array(keep))


def process_filter(steps: pa.Table, components: Mapping[str, float] | None = None) -> pa.Table:
    """Keep episodes in which every step was judged good: each component in `components`
    (default: format_valid 1, tool_error_penalty 0) at its given value."""
    return _filtered(steps, "process", process=components)


def outcome_filter(steps: pa.Table, component: str | None = None) -> pa.Table:
    """Keep episodes whose final step (largest t) has `component` (default task_success)
    > 0."""
    return _filtered(steps, "outcome", outcome=component)


def select_training_data(steps: pa.Table, mode: str,
                         process: Mapping[str, float] | None = None,
                         outcome: str | None = None) -> pa.Table:
    """Episodes for training by mode: all, process, outcome or process+outcome (both);
    `process` / `outcome` name the components the filters read (defaults above)."""
    return _filtered(steps, mode, process, outcome)


def diagnostics(steps: pa.Table, verifiers: Sequence[str]) -> dict[str, dict]:
    """Per verifier id: what it reports beyond its scores (e.g. agreement with a logged
    judge); verifiers with nothing to add are left out."""
    out = {}
    for v in _resolve(verifiers):
        # Only the columns it declares: a verifier that reorders the rows copies no others.
        found = v.diagnostics(steps if v.columns is None else _columns(steps, v.columns))
        if found is not None:
            out[v.id] = found
    return out


def _columns(steps: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The table's top-level columns that `columns` (top-level or dotted) name."""
    wanted = {c.partition(".")[0] for c in columns}
    return steps.select([c for c in steps.column_names if c in wanted])


def provenance(verifiers: Sequence[str]) -> dict[str, dict[str, str]]:
    """Per verifier id (stable order): the component it produces and the inputs it reads."""
    return {v.id: {"component": v.component, "inputs": v.inputs} for v in _resolve(verifiers)}
