"""An OTLP span's ids and times as the reader spells them, whichever path reads them
(camelCase hex ids and decimal nanoseconds are read directly, anything else by _hex/_ns)."""

from __future__ import annotations

import pytest

from tracerl.data.formats.otel_genai.spans import _otlp_span


@pytest.mark.parametrize("ids, trace, span_id", [
    ({"traceId": "ab", "spanId": "01"}, "ab", "01"),
    ({"traceId": "", "spanId": ""}, "", "/p"),  # empty: the untraced trace, the pointer
    ({"traceId": "0xab", "spanId": "0x01"}, "ab", "01"),
    ({"traceId": 171, "spanId": 1}, "171", "1"),
    ({"traceId": None, "spanId": "01"}, "", "01"),
    ({"spanId": "01"}, "", "01"),
    ({"trace_id": "ab", "span_id": "01"}, "ab", "01"),
    ({"context": {"trace_id": "0xab", "span_id": "0x01"}}, "ab", "01"),
])
def test_span_ids(ids, trace, span_id):
    span = _otlp_span({**ids, "name": "x"}, "/p", None)
    assert (span.trace_id, span.span_id) == (trace, span_id)


@pytest.mark.parametrize("start, ns", [
    ("1700000000000000001", 1700000000000000001), (5, 5), (2.5, 2), (None, 0), ("x", 0),
    ("2024-01-01T00:00:00Z", 1704067200000000000),
])
def test_span_times(start, ns):
    span = _otlp_span({"traceId": "ab", "spanId": "01", "startTimeUnixNano": start,
                       "endTimeUnixNano": start}, "/p", None)
    assert (span.start, span.end) == (ns, ns)
    assert _otlp_span({"traceId": "ab", "spanId": "01", "start_time": start}, "/p",
                      None).start == ns
