"""export: the labelled step tables as fine-tuning data (tracerl.export), per dataset."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows import _publish as publish
from flows._stage import (
    datasets,
    identify,
    namer,
    path,
    record_provenance,
    stage_params,
    write_metrics,
)
from tasks.export import credit_plan, export_steps, split_keys_of
from tracerl.export.run import load_tool_definitions
from tracerl.export.select import assign_splits
from tracerl.io.fileio import write_json


class NoExportSection(RuntimeError):
    pass


@flow(name="export", flow_run_name=namer("export"))
def export_flow() -> dict[str, dict]:
    params = stage_params()
    names = datasets(params)
    identify("export", params, names)
    config = params.export
    if config is None:
        raise NoExportSection("params have no `export:` section (tracerl/config/export.py)")
    filters = params.relabel.filters
    labelled = path(params, "labelled")
    # One assignment for every dataset: a task is in one split whichever agent's logs.
    keys = sorted({k for name in names for k in split_keys_of(labelled / name / "steps")})
    split_of = assign_splits(keys, config.splits, config.seed, config.split_method)
    tools = load_tool_definitions(config.tool_definitions)
    out = Path(config.out)
    plan = credit_plan({name: labelled / name / "steps" for name in names}, config,
                       params.train, params.ope, params.gamma, split_of)
    results = {name: export_steps(labelled / name / "steps", out / name, config,
                                  filters.process if filters else None,
                                  filters.outcome if filters else None, split_of,
                                  tools, plan) for name in names}
    write_json(out / "manifest.json", {"datasets": results})
    if plan is not None:  # what the report's step-credit section and the UI show
        credit_file = path(params, "reports") / "export" / "credit.json"
        write_json(credit_file, {"datasets": plan.summaries})
        publish_credit(plan.summaries)
    write_metrics(params, "export", {name: _metrics(m) for name, m in results.items()})
    record_provenance(params, "export")
    publish.wrote("export", [out / name for name in names])
    rows = [[name, *_metrics(m).values()] for name, m in results.items()]
    publish.summary("export", publish.PASS, ["dataset", *_metrics(next(iter(results.values())))],
                    rows, notes=[f"{out}/<dataset>/<format>/<split>.jsonl; manifest: "
                                 f"{out}/manifest.json"],
                    description="Fine-tuning exports (SFT, OpenAI, KTO, PRM) per split")
    return results


def publish_credit(summaries: dict[str, dict]) -> None:
    """Per dataset, the step credit in the UI: the (state, action) pairs with the most
    negative advantage and enough support, and the episodes whose value dropped most."""
    def cell(text: str) -> str:  # a state label's pipes are not columns
        return text.replace("|", "\\|")

    for name, s in summaries.items():
        level = f"{s['level']:.0%}"
        publish.detail(
            f"export-credit-{name}", f"{name}: step credit under the logging policy",
            ["state", "action", "advantage", f"{level} CI", "n", "behaviour prob", "flags"],
            [[cell(w["state"]), w["action"], round(w["advantage"], 4),
              f"{w['advantage_ci'][0]:.3f} to {w['advantage_ci'][1]:.3f}", w["n"],
              round(w["behavior_prob"], 3), ", ".join(w["flags"])] for w in s["worst_pairs"]],
            description=f"step credit of {name}: the most negative advantages",
            footer="\n".join([*(f"- {w['sentence']}" for w in s["worst_pairs"][:3]),
                              "", "Largest value drops (episode, step):",
                              *(f"- `{d['episode_id']}` t={d['t']} `{d['action']}`: "
                                f"value change {d['value_change']:+.3f} (advantage "
                                f"{d['advantage']:+.3f}, n = {d['n']})"
                                for d in s["largest_drops"][:5]),
                              "", f"Interval: {s['interval']}; pairs (state, action) "
                                  f"with n >= {s['min_count']} only; preference pairs "
                                  f"anchored here: {s['pairs']}."]))


def _metrics(manifest: dict) -> dict[str, int]:
    """The few numbers `dvc metrics` compares: records per export, summed over splits."""
    out = {f"tasks_{s}": n for s, n in manifest["splits"]["tasks"].items()}
    for fmt, counts in manifest["exports"].items():
        for key in ("records", "examples", "pairs", "trained_messages", "desirable", "steps_good",
                    "flagged_messages"):
            if key in counts:
                out[f"{fmt}_{key}"] = sum(counts[key].values())
    return out
