"""Do two checkouts' `tracerl ingest` write the same bytes? md5 of every step-table part,
the quarantine file and the summary, per input, side by side.

    .venv/bin/python benchmarks/ingest_identical.py [INPUT[:FORMAT] ...]

The two checkouts (python:root) are TRACERL_BASE and TRACERL_NEW, by default /work/main
and this worktree. Without inputs: every file under /work/shared/realdata/ (--format auto,
each alone) and the benchmark inputs under benchmarks/.out/ that exist (the first 50,000
native calculator steps, the 10,000-conversation OpenAI-chat, tau2 and OTel files). Exit
status 1 when any output differs. The hostile-input corpus (tests/data/broken/, each entry
with the format tests/test_hostile_input.py gives it by its name) is compared too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("TRACERL_IDENTICAL_OUT", HERE / "benchmarks" / ".out" / "identical"))
REALDATA = Path("/work/shared/realdata")
BROKEN = HERE / "tests" / "data" / "broken"
# as tests/test_hostile_input.py reads each entry of the corpus (by its name's prefix)
BROKEN_FORMATS = {"tau2_": "tau2", "chat_": "openai-chat", "anthropic_": "anthropic",
                  "atif_": "atif", "claude_": "claude-code", "langfuse_": "langfuse",
                  "otel_": "otel-genai", "bom_": "auto", "dup_": "auto"}
CODE = {
    "base": tuple(os.environ.get("TRACERL_BASE", "/work/main/.venv/bin/python:/work/main")
                  .split(":")),
    "new": tuple(os.environ.get("TRACERL_NEW", f"{HERE}/.venv/bin/python:{HERE}").split(":")),
}


def default_inputs() -> list[tuple[Path, str]]:
    found = [(p, "auto") for p in sorted(REALDATA.rglob("*"))
             if p.is_file() and p.suffix in (".json", ".jsonl")]
    for name in sorted(json.loads((BROKEN / "expected.json").read_text())):
        found.append((BROKEN / name, next((f for p, f in BROKEN_FORMATS.items()
                                           if name.startswith(p)), "jsonl")))
    bench = HERE / "benchmarks" / ".out"
    native = bench / "calculator_good_coverage_1000000steps_seed0.jsonl"
    if native.is_file():
        first = bench / "calculator_first50000.jsonl"
        if not first.is_file():
            with open(native, "rb") as src, open(first, "wb") as dst:
                for i, line in enumerate(src):
                    if i >= 50_000:
                        break
                    dst.write(line)
        found.append((first, "jsonl"))
    for name, fmt in (("chat.jsonl", "openai-chat"), ("tau2.json", "tau2"),
                      ("otel.jsonl", "otel-genai")):
        path = bench / "adapters_10000" / name
        if path.is_file():
            found.append((path, fmt))
    return found


def digest(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.md5(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def run(which: str, path: Path, fmt: str, k: int) -> dict[str, str]:
    python, root = CODE[which]
    out = OUT / f"{which}_{k}"
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run([python, "-m", "tracerl", "ingest", str(path), "--out", str(out),
                           "--format", fmt], cwd=root, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # refused input: the exit status and message compared
        return {"<exit status>": str(proc.returncode),
                "<last stderr line>": (proc.stderr.strip().splitlines() or [""])[-1]}
    return digest(out)


def main(argv: list[str]) -> int:
    inputs = [(Path(a.rsplit(":", 1)[0]), a.rsplit(":", 1)[1]) if ":" in a else (Path(a), "auto")
              for a in argv] or default_inputs()
    differ = 0
    for k, (path, fmt) in enumerate(inputs):
        a, b = run("base", path, fmt, k), run("new", path, fmt, k)
        bad = sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
        differ += bool(bad)
        print(f"{'SAME' if not bad else 'DIFFERENT'}  {path} --format {fmt}  "
              f"({len(a)} files)" + (f"  differ: {bad[:4]}" if bad else ""), flush=True)
    print(f"{len(inputs) - differ} of {len(inputs)} inputs byte-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
