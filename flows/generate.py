"""generate: the calculator agent's logs, both datasets, as native JSONL."""

from __future__ import annotations

from prefect import flow

from flows.common import datasets, md_table, path, publish, record_provenance, stage_params
from tasks.generate import generate_calculator_logs
from tracerl.params import get


@flow(name="generate")
def generate_flow() -> dict[str, int]:
    params = stage_params()
    raw = path(params, "raw")
    seed = int(get(params, "calculator.seed"))
    counts = {}
    for i, name in enumerate(datasets(params)):
        counts[name] = generate_calculator_logs(
            name, int(get(params, "calculator.episodes")), seed + i,
            float(get(params, "calculator.test_fraction")),
            get(params, f"calculator.behavior.{name}", {}), float(get(params, "gamma")),
            raw / f"{name}.jsonl")
    record_provenance(params, "generate")
    publish("generate-summary", md_table(["dataset", "steps written"],
                                         [[k, v] for k, v in counts.items()]),
            "Calculator logs written by the behaviour policies")
    return counts
