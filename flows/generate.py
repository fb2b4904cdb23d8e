"""generate: the simulated logs of the fixture params name, one file per dataset."""

from __future__ import annotations

from prefect import flow

from flows import _publish as publish
from flows._stage import identify, namer, record_provenance, stage_params
from tasks.generate import generate_logs


@flow(name="generate", flow_run_name=namer("generate"))
def generate_flow() -> dict[str, int]:
    config = stage_params()
    names = config.dataset_names()
    identify("generate", config, names)
    raw = config.paths.raw
    counts = {}
    for i, name in enumerate(names):
        fixture = config.fixture_name_of(name)
        if fixture is None:
            raise ValueError(f"dataset {name!r}: generate needs a fixture (params `fixture:`)")
        counts[name] = generate_logs(fixture, name, i, config, raw / f"{name}.jsonl")
    record_provenance(config, "generate")
    publish.wrote("generate", [raw / f"{name}.jsonl" for name in counts])
    publish.summary("generate", publish.PASS, ["dataset", "records written", "file"],
                 [[k, v, raw / f"{k}.jsonl"] for k, v in counts.items()],
                 description="Logs written by each dataset's behaviour policy")
    return counts
