"""Logged agents compared on the tasks they share: the paired difference with a paired
bootstrap interval, an exact test, pass^k, the tasks where they disagree, a leaderboard.

The unit of comparison is the **task**. Each agent's episodes are reduced to one score per
episode (`agent_episodes`), then to one mean score per task over its trials; an agent's
score is the mean over tasks of its per-task means (every task weighs the same, however
many trials it has: with one trial per task it is the plain success rate, and for 0/1
scores it is tau2-bench's pass^1).

- **Paired difference** (`compare`, agent minus baseline) over the tasks both agents have
  episodes on: mean over those tasks of (agent's task mean - baseline's task mean). Its
  interval is a percentile bootstrap over tasks: each resample draws the common tasks with
  replacement and keeps each task's pair of means together (tracerl.ope.estimate's one
  bootstrap, seeded). Fewer than `min_tasks` common tasks, or every task with the same
  difference (a resample cannot vary), flag the interval `interval_unreliable`.
- **Exact test** (0/1 scores only). H0: on every task, each trial of either agent succeeds
  with the same probability p_task (p may differ between tasks), trials independent.
  Conditional on a task's total successes s among its n_agent + n_baseline trials, the
  agent's successes are hypergeometric (s successes dealt at random over the trials), and
  tasks are independent; the statistic T is the agent's total successes over the common
  tasks, its exact null distribution the convolution of the per-task hypergeometric laws
  (the exact conditional test of a 2x2 table stratified by task: Birch 1964, the exact
  Mantel-Haenszel test). The two-sided p-value is the null probability of every value of T
  no more likely than the one observed (as `scipy.stats.binomtest` does). With one trial
  per agent per task this is exactly McNemar's exact test: only discordant tasks (one agent
  succeeded, the other not) vary, each the agent's with probability 1/2, so T ~ Binomial(
  discordant, 1/2) - the exact sign test on the discordant tasks. With several trials it
  tests equal per-trial success on each task and weighs a task by its trials, where the
  paired difference weighs every task the same.
- **pass^k** (tau2-bench, Yao et al. 2024): the probability that all k of k i.i.d. trials of
  a task succeed, estimated without bias per task from its n trials with c successes as
  C(c, k) / C(n, k) and averaged over tasks; for k = 1 .. the fewest trials any task has
  (at most `max_k`), with the paired difference of each and its bootstrap interval.
- **Disagreements**: the common tasks whose two task means differ, largest gap first.
- **Leaderboard** (`leaderboard`): every agent's score over its own tasks with a bootstrap
  interval over tasks, its pass^k, and its score on the tasks every agent shares.

A score is 0/1 when every episode's value is within 1e-6 of 0 or 1 (tau2-bench counts a
reward within 1e-6 of 1 as a success), or when `success_threshold` turns values into
successes (value >= threshold); otherwise the exact test and pass^k say why they do not
apply, and the difference and its interval are about the mean value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.ope.estimate import bootstrap_sums

RETURN = "return"
# What the comparison reads of a step table: one value per episode, its task, how it ended.
COLUMNS = ("episode_id", "task", "done", "reward", "reward_components",
           "episode.termination_reason")
INTERVAL_UNRELIABLE = "interval_unreliable"
SUCCESS_TOLERANCE = 1e-6  # tau2-bench's is_successful: |reward - 1| <= 1e-6
_TIE = 1e-12  # task means closer than this are equal
_P_SLACK = 1 + 1e-7  # relative slack when comparing null probabilities (as scipy does)


# --- episodes and tasks ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AgentEpisodes:
    """One agent's logged episodes, one entry per episode (sorted by episode id).

    value: the episode's return (sum of its rewards) or the reward component named by
    `value_name` on its done row. excluded: episodes left out, by reason."""

    name: str
    episode_id: np.ndarray
    task: np.ndarray
    value: np.ndarray
    value_name: str = RETURN
    excluded: Mapping[str, int] = field(default_factory=dict)
    # task_scores per success_threshold: an agent of several pairs is reduced once
    _scores: dict = field(default_factory=dict, init=False, repr=False)

    @property
    def n_episodes(self) -> int:
        return len(self.episode_id)

    def to_pandas(self) -> Any:
        """One row per episode: episode_id, task, value."""
        import pandas as pd

        return pd.DataFrame({"episode_id": self.episode_id, "task": self.task,
                             "value": self.value})


def agent_episodes(steps: pa.Table, name: str, *, value: str,
                   exclude_terminations: Iterable[str]) -> AgentEpisodes:
    """Reduce a step table to one value per episode.

    value: "return" (the undiscounted sum of the episode's rewards: relabelled ones on a
    labelled table; null rewards are skipped, as on an ingested table where only the done
    row has one) or the name of a reward component, read on the episode's done row. Left
    out, and counted by reason: episodes with no done row, no task id or no value, and
    those whose termination reason (`episode.termination_reason`) is in
    `exclude_terminations`."""
    need = ["episode_id", "task", "done", "reward"]
    missing = [c for c in need if c not in steps.column_names]
    if missing:
        raise ValueError(f"{name}: the step table has no column {', '.join(missing)}")
    done = steps.filter(pc.fill_null(steps.column("done"), False))
    per_episode = pa.table({"episode_id": done.column("episode_id"),
                            "task": done.column("task"),
                            "termination": _termination(done)})
    if value == RETURN:
        sums = steps.group_by("episode_id").aggregate([("reward", "sum")])
        per_episode = per_episode.join(sums, "episode_id").rename_columns(
            ["episode_id", "task", "termination", "value"])
    else:
        if "reward_components" not in done.column_names:
            raise ValueError(f"{name}: no reward_components column to read {value!r} from")
        per_episode = per_episode.append_column(
            "value", pc.map_lookup(done.column("reward_components"), value, "first"))
    n_with_done = per_episode.num_rows
    n_episodes = len(pc.unique(steps.column("episode_id")))
    per_episode = per_episode.sort_by("episode_id")
    episode_id = np.asarray(per_episode.column("episode_id").to_pylist(), dtype=object)
    task = np.asarray(per_episode.column("task").to_pylist(), dtype=object)
    values = per_episode.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    termination = np.asarray(per_episode.column("termination").to_pylist(), dtype=object)

    excluded: dict[str, int] = {}
    if n_episodes > n_with_done:
        excluded["no done row"] = n_episodes - n_with_done
    keep = np.ones(len(episode_id), dtype=bool)
    no_task = per_episode.column("task").is_null().to_numpy(zero_copy_only=False)
    for reason, hit in (("no task id", np.asarray(no_task, dtype=bool)),
                        ("no value" if value == RETURN else f"no {value} component",
                         ~np.isfinite(values))):
        hit &= keep
        if hit.any():
            excluded[reason] = int(hit.sum())
        keep &= ~hit
    for reason in sorted(set(exclude_terminations)):
        hit = keep & (termination == reason)
        if hit.any():
            excluded[f"termination {reason}"] = int(hit.sum())
        keep &= ~hit
    return AgentEpisodes(name, episode_id[keep], task[keep].astype(str), values[keep], value,
                         excluded)


def _termination(done: pa.Table) -> pa.Array:
    if "episode" in done.column_names and \
            "termination_reason" in {f.name for f in done.schema.field("episode").type}:
        return pc.struct_field(done.column("episode"), "termination_reason")
    return pa.nulls(done.num_rows, pa.string())


@dataclass(frozen=True, eq=False)
class TaskScores:
    """Per task (sorted, natural order): trials, mean score, successes (None unless every
    score is 0/1)."""

    tasks: np.ndarray
    trials: np.ndarray
    mean: np.ndarray
    successes: np.ndarray | None
    why_not_binary: str | None = None

    def subset(self, tasks: np.ndarray) -> TaskScores:
        at = self._index(tasks)
        return TaskScores(tasks, self.trials[at], self.mean[at],
                          None if self.successes is None else self.successes[at],
                          self.why_not_binary)

    def _index(self, tasks: np.ndarray) -> np.ndarray:
        where = {t: i for i, t in enumerate(self.tasks.tolist())}
        return np.fromiter((where[t] for t in tasks.tolist()), dtype=np.int64,
                           count=len(tasks))


def _natural_key(task: str) -> tuple:
    """"2" before "13"; mixed ids ("t-2", "t-13") by their numeric parts."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", task) if p)


