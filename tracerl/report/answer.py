"""The answer first: one line per evaluated dataset saying what to do — deploy a candidate,
keep the logged policy, or "cannot tell" — with the estimate, its interval and why.

Read off the one OPE engine's outputs, never a second rule: the candidate is the headline
estimator's pick of `tracerl.ope.select.select` (the stage's selection.json), and whether it
beats the logged policy is `tracerl.ope.select.verdict_against_logged` of its record against
the dataset's logged value. Every surface (the HTML report, the stage's markdown table, the
`ope-summary` artifact, `tracerl results`) prints these lines, from `answers`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tracerl.ope.records import OUT_OF_RANGE_WORDS, is_out_of_range
from tracerl.ope.select import blocking_flags, pick_of, verdict_against_logged

DEPLOY, KEEP, CANNOT_TELL = "deploy", "keep the logged agent", "cannot tell"
# Candidates that are the logged agent itself (the fixture's behaviour policy): picking one
# of them is the answer "keep the logged agent".
LOGGED_AGENT = ("behavior",)


@dataclass(frozen=True)
class Answer:
    """What the data allows on one dataset. `candidate`: the headline estimator's pick (None
    when nothing could be picked); its estimate and interval; the logged policy's value and
    interval; `why`: the reason, in a clause; `margin`: by how much the decision holds (the
    gap between the two intervals; negative: their overlap); `next_step`: for "cannot
    tell", the one thing that would tell; `out_of_range`: the estimate was projected onto
    the return range (its number is not printed)."""

    dataset: str
    decision: str
    candidate: str | None
    headline: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    logged: float | None
    logged_low: float | None
    logged_high: float | None
    why: str
    margin: float | None = None
    next_step: str = ""
    out_of_range: bool = False

    @property
    def action(self) -> str:
        """The decision in words: "deploy bc", "keep the logged agent", "cannot tell"."""
        return f"{DEPLOY} {self.candidate}" if self.decision == DEPLOY else self.decision

    def figures(self) -> str:
        """The candidate's headline estimate and interval beside the logged value."""
        parts = []
        if self.candidate is not None and self.estimate is not None:
            shown = (f"{OUT_OF_RANGE_WORDS} (flagged)" if self.out_of_range else
                     f"{_num(self.estimate)} {_ci(self.ci_low, self.ci_high)}")
            parts.append(f"{self.candidate} {self.headline} {shown}")
        if self.logged is not None:
            parts.append(f"logged {_num(self.logged)} {_ci(self.logged_low, self.logged_high)}")
        return " vs ".join(parts)

    def line(self) -> str:
        """The one line: `dataset: ACTION (margin) — figures; why[; next: ...]`."""
        figures = self.figures()
        margin = "" if self.margin is None or self.decision == CANNOT_TELL \
            else f" (margin {self.margin:.3f})"
        return (f"{self.dataset}: {self.action}{margin} — "
                + (f"{figures}; " if figures else "") + self.why
                + (f"; would tell: {self.next_step}" if self.next_step else ""))


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _ci(low: float | None, high: float | None) -> str:
    return "[no interval]" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def more_episodes(n: int, half_widths: float, gap: float) -> int | None:
    """Episodes to add before intervals of these half-widths (shrinking as 1/sqrt(n)) stop
    overlapping across `gap`; None when there is no gap to resolve."""
    if n <= 0 or not gap > 1e-9 or not half_widths > 0:
        return None
    return max(1, math.ceil(round(n * (half_widths / gap) ** 2, 6)) - n)


def _headline_record(records: Sequence[Mapping[str, Any]], dataset: str, policy: str,
                     headline: str) -> Mapping[str, Any] | None:
    return next((r for r in records if r["dataset"] == dataset and r["policy"] == policy
                 and f"{r['layer']}/{r['estimator']}" == headline), None)


