"""generate: the simulated logs of the fixture params name, one file per dataset."""

from __future__ import annotations

from prefect import flow

from flows import _publish as publish
from flows._stage import datasets, identify, namer, path, record_provenance, stage_params
from tasks.generate import generate_logs
from tracerl.config.fixtures import fixture_of


@flow(name="generate", flow_run_name=namer("generate"))
def generate_flow() -> dict[str, int]:
    params = stage_params()
    identify("generate", params, datasets(params))
    raw = path(params, "raw")
    counts = {}
    for i, name in enumerate(datasets(params)):
        fixture = fixture_of(params, name)
        if fixture is None:
            raise ValueError(f"dataset {name!r}: generate needs a fixture (params `fixture:`)")
        counts[name] = generate_logs(fixture.name, name, i, params, raw / f"{name}.jsonl")
    record_provenance(params, "generate")
    publish.wrote("generate", [raw / f"{name}.jsonl" for name in counts])
    publish.summary("generate", publish.PASS, ["dataset", "records written", "file"],
                 [[k, v, raw / f"{k}.jsonl"] for k, v in counts.items()],
                 description="Logs written by each dataset's behaviour policy")
    return counts