def _natural_order(names: np.ndarray) -> np.ndarray:
    """Indices that sort task ids naturally; numeric ids (tau2's) without a Python key."""
    text = names.astype(str)
    if len(text) and np.char.isdigit(text).all() and np.char.str_len(text).max() <= 18:
        return np.lexsort((text, text.astype(np.int64)))
    return np.asarray(sorted(range(len(text)), key=lambda i: _natural_key(text[i])),
                      dtype=np.int64)


def task_scores(episodes: AgentEpisodes, success_threshold: float | None) -> TaskScores:
    """Each task's trials, mean score and (0/1 scores) successes."""
    if success_threshold not in episodes._scores:
        episodes._scores[success_threshold] = _task_scores(episodes, success_threshold)
    return episodes._scores[success_threshold]


def _task_scores(episodes: AgentEpisodes, success_threshold: float | None) -> TaskScores:
    values = episodes.value
    why = None
    if success_threshold is not None:
        scores = (values >= success_threshold).astype(np.float64)
    else:
        near_zero = np.abs(values) <= SUCCESS_TOLERANCE
        near_one = np.abs(values - 1.0) <= SUCCESS_TOLERANCE
        binary = near_zero | near_one
        scores = np.where(near_one, 1.0, np.where(near_zero, 0.0, values))
        if not binary.all():
            i = int(np.flatnonzero(~binary)[0])
            why = (f"{episodes.name}'s values are not 0/1 (episode {episodes.episode_id[i]}: "
                   f"{values[i]:g}); set compare.success_threshold to count successes")
    names, code = np.unique(episodes.task.astype(str), return_inverse=True)
    order = _natural_order(names)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    code = rank[code.reshape(-1)]
    tasks = names[order].astype(object)
    trials = np.bincount(code, minlength=len(tasks)).astype(np.int64)
    total = np.bincount(code, weights=scores, minlength=len(tasks))
    mean = total / np.maximum(trials, 1)
    successes = None if why else np.rint(total).astype(np.int64)
    return TaskScores(tasks, trials, mean, successes, why)


