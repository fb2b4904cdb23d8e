"""The one record every OPE layer returns, and the one bootstrap that fills it.

Every estimator reduces to per-episode contributions: numerators N (n, K) and, when it is
self-normalised, denominators D (n, K). Its value is
    V = sum_k (sum_i N_ik) / (sum_i D_ik)        (D = 1 for plain means: V = mean_i N_i)
and its interval is a percentile bootstrap over episodes that recomputes V on each resample
(`bootstrap_sums`: the one resampling of episodes, also of distinct trajectories standing for
many), then the interval rules of `tracerl.ope.intervals` (the prior atom at the ends of
the value's range, and the rest).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracerl.ope.intervals import percentile, prior_interval
from tracerl.rl.transitions import distinct_rows  # hash-based distinct rows: no row sort

LOW_SUPPORT = "low_support"
UNSUPPORTED_ACTIONS = "unsupported_actions"
DISAGREES_WITH = "disagrees_with"
NOT_APPLICABLE = "not_applicable"
ZERO_WEIGHT = "zero_weight_normaliser"  # a self-normalised term had all-zero weights
ESTIMATED_PROPENSITIES = "estimated_propensities"  # IS with pi_hat_b: none were logged
NOT_CONVERGED = "not_converged"  # the critic's iterations stopped before converging
UNREPLAYED_CALLS = "unreplayed_calls"  # replay met calls the log has no response for

# Resample counts up to this many (n x n_boot) are kept per process (`_kept_counts`).
KEPT_COUNTS_BYTES = 256 * 2**20
# Resampling self-normalised per-step ratios exactly costs n_boot x rows x columns: beyond
# this many multiply-adds (a few seconds) their linearised terms are resampled instead.
EXACT_RATIO_BUDGET = 2_000_000_000
BOOT_CHUNK_BYTES = 32 * 2**20  # bootstrap index memory per chunk (bounded for any n)
_AGREEMENT_TOL = 1e-9  # relative slack when comparing interval ends
_GROUP_MIN_ROWS = 10_000  # below this, resampling row indices is already fast
_GROUP_GAIN = 20  # resample distinct rows when there are 20x fewer of them than rows


@dataclass
class Estimate:
    """One OPE estimate: value, interval, how much of the target the data covers, flags.

    support: enough effective episodes for the target, per task (one notion for every
    layer, tracerl.ope.support: what selection compares with min_support); covered: the
    share of its play on decisions the data covers (rule 4 of tracerl.ope.intervals widens
    by 1 - covered; None: the same as support); n: episodes used; ess: effective sample
    size behind the interval (None where not computed).
    """

    layer: str
    estimator: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    ci_level: float
    support: float
    n: int
    ess: float | None = None
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    covered: float | None = None

    @classmethod
    def from_contributions(
        cls,
        layer: str,
        estimator: str,
        contributions: np.ndarray,
        *,
        support: float,
        ess: float | None = None,
        flags: Iterable[str] = (),
        level: float = 0.95,
        n_boot: int = 2000,
        seed: int,
        ratio_denominators: np.ndarray | None = None,
        details: dict[str, Any] | None = None,
        multiplicity: np.ndarray | None = None,
        value_range: tuple[float, float] | None = None,
    ) -> Estimate:
        """Value and bootstrap interval from per-episode contributions.

        contributions: (n,) or (n, K). Without `ratio_denominators` the value is the mean
        over episodes of the row sums; with them (same shape) it is
        sum_k sum_i contributions_ik / sum_i ratio_denominators_ik, recomputed per resample.
        """
        spec = ContributionSpec(layer, estimator, contributions, support=support,
                                ratio_denominators=ratio_denominators, ess=ess,
                                flags=tuple(flags), details=details,
                                value_range=value_range)
        return estimates_from_contributions([spec], seed=seed, level=level, n_boot=n_boot,
                                            multiplicity=multiplicity)[0]

    @classmethod
    def not_applicable(
        cls,
        layer: str,
        estimator: str,
        reason: str,
        *,
        support: float = math.nan,
        n: int = 0,
        flags: Iterable[str] = (),
        level: float = 0.95,
        details: dict[str, Any] | None = None,
    ) -> Estimate:
        """A record that declines to estimate, saying why (value None)."""
        return cls(layer=layer, estimator=estimator, value=None, ci_low=None, ci_high=None,
                   ci_level=level, support=support, n=n, ess=None,
                   flags=[f"{NOT_APPLICABLE}: {reason}", *flags], details=dict(details or {}))

    @property
    def applicable(self) -> bool:
        """False for records made by `not_applicable`."""
        return self.value is not None

    def add_flag(self, flag: str) -> None:
        """Append `flag` once."""
        if flag not in self.flags:
            self.flags.append(flag)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: plain Python types, NaN/inf as None, details keys sorted."""
        return {
            "layer": self.layer,
            "estimator": self.estimator,
            "value": _jsonable(self.value),
            "ci_low": _jsonable(self.ci_low),
            "ci_high": _jsonable(self.ci_high),
            "ci_level": _jsonable(self.ci_level),
            "support": _jsonable(self.support),
            "n": int(self.n),
            "ess": _jsonable(self.ess),
            "flags": [str(f) for f in self.flags],
            "details": _jsonable(self.details),
        }


