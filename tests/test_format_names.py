"""Adding a format touches one package and one test file: every place a format's name
appears in the repository outside its package (`tracerl/data/formats/<name>/`) and its
test file (`tests/test_format_<name>.py`) is listed here, and a new one fails.

The README's formats table is generated from the declarations (`python -m tracerl formats
--readme`; tests/test_formats.py holds it equal), so it is no place of its own. Generated
outputs (dvc.lock, benchmark results) are not read. A format's code deps are the folder
`tracerl/data/formats` (tracerl.config.deps.whole_packages): no dvc.yaml names a format,
and a new format package leaves every dvc.yaml's deps as they are."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tracerl.config import formats
from tracerl.config.formats import FORMATS, Format
from tracerl.config.registry import Ref

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tracerl", "flows", "tasks", "tests", "benchmarks", "docs", "pipelines", "gx")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".in", ".txt", ".sh"}
SKIP = {"__pycache__", ".venv", ".git", ".dvc", "results", "realdata"}
GENERATED = {"dvc.lock"}
THIS = "tests/test_format_names.py"  # the list itself

def _text_files() -> list[Path]:
    found = [p for p in ROOT.iterdir() if p.is_file()
             and (p.suffix in SUFFIXES or p.name in ("Makefile", "MANIFEST.in"))]
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            rel = path.relative_to(ROOT).parts
            if path.is_file() and path.suffix in SUFFIXES and not SKIP & set(rel) \
                    and path.name not in GENERATED:
                found.append(path)
    return sorted(found)


def _pattern(name: str) -> re.Pattern:
    spellings = sorted({name, name.replace("-", "_")}, key=len, reverse=True)
    # not a part of a longer name (mini-swe-agent is no swe-agent, .jsonl no jsonl)
    return re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, spellings)) +
                      r")(?![\w-])")


def places(names: list[str]) -> dict[str, set[str]]:
    """Format name -> the files that spell it outside its package and its test file (the
    README's generated table left out)."""
    table = formats.readme_table()
    patterns = {n: _pattern(n) for n in names}
    found: dict[str, set[str]] = {n: set() for n in names}
    for path in _text_files():
        rel = path.relative_to(ROOT).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if rel == "README.md":
            text = text.replace(table, "")
        for name, pattern in patterns.items():
            package = f"tracerl/data/formats/{name.replace('-', '_')}/"
            own_test = f"tests/test_format_{name.replace('-', '_')}.py"
            if rel.startswith(package) or rel in (own_test, THIS):
                continue
            if pattern.search(text):
                found[name].add(rel)
    return found


def _files(text: str) -> set[str]:
    return set(text.split())


# Where the older formats are named outside their package and test file: the tests,
# benchmarks and example pipelines that read them (tau2 and openai-chat are the example
# pipelines' inputs, jsonl the native format), and readers that tell another format's
# files apart. The formats added since the registry are named nowhere but in tests of
# misreads (which format a file was wrongly taken for).
KNOWN: dict[str, set[str]] = {
    "anthropic": _files(
        "benchmarks/ingest_identical.py tests/test_adapter_shapes.py "
        "tests/test_anthropic_real_shapes.py tests/test_formats_external.py "
        "tests/test_hostile_input.py tests/test_otel_files.py "
        "tests/test_otel_real_shapes.py tests/test_realdata_ingest.py"),
    "atif": _files(
        "benchmarks/ingest_identical.py tests/test_adapter_shapes.py "
        "tests/test_atif_real_shapes.py tests/test_format_misreads.py "
        "tests/test_formats_external.py tests/test_hostile_input.py "
        "tests/test_otel_files.py tests/test_realdata_ingest.py"),
    "claude-code": _files(
        "benchmarks/ingest_identical.py tests/test_adapter_shapes.py "
        "tests/test_claude_code_real_shapes.py tests/test_formats.py "
        "tests/test_formats_external.py tests/test_hostile_input.py tests/test_init.py "
        "tests/test_otel_files.py tests/test_otel_real_shapes.py "
        "tests/test_realdata_ingest.py tracerl/data/formats/otel_genai/read.py"),
    "codex-cli": _files(
        "tests/test_format_misreads.py"),
    "gemini-cli": _files(
        "tests/test_format_misreads.py"),
    "inspect-ai": _files(
        "tests/test_format_misreads.py"),
    "jsonl": _files(
        "benchmarks/ingest_identical.py benchmarks/ingest_side_by_side.py "
        "benchmarks/redact.py docs/architecture.md pipelines/tau2/README.md "
        "pipelines/tau2/params.yaml tests/data/broken/make_corpus.py "
        "tests/test_adapter_openai_chat.py tests/test_adapter_shapes.py "
        "tests/test_export.py tests/test_export_credit.py "
        "tests/test_export_redaction.py tests/test_format_misreads.py "
        "tests/test_formats.py tests/test_formats_external.py "
        "tests/test_hostile_input.py tests/test_ingest_shards.py "
        "tests/test_ingest_startup.py tests/test_redact_everywhere.py tracerl/api.py "
        "tracerl/data/formats/common/detect.py tracerl/data/formats/common/records.py "
        "tracerl/ope/external.py"),
    "langfuse": _files(
        "benchmarks/ingest_identical.py tests/test_adapter_shapes.py "
        "tests/test_format_misreads.py tests/test_formats.py "
        "tests/test_formats_external.py tests/test_hostile_input.py "
        "tests/test_langfuse_real_shapes.py tests/test_otel_files.py "
        "tests/test_realdata_ingest.py"),
    "mini-swe-agent": _files(
        "tests/test_format_misreads.py"),
    "openai-chat": _files(
        "README.md benchmarks/guard_false_blocks.py benchmarks/ingest_adapters.py "
        "benchmarks/ingest_identical.py benchmarks/ingest_memory.py "
        "benchmarks/redact.py benchmarks/support_desk_candidates.py "
        "benchmarks/support_desk_exports.py docs/architecture.md "
        "pipelines/support_desk/README.md pipelines/support_desk/params.yaml "
        "pipelines/tau2/README.md pipelines/tau2/params.yaml "
        "tests/data/broken/make_corpus.py tests/test_adapter_openai_chat.py "
        "tests/test_adapter_shapes.py tests/test_big_integers.py tests/test_export.py "
        "tests/test_export_redaction.py tests/test_export_size.py "
        "tests/test_format_misreads.py tests/test_formats.py tests/test_guard.py "
        "tests/test_hostile_input.py tests/test_ingest_schedule.py "
        "tests/test_ingest_startup.py tests/test_init.py "
        "tests/test_openai_chat_shapes.py tests/test_otel_files.py "
        "tests/test_redact.py tests/test_redact_everywhere.py "
        "tests/test_support_desk_decision.py tests/test_support_desk_logs.py "
        "tests/test_swirl_learners.py tracerl/api.py tracerl/data/formats/__init__.py "
        "tracerl/data/formats/common/jsonstream.py tracerl/envs/support_desk/README.md "
        "tracerl/envs/support_desk/chat.py tracerl/envs/support_desk/encoder.py "
        "tracerl/envs/support_desk/features.py tracerl/guard/guard.py"),
    "openhands": _files(
        "tests/test_atif_real_shapes.py"),
    "otel-genai": _files(
        "benchmarks/ingest_adapters.py benchmarks/ingest_identical.py "
        "benchmarks/ingest_otel.py tests/adapter_helpers.py tests/test_adapter_shapes.py "
        "tests/test_format_misreads.py tests/test_format_openinference.py "
        "tests/test_formats.py tests/test_formats_external.py tests/test_hostile_input.py "
        "tests/test_ingest_shards.py tests/test_init_pipeline.py "
        "tests/test_otel_batches.py tests/test_otel_files.py tests/test_otel_speed.py "
        "tests/test_realdata_ingest.py"),
    "smolagents": _files(
        "tests/test_format_misreads.py"),
    "tau2": _files(
        "Makefile README.md benchmarks/compare.py benchmarks/ingest_adapters.py "
        "benchmarks/ingest_identical.py benchmarks/ingest_memory.py benchmarks/redact.py "
        "docs/architecture.md flows/_runtime/ui_check.py flows/_stage.py flows/ingest.py "
        "flows/ope.py pipelines/support_desk/README.md pipelines/tau2/README.md "
        "pipelines/tau2/dvc.yaml pipelines/tau2/params.yaml tests/_shared_runs.py "
        "tests/data/broken/make_corpus.py tests/export_checks.py "
        "tests/test_adapter_openai_chat.py tests/test_adapter_shapes.py "
        "tests/test_adapter_tau2.py tests/test_answer.py tests/test_answers_decision.py "
        "tests/test_api.py tests/test_big_integers.py tests/test_checkout_servers.py "
        "tests/test_compare.py tests/test_compare_pipeline.py tests/test_dvc_deps.py "
        "tests/test_dvc_lock_current.py tests/test_dvc_views.py tests/test_engine.py "
        "tests/test_export.py tests/test_export_pipelines.py "
        "tests/test_export_realdata.py tests/test_export_redaction.py "
        "tests/test_external_pipeline.py tests/test_format_misreads.py "
        "tests/test_formats.py tests/test_gx_project.py tests/test_hostile_input.py "
        "tests/test_ingest_shards.py tests/test_init.py tests/test_init_pipeline.py "
        "tests/test_otel_files.py tests/test_outcome_verifiers.py "
        "tests/test_params_schema.py tests/test_publish_links.py "
        "tests/test_realdata_ingest.py tests/test_redact.py "
        "tests/test_redact_everywhere.py tests/test_report_browser.py "
        "tests/test_sources.py tests/test_swirl_learners.py tests/test_tau2_pipeline.py "
        "tests/test_tau2_shapes.py tests/test_tau2_verifiers.py tracerl/api.py "
        "tracerl/config/init.py tracerl/config/learning.py tracerl/config/stages.py "
        "tracerl/data/compare.py tracerl/data/formats/__init__.py "
        "tracerl/data/formats/common/jsonstream.py tracerl/data/ingest/parse.py "
        "tracerl/data/ingest/run.py tracerl/data/verifiers.py tracerl/guard/guard.py "
        "tracerl/ope/evaluate.py tracerl/rl/encoding.py"),
}


def test_every_place_a_format_name_appears_is_listed():
    """A format's facts live in its package: a new file naming a format (a list of
    formats, a detector asking for another format by name, a dvc.yaml naming a format
    package) fails here. Listed: the places of today; a place that no longer names it is
    to be dropped from the list."""
    names = list(formats.builtin_names())
    found = places(names)
    new = {n: sorted(found[n] - KNOWN.get(n, set())) for n in names}
    new = {n: f for n, f in new.items() if f}
    gone = {n: sorted(KNOWN.get(n, set()) - found[n]) for n in names}
    gone = {n: f for n, f in gone.items() if f}
    assert not new, f"format names in new places (a format's facts go in its package): {new}"
    assert not gone, f"listed places that no longer name the format (drop them): {gone}"


def test_no_pipeline_names_a_format_package():
    """The ingest stage depends on the folder of the formats, not on each format."""
    for pipeline in [ROOT / "dvc.yaml", *sorted(ROOT.glob("pipelines/*/dvc.yaml"))]:
        text = pipeline.read_text()
        assert "tracerl/data/formats\n" in text, pipeline
        assert not re.search(r"tracerl/data/formats/\w", text), pipeline


def test_a_pycache_is_no_part_of_the_formats_hash():
    """DVC hashes the folder as one `.dir`; compiled files written beside the code must not
    rerun ingest (checked by hand with `dvc status` after writing `__pycache__/x.pyc` under a
    directory dep: up to date; a new `.py`: modified)."""
    ignored = set((ROOT / ".dvcignore").read_text().split())
    assert {"__pycache__/", "*.pyc"} <= ignored


def _copy_code(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("tracerl", "flows", "tasks"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    for path in [ROOT / "dvc.yaml", ROOT / "params.yaml", *ROOT.glob("pipelines/*/*.yaml")]:
        (dest / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / path.relative_to(ROOT))


PROBE = '''"""A throwaway format: records `{"probe": [...]}`."""

from tracerl.config.formats import Format
from tracerl.config.registry import Ref

FORMAT = Format("zz-probe", counts="probe", unit="file",
                detect=Ref("tracerl.data.formats.zz_probe.read:detect"),
                read=Ref("tracerl.data.formats.zz_probe.read:read"),
                readme=("a probe file", "a probe", "none"))
'''


def test_a_new_format_package_changes_no_dvc_yaml(tmp_path):
    """A copy of the code with one more format package (registered, its code under the
    folder): `python -m tracerl deps --check` finds every dvc.yaml current."""
    from tracerl.cli import stage_plan
    from tracerl.config.deps import sync_deps

    _copy_code(tmp_path)
    package = tmp_path / "tracerl" / "data" / "formats" / "zz_probe"
    package.mkdir()
    (package / "__init__.py").write_text(PROBE)
    (package / "read.py").write_text("import json\n\n\ndef detect(s):\n    return False\n\n\n"
                                     "def read(path, limits=None, options=None):\n"
                                     "    return iter(json.loads(path.read_text())['probe'])\n")
    FORMATS.add("zz-probe", Format("zz-probe", counts="probe", unit="file",
                                   detect=Ref("tracerl.data.formats.zz_probe.read:detect"),
                                   read=Ref("tracerl.data.formats.zz_probe.read:read"),
                                   readme=("a probe file", "a probe", "none")))
    try:
        assert sync_deps(tmp_path, stage_plan, check=True) == {}
    finally:
        FORMATS.remove("zz-probe")
