"""Whether a file is a smolagents run log: memory steps (a list of them, a RunResult's
`steps`, or a runner's line with `intermediate_steps`)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.smolagents.read import is_step, steps_of


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"intermediate_steps") or (s.has(b"step_number") and
                                                 s.has(b"model_output_message"))
    return (s.array and is_step(s.record)) or steps_of(s.record)[0] is not None
