"""Great Expectations as a project: the suite and one checkpoint per dataset kept as files
under `gx/` (generated from params by `python -m tracerl gx generate`, reviewed in diffs),
and Data Docs built offline by the checkpoint run that validates each dataset.

The suite file is the same suite `tracerl.data.validation` runs (`_suite_specs`); the validate
stage refuses to run when the file no longer matches params, so a changed bound shows up
as a diff of `gx/expectations/tracerl_step_table.json` in review.

Great Expectations takes seconds to import: only `run_checkpoint` imports it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # the stage imports pandas when it builds the frame, not at start-up
    import pandas as pd

SUITE_NAME = "tracerl_step_table"
DATASOURCE = "tracerl_steps"
BATCH = "all_rows"


def suite_json(reward_min: float, reward_max: float) -> dict[str, Any]:
    """The expectation suite, in GX's own JSON layout (no ids: a stable file)."""
    from tracerl.data.validation import _suite_specs

    expectations = []
    for index, (name, class_name, kwargs, _) in enumerate(_suite_specs(float(reward_min),
                                                                        float(reward_max))):
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in class_name).lstrip("_")
        expectations.append({"type": snake, "kwargs": kwargs,
                             "meta": {"tracerl_index": index, "tracerl_name": name},
                             "severity": "critical"})
    return {"name": SUITE_NAME, "expectations": expectations,
            "meta": {"generated_from": "params.yaml validate.*; `python -m tracerl gx generate`"}}


def checkpoint_json(dataset: str) -> dict[str, Any]:
    return {"name": f"{dataset}_checkpoint",
            "validation_definitions": [{"name": dataset, "suite": SUITE_NAME,
                                        "data": {"datasource": DATASOURCE, "asset": dataset,
                                                 "batch_definition": BATCH}}],
            "actions": [{"type": "update_data_docs", "name": "data_docs",
                         "site_names": ["local_site"]}],
            "result_format": {"result_format": "SUMMARY"}}


def project_files(reward_min: float, reward_max: float, datasets: list[str]
                  ) -> dict[str, bytes]:
    """Relative path under gx/ → the bytes it must hold."""
    dump = lambda obj: orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"  # noqa: E731
    files = {f"expectations/{SUITE_NAME}.json": dump(suite_json(reward_min, reward_max))}
    for name in datasets:
        files[f"checkpoints/{name}_checkpoint.json"] = dump(checkpoint_json(name))
    return files


def generate(gx_dir: Path, reward_min: float, reward_max: float, datasets: list[str]
             ) -> list[Path]:
    """Write the suite and checkpoints; remove checkpoints of datasets no longer listed."""
    from tracerl.io.fileio import atomic_path

    gx_dir = Path(gx_dir)
    wanted = project_files(reward_min, reward_max, datasets)
    written = []
    for rel, data in wanted.items():
        with atomic_path(gx_dir / rel) as tmp:
            tmp.write_bytes(data)
        written.append(gx_dir / rel)
    for old in (gx_dir / "checkpoints").glob("*.json"):
        if f"checkpoints/{old.name}" not in wanted:
            old.unlink()
    return written


def stale(gx_dir: Path, reward_min: float, reward_max: float, datasets: list[str]
          ) -> list[str]:
    """Files under gx/ that do not match params (missing, different, or extra)."""
    gx_dir = Path(gx_dir)
    wanted = project_files(reward_min, reward_max, datasets)
    out = [rel for rel, data in wanted.items()
           if not (gx_dir / rel).is_file() or (gx_dir / rel).read_bytes() != data]
    out += [f"checkpoints/{p.name}" for p in (gx_dir / "checkpoints").glob("*.json")
            if f"checkpoints/{p.name}" not in wanted]
    return sorted(out)


_LOCK = threading.Lock()


@dataclass(frozen=True)
class DataDocs:
    """Where a validation run builds a dataset's Data Docs: the GX project folder holding
    its checkpoint (`checkpoints/<dataset>_checkpoint.json`) and the site's folder."""

    gx_dir: Path
    dataset: str
    docs_dir: Path


def run_checkpoint(context: Any, frame: pd.DataFrame, suite: Any, docs: DataDocs,
                   result_format: dict[str, Any]) -> Any:
    """Run the dataset's checkpoint in `context` (an ephemeral GX context) with `suite` on
    `frame` and build its Data Docs under
    `docs.docs_dir` (static HTML; GX's pages load their styles and scripts from CDNs, so
    offline they are readable but unstyled). Returns the run's one validation result.

    The checkpoint's name, data source, asset and actions come from the kept file;
    `suite` is the suite the caller validates with (the kept one plus a dataset's own
    rules) and `result_format` the detail the caller needs, so this one run gives both
    the verdict and the Data Docs."""
    with _LOCK:  # the shared GX config of ephemeral contexts is not thread-safe
        return _run_checkpoint(context, frame, suite, docs, result_format)


def _run_checkpoint(context: Any, frame: pd.DataFrame, suite: Any, docs: DataDocs,
                    result_format: dict[str, Any]) -> Any:
    import great_expectations as gx

    docs_dir = Path(docs.docs_dir).resolve()
    cp_spec = orjson.loads((Path(docs.gx_dir) / "checkpoints"
                            / f"{docs.dataset}_checkpoint.json").read_bytes())
    site = {"class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": str(docs_dir)}}
    # GX keeps the sites of ephemeral contexts in a shared default config: update it.
    for name in {a_site for a in cp_spec["actions"] for a_site in a.get("site_names", [])}:
        if name in (context.get_config().data_docs_sites or {}):
            context.update_data_docs_site(site_name=name, site_config=site)
        else:
            context.add_data_docs_site(site_name=name, site_config=site)
    suite = context.suites.add(suite)
    definitions = []
    for vd in cp_spec["validation_definitions"]:
        batch = (context.data_sources.add_pandas(vd["data"]["datasource"])
                 .add_dataframe_asset(vd["data"]["asset"])
                 .add_batch_definition_whole_dataframe(vd["data"]["batch_definition"]))
        definitions.append(context.validation_definitions.add(
            gx.ValidationDefinition(name=vd["name"], data=batch, suite=suite)))
    if len(definitions) != 1:
        raise ValueError(f"{cp_spec['name']}: one validation definition expected, got "
                         f"{len(definitions)}")
    checkpoint = context.checkpoints.add(gx.Checkpoint(
        name=cp_spec["name"], validation_definitions=definitions,
        actions=[gx.checkpoint.UpdateDataDocsAction(name=a["name"], site_names=a["site_names"])
                 for a in cp_spec["actions"]], result_format=result_format))
    result = checkpoint.run(batch_parameters={"dataframe": frame})
    return next(iter(result.run_results.values()))
