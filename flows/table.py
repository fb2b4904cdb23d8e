"""table: the chapter's calculator table, exact and Monte Carlo, as a DVC metrics file."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, path, publish, record_provenance, stage_params, write_metrics
from tasks.table import evaluate_calculator_policies
from tracerl.envs.calculator_table import markdown
from tracerl.params import get


@flow(name="table")
def table_flow() -> dict:
    params = stage_params()
    table = evaluate_calculator_policies(path(params, "models"), datasets(params),
                                         get(params, "calculator.behavior", {}),
                                         int(get(params, "table.mc_episodes")),
                                         int(get(params, "table.seed")),
                                         float(get(params, "gamma")))
    write_metrics(params, "table", table)
    record_provenance(params, "table")
    publish("calculator-table", "# Four policies on two datasets\n\n" + markdown(table),
            "Exact and Monte Carlo success of each policy, beside the chapter's numbers")
    return table
