"""Raw calculator logs for the inbox, with episode ids of their own (as real logs have)."""

from __future__ import annotations

from pathlib import Path

from tracerl.envs.calculator import logs as calculator


def inbox_log(path: Path, prefix: str, episodes: int = 20, seed: int = 1,
              dataset: str = "good_coverage") -> int:
    """Write `episodes` episodes of `dataset`'s behaviour policy, episode ids `<prefix>-…`;
    the number of steps written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = ({**r, "episode_id": f"{prefix}-{r['episode_id']}"}
               for r in calculator.log_records(dataset, episodes, seed, 0.2))
    return calculator.write_jsonl(path, records)
