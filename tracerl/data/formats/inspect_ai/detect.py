"""Whether a file is an Inspect AI eval log: a document whose `eval` names its task and
model, or a `.eval` zip with a header or journal start entry."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.inspect_ai.read import is_eval_zip, is_log


def detect(s: Sniffed) -> bool:
    if s.container == "zip":
        return is_eval_zip(s.path)
    if s.keys_only:
        return s.has(b"eval") and s.has(b"eval_id", b"task_id") and s.has(b"plan")
    return is_log(s.record)
