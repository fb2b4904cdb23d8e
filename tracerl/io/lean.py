"""Start-up of processes that only ingest (the `tracerl ingest` command, its parser
workers): what they need of pyarrow, without what they never use.

Kept free of heavy imports: a spawned parser worker imports this module before anything
else (it names the worker's initializer).
"""

from __future__ import annotations

import sys


def pyarrow_without_pandas() -> None:
    """pyarrow imports pandas (about 0.25 CPU seconds, more than pyarrow itself) at its first
    conversion of any Python value, only to ask whether the value is a pandas array; an
    ingest never hands it one. Called first in a process that only ingests: pyarrow's one
    try then finds no pandas and does not ask again for such checks (an explicit pandas
    conversion, `to_pandas`, tries again and works). A no-op once pandas is imported.
    Not for a process that goes on to hand pandas objects to `pa.array`."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NoPandas)  # `import pandas` fails, while pyarrow tries
    try:
        pa.array([0])  # pyarrow's one try at importing pandas
    finally:
        sys.meta_path.remove(_NoPandas)


class _NoPandas:
    """An import finder that refuses pandas."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not imported by a process that only ingests")


def ingest_worker_start(parent_pid: int) -> None:
    """A parser worker's initializer: pyarrow without pandas, then
    tracerl.data.ingest.guard.exit_with_parent."""
    pyarrow_without_pandas()
    from tracerl.data.ingest.guard import exit_with_parent

    exit_with_parent(parent_pid)
