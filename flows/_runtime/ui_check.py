"""Look at the Prefect UI as a reviewer does, in headless Chromium: the latest completed ope
run, its parameters, its summary artifact and its plot; screenshots under `reports/ui/`.

`python -m flows._runtime.ui_check [--out reports/ui]` (what `make ui-check` runs) uses the Prefect
server the settings point at. The browser test (tests/test_ui_browser.py) uses its own.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--hide-scrollbars",
                  "--virtual-time-budget=20000"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if exe := shutil.which(name):
            return exe
    raise FileNotFoundError("no chromium on PATH: `apt-get install -y chromium` (make test "
                            "installs it when missing)")


def dump_dom(url: str, timeout: float = 90.0) -> str:
    """The DOM after the UI (a JS app) has rendered: virtual time lets it finish."""
    done = subprocess.run([chromium(), *CHROMIUM_FLAGS, "--dump-dom", url], capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed on {url}: {done.stderr[-1000:]}")
    return done.stdout


def screenshot(url: str, out: Path, size: str = "1400,1000", timeout: float = 90.0) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--window-size={size}",
                    f"--screenshot={out.resolve()}", url], capture_output=True,
                   timeout=timeout, check=True)
    return out


def review_pages(ui: str, client, stage: str = "ope",
                 pipeline: str = "calculator") -> dict[str, str]:
    """UI pages of the latest completed run of `stage` of `pipeline`: name → URL (its
    artifacts under their names without the pipeline: `ope-summary`, `ope-plot`)."""
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    from flows._publish import artifact_key

    runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
        tags=FlowRunFilterTags(all_=[f"stage:{stage}", f"pipeline:{pipeline}"]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.COMPLETED]))),
        sort=FlowRunSort.START_TIME_DESC, limit=1)
    if not runs:
        raise LookupError(f"no completed {stage} run of {pipeline} on this server: run the "
                          "pipeline first")
    run = runs[0]
    pages = {"run": f"{ui}/runs/flow-run/{run.id}",
             "parameters": f"{ui}/runs/flow-run/{run.id}?tab=Parameters"}
    for key in (f"{stage}-summary", f"{stage}-plot"):
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[artifact_key(f"{pipeline}-{key}")]),
            flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])))
        if found:
            pages[key] = f"{ui}/artifacts/artifact/{found[0].id}"
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/ui"))
    parser.add_argument("--stage", default="ope")
    parser.add_argument("--pipeline", default="calculator",
                        help="calculator | tau2 | support_desk (the `pipeline:` tag)")
    args = parser.parse_args()
    from flows._runtime.server import ui_url, use_checkout_server

    use_checkout_server()  # this checkout's server, before Prefect is imported
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        pages = review_pages(ui_url(), client, args.stage, args.pipeline)
    for name, url in pages.items():
        shot = screenshot(url, args.out / f"{args.pipeline}-{args.stage}-{name}.png")
        print(f"{shot}  ← {url}")


if __name__ == "__main__":
    main()
