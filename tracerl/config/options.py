"""The library's objects a section configures, built in the stages (and commands) that use
them; never imported by params checking, which runs in every stage."""

from __future__ import annotations

from typing import Any

from tracerl.config.data import Ingest


def ingest_options(knobs: Ingest) -> dict[str, Any]:
    """`tracerl.data.ingest.ingest`'s keyword arguments from the `ingest` section: batches,
    workers, strictness, size and nesting limits, redaction, the adapters' reward knobs."""
    from tracerl.data.formats import ReadOptions
    from tracerl.data.ingest.limits import Limits
    from tracerl.data.redact import Redactor

    redact = knobs.redact
    return {"batch_lines": knobs.batch_lines, "max_bad_fraction": knobs.max_bad_fraction,
            "workers": knobs.workers, "strict": knobs.strict,
            "limits": Limits(knobs.max_record_bytes, knobs.max_depth, knobs.batch_bytes),
            "redactor": Redactor(off=tuple(redact.disable), patterns=dict(redact.patterns),
                                 secret_keys=tuple(redact.secret_keys),
                                 keep_digest=redact.keep_digest, enabled=redact.enabled),
            "read_options": ReadOptions(knobs.reward_attribute, knobs.reward_evaluation)}
