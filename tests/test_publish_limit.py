"""No artifact is one event over Prefect's size limit: a report over it is linked, other
markdown cut at a line (the server refuses a larger event; tests/test_server_large_artifact.py
posts 10 MB to a real server)."""

from __future__ import annotations

import logging

import orjson

from flows import _publish as publish


def _capture(monkeypatch) -> list[tuple[str, dict]]:
    made: list[tuple[str, dict]] = []
    monkeypatch.setattr(publish, "inline_limit", lambda: 10_000)
    monkeypatch.setattr(publish, "get_run_logger", lambda: logging.getLogger("test"))
    monkeypatch.setattr(publish, "create_markdown_artifact",
                        lambda **kw: made.append(("markdown", kw)) or "id")
    monkeypatch.setattr(publish, "create_link_artifact",
                        lambda **kw: made.append(("link", kw)) or "id")
    return made


def test_small_markdown_is_inlined_a_large_report_linked_other_markdown_cut(tmp_path,
                                                                            monkeypatch):
    made = _capture(monkeypatch)
    publish.publish_markdown("k", "| a |\n" * 100, "d")
    page = tmp_path / "report.html"
    publish.publish_markdown("r", "<td>\"x\"</td>\n" * 2000, "d", whole=page)
    quoted = '"quoted" line\n' * 2000  # JSON escaping doubles its quotes
    publish.publish_markdown("c", quoted, "d")
    (kind0, small), (kind1, linked), (kind2, cut) = made
    assert kind0 == "markdown" and small["markdown"] == "| a |\n" * 100
    assert kind1 == "link" and linked["link"] == page.resolve().as_uri()
    assert kind2 == "markdown" and cut["markdown"].endswith("over the 10000 an artifact holds)*")
    assert len(orjson.dumps(cut["markdown"])) <= 10_000
    assert cut["markdown"].startswith('"quoted" line\n')
