"""The review desk: what each stage publishes for a reviewer who opens no files.

Every stage publishes, in this order:
- `<stage>-summary`: the verdict first, then the few numbers that matter (one short table,
  one row per dataset) and links to its HTML reports;
- detail tables split so each fits a screen (e.g. OPE per dataset, one row per candidate);
- its plots as images in the UI (inlined as data URIs, not paths on someone's disk).

Each artifact is also logged at INFO, so the run's log says what was decided.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from flows._stage import md_table
from tracerl.io.staging import visible

PASS, FAIL = "PASS", "FAIL"


def artifact_key(key: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]+", "-", key.lower())).strip("-")


def summary(stage: str, verdict: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
            *, notes: Sequence[str] = (), links: dict[str, Path] | None = None,
            description: str = "") -> str:
    """Publish `<stage>-summary`: verdict, one short table, notes, links to reports."""
    links = links or {}
    parts = [f"## {stage}: **{verdict}**", "", md_table(list(header), [list(r) for r in rows])]
    if notes:
        parts += ["", *[f"- {n}" for n in notes]]
    if links:
        parts += ["", "Reports: " + " · ".join(f"[{label}]({file_link(p)})"
                                             for label, p in links.items())]
    markdown = "\n".join(parts)
    logger = get_run_logger()
    logger.info("%s verdict: %s", stage, verdict)
    for row in rows:
        logger.info("%s: %s", stage, ", ".join(f"{h}={c}" for h, c in zip(header, row,
                                                                          strict=False)))
    for note in notes:
        logger.info("%s: %s", stage, note)
    create_markdown_artifact(key=artifact_key(f"{stage}-summary"), markdown=markdown,
                             description=description or f"{stage}: verdict and key numbers")
    for label, p in links.items():
        create_link_artifact(key=artifact_key(f"{stage}-{label}-link"), link=file_link(p),
                             link_text=f"{label}: {p}", description=f"{stage}: {label}")
    return markdown


def detail(key: str, title: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
           description: str, footer: str = "") -> str:
    """A detail table (keep it to a screen: split by dataset before calling)."""
    parts = [f"### {title}"]
    if header:
        parts.append(md_table(list(header), [list(r) for r in rows]))
    if footer:
        parts.append(footer)
    markdown = "\n\n".join(parts)
    create_markdown_artifact(key=artifact_key(key), markdown=markdown, description=description)
    get_run_logger().info("published %s (%d table rows)", artifact_key(key),
                          len(rows) or markdown.count("\n|") - 1)
    return markdown


def image(key: str, png: Path, title: str, description: str) -> None:
    """A plot shown in the UI: the PNG inlined as a data URI inside a markdown artifact."""
    png = Path(png)
    source = visible(png)  # inside a stage, its staged copy until the stage publishes
    if not source.is_file():
        get_run_logger().warning("plot %s not found: not published", png)
        return
    markdown = f"### {title}\n\n{image_markdown(source, title)}\n\nfile: `{png}`"
    create_markdown_artifact(key=artifact_key(key), markdown=markdown, description=description)
    get_run_logger().info("published plot %s (%s, %d bytes)", artifact_key(key), png,
                          source.stat().st_size)


def image_markdown(png: Path, alt: str) -> str:
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"


def file_link(p: Path) -> str:
    return Path(p).resolve().as_uri()


def wrote(stage: str, paths: Sequence[Path]) -> None:
    """Log each output a stage wrote, with its size."""
    logger = get_run_logger()
    for p in paths:
        p, where = Path(p), visible(Path(p))  # a stage's own outputs are staged until it ends
        size = (sum(f.stat().st_size for f in where.rglob("*") if f.is_file())
                if where.is_dir() else where.stat().st_size if where.exists() else 0)
        logger.info("%s wrote %s (%d bytes)", stage, p, size)