@dataclass(frozen=True)
class ContributionSpec:
    """What `estimates_from_contributions` needs to make one Estimate."""

    layer: str
    estimator: str
    contributions: np.ndarray
    support: float
    ratio_denominators: np.ndarray | None = None
    ess: float | None = None
    flags: tuple[str, ...] = ()
    details: dict[str, Any] | None = None
    value_range: tuple[float, float] | None = None  # (worst, best): the prior atom's ends


def estimates_from_contributions(
    specs: Sequence[ContributionSpec],
    *,
    seed: int,
    level: float = 0.95,
    n_boot: int = 2000,
    multiplicity: np.ndarray | None = None,
) -> list[Estimate]:
    """Estimates of several estimators on the same episodes, bootstrapped together.

    All specs share one set of resamples (common random numbers); because the draws depend
    only on (n, n_boot, seed), each result equals `Estimate.from_contributions` with the
    same seed. Identical and constant contribution columns are resampled once.

    multiplicity: how many logged episodes each row stands for (rows = distinct
    trajectories, see tracerl.ope.grouped); sums are weighted by it and a resample draws
    the episodes, i.e. Multinomial(n, multiplicity / n) counts of the rows.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    if not specs:
        return []
    terms = [_terms(spec) for spec in specs]
    ns = {num.shape[0] for num, _ in terms}
    if len(ns) != 1:
        raise ValueError(f"all specs must have the same number of episodes, got {sorted(ns)}")
    rows = ns.pop()
    weights = None if multiplicity is None else np.asarray(multiplicity, dtype=np.float64)
    if weights is not None and (weights.shape != (rows,) or np.any(weights < 0)):
        raise ValueError("multiplicity must give a count >= 0 for every row")
    n = rows if weights is None else int(round(weights.sum()))
    if n == 0:
        raise ValueError("no episodes")

    # Self-normalised per-step ratios (PDWIS, WDR: K columns each) are recomputed exactly on
    # every resample while that costs at most EXACT_RATIO_BUDGET multiply-adds; beyond, they
    # enter the bootstrap by their first-order (linearised) per-episode terms, whose mean is
    # the same value: a cost of O(n_boot x rows) instead of O(n_boot x rows x K).
    width = sum(num.shape[1] + (0 if den is None else den.shape[1]) for num, den in terms)
    linearise = n_boot * rows * width > EXACT_RATIO_BUDGET
    exact = [None] * len(terms)
    if linearise:
        for i, (num, den) in enumerate(terms):
            if den is not None and den.shape[1] > 1:
                exact[i] = _exact_ratio(num, den, weights)
                terms[i] = (_linearised(num, den, weights, n)[:, None], None)
    columns = _Columns(rows, weights)
    refs = [([columns.add(c) for c in num.T],
             [columns.add(d) for d in den.T] if den is not None else None)
            for num, den in terms]
    boot = bootstrap_sums(columns.matrix(), n_boot=n_boot, seed=seed, multiplicity=weights)

    out = []
    for spec, (num_refs, den_refs), ratio in zip(specs, refs, exact, strict=True):
        flags = list(spec.flags)
        value, zero = _ratio_value(num_refs, den_refs, columns.full_sum, n)
        details = {"n_boot": n_boot, "seed": seed, **(spec.details or {})}
        if ratio is not None:
            value, zero = ratio
            details["ratio_bootstrap"] = "linearised per-step ratios (first order)"
        if zero:
            flags.append(ZERO_WEIGHT)
        ci_low = ci_high = None
        if n_boot:
            values, _ = _ratio_value(num_refs, den_refs, lambda r: columns.boot_sum(r, boot), n)
            ci_low, ci_high = percentile(values, level)
            if spec.value_range is not None:
                details["bootstrap_interval"] = [ci_low, ci_high]
                details["prior_range"] = list(spec.value_range)
                ci_low, ci_high = prior_interval(values, values, n, spec.value_range, level,
                                                 seed)
        out.append(Estimate(
            layer=spec.layer, estimator=spec.estimator, value=float(value), ci_low=ci_low,
            ci_high=ci_high, ci_level=level, support=float(spec.support), n=n,
            ess=None if spec.ess is None else float(spec.ess), flags=flags, details=details,
        ))
    return out


def resample_counts(multiplicity: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """The bootstrap over rows that stand for `multiplicity` identical episodes each:
    (n_boot, k) counts per row, a resample of the episodes drawn exactly as
    Multinomial(episodes, multiplicity / episodes) (`bootstrap_sums`, the refitted critic)."""
    multiplicity = np.asarray(multiplicity, dtype=np.float64)
    total = multiplicity.sum()
    rng = np.random.default_rng(seed)
    return rng.multinomial(int(round(total)), multiplicity / total,
                           size=n_boot).astype(np.float64)


def bootstrap_sums(columns: np.ndarray, *, n_boot: int, seed: int,
                   multiplicity: np.ndarray | None = None) -> np.ndarray:
    """Column sums of `columns` (n, J) over `n_boot` resamples of its rows, shape (n_boot, J).

    Resample b draws n row indices uniformly with replacement from default_rng(seed); the
    draws are one stream taken BOOT_CHUNK_BYTES at a time, so memory stays bounded and the
    result depends only on (n, n_boot, seed), not on J or the chunking. Up to
    KEPT_COUNTS_BYTES of them are kept, so estimates that share (n, n_boot, seed) — every
    candidate's critic and IS family on one log (`tracerl.ope.evaluate`) — draw them once.

    When many rows are identical (tabular problems: a few hundred distinct episodes among
    300,000), the same resampling is done exactly and far faster on the distinct rows: the
    counts of each distinct row in a resample are Multinomial(n, its share of the rows).
    """
    n, n_cols = columns.shape
    out = np.empty((n_boot, n_cols))
    if n_cols == 0 or n_boot == 0:
        return out
    columns = np.ascontiguousarray(columns, dtype=np.float64)
    if multiplicity is not None:  # rows already stand for groups of identical episodes
        return resample_counts(multiplicity, n_boot, seed) @ columns
    rng = np.random.default_rng(seed)
    # A row's distinct values are at least its first column's: when those alone are too
    # many (logs that never repeat), the rows are not folded at all.
    if n >= _GROUP_MIN_ROWS and len(pd.unique(columns[:, 0])) * _GROUP_GAIN <= n:
        code, first = distinct_rows(columns)
        if len(first) * _GROUP_GAIN <= n:
            sizes = np.bincount(code, minlength=len(first))
            counts = rng.multinomial(n, sizes / n, size=n_boot)
            return counts.astype(np.float64) @ columns[first]
    rows = max(1, BOOT_CHUNK_BYTES // (8 * n))
    kept = _kept_counts(n, n_boot, seed) if n * n_boot <= KEPT_COUNTS_BYTES else None
    buffer = np.empty((min(rows, n_boot), n))  # the counts as floats, one chunk at a time
    for start, counts in (_chunks(n, n_boot, rng) if kept is None else
                          ((s, kept[s:s + rows]) for s in range(0, n_boot, rows))):
        m = len(counts)
        np.copyto(buffer[:m], counts)  # exact: counts are small integers
        out[start:start + m] = buffer[:m] @ columns  # sum_i k_bi c_ij
    return out


def _chunks(n: int, n_boot: int, rng: np.random.Generator):
    """(first resample, counts (m, n)) of the resamples, BOOT_CHUNK_BYTES of draws at a time:
    resample b draws n row indices uniformly with replacement, one stream for all."""
    rows = max(1, BOOT_CHUNK_BYTES // (8 * n))
    for start in range(0, n_boot, rows):  # chunks of resamples, not episodes
        m = min(rows, n_boot - start)
        idx = rng.integers(0, n, size=(m, n))
        idx += np.arange(m)[:, None] * n  # resample r counts into bins r*n .. r*n + n-1
        yield start, np.bincount(idx.ravel(), minlength=m * n).reshape(m, n)


@functools.lru_cache(maxsize=2)
def _kept_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """The counts of `_chunks` for (n, n_boot, seed), drawn once per process and kept (one
    byte per count where they fit): every estimate of every candidate on the same episodes
    with the same seed reads the same resamples, so drawing them is paid once."""
    counts = np.empty((n_boot, n), dtype=np.uint16)
    for start, chunk in _chunks(n, n_boot, np.random.default_rng(seed)):
        counts[start:start + len(chunk)] = chunk
    if counts.max(initial=0) <= np.iinfo(np.uint8).max:
        counts = counts.astype(np.uint8)
    counts.flags.writeable = False
    return counts


def flag_disagreements(estimates: list[Estimate]) -> None:
    """Flag "disagrees_with:<layer>/<estimator>" on each pair whose intervals do not overlap."""
    with_ci = [e for e in estimates if e.ci_low is not None and e.ci_high is not None]
    for i, a in enumerate(with_ci):  # pairs of records (a handful), not episodes
        for b in with_ci[i + 1:]:
            # Zero-width intervals (deterministic targets) that differ only by rounding
            # are the same number, not a disagreement.
            tol = _AGREEMENT_TOL * max(1.0, abs(a.ci_high), abs(b.ci_high))
            if a.ci_high + tol < b.ci_low or b.ci_high + tol < a.ci_low:
                a.add_flag(f"{DISAGREES_WITH}:{b.layer}/{b.estimator}")
                b.add_flag(f"{DISAGREES_WITH}:{a.layer}/{a.estimator}")


def _terms(spec: ContributionSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """(numerators (n, K), denominators (n, K) or None) of a spec, validated."""
    num = np.asarray(spec.contributions, dtype=np.float64)
    if num.ndim == 1:
        num = num[:, None]
    if num.ndim != 2:
        raise ValueError(f"{spec.estimator}: contributions must be 1-D or 2-D")
    if not np.all(np.isfinite(num)):
        raise ValueError(f"{spec.estimator}: contributions have NaN or infinite entries")
    if spec.ratio_denominators is None:
        return num.sum(axis=1, keepdims=True), None  # mean over episodes of the row sums
    den = np.asarray(spec.ratio_denominators, dtype=np.float64)
    if den.ndim == 1:
        den = den[:, None]
    if den.shape != num.shape:
        raise ValueError(f"{spec.estimator}: ratio_denominators has shape {den.shape}, "
                         f"contributions {num.shape}")
    if not np.all(np.isfinite(den)):
        raise ValueError(f"{spec.estimator}: ratio_denominators have NaN or infinite entries")
    return num, den


def _exact_ratio(num: np.ndarray, den: np.ndarray, weights: np.ndarray | None
                 ) -> tuple[float, bool]:
    """sum_k (sum_i w_i num_ik) / (sum_i w_i den_ik), a zero denominator's term 0."""
    w = np.ones(len(num)) if weights is None else weights
    top, bottom = w @ num, w @ den
    nonzero = bottom != 0
    return float(np.divide(top, bottom, out=np.zeros_like(top), where=nonzero).sum()), \
        not bool(np.all(nonzero))


