"""generate: the calculator agent's logs, both datasets, as native JSONL."""

from __future__ import annotations

from prefect import flow

from flows import desk
from flows.common import datasets, path, record_provenance, stage_params
from flows.identity import identify, namer
from tasks.generate import generate_calculator_logs
from tracerl.params import get


@flow(name="generate", flow_run_name=namer("generate"))
def generate_flow() -> dict[str, int]:
    params = stage_params()
    identify("generate", params, datasets(params))
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
    desk.wrote("generate", [raw / f"{name}.jsonl" for name in counts])
    desk.summary("generate", desk.PASS, ["dataset", "steps written", "file"],
                 [[k, v, raw / f"{k}.jsonl"] for k, v in counts.items()],
                 description="Calculator logs written by the behaviour policies")
    return counts
