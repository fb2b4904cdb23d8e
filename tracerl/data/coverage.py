"""Action coverage of a logged dataset: which (state, action) pairs the logs support.

Offline RL can only be trusted inside the support of the data, so before training we
report N(s), N(s, a), the behaviour policy estimated from counts (N(s, a) / N(s)) beside
the mean logged propensity exp(action_logprobs), the valid actions never logged at each
state, and coverage by task: the share of (state, valid action) pairs that were logged,
and a task x action count matrix where a zero on a valid action is flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracerl.rl.transitions import Transitions

WARN = "⚠"


@dataclass(frozen=True, eq=False)
class CoverageReport:
    """Coverage counts over the states seen in the data (rows sorted by state key).

    n_sa: (n_states, n_actions) N(s, a); n_s: N(s); valid: the featurizer's valid actions;
    mean_logged_prob: mean exp(action_logprobs) per (s, a), NaN where none was logged.
    Per task (rows of `tasks`): action_counts (n_tasks, n_actions), action_valid (the
    action is valid at some state seen on the task), valid_pairs / logged_pairs: the
    (state seen on the task, valid action) pairs, all and logged on that task.
    """

    actions: tuple[str, ...]
    state_keys: np.ndarray
    n_s: np.ndarray
    n_sa: np.ndarray
    valid: np.ndarray
    mean_logged_prob: np.ndarray
    tasks: np.ndarray
    task_transitions: np.ndarray
    action_counts: np.ndarray
    action_valid: np.ndarray
    valid_pairs: np.ndarray
    logged_pairs: np.ndarray
    n_transitions: int
    n_episodes: int

    @property
    def behavior_from_counts(self) -> np.ndarray:
        """N(s, a) / N(s): the behaviour policy estimated from counts."""
        return self.n_sa / np.maximum(self.n_s, 1)[:, None]

    @property
    def never_logged(self) -> dict[str, list[str]]:
        """State key -> valid actions never logged there (states with none omitted)."""
        missing = self.valid & (self.n_sa == 0)
        return {
            str(key): [self.actions[a] for a in np.flatnonzero(row)]
            for key, row in zip(self.state_keys, missing, strict=True)
            if row.any()
        }

    @property
    def task_gaps(self) -> np.ndarray:
        """(n_tasks, n_actions) True where an action valid on the task was never logged."""
        return self.action_valid & (self.action_counts == 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary; key order and values depend only on the data."""
        behavior = self.behavior_from_counts
        never = self.never_logged
        states = {}
        for i, key in enumerate(self.state_keys.tolist()):
            logged = np.flatnonzero(self.n_sa[i])
            states[key] = {
                "n": int(self.n_s[i]),
                "actions": {
                    self.actions[a]: {
                        "n": int(self.n_sa[i, a]),
                        "behavior_prob_from_counts": float(behavior[i, a]),
                        "mean_logged_prob": _number(self.mean_logged_prob[i, a]),
                    }
                    for a in logged
                },
                "never_logged_valid": never.get(key, []),
            }
        tasks = {}
        for k, task in enumerate(self.tasks.tolist()):
            tasks[task] = {
                "n_transitions": int(self.task_transitions[k]),
                "action_counts": {a: int(c) for a, c in zip(self.actions,
                                                             self.action_counts[k],
                                                             strict=True)},
                "never_logged_actions": [self.actions[a]
                                         for a in np.flatnonzero(self.task_gaps[k])],
                "valid_pairs": int(self.valid_pairs[k]),
                "logged_valid_pairs": int(self.logged_pairs[k]),
                "share_logged": _number(self.logged_pairs[k] / self.valid_pairs[k]
                                        if self.valid_pairs[k] else math.nan),
            }
        return {
            "actions": list(self.actions),
            "n_transitions": self.n_transitions,
            "n_episodes": self.n_episodes,
            "n_states": len(self.state_keys),
            "n_never_logged_pairs": int(np.count_nonzero(self.valid & (self.n_sa == 0))),
            "tasks": tasks,
            "states": states,
        }

    def to_pandas(self) -> Any:
        """One row per (state, action) logged or valid there: N(s), N(s, a), the behaviour
        estimated from counts, the mean logged propensity, valid, never logged."""
        import pandas as pd

        rows, cols = np.nonzero((self.n_sa > 0) | self.valid)
        return pd.DataFrame({
            "state": self.state_keys[rows], "action": np.asarray(self.actions)[cols],
            "n_state": self.n_s[rows], "n": self.n_sa[rows, cols],
            "behavior_prob_from_counts": self.behavior_from_counts[rows, cols],
            "mean_logged_prob": self.mean_logged_prob[rows, cols],
            "valid": self.valid[rows, cols],
            "never_logged": self.valid[rows, cols] & (self.n_sa[rows, cols] == 0)})

    def to_markdown(self, max_tasks: int = 20, max_states: int = 10) -> str:
        """Compact report: task x action counts with never-logged valid actions flagged."""
        a_cols = list(self.actions)
        lines = [
            f"**Coverage**: {self.n_transitions:,} transitions, {self.n_episodes:,} episodes, "
            f"{len(self.state_keys):,} states.",
            "",
            f"Task × action counts ({WARN} = valid on the task's states but never logged; "
            "– = never valid):",
            "",
            "| task | " + " | ".join(a_cols) + " | logged (s, valid a) |",
            "|---|" + "---:|" * len(a_cols) + "---:|",
        ]
        order = np.argsort(-self.task_transitions, kind="stable")
        for k in order[:max_tasks]:
            cells = []
            for a in range(len(a_cols)):
                count = int(self.action_counts[k, a])
                if self.task_gaps[k, a]:
                    cells.append(f"**0 {WARN}**")
                elif count == 0 and not self.action_valid[k, a]:
                    cells.append("–")
                else:
                    cells.append(f"{count:,}")
            share = (f"{self.logged_pairs[k] / self.valid_pairs[k]:.0%} "
                     f"({self.logged_pairs[k]}/{self.valid_pairs[k]})"
                     if self.valid_pairs[k] else "–")
            lines.append(f"| {_cell(self.tasks[k])} | " + " | ".join(cells) + f" | {share} |")
        if len(order) > max_tasks:
            lines.append(f"\n… {len(order) - max_tasks} more tasks (see to_dict()).")

        gap_rows = [k for k in order if self.task_gaps[k].any()]
        lines.append("")
        if gap_rows:
            lines.append("Valid actions never logged on a task:")
            lines.append("")
            for k in gap_rows[:max_tasks]:
                missing = ", ".join(f"`{self.actions[a]}`"
                                    for a in np.flatnonzero(self.task_gaps[k]))
                lines.append(f"- {WARN} `{_cell(self.tasks[k])}` tasks: {missing} never logged")
            if len(gap_rows) > max_tasks:
                lines.append(f"- … {len(gap_rows) - max_tasks} more tasks.")
        else:
            lines.append("Every action valid on a task was logged on it at least once.")

        never = self.never_logged
        if never:
            index = {k: i for i, k in enumerate(self.state_keys.tolist())}
            top = sorted(never, key=lambda key: (-self.n_s[index[key]], key))[:max_states]
            lines += ["", "Valid actions never logged, most visited states first:", "",
                      "| state | N(s) | never logged |", "|---|---:|---|"]
            lines += [f"| `{_cell(key)}` | {int(self.n_s[index[key]]):,} | "
                      f"{', '.join(never[key])} |" for key in top]
            if len(never) > max_states:
                lines.append(f"\n… {len(never) - max_states} more states.")

        choice = np.flatnonzero(self.valid.sum(axis=1) > 1)
        if choice.size:
            top = choice[np.lexsort((self.state_keys[choice], -self.n_s[choice]))][:max_states]
            behavior = self.behavior_from_counts
            lines += ["", "Behaviour at the most visited decision states: N(s,a)/N(s) "
                      "(mean logged exp(logprob)):", "",
                      "| state | N(s) | " + " | ".join(a_cols) + " |",
                      "|---|---:|" + "---:|" * len(a_cols)]
            for i in top:
                cells = [
                    (f"{behavior[i, a]:.2f} ({_fmt(self.mean_logged_prob[i, a])})"
                     if self.n_sa[i, a] else (f"0 {WARN}" if self.valid[i, a] else "–"))
                    for a in range(len(a_cols))
                ]
                lines.append(f"| `{_cell(self.state_keys[i])}` | {int(self.n_s[i]):,} | "
                             + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def plot(self, path: str | Path, max_tasks: int = 30) -> Path:
        """Heatmap of task x action counts (log colour), never-logged valid cells in red."""
        # Figure + Agg canvas, not pyplot: no global backend or figure state is touched.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.colors import ListedColormap
        from matplotlib.figure import Figure

        order = np.argsort(-self.task_transitions, kind="stable")[:max_tasks]
        counts = self.action_counts[order].astype(np.float64)
        gaps = self.task_gaps[order]
        n_tasks, n_actions = counts.shape
        fig = Figure(figsize=(1.5 + 1.1 * n_actions, 1.2 + 0.5 * max(n_tasks, 1)), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        image = ax.imshow(np.log10(1.0 + counts), cmap="Blues", aspect="auto",
                          vmin=0.0, vmax=max(1.0, float(np.log10(1.0 + counts.max(initial=0)))))
        ax.imshow(np.where(gaps, 1.0, np.nan), cmap=ListedColormap(["#d62728"]),
                  aspect="auto", vmin=0, vmax=1)
        peak = counts.max(initial=0)
        for r in range(n_tasks):
            for c in range(n_actions):  # a handful of cells: tasks x actions
                text = "0\nnever logged" if gaps[r, c] else f"{int(counts[r, c]):,}"
                dark = gaps[r, c] or (peak and counts[r, c] > peak ** 0.75)
                ax.text(c, r, text, ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
        ax.set_xticks(range(n_actions), labels=list(self.actions), rotation=30, ha="right")
        ax.set_yticks(range(n_tasks), labels=[_short(t) for t in self.tasks[order]])
        ax.set_xlabel("action")
        ax.set_ylabel("task")
        ax.set_title("Logged actions per task (red: valid but never logged)", fontsize=10)
        fig.colorbar(image, ax=ax, label="log10(1 + count)")
        fig.tight_layout()
        path = Path(path)
        # Fixed metadata: no version string or date, so the same data gives the same bytes.
        fig.savefig(path, format="png", metadata={"Software": "tracerl"})
        return path


def coverage_report(tr: Transitions) -> CoverageReport:
    """Coverage of transitions (a state encoder's, over the states a policy sees:
    `Transitions.project(encoder.policy_variables)`)."""
    n_s, n_a, n_t = tr.n_states, tr.n_actions, len(tr.tasks)
    sa = tr.s.astype(np.int64) * n_a + tr.a
    n_sa = np.bincount(sa, minlength=n_s * n_a).reshape(n_s, n_a)
    logged_prob = np.isfinite(tr.behavior_prob)
    prob_sum = np.bincount(sa[logged_prob], weights=tr.behavior_prob[logged_prob],
                           minlength=n_s * n_a)
    prob_n = np.bincount(sa[logged_prob], minlength=n_s * n_a)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_prob = np.where(prob_n > 0, prob_sum / prob_n, np.nan).reshape(n_s, n_a)

    # (task, state) pairs seen, and N(task, state, a) over them only (sparse in general).
    pairs, pair_of = np.unique(tr.task.astype(np.int64) * n_s + tr.s, return_inverse=True)
    pair_of = pair_of.reshape(-1)
    pair_task, pair_state = pairs // max(n_s, 1), pairs % max(n_s, 1)
    n_pair_a = np.bincount(pair_of * n_a + tr.a, minlength=len(pairs) * n_a)
    pair_valid = tr.valid[pair_state]
    pair_logged = (n_pair_a.reshape(-1, n_a) > 0) & pair_valid
    valid_pairs = np.bincount(pair_task, weights=pair_valid.sum(axis=1), minlength=n_t)
    logged_pairs = np.bincount(pair_task, weights=pair_logged.sum(axis=1), minlength=n_t)
    rows, cols = np.nonzero(pair_valid)
    action_valid = np.bincount(pair_task[rows] * n_a + cols, minlength=n_t * n_a) > 0
    action_counts = np.bincount(tr.task.astype(np.int64) * n_a + tr.a, minlength=n_t * n_a)

    seen = np.flatnonzero(n_sa.sum(axis=1) > 0)
    seen = seen[np.argsort(tr.state_keys[seen], kind="stable")]
    return CoverageReport(
        actions=tuple(tr.actions),
        state_keys=tr.state_keys[seen],
        n_s=n_sa[seen].sum(axis=1),
        n_sa=n_sa[seen],
        valid=tr.valid[seen],
        mean_logged_prob=mean_prob[seen],
        tasks=tr.tasks,
        task_transitions=np.bincount(tr.task, minlength=n_t),
        action_counts=action_counts.reshape(n_t, n_a),
        action_valid=action_valid.reshape(n_t, n_a),
        valid_pairs=valid_pairs.astype(np.int64),
        logged_pairs=logged_pairs.astype(np.int64),
        n_transitions=tr.n,
        n_episodes=len(np.unique(tr.episode)),
    )


def _number(x: float) -> float | None:
    """JSON-safe float: NaN becomes None."""
    return None if math.isnan(x) else float(x)


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|") or "(none)"


def _short(text: Any, width: int = 28) -> str:
    text = str(text) or "(none)"
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class CrossCoverage:
    """How much of a target agent's logged (state, action) pairs a reference log contains,
    overall and by action (tool): by rows (decisions) and by distinct pairs."""

    target: str
    reference: str
    by_action: dict[str, dict[str, float | int | None]]
    overall: dict[str, float | int | None]

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "reference": self.reference, "overall": self.overall,
                "by_action": self.by_action}

    def to_markdown(self) -> str:
        lines = [f"**Cross-agent coverage**: share of `{self.target}`'s (state, action) "
                 f"pairs that `{self.reference}`'s logs contain.", "",
                 "| action | rows | rows covered | share | distinct pairs | pairs covered "
                 "| share |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, c in [*sorted(self.by_action.items()), ("**all**", self.overall)]:
            lines.append(f"| {_cell(name)} | {c['rows']:,} | {c['rows_covered']:,} | "
                         f"{_share(c['share_rows'])} | {c['pairs']:,} | {c['pairs_covered']:,} "
                         f"| {_share(c['share_pairs'])} |")
        return "\n".join(lines) + "\n"


def cross_agent_coverage(target_states: np.ndarray, target_actions: np.ndarray,
                         reference_states: np.ndarray, reference_actions: np.ndarray,
                         target: str = "target", reference: str = "reference"
                         ) -> CrossCoverage:
    """Share of the target's (state key, action key) pairs found in the reference, per
    action and overall. Keys are compared as strings, so the two logs may have been
    featurized separately (each with its own vocabulary) by the same featurizer."""
    def pairs(states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return np.char.add(np.char.add(np.asarray(states, dtype=str), "\x1f"),
                           np.asarray(actions, dtype=str))

    target_pairs = pairs(target_states, target_actions)
    covered = np.isin(target_pairs, pairs(reference_states, reference_actions))
    actions = np.asarray(target_actions, dtype=str)

    def summary(mask: np.ndarray) -> dict[str, float | int | None]:
        distinct, first = np.unique(target_pairs[mask], return_index=True)
        hit = covered[mask][first]
        rows, rows_hit = int(mask.sum()), int(covered[mask].sum())
        return {"rows": rows, "rows_covered": rows_hit,
                "share_rows": rows_hit / rows if rows else None,
                "pairs": len(distinct), "pairs_covered": int(hit.sum()),
                "share_pairs": float(hit.mean()) if len(distinct) else None}

    by_action = {str(a): summary(actions == a) for a in np.unique(actions)}
    return CrossCoverage(target, reference, by_action, summary(np.ones(len(actions), bool)))


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"
