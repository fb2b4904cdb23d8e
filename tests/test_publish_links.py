"""A stage's HTML reports reach the reviewer through the Prefect UI: each self-contained
page is inlined as an artifact of its own (tables and images kept), the summary links to
that artifact's page on the server (an http link a browser opens; never `file://`), a
multi-file site is named by its path, and every key starts with the pipeline."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.integration

PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg"
       "AAIAAAUAAen63NgAAAAASUVORK5CYII=")


def test_reports_are_inlined_and_linked_by_their_ui_page(tmp_path, prefect_server,
                                                        monkeypatch):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    from flows import _publish as publish

    (tmp_path / "pipelines/tau2").mkdir(parents=True)
    (tmp_path / "pipelines/tau2/params.yaml").write_text("datasets: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACERL_PARAMS", "pipelines/tau2/params.yaml")
    page = tmp_path / "index.html"
    page.write_text('<!DOCTYPE html><html><head><style>td{color:red}</style></head><body>'
                    '<h1>run</h1><table><tr><th>state</th></tr><tr><td>mul|1|1|-</td></tr>'
                    f'</table><img alt="plot" src="{PNG}"><script>alert(1)</script>'
                    "</body></html>")
    site = tmp_path / "docs" / "index.html"
    site.parent.mkdir()
    site.write_text('<html><head><link href="static/style.css" rel="stylesheet"></head>'
                    "<body>a site</body></html>")

    @flow
    def stage() -> str:
        return publish.summary("report", publish.PASS, ["report"], [["x"]],
                               links={"html report": page, "data docs": site})

    markdown = stage()
    assert "file://" not in markdown
    [link] = re.findall(r"\[html report\]\((http://[^)]+)\)", markdown)
    ui = prefect_server.removesuffix("/api")
    assert link.startswith(f"{ui}/artifacts/artifact/")
    assert f"data docs: `{site}`" in markdown  # a site: named, not linked
    with get_client(sync_client=True) as client:
        # the newest: the session's server also holds other tests' tau2 reports
        inlined = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["tau2-report-html-report"])),
            sort=ArtifactSort.CREATED_DESC)
        summary = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["tau2-report-summary"])))
        assert inlined and summary
        assert str(inlined[0].id) == link.rsplit("/", 1)[1]
        body = inlined[0].data
        assert "<td>mul|1|1|-</td>" in body and PNG in body
        assert "<script" not in body and "<style" not in body
        assert not client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["tau2-report-data-docs"])))