def pass_hat_k(trials: np.ndarray, successes: np.ndarray, k: int) -> np.ndarray:
    """Per task, C(c, k) / C(n, k): the unbiased estimate of the probability that k i.i.d.
    trials all succeed (tau2-bench's pass^k), as the product of (c - j) / (n - j), j < k."""
    if k < 1 or (len(trials) and trials.min() < k):
        raise ValueError(f"pass^{k} needs at least {k} trials on every task")
    out = np.ones(len(trials))
    for j in range(k):
        out *= np.clip(successes - j, 0, None) / (trials - j)
    return out


# --- the exact test -------------------------------------------------------------------------


@dataclass(frozen=True)
class ExactTest:
    """The exact conditional test of equal success, stratified by task (see the module)."""

    name: str
    p_value: float
    statistic: int           # the agent's successes on the common tasks
    expected: float          # its mean under H0
    informative_tasks: int   # tasks whose outcome could have gone either way under H0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "p_value": self.p_value, "statistic": self.statistic,
                "expected": self.expected, "informative_tasks": self.informative_tasks}


def _hypergeom_pmf(total: int, successes: int, draws: int) -> tuple[int, np.ndarray]:
    """(first value, pmf) of the successes among `draws` of `total` trials holding
    `successes` (exact integer binomials, then one division)."""
    from math import comb

    lo, hi = max(0, draws - (total - successes)), min(draws, successes)
    weights = [comb(successes, x) * comb(total - successes, draws - x) for x in range(lo, hi + 1)]
    denominator = comb(total, draws)
    return lo, np.array([w / denominator for w in weights])


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if min(len(a), len(b)) > 64 and len(a) * len(b) > 10_000_000:
        from scipy.signal import fftconvolve

        out = np.clip(fftconvolve(a, b), 0.0, None)
        return out / out.sum()
    return np.convolve(a, b)


def _power(pmf: np.ndarray, times: int) -> np.ndarray:
    """pmf of the sum of `times` independent copies (square and multiply)."""
    result, base = np.ones(1), pmf
    while times:
        if times & 1:
            result = _convolve(result, base)
        times >>= 1
        if times:
            base = _convolve(base, base)
    return result


