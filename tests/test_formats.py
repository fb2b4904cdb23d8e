"""A log format is one declared component (tracerl.config.formats): every list of formats
is built from the registry, a team's own format is a plugin, and a format's name appears
only in its own package."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tracerl.cli import app
from tracerl.config import formats
from tracerl.config.data import Dataset
from tracerl.config.formats import FORMATS, Format, format_names, get_format, readme_table
from tracerl.data.formats import detect_format
from tracerl.data.ingest import ingest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PACKAGES = ROOT / "tracerl" / "data" / "formats"


def test_every_format_package_declares_its_format_and_the_registry_lists_them():
    packages = sorted(p.name for p in PACKAGES.iterdir()
                      if (p / "__init__.py").is_file() and p.name != formats.SHARED)
    assert sorted(n.replace("-", "_") for n in formats.builtin_names()) == packages
    for name in formats.builtin_names():
        fmt = get_format(name)
        assert fmt.name == name and fmt.counts and all(fmt.readme), name
        assert fmt.native or callable(fmt.reader()), name
        assert callable(fmt.detector()), name
    assert format_names() == sorted(format_names(), key=lambda n: (get_format(n).priority, n))


def test_the_readme_formats_table_is_the_registry_s():
    """`readme_table()` is the README's table, row for row (regenerate it from the
    declarations after changing one)."""
    assert readme_table() in README


def test_format_choices_come_from_the_registry():
    result = CliRunner().invoke(app, ["ingest", "--help"], terminal_width=400)
    for name in format_names():
        assert name in result.output
    assert Dataset(format="tau2").format == "tau2"
    assert Dataset(format="my_logs:FORMAT").format == "my_logs:FORMAT"  # checked when read
    with pytest.raises(ValueError, match=r"unknown format 'openai_chat' \(did you mean "
                                         r"'openai-chat'\?\)"):
        Dataset(format="openai_chat")


def test_a_format_name_appears_only_in_its_own_package():
    """Adding a format touches its package and one test file: no code outside the package
    spells its name (the registry builds every list). Allowed elsewhere: the README (its
    generated table), tests, benchmarks (inputs per format) and the generated DVC deps."""
    names = set(formats.builtin_names())
    found = []
    for folder in ("tracerl", "flows", "tasks"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef,
                                            ast.AsyncFunctionDef))
                          and n.body and isinstance(n.body[0], ast.Expr)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in names \
                        and id(node) not in docstrings:
                    own = PACKAGES / node.value.replace("-", "_")
                    if own not in path.parents:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert found == []


# --- the README's plugin, run as a user would -------------------------------------------

def _readme_plugin(folder: Path) -> Path:
    section = README[README.index("### Your own format"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.splitlines()) <= 50
    (folder / "my_logs.py").write_text(code)
    return folder / "my_logs.py"


def _runs(path: Path) -> list[dict]:
    runs = [{"run": "r1", "reward": 1.0, "steps": [
                {"tool": "search", "args": {"q": "x"}, "result": "3 hits"},
                {"tool": "open", "args": {"id": 2}, "result": {"title": "t"}}]},
            {"run": "r2", "steps": [{"tool": "search", "args": {"q": "y"}, "result": None}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    return runs


def test_the_readme_plugin_is_read_by_reference_and_detected_once_installed(tmp_path,
                                                                            monkeypatch):
    monkeypatch.syspath_prepend(str(_readme_plugin(tmp_path).parent))
    logs = tmp_path / "runs.jsonl"
    runs = _runs(logs)
    summary = ingest([logs], tmp_path / "out", fmt="my_logs:FORMAT")
    table = pq.read_table(tmp_path / "out" / "steps")
    # recomputed from the file with the stdlib: one row per step, one episode per run
    assert summary.read == len(runs) == summary.episodes and summary.quarantined == 0
    assert table.num_rows == sum(len(r["steps"]) for r in runs)
    assert sorted(table.column("action").to_pylist(), key=str)[0]["tool"] in ("open", "search")
    assert summary.record_units == {"my_logs:FORMAT": "run"}

    assert detect_format(logs) is None  # not installed: auto refuses it, naming it
    from my_logs import FORMAT  # an entry point `tracerl.formats` adds it to the registry

    FORMATS.add("my-agent", FORMAT)
    try:
        assert detect_format(logs) == "my-agent"
        assert ingest([logs], tmp_path / "auto").rows == table.num_rows
    finally:
        FORMATS.remove("my-agent")


def test_an_unknown_file_is_refused_once_by_name_with_the_nearest_formats(tmp_path):
    logs = tmp_path / "odd.jsonl"
    logs.write_text("".join(json.dumps({"when": i, "what": "x"}) + "\n" for i in range(50)))
    summary = ingest([logs], tmp_path / "out", max_bad_fraction=1.0)
    rejects = [json.loads(line) for line in
               (tmp_path / "out" / "quarantine.jsonl").read_text().splitlines()]
    assert summary.read == summary.quarantined == 1 and len(rejects) == 1
    assert rejects[0]["field"] == "<format>" and rejects[0]["source_file"] == str(logs)
    assert "keys: what, when" in rejects[0]["reason"] and "nearest formats:" in \
        rejects[0]["reason"] and "Your own format" in rejects[0]["reason"]
    assert summary.refused_files == {str(logs): rejects[0]["reason"]}


def test_a_format_declares_what_the_runner_asks():
    with pytest.raises(ValueError, match="unit"):
        Format("x", counts="run", unit="line")
    with pytest.raises(ValueError, match="auto"):
        Format("auto", counts="run")
    assert get_format("otel-genai").joins_files and get_format("langfuse").joins_files
    assert get_format("tau2").shardable and not get_format("otel-genai").shardable
    assert get_format("claude-code").unit == "file" and get_format("jsonl").native
