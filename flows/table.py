"""table: the chapter's calculator table, exact and Monte Carlo, as a DVC metrics file."""

from __future__ import annotations

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
from tasks.table import evaluate_calculator_policies
from tracerl.envs.calculator.table import markdown


@flow(name="table", flow_run_name=namer("table"))
def table_flow() -> dict:
    params = stage_params()
    names = datasets(params)
    identify("table", params, names)
    table = evaluate_calculator_policies(
        path(params, "models"), names, params.train.learners,
        {n: params.calculator.behavior_of(n) for n in names}, params.table.mc_episodes,
        params.table.seed, params.gamma)
    write_metrics(params, "table", table)
    record_provenance(params, "table")
    publish.summary("table", publish.PASS, ["dataset", "policy", "success (exact)", "success (MC)",
                                      "return"],
                 [[d, p, f"{r['success']:.3f}", f"{r['success_mc']:.3f}", f"{r['return']:.4f}"]
                  for d, rows in table.items() for p, r in rows.items()],
                 description="Exact and Monte Carlo success of each policy")
    publish.detail("calculator-table", "Four policies on two datasets", [], [],
                "Exact and Monte Carlo success of each policy, beside the chapter's numbers",
                footer=markdown(table))
    return table