def exact_test(agent_trials: np.ndarray, agent_successes: np.ndarray,
               baseline_trials: np.ndarray, baseline_successes: np.ndarray) -> ExactTest:
    """Two-sided exact test that agent and baseline succeed equally often, task by task."""
    total = agent_trials + baseline_trials
    wins = agent_successes + baseline_successes
    informative = (wins > 0) & (wins < total)
    mcnemar = bool(np.all((agent_trials == 1) & (baseline_trials == 1)))
    name = ("McNemar's exact test (sign test on the discordant tasks)" if mcnemar else
            "exact conditional test stratified by task (hypergeometric per task)")
    fixed = int(agent_successes[~informative].sum())
    observed = int(agent_successes.sum())
    signatures: dict[tuple[int, int, int], int] = {}
    for key in zip(total[informative].tolist(), wins[informative].tolist(),
                   agent_trials[informative].tolist(), strict=True):
        signatures[key] = signatures.get(key, 0) + 1
    offset, pmf = fixed, np.ones(1)
    for (n, s, draws), count in sorted(signatures.items()):
        lo, one = _hypergeom_pmf(n, s, draws)
        offset += lo * count
        pmf = _convolve(pmf, _power(one, count))
    expected = float(fixed + sum(count * draws * s / n
                                 for (n, s, draws), count in signatures.items()))
    at = observed - offset
    p_observed = pmf[at] if 0 <= at < len(pmf) else 0.0
    p_value = float(min(1.0, pmf[pmf <= p_observed * _P_SLACK].sum()))
    return ExactTest(name, p_value, observed, expected, int(informative.sum()))


# --- the bootstrap --------------------------------------------------------------------------


