"""DVC plots that render offline.

`dvc plots show` writes an HTML page whose Vega, Vega-Lite and Vega-Embed come from a CDN:
offline it renders blank. Here the page template carries those libraries inline, taken
from the vl-convert-python package (which ships them), so the page needs no network.
The template is generated at run time (about 1 MB) into a git-ignored folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# DVC's vega templates declare Vega-Lite v5 ("$schema": .../vega-lite/v5.json).
VEGA_LITE_MAJOR = "5"

# DVC fills {plot_divs} (each plot: a div whose script calls vegaEmbed on its spec) and
# {refresh_tag}; there is no {scripts} placeholder, so DVC's CDN <script> tags go nowhere.
_PAGE_HEAD = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>DVC Plot</title>
    <script type="text/javascript">
"""
_PAGE_TAIL = """
    </script>
    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def vega_lite_version() -> str:
    """The newest Vega-Lite v5 release vl-convert carries (e.g. '5.21')."""
    import vl_convert

    ours = [v for v in vl_convert.get_vegalite_versions() if v.split(".")[0] == VEGA_LITE_MAJOR]
    if not ours:
        raise RuntimeError(f"vl-convert ships no Vega-Lite v{VEGA_LITE_MAJOR}")
    return max(ours, key=lambda v: tuple(int(p) for p in v.split(".")))


def offline_template(path: Path) -> Path:
    """Write the page template with Vega, Vega-Lite and Vega-Embed inlined; return path."""
    import vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=vega_lite_version())
    # The bundle goes inside one <script> element: it must not close it early, and must not
    # contain a placeholder DVC would fill.
    placeholders = ("{plot_divs}", "{refresh_tag}", "{scripts}")
    if re.search(r"</script", bundle, re.IGNORECASE) or any(p in bundle for p in placeholders):
        raise RuntimeError("the Vega bundle cannot be inlined as it is")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_PAGE_HEAD + bundle + _PAGE_TAIL, encoding="utf-8")
    return path


def show(out: Path = Path("dvc_plots"), revisions: list[str] | None = None,
         template_dir: Path | None = None) -> Path:
    """Run `dvc plots show` (or `dvc plots diff REVISIONS...`) with the offline template;
    return the written index.html. Runs in the current directory (the DVC repo)."""
    template = offline_template((template_dir or out / ".template") / "offline.html")
    command = ["diff", *revisions] if revisions else ["show"]
    dvc = Path(sys.executable).with_name("dvc")
    subprocess.run([str(dvc) if dvc.exists() else "dvc", "plots", *command,
                    "--html-template", str(template.resolve()), "-o", str(out)], check=True)
    return out / "index.html"
