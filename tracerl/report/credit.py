"""The report's step-credit section (issue 18, item 2): per dataset, the (state, action)
pairs whose advantage under the logging policy is most negative with enough support, and
the episodes whose value dropped most at one step, from the export stage's
`reports/export/credit.json` (tracerl.export.credit.summary)."""

from __future__ import annotations

from pathlib import Path

from tracerl.report.html import _esc, _load, section, table


def credit_section(reports: Path) -> tuple[str, str]:
    found = _load(Path(reports) / "export" / "credit.json")
    if not found or not found.get("datasets"):
        return section("credit", "Step credit", [
            '<p class="note">no step credit: the export stage did not write the weighted or '
            "pairs exports</p>"])
    body = []
    for name, s in found["datasets"].items():
        level = f"{s['level']:.0%}"
        body.append(f"<h3>{_esc(name)}: which steps the logs blame ({s['episodes']} "
                    f"episodes, {s['steps']} steps)</h3>")
        body.append(f'<p class="note">Advantage A(s, a) = Q(s, a) − V(s) under the logging '
                    "policy (its critic, fitted with the behaviour model as target over the "
                    f"critic's features); interval: {_esc(s['interval'])}, {level}; only "
                    f"(state, action) pairs logged at least {s['min_count']} times are "
                    "ranked" + ("" if s["converged"] else "; <b>the critic did not "
                                "converge</b>") + ".</p>")
        worst = s["worst_pairs"]
        if worst:
            body.append('<ul class="credit">' + "".join(
                f"<li>{_esc(w['sentence'])}</li>" for w in worst[:3]) + "</ul>")
            body.append(table(["state", "action", "advantage", f"{level} CI", "Q", "V", "n",
                               "n at state", "behaviour prob", "flags"],
                              [[w["state"], w["action"], w["advantage"],
                                f"{w['advantage_ci'][0]:.3f} to {w['advantage_ci'][1]:.3f}",
                                w["q"], w["v"], w["n"], w["n_state"], w["behavior_prob"],
                                ", ".join(w["flags"])] for w in worst]))
        else:
            body.append('<p class="note">no (state, action) pair with enough support has a '
                        "negative advantage</p>")
        drops = s["largest_drops"]
        if drops:
            body.append("<p>Per episode, the step where the value dropped most "
                        "(r + γ V(s′) − V(s)); the largest drops:</p>")
            body.append(table(["episode", "t", "action", "state", "value change",
                               "V before", "advantage", "n", "flags"],
                              [[d["episode_id"], d["t"], d["action"], d["state"],
                                d["value_change"], d["v_before"], d["advantage"], d["n"],
                                ", ".join(d["flags"])] for d in drops]))
        body.append(f'<p class="note">preference pairs anchored in these logs: '
                    f"{s.get('pairs', 0)}; every episode's drop is in the export's "
                    "credit/episodes.jsonl.</p>")
    return section("credit", "Step credit", body)
