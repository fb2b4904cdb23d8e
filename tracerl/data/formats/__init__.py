"""Formats: real agent-log formats in, native step records out.

Each format is a package here (`tau2/`, `openai_chat/`, ...) declaring one `Format`
(tracerl.config.formats); `common/` holds what readers share. A reader reads one file
of its format and yields `AdaptedRecord`s: one input record (an episode, a conversation,
a trace) with the native step records (``tracerl.data.schema`` layout) it becomes, or
the reason it cannot. Ingest then puts every row through the same rules and quarantine
as native JSONL. `read` counts the format's records (`Format.counts`); a record with one
bad row is quarantined whole, as a native episode with a rejected step is. A line or
element a reader cannot read at all (not JSON, over the size limit) is a record of its
own, quarantined with its reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class AdapterError(ValueError):
    """A record the adapter cannot turn into steps: where (a JSON pointer) and why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


@dataclass(frozen=True)
class ReadOptions:
    """Adapter knobs from params (`ingest.reward_attribute`, `ingest.reward_evaluation`).

    reward_attribute: a span/observation attribute (or Langfuse score name) whose value is
    the episode's reward (OpenTelemetry, Langfuse); reward_evaluation: the
    `gen_ai.evaluation.name` (or Langfuse score name) whose score is the reward when a
    conversation has several; source_name: the file's path under the input root (not a
    param: the runner sets it for each file)."""

    reward_attribute: str | None = None
    reward_evaluation: str | None = None
    # the file's path relative to the input root, set by the runner per file: default
    # episode ids stay distinct across folders of files with one name (`fallback_episode_id`)
    source_name: str | None = None

    @classmethod
    def from_params(cls, ingest: Mapping[str, Any] | None) -> ReadOptions:
        ingest = ingest or {}
        return cls(ingest.get("reward_attribute"), ingest.get("reward_evaluation"))


@dataclass
class AdaptedRecord:
    number: int  # 1-based index of the record in its file (line number for JSONL)
    pointer: str  # JSON pointer of the record ("" for a whole-file record or a JSONL line)
    rows: list[dict] = field(default_factory=list)  # native step records, t order
    row_pointers: list[str] = field(default_factory=list)
    error: AdapterError | None = None
    episode_id: str | None = None
    text: str | None = None  # the raw text quarantine shows, when the adapter has it
    notes: Counter | None = None  # facts the summary counts (e.g. reused_call_ids)
    source_file: str | None = None  # when the record is not in the file being read
    is_record: bool = True  # False: no record, only notes for the summary to count

    @property
    def raw(self) -> str:
        """What quarantine shows of a rejected record: its text (or head) when the adapter
        kept it, else where it is (records can be large)."""
        if self.text is not None:
            return self.text
        return f"record {self.number} at {self.pointer or '/'}" + (
            f" (episode {self.episode_id})" if self.episode_id else "")


def fallback_episode_id(path: Path, number: int, options: Any = None) -> str:
    """The episode id of a record that names none: `<file>:<record number>`, the file
    being its path relative to the input root (`ReadOptions.source_name`, so that
    `taskA/agent/trajectory.json` and `taskB/agent/trajectory.json` stay two episodes),
    else the file's name."""
    name = getattr(options, "source_name", None)
    return f"{name or path.name}:{number}"


Reader = Callable[..., Iterator[AdaptedRecord]]  # (path, limits, options) -> records


def reader(fmt: str) -> tuple[Reader, str]:
    """(the record reader of a format, the unit its records count)."""
    from tracerl.config.formats import get_format

    declared = get_format(fmt)
    if declared.native:
        raise ValueError(f"format {fmt!r} is native step records: no reader")
    return declared.reader(), declared.counts


def detect_format(path: Path, head_bytes: int = 1 << 20) -> str | None:
    """The format of one file, from its first record (tracerl.data.formats.common.detect);
    None when no format reads it (`common.detect.refusal` says why)."""
    from tracerl.data.formats.common.detect import sniff

    return sniff(path, head_bytes)


def _head(path: Path, head_bytes: int) -> bytes:
    """The first head_bytes of a file (decompressed: .gz, .zst, .bz2, .xz; of a cut one,
    what is intact)."""
    from tracerl.data.ingest.limits import GzipCut, compressed, decompressed_pieces

    with open(path, "rb") as f:
        if not compressed(path):
            return f.read(head_bytes)
        head = b""
        try:
            for piece in decompressed_pieces(f, path.name):
                head += piece
                if len(head) >= head_bytes:
                    break
        except GzipCut:
            pass
        return head[:head_bytes]
