"""Where an adapter's ingest spends its CPU: read+adapt, parse, redact, Parquet write,
in this process (the one-worker path, gc off, best of REPEATS), in CPU seconds.

    .venv/bin/python benchmarks/ingest_phases.py FILE FORMAT [REPEATS] [--profile]

Records are read by the format's reader, cut into batches of 25,000 adapted rows (as
`tracerl ingest` cuts them), parsed by the native rules (run._parse_adapted_guarded),
redacted (Redactor.table) and written to memory (pyarrow.parquet.write_table). Run it
with another checkout's python from that checkout's root for a side-by-side.
--profile: where the parse phase's CPU goes (cProfile of its last repeat, by own time).
Also printed: the CPU of decoding the file's JSON alone (each record, and every string in
it that is JSON text, by orjson), and that plus parse, redact and write: the least any
adapter of the format can take here (the walk over the records' values is counted in).
"""

from __future__ import annotations

import contextlib
import gc
import io
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    import pyarrow.parquet as pq

    from tracerl.data.formats import reader
    from tracerl.data.ingest.limits import Limits
    from tracerl.data.ingest.run import _parse_adapted_guarded
    from tracerl.data.redact import Redactor

    profile = "--profile" in argv
    argv = [a for a in argv if a != "--profile"]
    path, fmt = Path(argv[0]), argv[1]
    repeats = int(argv[2]) if len(argv) > 2 else 2
    profiler = None
    gc.disable()
    best: dict[str, float] = {}
    for _ in range(repeats):
        read, _ = reader(fmt)
        t = time.process_time()
        records = list(read(path, Limits()))
        times = {"read+adapt": time.process_time() - t}
        batches, batch, rows = [], [], 0
        for r in records:
            batch.append(r)
            rows += len(r.rows)
            if rows >= 25_000:
                batches.append(batch)
                batch, rows = [], 0
        if batch:
            batches.append(batch)
        if profile:
            import cProfile

            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
        t = time.process_time()
        parsed = [_parse_adapted_guarded(b, str(path), False).table for b in batches]
        times["parse"] = time.process_time() - t
        if profiler is not None:
            profiler.disable()
        redactor = Redactor()
        t = time.process_time()
        tables = [redactor.table(x)[0] for x in parsed]
        times["redact"] = time.process_time() - t
        t = time.process_time()
        for x in tables:
            pq.write_table(x, io.BytesIO())
        times["write"] = time.process_time() - t
        times["(json)"] = _json_floor(path)
        for k, v in times.items():
            best[k] = min(best.get(k, float("inf")), v)
        actions = sum(x.num_rows for x in tables)
        del records, parsed, tables, batches, batch
    floor = best.pop("(json)")
    total = sum(best.values())
    print(f"{fmt} {path.name}: {actions:,} actions; CPU s "
          + ", ".join(f"{k} {v:.2f}" for k, v in best.items())
          + f"; total {total:.2f} ({actions / total:,.0f} actions/s)")
    fixed = floor + best["parse"] + best["redact"] + best["write"]
    print(f"  JSON decoding alone (orjson: each record, and each string in it that is JSON "
          f"text) {floor:.2f}; with parse, redact and write, what an adapter that cost "
          f"nothing more would take: {fixed:.2f} ({actions / fixed:,.0f} actions/s)")
    if profiler is not None:
        import pstats

        print("parse phase, last repeat (cProfile's own overhead included):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return 0


def _json_floor(path: Path) -> float:
    """CPU seconds to decode the file's JSON and no more: each line (or the whole
    document) by orjson, then every string inside that is itself JSON text (starts with
    `[` or `{`: OTel's message attributes, tool arguments), as any reader of the format
    must at least; the decoded text's own strings are not looked into."""
    import orjson

    data = path.read_bytes()
    t = time.process_time()
    docs = [orjson.loads(line) for line in data.splitlines() if line.strip()] \
        if path.suffix == ".jsonl" else [orjson.loads(data)]
    level = docs
    while level:
        inner = []
        for v in level:
            if type(v) is dict:
                inner.extend(v.values())
            elif type(v) is list:
                inner.extend(v)
            elif type(v) is str and v[:1] in ("[", "{"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    orjson.loads(v)  # (what it holds is not walked: one level of text)
        level = inner
    return time.process_time() - t


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
