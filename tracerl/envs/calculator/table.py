"""The chapter's table: four policies on two datasets, judged by the exact evaluator and by
Monte Carlo rollouts in the simulator."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from tracerl.envs.calculator.exact import exact_value
from tracerl.envs.calculator.rules import DEFAULT_GAMMA
from tracerl.envs.calculator.simulator import mc_value
from tracerl.report.terminal import load, new_table, show

if TYPE_CHECKING:
    from tracerl.rl.policy import Policy

# What the book chapter printed (500-episode samples; see README for why ours differ).
CHAPTER = {
    "good_coverage": {"behavior": 0.72, "bc": 1.00, "naive_fqi": 1.00, "constrained_fqi": 1.00},
    "no_mul_support": {"behavior": 0.52, "bc": 0.67, "naive_fqi": 1.00,
                       "constrained_fqi": 0.72},
}
CHAPTER_MUL = {"no_mul_support": {"bc": 0.01, "naive_fqi": 1.00, "constrained_fqi": 0.02}}


def policy_row(policy: Policy, mc_episodes: int, seed: int,
               gamma: float = DEFAULT_GAMMA) -> dict[str, float]:
    """Exact and Monte Carlo success (overall and on mul tasks) and exact return."""
    exact = exact_value(policy, gamma)
    mc = mc_value(policy, mc_episodes, seed, gamma)
    return {
        "success": exact["success"],
        "success_mc": mc["success"],
        "success_mul": exact["success_by_task"]["mul"],
        "success_mul_mc": mc["success_by_task"]["mul"],
        "return": exact["return"],
    }


def calculator_table(policies: Mapping[str, Mapping[str, Policy]], mc_episodes: int, seed: int,
                     gamma: float = DEFAULT_GAMMA) -> dict[str, dict[str, dict[str, float]]]:
    """{dataset: {policy: row}}; each (dataset, policy) gets its own seed, derived from
    `seed` in a fixed order so the table is reproducible."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    k = 0
    for dataset, by_name in policies.items():
        table[dataset] = {}
        for name, policy in by_name.items():
            table[dataset][name] = policy_row(policy, mc_episodes, seed + k, gamma)
            k += 1
    return table


def markdown(table: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """The table beside the chapter's printed numbers."""
    lines = ["| dataset | policy | success (exact) | success (MC) | chapter | mul tasks (exact) "
             "| mul (MC) | chapter mul | return (exact) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for dataset, rows in table.items():
        for name, r in rows.items():
            chapter = CHAPTER.get(dataset, {}).get(name)
            chapter_mul = CHAPTER_MUL.get(dataset, {}).get(name)
            lines.append(
                f"| {dataset} | {name} | {r['success']:.3f} | {r['success_mc']:.3f} | "
                f"{_fmt(chapter)} | {r['success_mul']:.3f} | {r['success_mul_mc']:.3f} | "
                f"{_fmt(chapter_mul)} | {r['return']:.4f} |")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def print_calculator_table(reports: Path, metrics: Path, console: Console) -> bool:
    """`tracerl results`: the calculator table beside the chapter's numbers, if written."""
    table = load(metrics / "table.json")
    if not table:
        return False
    view = new_table("calculator: four policies on two datasets (exact / Monte Carlo; "
                 "chapter = the book's 500-episode figures)")
    for col in ("dataset", "policy", "success", "MC", "chapter", "mul tasks", "MC",
                "chapter", "return"):
        view.add_column(col, justify="left" if col in ("dataset", "policy") else "right")
    order = ["behavior", "bc", "naive_fqi", "constrained_fqi"]
    for dataset, rows in table.items():
        for name in sorted(rows, key=lambda p: order.index(p) if p in order else 99):
            r = rows[name]
            chapter = CHAPTER.get(dataset, {}).get(name)
            chapter_mul = CHAPTER_MUL.get(dataset, {}).get(name)
            view.add_row(dataset, name, f"{r['success']:.3f}", f"{r['success_mc']:.3f}",
                         "" if chapter is None else f"{chapter:.2f}",
                         f"{r['success_mul']:.3f}", f"{r['success_mul_mc']:.3f}",
                         "" if chapter_mul is None else f"{chapter_mul:.2f}",
                         f"{r['return']:.4f}")
    show(console, view)
    return True
