"""Write one dataset's exports: every enabled format, per split, and its manifest.

    <out>/sft/<split>.jsonl         TRL conversational (+ <split>.parquet: sft_parquet)
    <out>/sft_openai/<split>.jsonl  OpenAI fine-tuning chat format, weight 0/1
    <out>/kto/<split>.jsonl         TRL unpaired preference, one record per assistant turn
    <out>/prm/<split>.jsonl         TRL stepwise supervision, one record per episode
    <out>/weighted/<split>.jsonl    the SFT shape, a credit weight and credit per assistant
                                    message, one record per episode (+ <split>.parquet)
    <out>/pairs{,_openai}/<split>.jsonl  preference pairs (TRL, OpenAI), one per anchor step
    <out>/manifest.json             counts, filters, verifier versions, source hash, files

Episodes are read in batches and each record is written as it is built, so memory holds
one batch of rows, never the exports. The folder is written beside its final place and
moved there whole (the old exports or the new ones, never a mix).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracerl.config.export import Export
from tracerl.data import relabel as rl
from tracerl.data.schema import dumps_exact, upgrade_table
from tracerl.export import formats as fm
from tracerl.export.conversation import COLUMNS, Conversation, conversations
from tracerl.export.credit import PairSpec
from tracerl.export.formats import provenance
from tracerl.export.select import (
    SPLITS,
    StepChecks,
    assign_splits,
    sft_weights,
    split_key,
    step_labels,
)
from tracerl.export.tools import ToolCatalog
from tracerl.io.fileio import replace_dir
from tracerl.io.staging import staged
from tracerl.rl.credit import INTERVAL, StepCredit, credit_weights

MANIFEST_VERSION = 1
BATCH_ROWS = 20_000          # rows converted to Python at a time
PARQUET_BATCH = 1_000        # SFT records per Parquet row group


class ExportError(ValueError):
    """Unusable export input (a tool definitions file, a table without a column)."""


def _hash_file(h: Any, path: Path) -> Any:
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h


def source_sha256(steps_dir: Path) -> str:
    """sha256 over a Parquet folder's files (names in order, then each file's bytes)."""
    h = hashlib.sha256()
    for part in sorted(Path(steps_dir).glob("*.parquet")):
        h.update(part.name.encode() + b"\x00")
        _hash_file(h, part)
    return h.hexdigest()


def load_tool_definitions(path: Path | str | None) -> dict[str, dict] | None:
    """name -> OpenAI-style tool ({"type": "function", "function": {"name", ...}}) from a
    JSON file holding a list of them (a bare function object is accepted too)."""
    if path is None:
        return None
    try:
        value = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ExportError(f"{path}: cannot read tool definitions: {exc}") from None
    if not isinstance(value, list):
        raise ExportError(f"{path}: expected a JSON list of tool definitions, got "
                          f"{type(value).__name__}")
    out: dict[str, dict] = {}
    for i, tool in enumerate(value):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ExportError(f"{path}: tool {i}: expected an object with a function name "
                              "({\"type\": \"function\", \"function\": {\"name\": ...}})")
        if name in out:
            raise ExportError(f"{path}: tool {i}: {name!r} is defined twice")
        out[name] = {"type": "function", "function": function}
    return out


def split_keys(steps: pa.Table) -> list[str]:
    """The split key of each episode of a step table (tracerl.export.select.split_key)."""
    pairs = steps.select(["episode_id", "task"]).group_by(["episode_id", "task"]).aggregate([])
    return [split_key(task, ep) for ep, task in zip(pairs.column("episode_id").to_pylist(),
                                                    pairs.column("task").to_pylist(),
                                                    strict=True)]


# --- writing ------------------------------------------------------------------------------
# The folders of each format's JSONL files, and the formats that write Parquet (folder, schema).
JSONL_FOLDERS = {"sft": ("sft",), "sft_parquet": (), "sft_openai": ("sft_openai",),
                 "kto": ("kto",), "prm": ("prm",), "weighted": ("weighted",),
                 "pairs": ("pairs", "pairs_openai")}
PARQUET_FOLDERS = {"sft_parquet": ("sft", fm.SFT_PARQUET_SCHEMA),
                   "weighted": ("weighted", fm.WEIGHTED_PARQUET_SCHEMA)}


class _Files:
    """One JSONL file per (folder, split) and the Parquet files, counting lines. A file is
    created by its first record: a split or format with no record writes no file (an empty
    JSONL file is not a dataset: `datasets.load_dataset("json")` fails on it), and
    `not_written` names each with the reason."""

    def __init__(self, root: Path, formats: Sequence[str], splits: Sequence[str],
                 pairs_openai: bool = True) -> None:
        self.root = root
        self.handles: dict[str, Any] = {}
        self.lines: Counter = Counter()
        self.expected: list[str] = []
        self.parquet: dict[str, list[dict]] = {}
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.schemas: dict[str, pa.Schema] = {}
        self.closed = False
        for fmt in formats:
            for folder in JSONL_FOLDERS[fmt]:
                if folder == "pairs_openai" and not pairs_openai:
                    continue
                self.expected += [f"{folder}/{split}.jsonl" for split in splits]
            if fmt in PARQUET_FOLDERS:
                folder, schema = PARQUET_FOLDERS[fmt]
                for split in splits:
                    rel = f"{folder}/{split}.parquet"
                    self.parquet[rel], self.schemas[rel] = [], schema
                    self.expected.append(rel)

    def write(self, fmt: str, split: str, record: dict) -> None:
        rel = f"{fmt}/{split}.jsonl"
        handle = self.handles.get(rel)
        if handle is None:
            (self.root / fmt).mkdir(parents=True, exist_ok=True)
            handle = self.handles[rel] = open(self.root / rel, "wb")  # noqa: SIM115 (closed below)
        handle.write(dumps_exact(record) + b"\n")
        self.lines[rel] += 1

    def parquet_row(self, split: str, record: dict, folder: str = "sft") -> None:
        """A row of <folder>/<split>.parquet (an SFT record is converted here)."""
        rel = f"{folder}/{split}.parquet"
        rows = self.parquet[rel]
        rows.append(fm.parquet_row(record) if folder == "sft" else record)
        self.lines[rel] += 1
        if len(rows) >= PARQUET_BATCH:
            self._flush(rel)

    def _flush(self, rel: str) -> None:
        rows = self.parquet[rel]
        if rows:
            if rel not in self.writers:
                (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
                self.writers[rel] = pq.ParquetWriter(self.root / rel, self.schemas[rel])
            self.writers[rel].write_table(pa.Table.from_pylist(rows, self.schemas[rel]))
            rows.clear()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for rel in self.parquet:
            self._flush(rel)
        for writer in self.writers.values():
            writer.close()
        for handle in self.handles.values():
            handle.close()

    def not_written(self) -> dict[str, str]:
        """The expected files that got no record, each with why."""
        return {rel: "no records for this split (see the counts under exports)"
                for rel in sorted(self.expected) if not self.lines[rel]}

    def listing(self) -> dict[str, dict]:
        out = {}
        for rel in sorted(rel for rel, n in self.lines.items() if n):
            digest = _hash_file(hashlib.sha256(), self.root / rel).hexdigest()
            out[rel] = {"records": self.lines[rel], "sha256": digest}
        return out


def _batches(ids: pa.ChunkedArray) -> Iterator[tuple[int, int, np.ndarray]]:
    """(start, stop, episode starts relative to start) of batches of whole episodes."""
    n = len(ids)
    if n == 0:
        return
    change = np.asarray(pc.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False),
                        dtype=bool) if n > 1 else np.zeros(0, dtype=bool)
    starts = np.r_[0, np.flatnonzero(change) + 1]
    bounds = np.r_[starts, n]
    lo = 0
    while lo < len(starts):
        hi = int(np.searchsorted(bounds, bounds[lo] + BATCH_ROWS, side="right")) - 1
        hi = max(hi, lo + 1)
        yield int(bounds[lo]), int(bounds[hi]), bounds[lo:hi + 1] - bounds[lo]
        lo = hi


def _turn_values(turns: Sequence, values: list, how: str) -> list:
    """One value per turn from its rows' (a batch's values as a list: turns are short, and
    numpy per turn would cost more than the loop)."""
    if how == "min":
        return [float(min(values[i] for i in t.rows)) for t in turns]
    return [all(values[i] for i in t.rows) for t in turns]


def export_dataset(steps: pa.Table, out_dir: Path | str, config: Export, *,
                   process: Mapping[str, float] | None = None, outcome: str | None = None,
                   split_of: Mapping[str, str] | None = None,
                   tool_definitions: Mapping[str, dict] | None = None,
                   source: Mapping[str, Any] | None = None,
                   credit: StepCredit | None = None, pairs: Sequence[PairSpec] = (),
                   chosen: Mapping[tuple[str, int], dict] | None = None) -> dict:
    """Write the exports of one labelled step table to out_dir; returns its manifest.

    process / outcome: the components the SWiRL filters read (relabel.filters; library
    defaults when None). split_of: split key -> split (tracerl.export.select), so several
    datasets share one assignment; computed from this table's tasks when None. credit:
    the logging policy's step credit of this table (tracerl.rl.credit; rows in
    (episode_id, t) order), which the weighted and pairs formats need; pairs: the mined
    pairs anchored in this table, their chosen messages in `chosen` (`chosen_messages`)."""
    missing = [c for c in (*COLUMNS, "reward_components") if c not in steps.column_names]
    if missing:
        raise ExportError(f"the step table has no column(s) {missing}; export reads a "
                          "relabelled step table")
    steps = upgrade_table(steps)
    # Episodes in id order, steps in t order: a permutation, not a sorted copy of the table;
    # every per-row array below is computed in the table's order, then permuted.
    order = pc.sort_indices(steps, sort_keys=[("episode_id", "ascending"),
                                              ("t", "ascending")]).to_numpy()
    checks = StepChecks.of(steps, process, outcome)
    if split_of is None:
        split_of = assign_splits(split_keys(steps), config.splits, config.seed,
                                 config.split_method)
    splits = [s for s in SPLITS if config.splits.get(s, 0.0) > 0]
    formats = list(config.formats)
    want = {f: f in formats for f in JSONL_FOLDERS}
    any_sft = want["sft"] or want["sft_parquet"] or want["sft_openai"]
    if (want["weighted"] or want["pairs"]) and credit is None:
        # This table alone, the library's defaults: the dialogue encoder and hashed
        # features (tracerl.config.learning.LOGS_TRAIN), the default critic, gamma 1 (an
        # episodic success). The export stage passes the pipeline's (`plan_credit`).
        plan = plan_credit({"": steps}, config, split_of=split_of)
        credit, pairs, chosen = plan.credits.get(""), plan.pairs[""], plan.chosen
    if credit is not None and credit.tr.n != steps.num_rows:
        raise ExportError(f"the step credit covers {credit.tr.n} steps, the table has "
                          f"{steps.num_rows}")
    advantage_weights = (credit_weights(credit, config.weighting.rule,
                                        config.weighting.beta, config.weighting.max_weight)
                         if want["weighted"] and credit is not None else None)
    pairs_at: dict[int, list[PairSpec]] = {}
    for spec in pairs if want["pairs"] else ():
        pairs_at.setdefault(spec.row, []).append(spec)
    kept = {name: rl.episodes_kept(steps, mode, process, outcome)[order]
            for name, mode in (("sft", config.sft.episodes), ("kto", config.kto.episodes),
                               ("prm", config.prm.episodes))}
    weights = sft_weights(steps, config.sft, process, outcome)[order]
    kto_labels = step_labels(config.kto.label, checks)[order]
    prm_labels = step_labels(config.prm.label, checks)[order]

    final = staged(Path(out_dir))
    if final.is_dir() and any(final.iterdir()) and not (final / "manifest.json").is_file():
        raise ExportError(f"{out_dir}: a folder that holds files but no export manifest; "
                          "the export replaces its folder whole, so it writes only into an "
                          "empty folder or a previous export")
    tmp = final.with_name(f".{final.name}.staging-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files = _Files(tmp, formats, splits, pairs_openai=config.pairs.records == "pair")
    counts: dict[str, Counter] = {f: Counter() for f in ("sft", "kto", "prm", "splits",
                                                         "weighted", "pairs")}
    tasks_in: dict[str, set] = {s: set() for s in splits}
    other_events = 0
    needed = steps.select(list(COLUMNS))
    catalog = ToolCatalog.of(steps, tool_definitions)
    try:
        for lo, hi, starts in _batches(steps.column("episode_id").take(order)):
            batch = needed.take(order[lo:hi])
            col = {c: batch.column(c).to_pylist() for c in COLUMNS}
            slices = list(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True))
            w_batch, kto_batch, prm_batch = (a[lo:hi].tolist()
                                             for a in (weights, kto_labels, prm_labels))
            for conv in conversations(col, slices):
                first = lo + conv.rows[0]
                key = split_key(conv.task, conv.episode_id)
                split = split_of.get(key)
                if split is None:
                    raise ExportError(f"episode {conv.episode_id!r}: its split key {key!r} "
                                      "is not in the split assignment given")
                tasks_in[split].add(key)
                counts["splits"][f"{split}.episodes"] += 1
                other_events += conv.other_actor_events
                tools = catalog.specs(conv.tools, [c["name"] for t in conv.turns
                                                   for c in t.message["tool_calls"]])
                if any_sft and kept["sft"][first]:
                    _sft(files, counts["sft"], want, conv, col, split,
                         _turn_values(conv.turns, w_batch, "min"), tools)
                if want["kto"] and kept["kto"][first]:
                    _kto(files, counts["kto"], conv, col, split,
                         _turn_values(conv.turns, kto_batch, "all"), tools,
                         config.kto.records == "turn")
                if want["prm"] and kept["prm"][first]:
                    labels = _turn_values(conv.turns, prm_batch, "all")
                    files.write("prm", split, fm.prm_record(conv, col, split, labels))
                    counts["prm"][f"{split}.records"] += 1
                    counts["prm"][f"{split}.steps"] += len(labels)
                    counts["prm"][f"{split}.steps_good"] += sum(labels)
                if advantage_weights is not None or pairs_at:
                    _credit_records(files, counts, conv, col, split, lo, credit,
                                    advantage_weights, pairs_at, chosen or {}, tools,
                                        config.pairs.records == "pair")
        files.close()
        if credit is not None:
            _episode_drops(tmp, files, credit, steps)
        manifest = _manifest(steps, config, process, outcome, splits, counts, tasks_in,
                             other_events, files.listing(), files.not_written(), catalog,
                             source)
        (tmp / "manifest.json").write_bytes(
            orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n")
        replace_dir(tmp, final)
    except BaseException:
        files.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _sft(files: _Files, counts: Counter, want: dict[str, bool], conv: Conversation,
         col: dict[str, list], split: str, weights: list[float], tools: list | None) -> None:
    """An episode the SFT filter kept: its records, unless no message is trained on."""
    counts["episodes_selected"] += 1
    if max(weights, default=0.0) <= 0:
        counts["dropped_no_trained_message"] += 1
        return
    trl, openai = fm.sft_records(conv, col, split, weights, tools)
    if want["sft"]:
        files.write("sft", split, trl)
    if want["sft_parquet"]:
        files.parquet_row(split, trl)
    if want["sft_openai"]:
        files.write("sft_openai", split, openai)
    counts[f"{split}.records"] += 1
    counts[f"{split}.assistant_messages"] += len(weights)
    counts[f"{split}.trained_messages"] += sum(w > 0 for w in weights)


def _credit_records(files: _Files, counts: dict[str, Counter], conv: Conversation,
                    col: dict[str, list], split: str, lo: int, credit: StepCredit,
                    weights: np.ndarray | None, pairs_at: Mapping[int, list[PairSpec]],
                    chosen: Mapping[tuple[str, int], dict], tools: list | None,
                    per_pair: bool) -> None:
    """The weighted-steps record of a conversation (one, its assistant messages weighted)
    and the pair records anchored on its turns. Rows: lo + batch index = position in tr
    order."""
    if weights is not None and conv.turns:
        turn_rows = [[lo + i for i in turn.rows] for turn in conv.turns]
        step_credits = [[credit.step(r) for r in rows] for rows in turn_rows]
        turn_weights = [float(min(weights[r] for r in rows)) for rows in turn_rows]
        record = fm.weighted_record(conv, col, split, turn_weights, step_credits, tools)
        files.write("weighted", split, record)
        files.parquet_row(split, fm.weighted_parquet_row(record), folder="weighted")
        c = counts["weighted"]
        c[f"{split}.records"] += 1
        c[f"{split}.assistant_messages"] += len(turn_weights)
        c[f"{split}.flagged_messages"] += sum(bool(e["flags"]) for e in record["credit"])
        c[f"{split}.weight_sum"] += sum(turn_weights)
    anchored: list[dict] = []
    last: tuple[list[dict], dict] | None = None
    for turn, context in fm.turn_contexts(conv) if pairs_at else ():
        rows = [lo + i for i in turn.rows]
        for spec in pairs_at.get(rows[0], ()) if len(rows) == 1 else ():
            other = chosen.get((spec.chosen_dataset, spec.chosen_row))
            if other is None:
                raise ExportError(f"pair at {conv.episode_id!r} t {col['t'][turn.rows[0]]}: "
                                  "no message for its chosen step")
            prov = provenance(conv, split, fm.step_provenance(col, turn.rows))
            prov["chosen"] = other["provenance"]
            info = {"scope": spec.scope, "state": spec.state, "level": credit.level,
                    "chosen": {"action": spec.chosen_action, "dataset": spec.chosen_dataset,
                               "q": spec.chosen_q[0], "q_ci": list(spec.chosen_q[1:]),
                               "n": spec.chosen_n},
                    "rejected": {"action": spec.rejected_action, "q": spec.rejected_q[0],
                                 "q_ci": list(spec.rejected_q[1:]), "n": spec.rejected_n}}
            counts["pairs"][f"{split}.pairs"] += 1
            counts["pairs"][f"{split}.{spec.scope}"] += 1
            if not per_pair:
                anchored.append({"message": len(context), "chosen": other["message"],
                                 "credit": info, "provenance": prov})
                last = (context, turn.message)
                continue
            trl, openai = fm.pair_records(context, turn.message, other["message"], tools,
                                          prov, info)
            files.write("pairs", split, trl)
            files.write("pairs_openai", split, openai)
            counts["pairs"][f"{split}.records"] += 1
    if anchored and last is not None:
        steps = [s for p in anchored for s in p["provenance"]["steps"]]
        files.write("pairs", split, fm.pairs_conversation(
            last[0], last[1], tools, anchored, provenance(conv, split, steps)))
        counts["pairs"][f"{split}.records"] += 1


def _episode_drops(root: Path, files: _Files, credit: StepCredit, steps: pa.Table) -> None:
    """credit/episodes.jsonl: per episode the step where the value dropped most."""
    from tracerl.export.credit import episode_drops

    rel = "credit/episodes.jsonl"
    rows = episode_drops(credit, episode_ids(steps))
    files.expected.append(rel)
    if not rows:
        return
    (root / "credit").mkdir(exist_ok=True)
    (root / rel).write_bytes(b"".join(dumps_exact(r) + b"\n" for r in rows))
    files.lines[rel] = len(rows)


def chosen_messages(steps: pa.Table, rows: Sequence[int]) -> dict[int, dict]:
    """The assistant message and provenance of each listed step (positions in (episode_id,
    t) order; each alone in its turn), for the pairs whose chosen side it is."""
    wanted = set(int(r) for r in rows)
    out: dict[int, dict] = {}
    if not wanted:
        return out
    steps = upgrade_table(steps)
    order = pc.sort_indices(steps, sort_keys=[("episode_id", "ascending"),
                                              ("t", "ascending")]).to_numpy()
    needed = steps.select(list(COLUMNS))
    for lo, hi, starts in _batches(steps.column("episode_id").take(order)):
        if not any(lo <= r < hi for r in wanted):
            continue
        batch = needed.take(order[lo:hi])
        col = {c: batch.column(c).to_pylist() for c in COLUMNS}
        slices = list(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True))
        for conv in conversations(col, slices):
            for turn in conv.turns:
                if len(turn.rows) == 1 and lo + turn.rows[0] in wanted:
                    out[lo + turn.rows[0]] = {
                        "message": turn.message,
                        "provenance": {"episode_id": conv.episode_id, "task": conv.task,
                                       "steps": fm.step_provenance(col, turn.rows)}}
    return out


def single_step_turns(steps: pa.Table) -> np.ndarray:
    """Per step in (episode_id, t) order: its turn holds it alone (consecutive rows share a
    turn when it is not null, tracerl.export.conversation)."""
    order = pc.sort_indices(steps, sort_keys=[("episode_id", "ascending"),
                                              ("t", "ascending")])
    ids = steps.column("episode_id").take(order).to_numpy(zero_copy_only=False)
    turn = pc.fill_null(steps.column("turn").cast(pa.int64()), -1).take(order).to_numpy()
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=bool)
    joined = np.zeros(n - 1, dtype=bool)
    if n > 1:
        joined = (ids[1:] == ids[:-1]) & (turn[1:] == turn[:-1]) & (turn[1:] >= 0)
    return ~(np.r_[False, joined] | np.r_[joined, False])


def _kto(files: _Files, counts: Counter, conv: Conversation, col: dict[str, list],
         split: str, labels: list[bool], tools: list | None, per_turn: bool) -> None:
    """An example per assistant turn with something before it (an opening greeting has no
    prompt to prefer it in): the conversation once with a label per assistant message, or
    (per_turn) TRL's record per turn."""
    if not per_turn:
        record = fm.kto_conversation(conv, col, split, labels, tools)
        opening = bool(record["messages"]) and record["messages"][0]["role"] == "assistant"
        counts["skipped_empty_prompt"] += int(opening)
        examples = [m["label"] for m in record["messages"][1:] if m["role"] == "assistant"]
        if not examples:
            return
        files.write("kto", split, record)
        counts[f"{split}.records"] += 1
        counts[f"{split}.examples"] += len(examples)
        counts[f"{split}.desirable"] += sum(examples)
        counts[f"{split}.undesirable"] += len(examples) - sum(examples)
        return
    for record in fm.kto_records(conv, col, split, labels, tools):
        if not record["prompt"]:
            counts["skipped_empty_prompt"] += 1
            continue
        files.write("kto", split, record)
        counts[f"{split}.records"] += 1
        counts[f"{split}.examples"] += 1
        counts[f"{split}.{'desirable' if record['label'] else 'undesirable'}"] += 1


