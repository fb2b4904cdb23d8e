"""Adapters: real agent-log formats in, native step records out.

An adapter reads one file of its format and yields `AdaptedRecord`s: one input record (an
episode, a conversation) with the native step records (``tracerl.data.schema`` layout) it
becomes, or the reason it cannot. Ingest then puts every row through the same rules and
quarantine as native JSONL. `read` counts the adapter's records (tau2: simulations;
openai-chat: conversations); a record with one bad row is quarantined whole, as a native
episode with a rejected step is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FORMATS = ("auto", "jsonl", "tau2", "openai-chat")


class AdapterError(ValueError):
    """A record the adapter cannot turn into steps: where (a JSON pointer) and why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


@dataclass
class AdaptedRecord:
    number: int  # 1-based index of the record in its file (line number for JSONL)
    pointer: str  # JSON pointer of the record ("" for a whole-file record or a JSONL line)
    rows: list[dict] = field(default_factory=list)  # native step records, t order
    row_pointers: list[str] = field(default_factory=list)
    error: AdapterError | None = None
    episode_id: str | None = None
    text: str | None = None  # the raw text quarantine shows, when the adapter has it

    @property
    def raw(self) -> str:
        """What quarantine shows of a rejected record: its text (or head) when the adapter
        kept it, else where it is (records can be large)."""
        if self.text is not None:
            return self.text
        return f"record {self.number} at {self.pointer or '/'}" + (
            f" (episode {self.episode_id})" if self.episode_id else "")


Reader = Callable[..., Iterator[AdaptedRecord]]  # (path, limits=Limits()) -> records


def reader(fmt: str) -> tuple[Reader, str]:
    """(the record reader of an adapter format, the unit its records count)."""
    if fmt == "tau2":
        from tracerl.data.adapters.tau2 import read_tau2

        return read_tau2, "simulation"
    if fmt == "openai-chat":
        from tracerl.data.adapters.openai_chat import read_openai_chat

        return read_openai_chat, "conversation"
    raise ValueError(f"no adapter for format {fmt!r}; formats: {list(FORMATS)}")


def detect_format(path: Path, head_bytes: int = 1 << 16) -> str:
    """The format of one file, from its name and first bytes: "jsonl" (native steps),
    "tau2" (a results file: an object with info/tasks/simulations) or "openai-chat"."""
    try:
        head = _head(path, head_bytes).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return "jsonl"  # unreadable: the native reader says why, naming the file
    if head.startswith(b"{"):
        first_line = head.split(b"\n", 1)[0]
        messages = min(_key_at(head, b'"messages"'), _key_at(head, b'"traj"'))
        # tau2 results: info, tasks, then simulations (whose messages come later); a chat
        # record may carry `info` too, but not `tasks` before its messages.
        tau2 = min(_key_at(head, b'"simulations"'),
                   max(_key_at(head, b'"tasks"'), _key_at(head, b'"info"')))
        if tau2 < messages and not path.name.endswith((".jsonl", ".jsonl.gz")):
            return "tau2"
        # A chat record names messages/traj or a role near its start; a native step names
        # episode_id.
        if any(k in first_line for k in (b'"messages"', b'"traj"', b'"role"')) \
                and b'"episode_id"' not in first_line:
            return "openai-chat"
        return "jsonl"
    if head.startswith(b"["):
        return "openai-chat"
    return "jsonl"  # let the native reader say what is wrong


def _head(path: Path, head_bytes: int) -> bytes:
    """The first head_bytes of a file (.gz decompressed; of a cut .gz, what is intact)."""
    from tracerl.data.ingest.limits import GzipCut, gunzip_pieces

    with open(path, "rb") as f:
        if not path.name.endswith(".gz"):
            return f.read(head_bytes)
        head = b""
        try:
            for piece in gunzip_pieces(f):
                head += piece
                if len(head) >= head_bytes:
                    break
        except GzipCut:
            pass
        return head[:head_bytes]


def _key_at(head: bytes, key: bytes) -> int:
    at = head.find(key)
    return at if at >= 0 else len(head) + 1