def _percentile_interval(columns: np.ndarray, *, confidence: float, n_boot: int,
                         seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of each column's mean, resampling rows (tasks)."""
    n = len(columns)
    means = bootstrap_sums(columns, n_boot=n_boot, seed=seed) / n
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return low, high


def _unreliable(n_tasks: int, differences: np.ndarray, min_tasks: int) -> list[str]:
    flags = []
    if n_tasks < min_tasks:
        flags.append(f"{INTERVAL_UNRELIABLE}: {n_tasks} tasks < min_tasks {min_tasks}")
    if n_tasks and np.ptp(differences) <= _TIE:
        flags.append(f"{INTERVAL_UNRELIABLE}: every task has the same value, so no resample "
                     "varies")
    return flags


def _number(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# --- one pair -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PairComparison:
    """`agent` against `baseline` on the tasks both have episodes on (difference: agent
    minus baseline). Every number is None when they share no task."""

    agent: str
    baseline: str
    binary: bool
    tasks: np.ndarray                 # the common tasks
    agent_tasks: TaskScores           # on the common tasks
    baseline_tasks: TaskScores
    tasks_only_agent: list[str]
    tasks_only_baseline: list[str]
    agent_score: float | None
    baseline_score: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    n_boot: int
    seed: int
    exact: ExactTest | None
    exact_note: str | None
    pass_k: list[dict[str, Any]]
    flags: list[str]

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def task_differences(self) -> np.ndarray:
        return self.agent_tasks.mean - self.baseline_tasks.mean

    @property
    def agent_better(self) -> int:
        return int((self.task_differences > _TIE).sum())

    @property
    def baseline_better(self) -> int:
        return int((self.task_differences < -_TIE).sum())

    @property
    def key(self) -> str:
        return f"{self.agent}_vs_{self.baseline}"

    def disagreements(self) -> list[dict[str, Any]]:
        """The common tasks whose task means differ: largest gap first, the agent's wins
        before its losses, then task order."""
        d = self.task_differences
        rows = np.flatnonzero(np.abs(d) > _TIE)
        rows = rows[np.lexsort((-d[rows], -np.abs(d[rows])))]
        a, b = self.agent_tasks, self.baseline_tasks
        return [{"task": str(self.tasks[i]), "agent": float(a.mean[i]),
                 "baseline": float(b.mean[i]), "difference": float(d[i]),
                 "agent_trials": int(a.trials[i]), "baseline_trials": int(b.trials[i])}
                for i in rows]

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (task lists in natural order)."""
        return {
            "agent": self.agent, "baseline": self.baseline,
            "score": "success" if self.binary else "mean value",
            "n_tasks": self.n_tasks,
            "tasks_only_agent": self.tasks_only_agent,
            "tasks_only_baseline": self.tasks_only_baseline,
            "agent_episodes": int(self.agent_tasks.trials.sum()),
            "baseline_episodes": int(self.baseline_tasks.trials.sum()),
            "agent_score": _number(self.agent_score),
            "baseline_score": _number(self.baseline_score),
            "difference": _number(self.difference),
            "ci_low": _number(self.ci_low), "ci_high": _number(self.ci_high),
            "confidence": self.confidence, "n_boot": self.n_boot, "seed": self.seed,
            "agent_better": self.agent_better, "baseline_better": self.baseline_better,
            "ties": self.n_tasks - self.agent_better - self.baseline_better,
            "exact_test": None if self.exact is None else self.exact.to_dict(),
            "exact_test_note": self.exact_note,
            "pass_k": self.pass_k,
            "disagreements": self.disagreements(),
            "flags": self.flags,
        }

    def to_pandas(self) -> Any:
        """One row per common task: each agent's trials and mean score, the difference."""
        import pandas as pd

        a, b = self.agent_tasks, self.baseline_tasks
        frame = pd.DataFrame({"task": self.tasks.astype(str), "agent_trials": a.trials,
                              "agent_score": a.mean, "baseline_trials": b.trials,
                              "baseline_score": b.mean, "difference": self.task_differences})
        frame.attrs.update(agent=self.agent, baseline=self.baseline,
                           difference=self.difference, ci=(self.ci_low, self.ci_high),
                           p_value=None if self.exact is None else self.exact.p_value)
        return frame

    def __repr__(self) -> str:
        if not self.n_tasks:
            return f"PairComparison({self.agent} vs {self.baseline}: no common task)"
        p = "" if self.exact is None else f", exact p={self.exact.p_value:.4g}"
        return (f"PairComparison({self.agent} vs {self.baseline} on {self.n_tasks} tasks: "
                f"{self.agent_score:.4g} - {self.baseline_score:.4g} = {self.difference:.4g} "
                f"[{self.ci_low:.4g}, {self.ci_high:.4g}]{p})")


def compare(agent: AgentEpisodes, baseline: AgentEpisodes, *, confidence: float,
            n_boot: int, seed: int, max_k: int, min_tasks: int,
            success_threshold: float | None) -> PairComparison:
    """`agent` against `baseline` on the tasks they share (see the module docstring; the
    settings' defaults are the params model's, tracerl.config.schema.Compare)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    a_all = task_scores(agent, success_threshold)
    b_all = task_scores(baseline, success_threshold)
    shared = set(a_all.tasks.tolist()) & set(b_all.tasks.tolist())
    common = np.asarray([t for t in a_all.tasks.tolist() if t in shared], dtype=object)
    a, b = a_all.subset(common), b_all.subset(common)
    only_a = [t for t in a_all.tasks.tolist() if t not in shared]
    only_b = [t for t in b_all.tasks.tolist() if t not in shared]
    why_not = a.why_not_binary or b.why_not_binary
    binary = why_not is None
    settings = {"confidence": confidence, "n_boot": n_boot, "seed": seed}
    n = len(common)
    if n == 0:
        return PairComparison(agent.name, baseline.name, binary, common, a, b, only_a, only_b,
                              None, None, None, None, None, **settings, exact=None,
                              exact_note="no common task", pass_k=[],
                              flags=["no_common_tasks"])
    d = a.mean - b.mean
    k_max = min(max_k, int(a.trials.min()), int(b.trials.min())) if binary else 0
    passes = [(pass_hat_k(a.trials, a.successes, k), pass_hat_k(b.trials, b.successes, k))
              for k in range(1, k_max + 1)]
    columns = np.column_stack([d, *[pa_k - pb_k for pa_k, pb_k in passes]])
    low, high = _percentile_interval(columns, **settings)
    pass_k = [{"k": k, "agent": float(pa_k.mean()), "baseline": float(pb_k.mean()),
               "difference": float((pa_k - pb_k).sum() / n), "ci_low": float(low[k]),
               "ci_high": float(high[k])} for k, (pa_k, pb_k) in enumerate(passes, start=1)]
    exact = exact_test(a.trials, a.successes, b.trials, b.successes) if binary else None
    return PairComparison(
        agent.name, baseline.name, binary, common, a, b, only_a, only_b,
        float(a.mean.mean()), float(b.mean.mean()), float(d.sum() / n),
        float(low[0]), float(high[0]), **settings, exact=exact,
        exact_note=None if binary else f"not applicable: {why_not}", pass_k=pass_k,
        flags=_unreliable(n, d, min_tasks))


# --- every agent ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Leaderboard:
    """Every agent on its own tasks, best first; `shared_tasks`: the tasks all agents have."""

    rows: list[dict[str, Any]]
    shared_tasks: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "shared_tasks": self.shared_tasks}

    def to_pandas(self) -> Any:
        """One row per agent; pass^k as columns pass^1, pass^2, ..."""
        import pandas as pd

        flat = [{**{k: v for k, v in r.items() if k not in ("pass_k", "excluded")},
                 **{f"pass^{k}": v for k, v in r["pass_k"].items()}} for r in self.rows]
        return pd.DataFrame(flat).set_index("agent") if flat else pd.DataFrame()


def leaderboard(agents: Sequence[AgentEpisodes], *, confidence: float, n_boot: int,
                seed: int, max_k: int, min_tasks: int,
                success_threshold: float | None) -> Leaderboard:
    """Each agent's score over its own tasks (bootstrap interval over tasks), pass^k, and
    its score on the tasks every agent shares; ranked by score (ties share a rank)."""
    scores = [task_scores(a, success_threshold) for a in agents]
    shared = set.intersection(*(set(s.tasks.tolist()) for s in scores)) if scores else set()
    rows = []
    for agent, s in zip(agents, scores, strict=True):
        n = len(s.tasks)
        row: dict[str, Any] = {"agent": agent.name, "episodes": agent.n_episodes,
                               "tasks": n, "trials_min": int(s.trials.min()) if n else 0,
                               "trials_max": int(s.trials.max()) if n else 0,
                               "score": None, "ci_low": None, "ci_high": None,
                               "shared_score": None, "pass_k": {},
                               "excluded": dict(agent.excluded), "flags": []}
        if n:
            low, high = _percentile_interval(s.mean[:, None], confidence=confidence,
                                             n_boot=n_boot, seed=seed)
            on_shared = np.asarray([t in shared for t in s.tasks.tolist()])
            row.update(score=float(s.mean.mean()), ci_low=float(low[0]),
                       ci_high=float(high[0]),
                       shared_score=float(s.mean[on_shared].mean()) if shared else None,
                       flags=_unreliable(n, s.mean, min_tasks))
            if s.successes is not None:
                row["pass_k"] = {str(k): float(pass_hat_k(s.trials, s.successes, k).mean())
                                 for k in range(1, min(max_k, row["trials_min"]) + 1)}
            else:
                row["flags"].append(f"pass_k not applicable: {s.why_not_binary}")
        rows.append(row)
    ordered = sorted(rows, key=lambda r: (r["score"] is None, -(r["score"] or 0.0), r["agent"]))
    for r in ordered:  # ties share the better rank
        r["rank"] = 1 + sum(1 for o in ordered if o["score"] is not None and
                            r["score"] is not None and o["score"] > r["score"] + _TIE)
        if r["score"] is None:
            r["rank"] = None
    return Leaderboard(ordered, sorted(shared, key=_natural_key))


# --- a pipeline's datasets ------------------------------------------------------------------


def pairs_of(names: Sequence[str], pairs: str | Sequence[tuple[str, str]]
             ) -> list[tuple[str, str]]:
    """(agent, baseline) pairs: "all" pairs each dataset with every earlier one (the earlier
    one the baseline), else the pairs as given; an unknown name is an error."""
    if pairs == "all":
        return [(names[j], names[i]) for i in range(len(names))
                for j in range(i + 1, len(names))]
    out = [tuple(p) for p in pairs]
    for agent, baseline in out:
        for name in (agent, baseline):
            if name not in names:
                raise ValueError(f"compare pair ({agent}, {baseline}): {name!r} is not one of "
                                 f"the datasets {list(names)}")
        if agent == baseline:
            raise ValueError(f"compare pair ({agent}, {baseline}): an agent against itself")
    return out


@dataclass(frozen=True, eq=False)
class Comparison:
    """Every pair's comparison and the leaderboard of one set of agents."""

    pairs: list[PairComparison]
    leaderboard: Leaderboard
    value: str
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "notes": self.notes,
                "leaderboard": self.leaderboard.to_dict(),
                "pairs": [p.to_dict() for p in self.pairs]}

    def to_pandas(self) -> Any:
        """One row per pair: the headline numbers."""
        import pandas as pd

        keys = ("agent", "baseline", "n_tasks", "agent_score", "baseline_score", "difference",
                "ci_low", "ci_high", "agent_better", "baseline_better")
        rows = []
        for p in self.pairs:
            d = p.to_dict()
            rows.append({**{k: d[k] for k in keys},
                         "p_value": None if p.exact is None else p.exact.p_value,
                         "flags": ", ".join(p.flags)})
        return pd.DataFrame(rows, columns=[*keys, "p_value", "flags"])

    def __repr__(self) -> str:
        return (f"Comparison({len(self.leaderboard.rows)} agents, {len(self.pairs)} pairs; "
                f"value {self.value}: " + "; ".join(
                    f"{p.agent} - {p.baseline} = {p.difference:.4g}" if p.n_tasks else
                    f"{p.agent} vs {p.baseline}: no common task" for p in self.pairs) + ")")

    def metrics(self) -> dict[str, Any]:
        """Scalar metrics (`metrics/<pipeline>/compare.json`): per pair and per agent."""
        pairs = {}
        for p in self.pairs:
            d = p.to_dict()
            m = {k: d[k] for k in ("n_tasks", "agent_score", "baseline_score", "difference",
                                   "ci_low", "ci_high", "agent_better", "baseline_better")}
            if p.exact is not None:
                m["p_value"] = p.exact.p_value
            m.update({f"pass_{r['k']}_difference": r["difference"] for r in p.pass_k
                      if r["k"] >= 2})
            pairs[p.key] = {k: v for k, v in m.items() if v is not None}
        agents = {}
        for r in self.leaderboard.rows:
            m = {"score": r["score"], "rank": r["rank"], "tasks": r["tasks"],
                 "episodes": r["episodes"],
                 **{f"pass_{k}": v for k, v in r["pass_k"].items() if int(k) >= 2}}
            agents[r["agent"]] = {k: v for k, v in m.items() if v is not None}
        return {"pairs": pairs, "leaderboard": agents}


def compare_datasets(agents: Sequence[AgentEpisodes],
                     pairs: str | Sequence[tuple[str, str]], *, confidence: float,
                     n_boot: int, seed: int, max_k: int, min_tasks: int,
                     success_threshold: float | None) -> Comparison:
    """Every pair (`pairs_of`) and the leaderboard. With one agent there is no pair: the
    notes say so, and the leaderboard has its one row."""
    settings = {"confidence": confidence, "n_boot": n_boot, "seed": seed, "max_k": max_k,
                "min_tasks": min_tasks, "success_threshold": success_threshold}
    by_name = {a.name: a for a in agents}
    if len(by_name) != len(agents):
        raise ValueError(f"agents' names repeat: {[a.name for a in agents]}")
    chosen = pairs_of(list(by_name), pairs)
    notes = []
    if len(agents) < 2:
        notes.append(f"{len(agents)} dataset{'' if len(agents) == 1 else 's'}: no pair to "
                     "compare (a comparison needs two datasets over shared task ids)")
    results = [compare(by_name[a], by_name[b], **settings) for a, b in chosen]
    for p in results:
        if not p.n_tasks:
            notes.append(f"{p.agent} and {p.baseline} share no task: nothing to pair")
    for a in agents:
        if a.excluded:
            notes.append(f"{a.name}: left out " + ", ".join(
                f"{n} episode{'' if n == 1 else 's'} ({why})" for why, n in a.excluded.items()))
    value = agents[0].value_name if agents else RETURN
    return Comparison(results, leaderboard(agents, **settings), value, notes)