def _per_split(counter: Counter, name: str, splits: Sequence[str]) -> dict[str, int]:
    return {s: int(counter[f"{s}.{name}"]) for s in splits}


def _manifest(steps: pa.Table, config: Export, process: Mapping[str, float] | None,
              outcome: str | None, splits: Sequence[str], counts: dict[str, Counter],
              tasks_in: dict[str, set], other_events: int, listing: dict[str, dict],
              not_written: dict[str, str],
              catalog: ToolCatalog,
              source: Mapping[str, Any] | None) -> dict:
    def unique(name: str) -> list:
        return sorted(v for v in pc.unique(steps.column(name)).to_pylist() if v is not None)

    sft, kto, prm = counts["sft"], counts["kto"], counts["prm"]
    exports: dict[str, Any] = {}
    if {"sft", "sft_parquet", "sft_openai"} & set(config.formats):
        exports["sft"] = {
            "episodes": config.sft.episodes, "weight": config.sft.weight,
            "episodes_selected": int(sft["episodes_selected"]),
            "dropped_no_trained_message": int(sft["dropped_no_trained_message"]),
            "records": _per_split(sft, "records", splits),
            "assistant_messages": _per_split(sft, "assistant_messages", splits),
            "trained_messages": _per_split(sft, "trained_messages", splits)}
    if "kto" in config.formats:
        exports["kto"] = {
            "episodes": config.kto.episodes, "label": config.kto.label,
            "record": config.kto.records,
            "records": _per_split(kto, "records", splits),
            "examples": _per_split(kto, "examples", splits),
            "desirable": _per_split(kto, "desirable", splits),
            "undesirable": _per_split(kto, "undesirable", splits),
            "skipped_empty_prompt": int(kto["skipped_empty_prompt"])}
    if "prm" in config.formats:
        exports["prm"] = {
            "episodes": config.prm.episodes, "label": config.prm.label,
            "records": _per_split(prm, "records", splits),
            "steps": _per_split(prm, "steps", splits),
            "steps_good": _per_split(prm, "steps_good", splits)}
    if "weighted" in config.formats:
        w = counts["weighted"]
        exports["weighted"] = {
            "rule": config.weighting.rule, "beta": config.weighting.beta,
            "max_weight": config.weighting.max_weight,
            "interval": INTERVAL, "records": _per_split(w, "records", splits),
            "assistant_messages": _per_split(w, "assistant_messages", splits),
            "flagged_messages": _per_split(w, "flagged_messages", splits),
            "weight_sum": {s: round(float(w[f"{s}.weight_sum"]), 6) for s in splits}}
    if "pairs" in config.formats:
        p = counts["pairs"]
        exports["pairs"] = {
            "scope": list(config.pairs.scope), "min_count": config.pairs.min_count,
            "rule": "two logged steps at one encoded state, actions differ, Q intervals "
                    "do not overlap",
            "record": config.pairs.records,
            "records": _per_split(p, "records", splits),
            "pairs": _per_split(p, "pairs", splits),
            **{scope: _per_split(p, scope, splits) for scope in config.pairs.scope}}
    n_episodes = sum(counts["splits"][f"{s}.episodes"] for s in splits)
    return {
        "manifest_version": MANIFEST_VERSION,
        "source": {**(source or {}), "rows": steps.num_rows, "episodes": n_episodes},
        "verifiers": {"verifier_version": unique("verifier_version"),
                      "reward_source": unique("reward_source")},
        "filters": {"process": dict(rl.PROCESS_COMPONENTS if process is None else process),
                    "outcome": outcome or rl.OUTCOME_COMPONENT},
        "splits": {"method": config.split_method, "seed": config.seed,
                   "shares": {s: config.splits[s] for s in splits},
                   "tasks": {s: len(tasks_in[s]) for s in splits},
                   "episodes": {s: int(counts["splits"][f"{s}.episodes"]) for s in splits}},
        "exports": exports,
        "other_actor_events_not_exported": other_events,
        "tool_sources": catalog.sources(),
        "files": listing,
        "not_written": not_written,
    }


