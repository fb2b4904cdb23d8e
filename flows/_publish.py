"""The review desk: what each stage publishes for a reviewer who opens no files.

Every stage publishes, in this order:
- `<pipeline>-<stage>-summary`: the verdict first, then the few numbers that matter (one
  short table, one row per dataset) and links to its HTML reports;
- detail tables split so each fits a screen (e.g. OPE per dataset, one row per candidate);
- its plots as images in the UI (inlined as data URIs, not paths on someone's disk);
- its HTML reports themselves, inlined as artifacts (`<pipeline>-<stage>-<label>`): the
  summary links to their pages in the UI, which a browser opens (a `file://` link from a
  web page does not).

No artifact is larger than a Prefect event may be (`server.events.maximum_size_bytes`,
1.5 MB by default, of the artifact's JSON text: the server refuses a larger event and logs
it): a report over `inline_limit()` is published as a link artifact naming its file; any
other markdown over it is cut at a line, saying so.

Every key starts with the pipeline (`calculator-ope-summary`, `tau2-ope-summary`): the
latest artifact of a key is always that pipeline's. Each artifact is also logged at INFO, so
the run's log says what was decided.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from prefect import get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from flows._stage import md_table, pipeline_name
from tracerl.io.staging import visible, written_under

PASS, FAIL = "PASS", "FAIL"


def artifact_key(key: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]+", "-", key.lower())).strip("-")


def pipeline_key(key: str) -> str:
    """The key of an artifact of this stage's pipeline: `<pipeline>-<key>` (a key that
    already starts with the pipeline's name keeps it once: `calculator-table`)."""
    pipeline, key = artifact_key(pipeline_name()), artifact_key(key)
    return key if key.startswith(f"{pipeline}-") else f"{pipeline}-{key}"


def inline_limit() -> int:
    """Bytes of JSON text (the markdown as the artifact's event carries it, escaped) one
    artifact may hold: the largest event Prefect's server publishes, less room for the
    rest of the event (its ids, key, description: ~1 KB)."""
    from prefect.settings import get_current_settings

    return get_current_settings().server.events.maximum_size_bytes - 64_000


def publish_markdown(key: str, markdown: str, description: str,
                     whole: Path | None = None) -> Any:
    """One markdown artifact (its id), never one event larger than the server publishes
    (`inline_limit()`): a larger one is, for a file `whole`, a link artifact to that file,
    else its first lines and a note."""
    limit = inline_limit()
    size = len(orjson.dumps(markdown))
    if size <= limit:
        return create_markdown_artifact(key=key, markdown=markdown, description=description)
    get_run_logger().info("%s: %d bytes as JSON, over the %d an artifact holds: %s", key,
                          size, limit, f"linked to {whole}" if whole else "cut")
    if whole is not None:
        return create_link_artifact(key=key, link=Path(whole).resolve().as_uri(),
                                    link_text=f"{whole} ({size} bytes)",
                                    description=f"{description} (linked: too large to inline)")
    note = f"\n\n*(cut: {size} bytes as JSON, over the {limit} an artifact holds)*"
    head = markdown[: len(markdown) * (limit - 2 * len(note)) // size]  # escaping kept
    head = head.rsplit("\n", 1)[0] if "\n" in head else head
    return create_markdown_artifact(key=key, markdown=head + note, description=description)


def _inline_html(page: str) -> str:
    """The body of a self-contained HTML page, as a markdown artifact renders it (the UI
    keeps tables and inlined images; style sheets and scripts are dropped)."""
    body = re.search(r"(?is)<body[^>]*>(.*)</body>", page)
    text = body.group(1) if body else page
    return re.sub(r"(?is)<(script|style)\b.*?</\1>", "", text)


def summary(stage: str, verdict: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
            *, notes: Sequence[str] = (), links: dict[str, Path] | None = None,
            description: str = "", answer: Sequence[str] = ()) -> str:
    """Publish `<stage>-summary`: verdict, the answer lines (first, one per dataset), one
    short table, notes, links to reports."""
    links = links or {}
    parts = [f"## {stage}: **{verdict}**", "", *[f"- **{a}**" for a in answer],
             *([""] if answer else []), md_table(list(header), [list(r) for r in rows])]
    if notes:
        parts += ["", *[f"- {n}" for n in notes]]
    if links:
        shown = report_links(stage, links)
        parts += ["", "Reports: " + " · ".join(
            f"[{label}]({url})" if url else f"{label}: `{links[label]}`"
            for label, url in shown.items())]
    markdown = "\n".join(parts)
    logger = get_run_logger()
    logger.info("%s verdict: %s", stage, verdict)
    for line in answer:
        logger.info("%s: %s", stage, line)
    for row in rows:
        logger.info("%s: %s", stage, ", ".join(f"{h}={c}" for h, c in zip(header, row,
                                                                          strict=False)))
    for note in notes:
        logger.info("%s: %s", stage, note)
    publish_markdown(pipeline_key(f"{stage}-summary"), markdown,
                     description or f"{stage}: verdict and key numbers")
    return markdown


def report_links(stage: str, links: dict[str, Path]) -> dict[str, str | None]:
    """Each HTML report inlined as an artifact of its own; label -> its page in the UI (None
    for a file that is not one self-contained page, e.g. a multi-page site: named, not
    linked)."""
    from flows._runtime.server import ui_url

    shown: dict[str, str | None] = {}
    for label, p in links.items():
        source = visible(Path(p))
        if source.suffix != ".html" or not source.is_file() or _is_site(source):
            shown[label] = None
            continue
        artifact = publish_markdown(
            pipeline_key(f"{stage}-{label}"), _inline_html(source.read_text(errors="replace")),
            f"{stage}: {label} ({p})", whole=Path(p))
        shown[label] = f"{ui_url()}/artifacts/artifact/{artifact}"
        get_run_logger().info("published %s (%s inlined, %d bytes)",
                              pipeline_key(f"{stage}-{label}"), p, source.stat().st_size)
    return shown


def _is_site(page: Path) -> bool:
    """A page that needs files beside it (style sheets, scripts, other pages)."""
    return bool(re.search(r"""(?i)<(link|script)[^>]+(href|src)=["'](?!data:|https?:)""",
                          page.read_text(errors="replace")))


def detail(key: str, title: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
           description: str, footer: str = "") -> str:
    """A detail table (keep it to a screen: split by dataset before calling)."""
    parts = [f"### {title}"]
    if header:
        parts.append(md_table(list(header), [list(r) for r in rows]))
    if footer:
        parts.append(footer)
    markdown = "\n\n".join(parts)
    publish_markdown(pipeline_key(key), markdown, description)
    get_run_logger().info("published %s (%d table rows)", pipeline_key(key),
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
    publish_markdown(pipeline_key(key), markdown, description, whole=png)
    get_run_logger().info("published plot %s (%s, %d bytes)", pipeline_key(key), png,
                          source.stat().st_size)


def image_markdown(png: Path, alt: str) -> str:
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"


def wrote(stage: str, paths: Sequence[Path]) -> None:
    """Log each output a stage wrote, with its size: what the stage wrote there (its staged
    files, under a folder too), not what an earlier run left."""
    logger = get_run_logger()
    for p in paths:
        size = sum(f.stat().st_size for where in written_under(Path(p))
                   for f in ([where] if where.is_file() else where.rglob("*")) if f.is_file())
        logger.info("%s wrote %s (%d bytes)", stage, p, size)
