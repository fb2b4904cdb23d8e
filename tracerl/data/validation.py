"""Data-quality checks on the step table, run as a Great Expectations suite.

`validate_steps` flattens a step table (see `tracerl.data.schema.STEP_SCHEMA`) into a pandas
frame, adds two derived per-row columns for the checks GX cannot express on one column,
runs one expectation suite and condenses the result into a `ValidationReport` that names a
few offending rows per failed expectation. `write_report` stores the report as
`summary.json` and a self-contained `report.html`.

Great Expectations takes seconds to import, so it is imported inside `validate_steps` only.
"""

from __future__ import annotations

import html
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.schema import ACTION_TYPES, SPLITS, STEP_SCHEMA, upgrade_table
from tracerl.io.fileio import write_text

if TYPE_CHECKING:
    from tracerl.data.gx_project import DataDocs

__all__ = ["ExpectationOutcome", "ValidationReport", "validate_step_parts", "validate_steps",
           "write_report"]

# Row number column added to the frame: GX reports it for each offending row, and the
# sample's episode_id, t and value are then read back from the frame with their real types
# (GX turns index-column values into strings).
_ROW = "_row"
EPISODE_DONE_COUNT = "episode_done_count"
TOOL_IN_AVAILABLE_TOOLS = "tool_in_available_tools"

# Columns that must be non-null on every row.
NOT_NULL_COLUMNS = ("episode_id", "t", "action.type", "done", "source_file", "source_record")