# --- the logging policy's credit, for every dataset at once ---------------------------------
@dataclass
class CreditPlan:
    """Every dataset's step credit, the pairs anchored in each, the chosen sides' messages
    and what the report shows (tracerl.export.credit.summary per dataset)."""

    credits: dict[str, StepCredit]
    pairs: dict[str, list[PairSpec]]
    chosen: dict[tuple[str, int], dict]
    summaries: dict[str, dict]


def episode_ids(steps: pa.Table) -> list[str]:
    """The episode ids in ascending order: the numbering of every encoder's transitions."""
    return sorted(pc.unique(steps.column("episode_id")).to_pylist())


def plan_credit(tables: Mapping[str, pa.Table], config: Export, train: Any = None,
                ope: Any = None, gamma: float = 1.0, split_of: Mapping[str, str] | None = None
                ) -> CreditPlan:
    """The logging policy's credit of each table (one encoder over all of them, as the
    train stage fits it: train.encoder; the critic of the ope section over its features,
    the behaviour model of train.bc), and the preference pairs `config.pairs` mines.
    train / ope None: the library's defaults for dialogue logs (the dialogue encoder and
    hashed features of tracerl.config.learning.LOGS_TRAIN, the default ope section)."""
    from tracerl.config.learning import LOGS_TRAIN, Ope, Train
    from tracerl.export.credit import mine_pairs, summary
    from tracerl.feature_maps import critic_features
    from tracerl.rl.credit import logging_credit
    from tracerl.rl.encoding import encoder_for

    train = Train.model_validate(LOGS_TRAIN) if train is None else train
    ope = Ope() if ope is None else ope

    encoder = encoder_for(list(tables.values()), train.encoder, **train.encoder_params)
    features = critic_features(ope, train, encoder)
    if split_of is None:
        split_of = assign_splits([k for t in tables.values() for k in split_keys(t)],
                                 config.splits, config.seed, config.split_method)
    credits, summaries, mined = {}, {}, {}
    for name, steps in tables.items():  # over datasets
        credit = logging_credit(encoder.transitions(steps), features, train, ope,
                                gamma=gamma, min_count=config.credit.min_count)
        credits[name] = credit
        summaries[name] = summary(credit, episode_ids(steps), config.credit.top)
        order = pc.sort_indices(steps, sort_keys=[("episode_id", "ascending"),
                                                  ("t", "ascending")])
        ids = steps.column("episode_id").take(order).to_pylist()
        tasks = steps.column("task").take(order).to_pylist()
        keys = [split_key(t, e) for t, e in zip(tasks, ids, strict=True)]
        mined[name] = (credit, np.asarray([split_of[k] for k in keys], dtype=object),
                       np.asarray(keys, dtype=object), single_step_turns(steps))
    specs = mine_pairs(mined, config.pairs.scope, config.pairs.min_count) \
        if "pairs" in config.formats else []
    pairs: dict[str, list[PairSpec]] = {name: [] for name in tables}
    wanted: dict[str, set[int]] = {name: set() for name in tables}
    for spec in specs:
        pairs[spec.dataset].append(spec)
        wanted[spec.chosen_dataset].add(spec.chosen_row)
    chosen = {(name, row): m for name in tables
              for row, m in chosen_messages(tables[name], sorted(wanted[name])).items()}
    for name in tables:
        summaries[name]["pairs"] = len(pairs[name])
    return CreditPlan(credits, pairs, chosen, summaries)
