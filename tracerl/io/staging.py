"""A stage's outputs published as one unit: the old set or the new one, never a mix.

While `stage_outputs(stage)` is active, every write through `tracerl.io.fileio`
(`atomic_path`, `write_json`, `write_text`, `write_table`, `publish_together`) and every
path passed through `staged()` lands under `.tracerl/staging/<stage>-<pid>/`, mirroring
the project tree. When the stage succeeds, a journal naming every output is written
atomically, then each output is renamed into place, then the journal is removed. A kill
before the journal leaves the old outputs (the staging folder is removed by the next
run); a kill after it leaves the journal, and the next stage to start (or any
`read_table`) completes the renames first: readers never see a mix.

Leftovers of killed runs (staging folders of processes that are gone) are removed by the
next `stage_outputs` or `recover()`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

STAGING = Path(".tracerl") / "staging"
PUBLISHED = Path(".tracerl") / "published"  # hard links to each stage's last outputs
_active: _Outputs | None = None  # one stage per process; module-level so threads see it


class _Outputs:
    def __init__(self, root: Path, stage: str) -> None:
        self.root = root.resolve()
        self.stage = stage
        self.base = self.root / STAGING
        self.dir = self.base / f"{stage}-{os.getpid()}"
        self.moves: dict[str, None] = {}  # project-relative final paths, in write order

    def _output(self, final: Path) -> Path | None:
        """`final` relative to the project when it can be a stage output; None outside the
        project and for bookkeeping (`_bookkeeping`)."""
        absolute = Path(os.path.abspath(final))
        try:
            rel = absolute.relative_to(self.root)
        except ValueError:  # outside the project: not a stage output
            return None
        return None if _bookkeeping(rel) else rel

    def target(self, final: Path) -> Path:
        rel = self._output(final)
        if rel is None:
            return Path(final)
        # a file inside a folder that is already staged whole goes inside that copy
        for parent in rel.parents:
            if str(parent) in self.moves and parent != Path("."):
                return self.dir / rel
        self.moves[str(rel)] = None
        staged = self.dir / rel
        staged.parent.mkdir(parents=True, exist_ok=True)
        return staged

    def visible(self, final: Path) -> Path:
        """Where a reader in this stage finds `final` (its staged copy if it wrote it)."""
        rel = self._output(final)
        if rel is None:
            return Path(final)
        for candidate in (rel, *rel.parents):
            if str(candidate) in self.moves:
                return self.dir / rel
        return Path(final)

    def written_under(self, final: Path) -> list[Path]:
        """The staged copies of the outputs at `final` or inside it."""
        rel = self._output(final)
        if rel is None:
            return []
        if any(str(c) in self.moves for c in (rel, *rel.parents) if c != Path(".")):
            return [self.dir / rel]  # staged whole (or inside a folder staged whole)
        return [self.dir / m for m in self.moves if Path(m).is_relative_to(rel)]

    def commit(self) -> None:
        journal = self.base / f"{self.stage}.journal.json"
        self.base.mkdir(parents=True, exist_ok=True)  # a stage that staged nothing has none
        tmp = journal.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"staging": self.dir.name, "moves": list(self.moves)}))
        os.replace(tmp, journal)
        _roll_forward(self.root, journal)
        _snapshot(self.root, self.stage, list(self.moves))


# Hidden folders at the top of the project that are tools' own, never a stage's output.
_TOOL_FOLDERS = frozenset({".tracerl", ".dvc", ".git", ".prefect", ".venv"})
# How the library names its own temporaries beside a final output: ".<name>.<x>.tmp"
# (atomic_path), ".<name>.staging-<pid>" (write_table, export), ".ingest-staging-<pid>",
# ".<name>.old" (replace_dir), ".publish.json" (publish_together).
_TEMPORARY = re.compile(r"^\.(.*staging.*|.*\.tmp|.*\.old|publish\.json)$")


def _bookkeeping(rel: Path) -> bool:
    """Whether a project-relative path is bookkeeping, written in place, never staged: a
    tool's own folder, or inside a temporary the library moves into place itself (a hidden
    name below a visible folder, or one named as the library names them). Hidden folders
    a user names for outputs (`.scratch/run/steps`) are outputs like any other."""
    parts = rel.parts
    if parts and parts[0] in _TOOL_FOLDERS:
        return True
    below_visible = False
    for part in parts:
        if part.startswith("."):
            if below_visible or _TEMPORARY.match(part):
                return True
        else:
            below_visible = True
    return False


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _roll_forward(root: Path, journal: Path) -> None:
    entry = orjson.loads(journal.read_bytes())
    staging = journal.parent / entry["staging"]
    for rel in entry["moves"]:
        src, dst = staging / rel, root / rel
        if not src.exists() and not src.is_symlink():
            continue  # moved already (a previous roll-forward was killed after it)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            old = dst.with_name(f".{dst.name}.old")
            if dst.exists():
                if old.exists():
                    shutil.rmtree(old)
                os.replace(dst, old)
            os.replace(src, dst)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(src, dst)
    journal.unlink()
    shutil.rmtree(staging, ignore_errors=True)


def recover(root: Path | str = ".") -> list[str]:
    """Complete every publish a killed stage left half done, and remove the staging
    folders of processes that are gone; returns the stages completed."""
    base = Path(root).resolve() / STAGING
    if not base.is_dir():
        return []
    done = []
    for journal in sorted(base.glob("*.journal.json")):
        _roll_forward(Path(root).resolve(), journal)
        done.append(journal.name.removesuffix(".journal.json"))
    for leftover in base.iterdir():
        stage, _, pid = leftover.name.rpartition("-")
        if leftover.is_dir() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)
    for leftover in base.glob("*.tmp"):
        leftover.unlink(missing_ok=True)
    return done


def _link_tree(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=os.link)
    elif src.is_file():
        os.link(src, dst)


def _snapshot(root: Path, stage: str, rels: list[str]) -> None:
    """Hard links to the outputs just published (no copy: outputs are never rewritten in
    place, only replaced), so a later failed run of the stage can put them back."""
    snap = root / PUBLISHED / stage
    tmp = root / PUBLISHED / f".{stage}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for rel in rels:
            _link_tree(root / rel, tmp / "files" / rel)
    except OSError:  # no hard links here (another file system): no snapshot
        shutil.rmtree(tmp, ignore_errors=True)
        return
    (tmp / "manifest.json").write_bytes(orjson.dumps(rels))
    shutil.rmtree(snap, ignore_errors=True)
    os.replace(tmp, snap)


def restore_missing(stage: str, root: Path | str = ".") -> list[str]:
    """Put back the stage's last published outputs that are missing now (`dvc repro`
    removes a stage's outputs before its command runs; when that command then fails,
    e.g. on a server that does not answer, the previous outputs come back). Returns the
    paths restored; outputs that exist are left alone."""
    root = Path(root).resolve()
    snap = root / PUBLISHED / stage
    if not (snap / "manifest.json").is_file():
        return []
    restored = []
    for rel in orjson.loads((snap / "manifest.json").read_bytes()):
        if not (root / rel).exists() and (snap / "files" / rel).exists():
            try:
                _link_tree(snap / "files" / rel, root / rel)
            except OSError:
                continue
            restored.append(rel)
    return restored


def staged(final: Path | str) -> Path:
    """Where to write `final` now: its staging copy inside an active stage, else itself."""
    return _active.target(Path(final)) if _active is not None else Path(final)


def visible(final: Path | str) -> Path:
    """Where to read `final` now: this stage's own staged copy when it wrote one."""
    return _active.visible(Path(final)) if _active is not None else Path(final)


def written_under(final: Path | str) -> list[Path]:
    """What this stage wrote at `final` or under it (its staged copies), or `final` itself
    outside a stage."""
    return _active.written_under(Path(final)) if _active is not None else [Path(final)]


def active() -> bool:
    return _active is not None


@contextmanager
def stage_outputs(stage: str, root: Path | str = ".") -> Iterator[None]:
    """Run a stage with its outputs staged; publish them together when it returns (or
    raises an exception whose `outputs_complete` is true, e.g. a failed quality gate whose
    report the user must see); discard them on any other exception or a kill."""
    global _active
    recover(root)
    outputs = _Outputs(Path(root), stage)
    shutil.rmtree(outputs.dir, ignore_errors=True)
    _active = outputs
    try:
        yield
    except BaseException as exc:
        _active = None
        if getattr(exc, "outputs_complete", False):
            outputs.commit()
        else:
            shutil.rmtree(outputs.dir, ignore_errors=True)
        raise
    _active = None
    outputs.commit()