def _why_no_pick(records: Sequence[Mapping[str, Any]], dataset: str, headline: str,
                 note: str) -> str:
    """Why the selection ranked no candidate first, in a clause (the flags per candidate)."""
    mine = [r for r in records if r["dataset"] == dataset
            and f"{r['layer']}/{r['estimator']}" == headline]
    if not mine:
        return note or f"no {headline} estimate on {dataset}"
    blocked: dict[str, int] = {}
    for r in mine:
        reason = ("no point estimate" if r["value"] is None
                  else ", ".join(blocking_flags(r["flags"])) or "unflagged")
        blocked[reason] = blocked.get(reason, 0) + 1
    return (f"none of {len(mine)} candidates' {headline} estimates can be ranked first ("
            + "; ".join(f"{n} {reason}" for reason, n in sorted(blocked.items())) + ")")


def _next_step_of(record: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    """For "cannot tell" on overlapping intervals: how many more logged episodes would
    separate them at the gap the point estimates show (intervals shrink as 1/sqrt(n))."""
    n = int(base.get("n") or record.get("n") or 0)
    gap = abs(record["value"] - base["value"])
    half = ((record["ci_high"] - record["ci_low"]) + (base["ci_high"] - base["ci_low"])) / 2.0
    more = more_episodes(n, half, gap)
    if more is None:
        return "nothing: the estimates coincide, the candidate is no better than the logs"
    return (f"about {more:,} more logged episodes (now {n:,}), if the gap of {gap:.3f} "
            "holds")


def answers(records: Sequence[Mapping[str, Any]], selection: Sequence[Mapping[str, Any]],
            logged: Mapping[str, Mapping[str, Any]], headline: str,
            min_support: float) -> list[Answer]:
    """One answer per evaluated dataset (in the records' order), from the stage's records,
    its selection and each dataset's logged value. The pick is the logged agent itself:
    "keep the logged agent"; its interval above the logged one: "deploy"; below: "keep";
    else "cannot tell" with the one thing that would tell."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        pick, note = pick_of(selection, dataset, headline)
        base = (logged or {}).get(dataset) or {}
        lg = (base.get("value"), base.get("ci_low"), base.get("ci_high"))
        record = None if pick is None else _headline_record(records, dataset, pick, headline)
        if record is None:
            out.append(Answer(dataset, CANNOT_TELL, None, headline, None, None, None, *lg,
                              _why_no_pick(records, dataset, headline, note),
                              next_step=_next_step_no_pick(records, dataset, headline)))
            continue
        est = (record["value"], record["ci_low"], record["ci_high"])
        wild = is_out_of_range(record)
        if lg[0] is None or lg[1] is None:
            out.append(Answer(dataset, CANNOT_TELL, pick, headline, *est, *lg,
                              f"{pick} is the pick, but there is no logged value with an "
                              "interval to compare it with", out_of_range=wild,
                              next_step="the logged agent's own returns (a reward per "
                                        "episode)"))
            continue
        if pick in LOGGED_AGENT:
            out.append(Answer(dataset, KEEP, pick, headline, *est, *lg,
                              "the best candidate the data can vouch for is the logged "
                              "agent itself", out_of_range=wild))
            continue
        verdict = verdict_against_logged(record, base, min_support)
        next_step = ""
        margin = None
        if verdict.startswith("better"):
            decision, why = DEPLOY, ("the pick's interval lies above the logged agent's "
                                     "(they do not overlap)")
            margin = record["ci_low"] - base["ci_high"]
        elif verdict.startswith("worse"):
            decision, why = KEEP, ("the pick, the best candidate the data can vouch for, "
                                   "lies below the logged agent (intervals do not overlap)")
            margin = base["ci_low"] - record["ci_high"]
        elif verdict.startswith("cannot tell apart"):
            decision, why = CANNOT_TELL, ("the pick's interval overlaps the logged agent's: "
                                          "the data cannot tell them apart")
            margin = min(record["ci_high"], base["ci_high"]) - max(record["ci_low"],
                                                                  base["ci_low"])
            margin = -margin
            next_step = _next_step_of(record, base)
        else:
            decision, why = CANNOT_TELL, f"the pick {pick}: {verdict}"
        out.append(Answer(dataset, decision, pick, headline, *est, *lg, why, margin,
                          next_step, wild))
    return out


def _next_step_no_pick(records: Sequence[Mapping[str, Any]], dataset: str,
                       headline: str) -> str:
    """For "cannot tell" with no pick: what the best-placed candidate's records ask for
    (`_next_step`: propensities to log, episodes where support lacks, ...)."""
    mine = [r for r in records if r["dataset"] == dataset]
    heads = [r for r in mine if f"{r['layer']}/{r['estimator']}" == headline
             and r["value"] is not None]
    if not heads:
        return _next_step(mine, None, UNIDENTIFIED)
    best = max(heads, key=lambda r: (r["value"], str(r["policy"])))
    return _next_step([r for r in mine if r["policy"] == best["policy"]], best, UNIDENTIFIED)


def ranking_lines(ranking: Mapping[str, Any] | None) -> list[str]:
    """The agents' ranking first (`tracerl.ope.select.rank_agents`): one line ranking the
    logged agents by model name, then one per adjacent pair with its paired difference and
    the Holm-adjusted verdict. [] with fewer than two agents."""
    if not ranking or len(ranking.get("agents") or []) < 2:
        return []
    def who(row: Mapping[str, Any]) -> str:
        model = row.get("model")
        return row["agent"] if not model or model == row["agent"] else \
            f"{model} ({row['agent']})"
    rows = ranking["agents"]
    out = ["agents ranked (logged value): " + "; ".join(
        f"{k + 1}. {who(r)} {_num(r['value'])} {_ci(r['ci_low'], r['ci_high'])}"
        for k, r in enumerate(rows))]
    named = {r["agent"]: who(r) for r in rows}
    m = len(ranking.get("pairs") or [])
    for p in ranking.get("pairs") or []:
        if p.get("difference") is None:
            out.append(f"{named[p['agent']]} vs {named[p['other']]}: no task both ran")
            continue
        verdict = (f"{named[p['agent']]} is better" if p.get("told_apart")
                   else "cannot tell them apart")
        out.append(f"{named[p['agent']]} vs {named[p['other']]}: {verdict} — paired "
                   f"difference {p['difference']:+.3f} {_ci(p['ci_low'], p['ci_high'])} over "
                   f"{p['tasks']} shared tasks, p {p['p_value']:.3g}, "
                   f"{ranking.get('adjustment', 'Holm')}-adjusted over {m} pair"
                   f"{'s' if m != 1 else ''} {p['p_holm']:.3g}")
    return out


def answer_lines(found: Sequence[Answer], ranking: Mapping[str, Any] | None) -> list[str]:
    """Every surface's answer: the agents' ranking first (several logged agents), then one
    line per dataset."""
    return ranking_lines(ranking) + [a.line() for a in found]


def answer_lines_of(ope_dir: Path, headline: str, min_support: float) -> list[str]:
    """`answer_lines` from the ope stage's outputs under `ope_dir`."""
    return answer_lines(answers_of(ope_dir, headline, min_support),
                        _load(ope_dir, "ranking.json"))


def answers_of(ope_dir: Path, headline: str, min_support: float) -> list[Answer]:
    """The answers from the ope stage's outputs under `ope_dir` (none when it has not run)."""
    records = _load(ope_dir, "estimates.json")
    if not records:
        return []
    return answers(records, _load(ope_dir, "selection.json") or [],
                   _load(ope_dir, "logged.json") or {}, headline, min_support)


def _load(ope_dir: Path, name: str) -> Any:
    path = Path(ope_dir) / name
    return orjson.loads(path.read_bytes()) if path.is_file() else None


def headline_metrics(found: Sequence[Answer], selection: Sequence[Mapping[str, Any]]
                     ) -> dict[str, dict[str, float]]:
    """The pipeline's few headline metrics (`dvc exp show`, `dvc metrics show`): per
    evaluated dataset the answer's candidate's headline estimate, the logged policy's
    value and, where a truth exists, regret@1 of the pick (the true value lost by deploying
    it). The detail stays in the stages' own metrics files and the reports."""
    out: dict[str, dict[str, float]] = {}
    for a in found:
        layer, _, estimator = a.headline.partition("/")
        row = next((s for s in selection if (s["dataset"], s["layer"], s["estimator"])
                    == (a.dataset, layer, estimator)), {})
        mine = {"estimate": a.estimate, "logged": a.logged,
                "regret": row.get("regret_at_1")}
        out[a.dataset] = {k: round(float(v), 6) for k, v in mine.items() if v is not None}
    return out


def headline_metrics_of(ope_dir: Path, headline: str, min_support: float
                        ) -> dict[str, dict[str, float]]:
    """`headline_metrics` from the ope stage's outputs under `ope_dir`."""
    return headline_metrics(answers_of(ope_dir, headline, min_support),
                            _load(ope_dir, "selection.json") or [])


def headline_points(records: Sequence[Mapping[str, Any]], logged: Mapping[str, Mapping],
                    dataset: str, headline: str) -> list[dict[str, Any]]:
    """Each candidate's headline estimate on `dataset` with its interval, and the logged
    policy's value as a row of its own (`dvc plots`: a bar per policy, compared across
    experiments). Candidates without a point estimate are left out; an out-of-range value
    (the range's end, not an estimate) has no bar, its flags say why."""
    points = [{"dataset": dataset, "policy": str(r["policy"]),
               "dataset_policy": f"{dataset} · {r['policy']}",
               "estimate": None if is_out_of_range(r) else r["value"],
               "ci_low": r["ci_low"],
               "ci_high": r["ci_high"], "support": r["support"],
               "flags": ", ".join(blocking_flags(r["flags"])) or "none"}
              for r in records if r["dataset"] == dataset and r["value"] is not None
              and f"{r['layer']}/{r['estimator']}" == headline]
    base = (logged or {}).get(dataset) or {}
    if base.get("value") is not None:
        points.append({"dataset": dataset, "policy": "(logged policy)",
                       "dataset_policy": f"{dataset} · (logged policy)",
                       "estimate": base["value"],
                       "ci_low": base.get("ci_low"), "ci_high": base.get("ci_high"),
                       "support": 1.0, "flags": "none"})
    return points


IDENTIFIED, BOUNDED, UNIDENTIFIED = "identified", "bounded", "unidentified"


@dataclass(frozen=True)
class Verdict:
    """What the logs allow of one candidate: `identified` (a supported, unflagged estimate
    another unflagged estimate corroborates, with its interval), `bounded` (only a range)
    or `unidentified` (not even that); why, and the next step that would change it."""

    dataset: str
    candidate: str
    status: str
    estimator: str | None
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    why: str
    next_step: str

    def text(self) -> str:
        if self.status == IDENTIFIED:
            figures = (f" {self.estimator} {_num(self.estimate)} "
                       f"{_ci(self.ci_low, self.ci_high)}")
        elif self.status == BOUNDED:
            figures = f" to {_ci(self.ci_low, self.ci_high)} ({self.estimator})"
        else:
            figures = ""
        return (f"{self.candidate} {self.status}{figures}: {self.why}; next: "
                f"{self.next_step}")


def _is_return(r: Mapping[str, Any]) -> bool:
    return r.get("metric", "return") == "return" and r["layer"] != "verifier"


def _flag_names(r: Mapping[str, Any]) -> set[str]:
    return {str(f).split(":")[0] for f in r["flags"]}


def _name(r: Mapping[str, Any]) -> str:
    return f"{r['layer']}/{r['estimator']}"


def candidate_verdict(records: Sequence[Mapping[str, Any]], dataset: str, candidate: str,
                      headline: str, min_support: float) -> Verdict:
    """The verdict on one candidate from its records on `dataset` (see `Verdict`)."""
    mine = [r for r in records if r["dataset"] == dataset and r["policy"] == candidate]
    head = _headline_record(records, dataset, candidate, headline)
    usable = [r for r in mine if _is_return(r) and r["value"] is not None
              and not blocking_flags(r["flags"]) and r["support"] is not None
              and r["support"] >= min_support]
    chosen = head if head is not None and head in usable else (usable[0] if usable else None)
    status, why, shown = UNIDENTIFIED, "", None
    if chosen is not None:
        others = [r for r in usable if r is not chosen
                  and f"disagrees_with:{_name(r)}" not in chosen["flags"]]
        if others:
            status, shown = IDENTIFIED, chosen
            why = ("supported, unflagged, corroborated by "
                   + ", ".join(_name(r) for r in others[:3]))
        else:
            status, shown = BOUNDED, chosen
            why = f"{_name(chosen)} is unflagged but no other unflagged estimate corroborates it"
    if status == UNIDENTIFIED:
        ranged = [r for r in mine if _is_return(r) and r["ci_low"] is not None
                  and r["ci_high"] is not None]
        if ranged:
            shown = head if head in ranged else min(
                ranged, key=lambda r: (r["ci_high"] - r["ci_low"], _name(r)))
            status = BOUNDED
            blocked = blocking_flags(shown["flags"]) or ["no point value"]
            why = f"only a range: {_name(shown)} carries {', '.join(blocked)}"
        else:
            reasons = sorted({str(f) for r in mine for f in r["flags"]
                              if str(f).startswith(("not_applicable", "no estimate"))})
            why = "; ".join(reasons[:2]) or "no estimate of any layer"
    return Verdict(dataset, candidate, status, None if shown is None else _name(shown),
                   None if shown is None else shown["value"],
                   None if shown is None else shown["ci_low"],
                   None if shown is None else shown["ci_high"], why,
                   _next_step(mine, head, status))


def _next_step(mine: Sequence[Mapping[str, Any]], head: Mapping[str, Any] | None,
               status: str) -> str:
    """What data would change the verdict, most useful first."""
    if status == IDENTIFIED:
        return "none needed (compare its interval with the logged policy's)"
    flags = set().union(*(_flag_names(r) for r in mine)) if mine else set()
    texts = [str(f) for r in mine for f in r["flags"]]
    steps = []
    if "estimated_propensities" in flags:
        steps.append("log the behaviour's log-probs of its actions (action_logprobs) at "
                     "collection")
    basis = head if head is not None else (mine[0] if mine else None)
    support = ((basis or {}).get("details") or {}).get("support") or {}
    if {"low_support", "unsupported_actions"} & flags:
        tasks = support.get("tasks_lacking") or []
        steps.append("more logged episodes where support lacks" + (
            f", on tasks {', '.join(tasks)}" if tasks else "")
            + " (or a logger that explores the candidate's actions)")
    elif {"interval_unreliable", "low_ess", "heavy_tailed_weights", "no estimate"} & flags:
        steps.append("more logged episodes (too few effective ones behind the interval)")
    if any("needs the candidate's distribution" in t for t in texts):
        steps.append("score the candidate's distribution at each logged step (step_probs)")
    if any(t.startswith("not_applicable") and r["layer"] in ("replay", "verifier")
           and "needs a policy" not in t for r in mine for t in map(str, r["flags"])):
        steps.append("replay a fixture (a simulator that answers the candidate's calls)")
    if {"critic_miscalibrated", "critic_biased", "ill_conditioned", "uncorroborated"} & flags \
            and not steps:
        steps.append("a critic over fewer, better-supported features (or more episodes)")
    return "; ".join(steps[:3]) or "more logged episodes"


def verdicts(records: Sequence[Mapping[str, Any]], dataset: str, headline: str,
             min_support: float) -> list[Verdict]:
    """One verdict per candidate evaluated on `dataset`, in the records' order."""
    names = dict.fromkeys(r["policy"] for r in records if r["dataset"] == dataset)
    return [candidate_verdict(records, dataset, c, headline, min_support) for c in names]


def verdict_line(records: Sequence[Mapping[str, Any]], dataset: str, headline: str,
                 min_support: float) -> str:
    """The one line of verdicts of a dataset, shown first (report, OPE summary artifact,
    `tracerl results`): `dataset verdicts: <candidate> <status> ...; next: ... | ...`."""
    found = verdicts(records, dataset, headline, min_support)
    if not found:
        return f"{dataset} verdicts: no candidate evaluated"
    return f"{dataset} verdicts: " + " | ".join(v.text() for v in found)


def verdict_lines_of(ope_dir: Path, headline: str, min_support: float) -> list[str]:
    """`verdict_line` of every dataset in the ope stage's outputs under `ope_dir`."""
    records = _load(ope_dir, "estimates.json") or []
    return [verdict_line(records, d, headline, min_support)
            for d in dict.fromkeys(r["dataset"] for r in records)]
