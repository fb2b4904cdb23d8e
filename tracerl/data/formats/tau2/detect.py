"""Whether a file is tau2-bench's: an object with `info` and `tasks` (a results file; its
simulations inline or in a sibling `simulations/` folder), or `simulations`; or one
simulation (`id`, `task_id`, `messages` or `ticks`, and `termination_reason` /
`reward_info` / `start_time`)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"simulations") or (s.has(b"info") and s.has(b"tasks")) or (
            s.has(b"task_id") and s.has(b"termination_reason")
            and s.has(b"messages", b"ticks"))
    value = s.record
    if not isinstance(value, dict):
        return False
    if ("info" in value and "tasks" in value) or isinstance(value.get("simulations"), list):
        return True
    from tracerl.data.formats.tau2.read import is_simulation

    return is_simulation(value)  # one simulation, a file of its own (`simulations/<id>.json`)