@dataclass
class ExpectationOutcome:
    """The result of one expectation, with a few offending rows."""

    name: str  # readable, e.g. "reward within [-1.0, 1.0]"
    expectation: str  # the GX expectation type, e.g. "expect_column_values_to_be_between"
    column: str | None
    success: bool
    unexpected_count: int | None  # None for table-level checks (column dtype)
    sample: list[dict[str, Any]] = field(default_factory=list)  # episode_id, t, value, source
    observed: str | None = None  # table-level observation (dtype) or GX error message
    blocking: bool = True  # False: a failure is counted and shown, the table still passes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ValidationReport:
    """All outcomes of one validation run over a step table."""

    success: bool
    rows: int
    episodes: int
    results: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def failures(self) -> list[ExpectationOutcome]:
        """Failed blocking expectations (the ones that fail the table)."""
        return [r for r in self.results if not r.success and r.blocking]

    @property
    def warnings(self) -> list[ExpectationOutcome]:
        """Failed expectations that are counted and shown but do not fail the table."""
        return [r for r in self.results if not r.success and not r.blocking]

    def unexpected(self, name: str) -> int:
        """Unexpected rows of the expectation called `name` (0 when it passed or is absent)."""
        return sum(r.unexpected_count or 0 for r in self.results if r.name == name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary; order follows the suite, no timestamps."""
        return {
            "success": self.success,
            "rows": self.rows,
            "episodes": self.episodes,
            "expectations": len(self.results),
            "failed": len(self.failures),
            "warnings": len(self.warnings),
            "results": [r.to_dict() for r in self.results],
        }

    def to_pandas(self) -> pd.DataFrame:
        """One row per expectation, in suite order (the offending-row samples left out)."""
        return pd.DataFrame([{k: v for k, v in r.to_dict().items() if k != "sample"}
                             for r in self.results],
                            columns=["name", "expectation", "column", "success",
                                     "unexpected_count", "observed", "blocking"])

    def failure_message(self) -> str:
        """One line per failed expectation, each naming a few offending rows."""
        head = f"{self.rows} rows, {self.episodes} episodes"
        if self.success and not self.warnings:
            return f"step table valid: all {len(self.results)} expectations passed ({head})"
        if self.success:
            return "\n".join([f"step table valid ({head}); counted, not failing:"] + [
                f"- {r.name}: {_describe_failure(r)}" for r in self.warnings])
        lines = [
            f"step table invalid: {len(self.failures)} of {len(self.results)} "
            f"expectations failed ({head})"
        ]
        for r in self.failures:
            lines.append(f"- {r.name} [{r.expectation}]: {_describe_failure(r)}")
        for r in self.warnings:
            lines.append(f"- (counted, not failing) {r.name}: {_describe_failure(r)}")
        return "\n".join(lines)


def _describe_failure(outcome: ExpectationOutcome) -> str:
    parts = []
    if outcome.unexpected_count is not None:
        parts.append(f"{outcome.unexpected_count} unexpected row(s)")
    if outcome.observed is not None:
        parts.append(f"observed {outcome.observed}")
    if outcome.sample:
        parts.append("e.g. " + "; ".join(_format_sample(s) for s in outcome.sample))
    return ", ".join(parts) if parts else "failed"


def _format_sample(sample: dict[str, Any]) -> str:
    return f"episode_id={sample['episode_id']!r} t={sample['t']} value={sample['value']!r}"


# --- building the frame -------------------------------------------------------------------


def _expected_dtypes() -> dict[str, str]:
    """pandas dtype name of each scalar column of the flattened STEP_SCHEMA.

    List and map columns come out as `object` and are not type-checked here, nor are
    optional integer columns (schema v2's turn, call_index, episode counts): pandas turns
    an integer column with nulls into float64, so their dtype says nothing (Arrow has
    already typed them).
    """
    out = {}
    for f in STEP_SCHEMA.empty_table().flatten().schema:
        if pa.types.is_string(f.type):
            out[f.name] = "str"  # pandas 3 string dtype
        elif pa.types.is_integer(f.type) and f.nullable:
            continue
        elif pa.types.is_integer(f.type) or pa.types.is_floating(f.type):
            out[f.name] = f.type.to_pandas_dtype().__name__  # e.g. int32, float64
        elif pa.types.is_boolean(f.type):
            out[f.name] = "bool"
    return out


def _tool_in_available_tools(flat: pa.Table) -> np.ndarray:
    """Per row: True unless a tool_call names a tool missing from a non-null available_tools.

    Vectorised in Arrow: explode the tool lists, compare each element with its row's tool.
    """
    tools = flat.column("state.available_tools").combine_chunks()
    tool = flat.column("action.tool").combine_chunks()
    is_call = pc.fill_null(pc.equal(flat.column("action.type"), "tool_call"), False)
    has_list = pc.is_valid(tools)
    parents = pc.list_parent_indices(tools)
    matches = pc.fill_null(pc.equal(pc.list_flatten(tools), pc.take(tool, parents)), False)
    found = np.zeros(flat.num_rows, dtype=bool)
    found[parents.to_numpy()[matches.to_numpy(zero_copy_only=False)]] = True
    needs_check = (is_call.to_numpy(zero_copy_only=False)
                   & has_list.to_numpy(zero_copy_only=False))
    return ~needs_check | found


def _read_columns(specs: list) -> set[str]:
    """Columns whose values the suite reads: every expectation's but the dtype checks',
    the samples' value columns and what each sample names (episode_id, t, source)."""
    out = {"episode_id", "t", "source_file", "source_record"}
    for _, class_name, kwargs, value_column in specs:
        if class_name != "ExpectColumnValuesToBeOfType":
            out.update([kwargs["column"]] if "column" in kwargs else kwargs.get("column_list", []))
        if value_column is not None:
            out.add(value_column)
    return out


def _string_stands_in() -> bool:
    """Whether pandas gives an Arrow string column a dtype of its own (pandas 3's str),
    which GX's dtype check reads alone; an object column's check reads every value."""
    return pa.array([], type=pa.string()).to_pandas().dtype != object


def _step_frame(parts: Iterable[pa.Table], specs: list) -> pd.DataFrame:
    """Flattened pandas frame of the columns the suite reads (every scalar column: their
    dtypes are checked) plus the derived columns and the row number, built a part of the
    step table at a time (the parts in order: a table whole, or its Parquet batches).

    List and map columns (events, reward components, tool lists) would become a Python
    object per row, most of the frame's memory, for no expectation: they stay in Arrow,
    one part at a time. A string column whose dtype alone is checked (tool results,
    arguments, messages, extras: most of the rest) is one shared column of nulls of its
    type: the same dtype, so the same check and result, without a copy of its text.
    """
    expected = _expected_dtypes()
    read = _read_columns(specs)
    stand_in = _string_stands_in()
    chunks: dict[str, list[pa.ChunkedArray]] = {name: [] for name in expected}
    blank: set[str] = set()
    offered, n = [], 0
    for part in parts:
        flat = upgrade_table(part).flatten()
        missing = sorted(set(expected) - set(flat.column_names))
        if missing:
            raise ValueError(f"table lacks step-schema columns: {missing}")
        for name in expected:
            column = flat.column(name)
            if stand_in and name not in read and column.type == pa.string():
                blank.add(name)
            else:
                chunks[name].append(column)
        offered.append(_tool_in_available_tools(flat))
        n += flat.num_rows
    if not offered:
        raise ValueError("no step table to validate (no parts)")
    typed = pa.table({name: pa.chunked_array([c for col in cols for c in col.chunks],
                                             type=cols[0].type)
                      for name, cols in chunks.items() if name not in blank})
    real = typed.to_pandas(split_blocks=True)
    del typed
    nulls = pa.table({"_": pa.nulls(n, pa.string())}).to_pandas()["_"]
    df = pd.DataFrame({name: nulls if name in blank else real[name] for name in expected},
                      copy=False)
    del real
    # A null done counts as not done; the not-null expectation reports it separately.
    done = df["done"].fillna(False).astype(bool)
    df[EPISODE_DONE_COUNT] = (
        done.groupby(df["episode_id"], dropna=False, sort=False).transform("sum").astype("int64")
    )
    df[TOOL_IN_AVAILABLE_TOOLS] = np.concatenate(offered)
    df[_ROW] = np.arange(len(df), dtype="int64")
    return df


# --- the suite ----------------------------------------------------------------------------


TOOL_OFFERED = "action.tool in state.available_tools"


def _suite_specs(
    reward_min: float, reward_max: float, tools: list[str] | None = None
) -> list[tuple[str, str, dict[str, Any], str | None]]:
    """(readable name, GX class name, kwargs, column the sample's value is read from)."""
    specs: list[tuple[str, str, dict[str, Any], str | None]] = []
    for column, dtype in _expected_dtypes().items():
        specs.append((f"{column} has dtype {dtype}", "ExpectColumnValuesToBeOfType",
                      {"column": column, "type_": dtype}, None))
    for column in NOT_NULL_COLUMNS:
        specs.append((f"{column} is not null", "ExpectColumnValuesToNotBeNull",
                      {"column": column}, column))
    specs += [
        ("(episode_id, t) is unique", "ExpectCompoundColumnsToBeUnique",
         {"column_list": ["episode_id", "t"]}, None),
        # Column-map expectations skip nulls, so a null split passes (split is optional).
        (f"split in {list(SPLITS)} or null", "ExpectColumnValuesToBeInSet",
         {"column": "split", "value_set": list(SPLITS)}, "split"),
        (f"action.type in {list(ACTION_TYPES)}", "ExpectColumnValuesToBeInSet",
         {"column": "action.type", "value_set": list(ACTION_TYPES)}, "action.type"),
        ("t >= 0", "ExpectColumnValuesToBeBetween", {"column": "t", "min_value": 0}, "t"),
        (f"reward within [{reward_min!r}, {reward_max!r}]", "ExpectColumnValuesToBeBetween",
         {"column": "reward", "min_value": reward_min, "max_value": reward_max}, "reward"),
        ("exactly one done row per episode", "ExpectColumnValuesToBeInSet",
         {"column": EPISODE_DONE_COUNT, "value_set": [1]}, EPISODE_DONE_COUNT),
        # The derived column is a bare bool; the tool name is the informative value.
        (TOOL_OFFERED, "ExpectColumnValuesToBeInSet",
         {"column": TOOL_IN_AVAILABLE_TOOLS, "value_set": [True]}, "action.tool"),
    ]
    if tools is not None:  # a dataset's own tool list (params), e.g. the calculator's
        specs.append((f"action.tool in {sorted(tools)}", "ExpectColumnValuesToBeInSet",
                      {"column": "action.tool", "value_set": sorted(tools)}, "action.tool"))
    return specs


def _plain(value: Any) -> Any:
    """A JSON-safe Python value: numpy scalars unwrapped, NaN -> None, inf -> 'inf'."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if pd.isna(value):
        return None
    return str(value)


def _sample(
    df: pd.DataFrame, result: dict[str, Any], value_column: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` offending rows in table order, spread over as many episodes as possible.

    An episode-level defect flags every row of its episode; without the spread one long bad
    episode would fill the whole sample and hide the others.
    """
    candidates = [int(e[_ROW]) if isinstance(e, dict) else int(e)
                  for e in result.get("partial_unexpected_index_list") or []]
    if not candidates:
        return []
    episodes = df["episode_id"].iloc[candidates].to_numpy()
    seen: set[Any] = set()
    first, rest = [], []
    for i, episode in zip(candidates, episodes, strict=True):
        (rest if episode in seen else first).append(i)
        seen.add(episode)
    rows = []
    for i in sorted((first + rest)[:limit]):
        row = df.iloc[i]
        episode_id, t = _plain(row["episode_id"]), _plain(row["t"])
        if isinstance(t, float) and t.is_integer():  # t turns float when some t is null
            t = int(t)
        value = _plain(row[value_column]) if value_column else [episode_id, t]
        source = f"{_plain(row['source_file'])}:{_plain(row['source_record'])}"
        rows.append({"episode_id": episode_id, "t": t, "value": value, "source": source})
    return rows


def _run_suite(df: pd.DataFrame, specs: list, sample_rows: int,
               data_docs: DataDocs | None = None) -> list[Any]:
    """Run the specs as one GX suite on df; return GX results in spec order. With
    `data_docs`, as the dataset's checkpoint, which also builds its Data Docs."""
    root_logger = logging.getLogger("great_expectations")
    if root_logger.level == logging.NOTSET:  # before the import, which logs a lot at DEBUG
        root_logger.setLevel(logging.WARNING)
    import great_expectations as gx  # lazy: ~4 s import
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # This GX module forces INFO on itself at import and logs each ephemeral context it makes.
    base_logger = logging.getLogger("great_expectations.data_context.types.base")
    if base_logger.level == logging.INFO:
        base_logger.setLevel(logging.NOTSET)

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = gx.ExpectationSuite(name="tracerl_step_table")
    for index, (_, class_name, kwargs, _) in enumerate(specs):
        suite.add_expectation(getattr(gxe, class_name)(**kwargs, meta={"tracerl_index": index}))
    result_format = {
        "result_format": "SUMMARY",
        "unexpected_index_column_names": [_ROW],
        # GX's query string lists every offending row index again (a whole-frame filter
        # per expectation); the report never reads it.
        "return_unexpected_index_query": False,
        # Extra candidates let _sample spread its picks over episodes.
        "partial_unexpected_count": sample_rows * 10,
    }
    if data_docs is not None:
        from tracerl.data.gx_project import run_checkpoint

        result = run_checkpoint(context, df, suite, data_docs, result_format)
    else:
        batch_definition = (
            context.data_sources.add_pandas("tracerl_steps")
            .add_dataframe_asset("steps")
            .add_batch_definition_whole_dataframe("all_rows")
        )
        batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
        result = batch.validate(suite, result_format=result_format)
    # GX groups results by domain, not suite order: restore the order via meta.
    return sorted(result.results, key=lambda r: r.expectation_config.meta["tracerl_index"])


def validate_steps(
    table: pa.Table, reward_min: float, reward_max: float, sample_rows: int = 5,
    tools: list[str] | None = None, hallucinated_tools: str = "fail",
    data_docs: DataDocs | None = None,
) -> ValidationReport:
    """Validate a step table: `validate_step_parts` of the table as one part."""
    return validate_step_parts([table], reward_min, reward_max, sample_rows, tools,
                               hallucinated_tools, data_docs)


def validate_step_parts(
    parts: Iterable[pa.Table], reward_min: float, reward_max: float, sample_rows: int = 5,
    tools: list[str] | None = None, hallucinated_tools: str = "fail",
    data_docs: DataDocs | None = None,
) -> ValidationReport:
    """Validate a step table given as consecutive parts (e.g. its Parquet batches: no
    whole table is held); the report names up to `sample_rows` offending rows per check.

    tools: when given, every action.tool must be one of them (a dataset's own rule).
    hallucinated_tools: "fail" (a call to a tool missing from the row's available_tools
    fails the table) or "count" (it is counted and shown as a warning: real agents do
    call tools they were not offered, and that is data, not a broken table).
    data_docs: when given, the suite runs as the dataset's GX checkpoint (from the GX
    project folder), which also builds its Data Docs: one GX run for both.
    Raises ValueError if the table lacks step-schema columns or the bounds are unordered.
    """
    if hallucinated_tools not in ("fail", "count"):
        raise ValueError(f"hallucinated_tools must be 'fail' or 'count', got "
                         f"{hallucinated_tools!r}")
    if not reward_min <= reward_max:
        raise ValueError(f"reward_min {reward_min} > reward_max {reward_max}")
    if sample_rows < 0:
        raise ValueError(f"sample_rows must be >= 0, got {sample_rows}")
    specs = _suite_specs(float(reward_min), float(reward_max), tools)
    df = _step_frame(parts, specs)
    outcomes = []
    for (name, _, kwargs, value_column), res in zip(
        specs, _run_suite(df, specs, sample_rows, data_docs), strict=True
    ):
        body = res.result or {}
        exc = res.exception_info or {}
        observed = body.get("observed_value")
        if exc.get("raised_exception"):
            observed = f"error: {exc.get('exception_message')}"
        count = body.get("unexpected_count")
        outcomes.append(
            ExpectationOutcome(
                name=name,
                expectation=res.expectation_config.type,
                column=kwargs.get("column", ", ".join(kwargs.get("column_list", []))),
                success=bool(res.success),
                unexpected_count=None if count is None else int(count),
                sample=_sample(df, body, value_column, sample_rows),
                observed=None if observed is None else str(observed),
                blocking=not (name == TOOL_OFFERED and hallucinated_tools == "count"),
            )
        )
    return ValidationReport(
        success=all(o.success or not o.blocking for o in outcomes),
        rows=len(df),
        episodes=int(df["episode_id"].nunique()),
        results=outcomes,
    )


# --- writing the report -------------------------------------------------------------------


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1f2328}
h1{font-size:1.4rem;margin:0 0 .5rem}
.summary{display:flex;gap:1.5rem;align-items:center;margin-bottom:1.5rem}
.badge{font-weight:700;padding:.25rem .75rem;border-radius:4px;color:#fff}
.pass{background:#1a7f37}.fail{background:#cf222e}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.4rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}
tr.failed td{background:#fff5f5}
.gx{color:#656d76;font-size:.8rem;font-family:ui-monospace,monospace}
.status-pass{color:#1a7f37;font-weight:600}.status-fail{color:#cf222e;font-weight:600}
ul.sample{margin:0;padding-left:1.1rem;font-family:ui-monospace,monospace;font-size:.8rem}
"""


def _html_cell_sample(outcome: ExpectationOutcome) -> str:
    items = [f"<li>{html.escape(_format_sample(s))} <span class='gx'>{html.escape(s['source'])}"
             "</span></li>" for s in outcome.sample]
    if outcome.observed is not None:
        items.insert(0, f"<li>observed {html.escape(outcome.observed)}</li>")
    return f"<ul class='sample'>{''.join(items)}</ul>" if items else ""


def _render_html(report: ValidationReport, title: str) -> str:
    status = "PASS" if report.success else "FAIL"
    rows = []
    for r in report.results:
        unexpected = "&mdash;" if r.unexpected_count is None else str(r.unexpected_count)
        rows.append(
            f"<tr class='{'passed' if r.success else 'failed'}'>"
            f"<td class='status-{'pass' if r.success else 'fail'}'>"
            f"{'pass' if r.success else 'FAIL'}</td>"
            f"<td>{html.escape(r.name)}<br>"
            f"<span class='gx'>{html.escape(r.expectation)}</span></td>"
            f"<td>{html.escape(r.column or '')}</td>"
            f"<td>{unexpected}</td>"
            f"<td>{_html_cell_sample(r)}</td></tr>"
        )
    t = html.escape(title)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{t}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{t}</h1>\n<div class='summary'>"
        f"<span class='badge {status.lower()}'>{status}</span>"
        f"<span>{report.rows} rows</span><span>{report.episodes} episodes</span>"
        f"<span>{len(report.results) - len(report.failures)} of {len(report.results)} "
        "expectations passed</span></div>\n"
        "<table><thead><tr><th>Status</th><th>Expectation</th><th>Column</th>"
        "<th>Unexpected rows</th><th>Sample rows</th></tr></thead><tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table>\n</body></html>\n"
    )


def write_report(report: ValidationReport, out_dir: Path, title: str) -> None:
    """Write `summary.json` (sorted keys) and a self-contained `report.html` into out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = json.dumps(report.to_dict(), sort_keys=True, indent=2, allow_nan=False) + "\n"
    write_text(out_dir / "summary.json", summary)
    write_text(out_dir / "report.html", _render_html(report, title))