def _linearised(num: np.ndarray, den: np.ndarray, weights: np.ndarray | None,
                n: float) -> np.ndarray:
    """Per-row c_i = sum_k V_k + sum_k (num_ik - V_k den_ik) / mean den_k, V_k the exact
    per-step ratios: the ratio's influence terms, whose (weighted) mean is its value."""
    w = np.ones(len(num)) if weights is None else weights
    top, bottom = w @ num, w @ den
    ratio = np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)
    mean_den = bottom / n
    influence = np.multiply(ratio, den)  # (num - ratio den) / mean den, in one buffer
    np.subtract(num, influence, out=influence)
    nonzero = mean_den != 0
    np.divide(influence, mean_den, out=influence, where=nonzero)
    influence[:, ~nonzero] = 0.0
    return ratio.sum() + influence.sum(axis=1)


def _ratio_value(num_refs: list, den_refs: list | None, total: Any, n: int) -> tuple[Any, bool]:
    """sum_k total(num_k) / total(den_k), with a zero denominator's term taken as 0.

    Returns the value (a float, or an array over resamples) and whether any term had a zero
    denominator (all weights zero: the numerator is zero too and the term says nothing).
    """
    if den_refs is None:
        return total(num_refs[0]) / n, False
    value, zero = 0.0, False
    for num_ref, den_ref in zip(num_refs, den_refs, strict=True):  # over terms k, not episodes
        num, den = np.asarray(total(num_ref)), np.asarray(total(den_ref))
        nonzero = den != 0
        zero = zero or not bool(np.all(nonzero))
        value = value + np.divide(num, den, out=np.zeros(np.shape(num)), where=nonzero)
    return value, zero


