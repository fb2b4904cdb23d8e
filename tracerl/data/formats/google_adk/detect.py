"""Whether a file is a Google ADK session (`events` beside `app_name` / `user_id`), an eval
set (`eval_cases`) or an eval set result (`eval_case_results`), in snake or camel case."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed
from tracerl.data.formats.google_adk.read import kind_of


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"eval_case_results", b"evalCaseResults", b"eval_cases", b"evalCases") \
            or (s.has(b"events") and s.has(b"app_name", b"appName") and
                s.has(b"invocation_id", b"invocationId"))
    return kind_of(s.record) is not None
