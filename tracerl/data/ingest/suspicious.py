"""Warnings where a read looks wrong though every record passed: what a user should look at
before trusting the step table.

- No tool call in the whole dataset while the agent's messages carry fenced shell
  commands or tool-like JSON: the log's actions are probably in its text (a format whose
  actions are commands in prose, read as plain chat), so the table has no action to learn.
- A compaction marker that points outside its file: the session's start hangs on a line
  that is not there (the transcript was cut or rotated); its first part was kept, but
  lines before the cut are missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds

# a fenced block of commands (```bash, ```sh, ```shell, ```console or an unlabelled fence
# opening a line that looks like a command), or JSON naming a tool and its arguments
_FENCED = re.compile(r"```(?:bash|sh|shell|console|zsh)?\s*\n\s*[$>]?\s*[a-z][\w./-]*[ \n]")
_TOOL_JSON = re.compile(r'\{\s*"(?:name|tool|tool_name|action|function)"\s*:\s*"[^"]+"\s*,\s*'
                        r'"(?:arguments|args|parameters|input|action_input)"\s*:')
_SAMPLE_ROWS = 2000  # message rows looked at (the warning needs a few, not all)


def warnings(steps_dir: Path, rows: int, notes: Mapping[str, int]) -> list[str]:
    """The warnings of one ingest's step table (`steps_dir`) and summary notes."""
    found = []
    if rows:
        found += _actions_in_text(steps_dir)
    cut = notes.get("compactions_with_parent_outside_file", 0)
    if cut:
        found.append(f"{cut} compaction marker(s) point to a message outside their file (the "
                     "transcript was cut or rotated): the lines before each were kept as the "
                     "session's start, but the session began in another file; ingest that "
                     "file too")
    return found


def _actions_in_text(steps_dir: Path) -> list[str]:
    steps = ds.dataset(steps_dir, format="parquet")
    kinds = steps.to_table(columns={"type": pc.field("action", "type")}).column("type")
    if pc.any(pc.equal(kinds, "tool_call")).as_py():
        return []  # (only the action types are read: the common case costs little)
    messages = steps.to_table(columns={"content": pc.field("action", "content")},
                              filter=pc.field("action", "type") == "message")
    contents = messages.column("content").slice(0, _SAMPLE_ROWS).to_pylist()
    fenced = sum(1 for c in contents if isinstance(c, str) and _FENCED.search(c))
    tool_json = sum(1 for c in contents if isinstance(c, str) and _TOOL_JSON.search(c))
    if not fenced and not tool_json:
        return []
    what = " and ".join(w for w in (f"{fenced} fenced command block(s)" if fenced else "",
                                    f"{tool_json} tool-like JSON object(s)" if tool_json
                                    else "") if w)
    return [f"0 tool calls, but the agent's messages hold {what} (of "
            f"{min(len(messages), _SAMPLE_ROWS)} looked at): the actions are probably in "
            "the text, which this format does not read as calls; check --format (a "
            "format that reads commands from text, or your own: README \"Your own format\")"]