class _Columns:
    """Distinct contribution columns; constant columns are kept out of the bootstrap."""

    def __init__(self, rows: int, weights: np.ndarray | None = None) -> None:
        self.rows = rows
        self.weights = weights  # episodes each row stands for (None: one each)
        self.n = rows if weights is None else float(weights.sum())
        self.cols: list[np.ndarray] = []
        self.by_hash: dict[bytes, int] = {}

    def add(self, col: np.ndarray) -> tuple[str, float | int]:
        """A reference ("const", c) or ("col", j) to `col`."""
        col = np.ascontiguousarray(col)
        if np.all(col == col[0]):
            return ("const", float(col[0]))  # resampled sum is n * c exactly
        key = hashlib.blake2b(col, digest_size=16).digest()
        j = self.by_hash.get(key)
        if j is None or not np.array_equal(self.cols[j], col):
            j = len(self.cols)
            self.cols.append(col)
            self.by_hash[key] = j
        return ("col", j)

    def matrix(self) -> np.ndarray:
        """The distinct non-constant columns as an (n, J) array."""
        if not self.cols:
            return np.empty((self.rows, 0))
        return np.column_stack(self.cols)

    def full_sum(self, ref: tuple[str, float | int]) -> float:
        """sum_i of the referenced column over all episodes."""
        kind, x = ref
        if kind == "const":
            return self.n * x
        col = self.cols[x]
        return float(np.sum(col) if self.weights is None else self.weights @ col)

    def boot_sum(self, ref: tuple[str, float | int], boot: np.ndarray) -> np.ndarray:
        """sum_i of the referenced column on each resample."""
        kind, x = ref
        return np.full(boot.shape[0], self.n * x) if kind == "const" else boot[:, x]


def _jsonable(x: Any) -> Any:
    """Plain, deterministic JSON types: NaN/inf to None, dict keys sorted."""
    if isinstance(x, dict):
        return {str(k): _jsonable(x[k]) for k in sorted(x, key=str)}
    if isinstance(x, list | tuple | np.ndarray):
        return [_jsonable(v) for v in (x.tolist() if isinstance(x, np.ndarray) else x)]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
