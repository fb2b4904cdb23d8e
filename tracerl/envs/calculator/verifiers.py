"""The calculator fixture's verifier (declared in its `FIXTURE`): task success re-derived
from the logged lookups and the final answer."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.verifiers import (
    Verifier,
    _bool,
    _json_numbers,
    _last_per_episode,
    as_numpy,
    column,
    episode_codes,
    no_error,
)

FINAL_TOOL = "final"


class CalculatorExact(Verifier):
    """Task success of the calculator toy, re-derived from the logged lookups and answer.

    On an accepted final call (tool ``final`` or action.type final_answer, no error): +1 if
    arguments.answer == task(x, y), where x and y are the episode's logged lookup_x and
    lookup_y tool_results, else -1 (also when any of them is missing). 0 on other rows: a
    rejected final call is penalised by tool_error_penalty, not here (as the env does).
    """

    name, version, component = "calculator_exact", "1", "task_success"
    inputs = ("task; observation.tool_result of accepted lookup_x/lookup_y; "
              "action.arguments.answer of the accepted final call")
    columns = ("episode_id", "t", "task", "action.type", "action.tool", "action.arguments",
               "observation.tool_result", "observation.error")

    def score(self, steps: pa.Table) -> np.ndarray:
        n = steps.num_rows
        if n == 0:
            return np.zeros(0)
        codes, n_ep = episode_codes(steps)
        t = as_numpy(column(steps, "t"))
        tool = column(steps, "action.tool")
        ok = no_error(steps)

        def lookup(name: str) -> np.ndarray:
            mask = _bool(pc.equal(tool, name)) & ok
            rows = np.flatnonzero(mask)
            vals = np.full(n, np.nan)
            vals[rows] = _json_numbers(column(steps, "observation.tool_result").take(rows))
            return _last_per_episode(codes, t, mask, vals, n_ep)[codes]

        x, y = lookup("lookup_x"), lookup("lookup_y")
        is_final = ok & (_bool(pc.equal(tool, FINAL_TOOL))
                         | _bool(pc.equal(column(steps, "action.type"), "final_answer")))
        final_rows = np.flatnonzero(is_final)
        answer = _json_numbers(column(steps, "action.arguments").take(final_rows), "answer")

        task = column(steps, "task").take(final_rows)
        xf, yf = x[final_rows], y[final_rows]
        # An unknown or null task gives NaN, which never equals an answer.
        expected = np.select(
            [_bool(pc.equal(task, "add")), _bool(pc.equal(task, "sub")),
             _bool(pc.equal(task, "mul"))],
            [xf + yf, xf - yf, xf * yf], np.nan)
        out = np.zeros(n)
        out[final_rows] = np.where(answer == expected, 1.0, -1.0)  # NaN compares False
        return out

