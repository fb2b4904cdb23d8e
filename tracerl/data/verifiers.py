"""Versioned verifiers: functions of the logged step table that produce one reward component.

Generic verifiers live here; a fixture brings its own (``tracerl.envs.<name>``). The registry
``tracerl.config.registries.VERIFIERS`` is the one source of verifier versions for relabel
and OPE.

A verifier is named ``name@version`` and reads only what the log recorded (never hidden
environment state), so rewards can be recomputed offline and audited. ``score`` returns one
float per row, aligned with the table's rows; tables may hold many episodes in any row order.

A team's own verifier is a plugin: params name it by import path, ``package.module:attr``
(``relabel.verifiers: [mychecks.outcomes:deployed]``), and the same registry resolves it
(`from_plugin`): a `Verifier` subclass (instantiated with its defaults), an instance, or a
plain function ``steps -> one float per row`` (its ``component`` and ``version``
attributes when it sets them, else its name and "1").

Logs that carry no outcome (coding-agent sessions, OTel spans, most chat logs) get one from
what they do carry: the last test or shell command's exit status (`CommandExitStatus`) and
explicit user feedback (`UserFeedback`). A relabelled dataset whose episode returns are all
one value answers nothing downstream: `require_varied_returns` stops the relabel stage
naming what to add.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.config.registries import VERIFIERS

# --- Column helpers ----------------------------------------------------------------------
# Columns stay chunked (a concatenated table has one chunk per part); only numpy results
# are concatenated, so no wide column is copied.


def column(steps: pa.Table, path: str) -> pa.ChunkedArray:
    """One (possibly nested, dotted) column; a null parent struct gives null children."""
    name, *rest = path.split(".")
    arr = steps.column(name)
    for child in rest:
        arr = pc.struct_field(arr, child)  # honours parent validity, unlike .field()
    return arr


def as_numpy(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An Arrow array as numpy (nulls become NaN or None per type); empty gives float64."""
    return arr.to_numpy(zero_copy_only=False) if len(arr) else np.zeros(0)


def _bool(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean array as numpy, null counting as False."""
    return as_numpy(pc.fill_null(arr, False)).astype(bool)


def encode(arr: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dense int code per value (-1 for null) and the distinct values they index."""
    enc = pc.dictionary_encode(arr)  # one dictionary shared by all chunks
    chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
    if not chunks:
        return np.zeros(0, dtype=np.int64), pa.array([], type=arr.type)
    codes = np.concatenate([as_numpy(pc.fill_null(c.indices, -1)) for c in chunks])
    return codes.astype(np.int64), chunks[0].dictionary


def episode_codes(steps: pa.Table) -> tuple[np.ndarray, int]:
    """Dense integer code of each row's episode_id, and the number of episodes."""
    codes, names = encode(column(steps, "episode_id"))
    return codes, len(names)


def flatten_lists(arr: pa.ChunkedArray) -> tuple[np.ndarray, pa.ChunkedArray]:
    """(row index of each element, the elements) of a list or map column.

    Built from value lengths, not list_parent_indices: the latter counts the hidden
    values of a null list while list_flatten drops them.
    """
    list_type = arr.type
    if pa.types.is_map(list_type):  # list_flatten does not take maps; same layout as lists
        list_type = pa.list_(pa.struct([list_type.key_field, list_type.item_field]))
    parents, values, start = [np.zeros(0, dtype=np.int64)], [], 0
    for chunk in arr.cast(list_type).chunks:
        lengths = as_numpy(pc.fill_null(pc.list_value_length(chunk), 0)).astype(np.int64)
        parents.append(np.repeat(np.arange(start, start + len(chunk)), lengths))
        values.append(pc.list_flatten(chunk))
        start += len(chunk)
    return np.concatenate(parents), pa.chunked_array(values, type=list_type.value_type)


def _json_numbers(text: pa.ChunkedArray, key: str | None = None) -> np.ndarray:
    """Numeric value of each JSON text (or of its ``key`` field); NaN when absent/non-numeric.

    Parses only the distinct texts: logs repeat a handful of values many times.
    """
    codes, distinct = encode(text)
    values = np.full(len(distinct) + 1, np.nan)  # last slot, index -1: null text
    for i, raw in enumerate(distinct.to_pylist()):
        try:
            v: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if key is not None:
            v = v.get(key) if isinstance(v, dict) else None
        # bool is an int subclass but is not a number here.
        if isinstance(v, int | float) and not isinstance(v, bool):
            values[i] = float(v)
    return values[codes]


def _last_per_episode(codes: np.ndarray, t: np.ndarray, mask: np.ndarray,
                      values: np.ndarray, n_episodes: int) -> np.ndarray:
    """Per episode, `values` at the latest-t row where `mask` holds; NaN if none."""
    out = np.full(n_episodes, np.nan)
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return out
    rows = rows[np.lexsort((t[rows], codes[rows]))]
    ep = codes[rows]
    last = np.r_[ep[1:] != ep[:-1], True]
    out[ep[last]] = values[rows[last]]
    return out


def no_error(steps: pa.Table) -> np.ndarray:
    """True where observation.error is null (the call was accepted)."""
    return as_numpy(column(steps, "observation.error").is_null()).astype(bool)


def call_valid(steps: pa.Table) -> np.ndarray:
    """A valid call: action.type is tool_call, the tool is offered, no observation.error."""
    n = steps.num_rows
    parent, offered_names = flatten_lists(column(steps, "state.available_tools"))
    # Compare integer codes, not strings: code each offered name, then look the row's
    # tool up in the same dictionary (-1 when never offered anywhere).
    offered_code, names = encode(offered_names)
    offered_code[offered_code < 0] = -2  # a null name matches nothing, not a null tool
    tool_code = as_numpy(pc.fill_null(pc.index_in(column(steps, "action.tool"),
                                                value_set=names), -1)).astype(np.int64)
    same = offered_code == tool_code[parent]
    offered = np.bincount(parent[same], minlength=n) > 0
    is_call = _bool(pc.equal(column(steps, "action.type"), "tool_call"))
    return is_call & offered & no_error(steps)


# --- Verifiers ---------------------------------------------------------------------------


class Verifier(ABC):
    """A versioned scorer of step rows producing one reward component."""

    name: str
    version: str
    component: str
    inputs: str  # one line: which logged fields it reads, for provenance
    # The step-table columns (top-level or dotted) `score` and `diagnostics` read, so a
    # stage can read only those; None: any column (the whole table is read).
    columns: tuple[str, ...] | None = None

    @property
    def id(self) -> str:
        """The registry key, ``name@version``."""
        return f"{self.name}@{self.version}"

    @abstractmethod
    def score(self, steps: pa.Table) -> np.ndarray:
        """One float per row of `steps`, aligned with its rows."""

    def diagnostics(self, steps: pa.Table) -> dict[str, Any] | None:
        """What the verifier can say beyond its scores (e.g. agreement with a logged
        judge), JSON-ready with a one-line `summary`; None when it has nothing to add."""
        return None

    def __repr__(self) -> str:
        return f"<Verifier {self.id} -> {self.component}>"


class FormatValid(Verifier):
    """1.0 for a valid call (tool_call, tool in state.available_tools, no error), else 0.0."""

    name, version, component = "format_valid", "1", "format_valid"
    inputs = "action.type; action.tool; state.available_tools; observation.error"
    columns = ("action.type", "action.tool", "state.available_tools", "observation.error")

    def score(self, steps: pa.Table) -> np.ndarray:
        return call_valid(steps).astype(np.float64)


class ToolErrorPenalty(Verifier):
    """-1.0 where observation.error is set, else 0.0."""

    name, version, component = "tool_error_penalty", "1", "tool_error_penalty"
    inputs = "observation.error"
    columns = ("observation.error",)

    def score(self, steps: pa.Table) -> np.ndarray:
        return np.where(no_error(steps), 0.0, -1.0)


class CostPenalty(Verifier):
    """-cost on each valid call (as format_valid judges it), 0.0 on an invalid one.

    A different cost is a different reward: register it under its own version.
    """

    name, component = "cost_penalty", "cost_penalty"
    columns = FormatValid.columns

    def __init__(self, cost: float = 0.02, version: str = "1") -> None:
        self.cost = float(cost)
        self.version = version
        self.inputs = (f"action.type; action.tool; state.available_tools; observation.error "
                       f"(cost {self.cost:g} per valid call)")

    def score(self, steps: pa.Table) -> np.ndarray:
        return np.where(call_valid(steps), -self.cost, 0.0)


# --- tau2-bench -------------------------------------------------------------------------
# The tau2 adapter puts the task definition (`extra.task`, with evaluation_criteria) and the
# simulation's reward_info (`extra.episode.reward_info`) on each episode's done row.


def _done_extras(steps: pa.Table) -> tuple[np.ndarray, list[Any]]:
    """(row index of each done row, its parsed `extra` object or None)."""
    rows = np.flatnonzero(_bool(column(steps, "done")))
    texts = column(steps, "extra").take(rows).to_pylist() if "extra" in steps.column_names \
        else [None] * len(rows)
    return rows, [orjson.loads(t) if t is not None else None for t in texts]


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def gold_action_taken(gold: dict, calls: list[tuple[str, Any]]) -> bool:
    """tau2's rule: some call has the gold action's name, and the arguments named by
    `compare_args` (all the call's arguments when it is null; none: any call) are equal."""
    gold_args = gold.get("arguments") if isinstance(gold.get("arguments"), dict) else {}
    for name, args in calls:
        if name != gold.get("name"):
            continue
        args = args if isinstance(args, dict) else {}
        keys = gold.get("compare_args")
        keys = list(args) if keys is None else keys
        if not keys:
            return True
        if {k: v for k, v in args.items() if k in keys} == \
                {k: v for k, v in gold_args.items() if k in keys}:
            return True
    return False


class Tau2ActionMatch(Verifier):
    """Whether each of the task's gold actions (evaluation_criteria.actions: name,
    arguments, compare_args) was taken in the episode, decided from the logged tool calls
    (the agent's rows and the user's/environment's calls in observation.events) and
    independently of tau2's own logged action_checks. Score: on the done row, 1.0 when every
    gold action was taken (also when the task lists none), else 0.0; 0.0 on other rows and
    on episodes with no task definition. `diagnostics` compares each decision with the
    logged action_checks."""

    name, version, component = "tau2_action_match", "1", "action_match"
    inputs = ("extra.task.evaluation_criteria.actions of the done row; action.tool and "
              "action.arguments of tool_call rows; tool_call events in observation.events")

    def decisions(self, steps: pa.Table) -> list[dict[str, Any]]:
        """One entry per (episode, gold action): ours (`taken`) and tau2's logged verdict
        (`logged`, None when the log has no action_checks entry for it)."""
        if steps.num_rows == 0:
            return []
        done_rows, extras = _done_extras(steps)
        codes, _ = episode_codes(steps)
        golds = {int(codes[r]): (r, _get(x, "task", "evaluation_criteria", "actions"),
                                 _get(x, "episode", "reward_info", "action_checks"))
                 for r, x in zip(done_rows, extras, strict=True)}
        names = {g.get("name") for _, actions, _ in golds.values() for g in actions or []
                 if isinstance(g, dict)}
        calls = self._calls(steps, codes, names)
        episode_ids = column(steps, "episode_id")
        out = []
        for code, (row, actions, checks) in golds.items():
            if not isinstance(actions, list):
                continue
            logged = {_get(c, "action", "action_id"): c.get("action_match")
                      for c in checks or [] if isinstance(c, dict)}
            for gold in actions:
                if not isinstance(gold, dict):
                    continue
                verdict = logged.get(gold.get("action_id"))
                out.append({"episode_id": episode_ids[int(row)].as_py(),
                            "action_id": gold.get("action_id"), "name": gold.get("name"),
                            "taken": gold_action_taken(gold, calls.get(code, [])),
                            "logged": verdict if isinstance(verdict, bool) else None})
        return out

    @staticmethod
    def _calls(steps: pa.Table, codes: np.ndarray, names: set) -> dict[int, list]:
        """Per episode code, the (tool, arguments) of every logged tool call whose tool is
        one of `names` (only those can match a gold action)."""
        wanted = pa.array(sorted(n for n in names if isinstance(n, str)), pa.string())
        tool = column(steps, "action.tool")
        rows = np.flatnonzero(_bool(pc.equal(column(steps, "action.type"), "tool_call"))
                              & _bool(pc.is_in(tool, value_set=wanted)))
        calls: dict[int, list] = {}
        args_text = column(steps, "action.arguments").take(rows).to_pylist()
        for r, name, text in zip(rows, tool.take(rows).to_pylist(), args_text, strict=True):
            calls.setdefault(int(codes[r]), []).append(
                (name, orjson.loads(text) if text is not None else None))
        events = column(steps, "observation.events")
        parent, flat = flatten_lists(events)
        if len(flat):
            kind = pc.struct_field(flat, "kind")
            ev_tool = pc.struct_field(flat, "tool")
            hit = np.flatnonzero(_bool(pc.equal(kind, "tool_call"))
                                 & _bool(pc.is_in(ev_tool, value_set=wanted)))
            texts = pc.struct_field(flat, "arguments").take(hit).to_pylist()
            for i, name, text in zip(hit, ev_tool.take(hit).to_pylist(), texts, strict=True):
                calls.setdefault(int(codes[parent[i]]), []).append(
                    (name, orjson.loads(text) if text is not None else None))
        return calls

    def score(self, steps: pa.Table) -> np.ndarray:
        out = np.zeros(steps.num_rows)
        if steps.num_rows == 0:
            return out
        done_rows, extras = _done_extras(steps)
        decided: dict[str, bool] = {}
        for d in self.decisions(steps):
            decided[d["episode_id"]] = decided.get(d["episode_id"], True) and d["taken"]
        ids = column(steps, "episode_id").take(done_rows).to_pylist()
        for r, episode, extra in zip(done_rows, ids, extras, strict=True):
            actions = _get(extra, "task", "evaluation_criteria", "actions")
            if isinstance(actions, list):
                out[r] = 1.0 if decided.get(episode, True) else 0.0
        return out

    def diagnostics(self, steps: pa.Table) -> dict[str, Any]:
        decisions = self.decisions(steps)
        compared = [d for d in decisions if d["logged"] is not None]
        agree = sum(d["taken"] == d["logged"] for d in compared)
        share = agree / len(compared) if compared else None
        return {
            "gold_actions": len(decisions),
            "checks_compared": len(compared),
            "agree": agree,
            "agreement": share,
            "taken": sum(d["taken"] for d in decisions),
            "disagreements": [d for d in compared if d["taken"] != d["logged"]][:20],
            "summary": (f"agrees with the logged action_checks on {agree}/{len(compared)} "
                        f"checks ({share:.1%})" if compared else
                        "no logged action_checks to compare with"),
        }


class Tau2Outcome(Verifier):
    """The episode's logged outcome as a reward component: on the done row, the reward the
    log recorded (tau2: `reward_info.reward`; after a relabel, `reward_logged`), 0.0 on
    other rows and where none was logged."""

    name, version, component = "tau2_outcome", "1", "task_success"
    inputs = ("reward of the done row as logged (tau2 reward_info.reward, kept in "
              "reward_logged after a relabel)")

    def score(self, steps: pa.Table) -> np.ndarray:
        name = "reward_logged" if "reward_logged" in steps.column_names else "reward"
        reward = as_numpy(column(steps, name)).astype(np.float64)
        done = _bool(column(steps, "done"))
        return np.where(done & np.isfinite(reward), reward, 0.0)


# --- Outcomes for logs that carry none --------------------------------------------------
# A shell command is a call whose arguments hold a `command` (or `cmd`): Claude Code's Bash,
# Codex's shell / exec_command, Cursor's run_terminal_cmd, Cline's execute_command,
# OpenHands' and SWE-agent's bash tools all log it so.
TEST_COMMAND = re.compile(
    r"(?i)(^|[\s;&|(])(py\.?test|python3? -m (pytest|unittest)|tox|nox|mix test|go test|"
    r"cargo (test|nextest)|(npm|pnpm|yarn|bun)( run)? test|jest|vitest|mocha|rspec|"
    r"phpunit|(mvn|gradle|gradlew|\./gradlew) test|dotnet test|ctest|make (test|check)|"
    r"bazel test|deno test|swift test|sbt test)\b")
# An exit status a shell tool reports in its result (Claude Code: "Exit code 1"), and a
# test runner's count of failures (pytest, mix, jest, cargo, go).
EXIT_CODE = re.compile(r"(?i)\bexit (code|status):? *([0-9]+)")
FAILURES = re.compile(r"(?i)\b([1-9][0-9]*) (failures?|failed|errors?)\b|^(FAIL|--- FAIL)\b",
                      re.MULTILINE)


def _command_of(arguments: str | None) -> str | None:
    """The shell command of a call (None: not a shell command)."""
    try:
        args = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return None
    command = args.get("command", args.get("cmd")) if isinstance(args, dict) else None
    if isinstance(command, list):
        command = " ".join(map(str, command))
    return command if isinstance(command, str) and command.strip() else None


def _json_text(text: str) -> str:
    """A tool result stored as JSON text: a string's own text (its lines), else as is."""
    if text.startswith('"'):
        try:
            return str(orjson.loads(text))
        except orjson.JSONDecodeError:
            pass
    return text


def command_failed(result: str | None, error: str | None) -> bool:
    """Whether a shell call failed: the log marks it an error, its result reports a non-zero
    exit status, or a test runner's output counts failures."""
    text = "\n".join(_json_text(t) for t in (error, result) if t)
    code = EXIT_CODE.search(text)
    if code is not None:
        return int(code.group(2)) != 0
    return error is not None or FAILURES.search(text) is not None


class CommandExitStatus(Verifier):
    """The outcome of a coding-agent session: on each episode's done row, 1.0 when its
    last test command (pytest, go test, npm test, mix test, ...; else its last shell
    command) succeeded, 0.0 when it failed (an error result, a non-zero exit code, a
    runner's failure count) or the episode ran none; 0.0 on other rows."""

    name, version, component = "command_exit_status", "1", "command_success"
    inputs = ("action.tool and action.arguments (command) of tool_call rows; their "
              "observation.tool_result and observation.error; done")

    def outcomes(self, steps: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Per episode code: (the deciding command's success: 1.0, 0.0, NaN for none,
        whether it was a test command)."""
        codes, n_ep = episode_codes(steps)
        success, is_test = np.full(n_ep, np.nan), np.zeros(n_ep, dtype=bool)
        if not steps.num_rows:
            return success, is_test
        calls = np.flatnonzero(_bool(pc.equal(column(steps, "action.type"), "tool_call")))
        # each distinct arguments text parsed once; a null one (code -1) is no command
        arg_codes, distinct = encode(column(steps, "action.arguments").take(calls))
        commands = [_command_of(text) for text in distinct.to_pylist()]
        is_command = np.asarray([c is not None for c in commands] + [False])
        is_test = np.asarray([c is not None and TEST_COMMAND.search(c) is not None
                              for c in commands] + [False])
        t = as_numpy(column(steps, "t")).astype(np.int64)
        index = np.arange(steps.num_rows, dtype=np.float64)

        def last_row(rows: np.ndarray) -> np.ndarray:  # per episode, NaN where none
            mask = np.zeros(steps.num_rows, dtype=bool)
            mask[rows] = True
            return _last_per_episode(codes, t, mask, index, n_ep)

        last_test = last_row(calls[is_test[arg_codes]])
        by_test = np.isfinite(last_test)
        deciding = np.where(by_test, last_test, last_row(calls[is_command[arg_codes]]))
        decided = np.isfinite(deciding)
        rows = deciding[decided].astype(np.int64)  # only the deciding results are read
        results = column(steps, "observation.tool_result").take(rows).to_pylist()
        errors = column(steps, "observation.error").take(rows).to_pylist()
        success[decided] = [0.0 if command_failed(r, e) else 1.0
                            for r, e in zip(results, errors, strict=True)]
        is_test = by_test
        return success, is_test

    def score(self, steps: pa.Table) -> np.ndarray:
        out = np.zeros(steps.num_rows)
        if not steps.num_rows:
            return out
        codes, _ = episode_codes(steps)
        success, _ = self.outcomes(steps)
        done = np.flatnonzero(_bool(column(steps, "done")))
        out[done] = np.nan_to_num(success[codes[done]], nan=0.0)
        return out

    def diagnostics(self, steps: pa.Table) -> dict[str, Any]:
        success, is_test = self.outcomes(steps)
        ran = np.isfinite(success)
        return {"episodes": len(success), "with_command": int(ran.sum()),
                "decided_by_tests": int(is_test.sum()), "succeeded": int((success == 1).sum()),
                "summary": f"{int(ran.sum())} of {len(success)} episodes ran a shell command "
                           f"({int(is_test.sum())} a test); the last succeeded in "
                           f"{int((success == 1).sum())}"}


# Explicit feedback, as a user writes it right after the agent's turn: a short message
# that starts with it (a longer one is a new instruction, whatever words it holds).
POSITIVE = re.compile(
    r"(?i)^\W*(👍|\+1\b|(great|perfect|nice|awesome|excellent)[,.! ]*(thanks?|thank you|"
    r"it works|that worked|works)|(thanks?|thank you)[,.! ]*(it|that|this) (works|worked|"
    r"fixed it|did it)|(it|that|this)( now)? (works|worked|fixed it|did the trick)|"
    r"works( now| great| perfectly)?\b|lgtm\b|looks good\b|solved\b|perfect\b)")
NEGATIVE = re.compile(
    r"(?i)^\W*(no\b[,.!]*\s*)?(👎|-1\b|"
    r"(it|that|this)( still)? (doesn't|does not|didn't|did not) work|"
    r"(still|it's still|it is still) (broken|failing|not working|wrong)|"
    r"(that's|that is|this is|it's|it is) (wrong|broken|not (right|what i)|incorrect)|"
    r"(doesn't|does not|didn't|did not) work|not working|wrong\b)")
FEEDBACK_MAX_CHARS = 200


def feedback_value(text: str | None) -> float:
    """+1.0 for explicit approval ("that worked", 👍), -1.0 for explicit disapproval ("it
    still fails", 👎), 0.0 otherwise (or for a message too long to be only feedback)."""
    if not text or len(text) > FEEDBACK_MAX_CHARS:
        return 0.0
    text = text.replace("\u2019", "'")  # typographic apostrophes, as chat UIs send them
    if NEGATIVE.search(text):
        return -1.0
    return 1.0 if POSITIVE.search(text) else 0.0


class UserFeedback(Verifier):
    """Explicit user feedback on the agent's turn: on the row whose observation holds the
    user's next message, +1.0 when it approves (`feedback_value`: "that worked", "thanks,
    it works", 👍), -1.0 when it disapproves ("it still fails", "that's wrong", 👎), 0.0
    otherwise. Ratings a log stores as scores (Langfuse) are its logged reward already."""

    name, version, component = "user_feedback", "1", "user_feedback"
    inputs = "observation.events (the user's messages: actor user, kind message)"

    def score(self, steps: pa.Table) -> np.ndarray:
        out = np.zeros(steps.num_rows)
        if not steps.num_rows:
            return out
        parent, events = flatten_lists(column(steps, "observation.events"))
        if not len(events):
            return out
        user = np.flatnonzero(_bool(pc.equal(pc.struct_field(events, "actor"), "user"))
                              & _bool(pc.equal(pc.struct_field(events, "kind"), "message")))
        texts = pc.struct_field(events, "content").take(user).to_pylist()
        for i, text in zip(user, texts, strict=True):  # the row's last user message counts
            out[parent[i]] = feedback_value(text if isinstance(text, str) else None)
        return out

    def diagnostics(self, steps: pa.Table) -> dict[str, Any]:
        s = self.score(steps)
        return {"approvals": int((s > 0).sum()), "disapprovals": int((s < 0).sum()),
                "summary": f"{int((s > 0).sum())} approvals and {int((s < 0).sum())} "
                           f"disapprovals in the users' messages"}


# --- Datasets whose rewards say nothing --------------------------------------------------


class ConstantRewards(ValueError):
    """Every episode of the relabelled datasets has the same return: nothing downstream can
    tell a good action from a bad one. The message names what to add."""


def return_summary(steps: pa.Table) -> dict[str, float | int]:
    """The spread of a labelled table's episode returns (undiscounted sums of `reward`):
    episodes, min, max (JSON-ready; what `require_varied_returns` reads)."""
    codes, n_ep = episode_codes(steps)
    reward = np.nan_to_num(as_numpy(column(steps, "reward")).astype(np.float64))
    returns = np.bincount(codes, weights=reward, minlength=n_ep) if n_ep else np.zeros(0)
    return {"episodes": int(n_ep), "min": float(returns.min(initial=0.0) if n_ep else 0.0),
            "max": float(returns.max(initial=returns.min(initial=0.0)) if n_ep else 0.0)}


def require_varied_returns(summaries: Mapping[str, Mapping[str, Any]],
                           verifiers: Sequence[str]) -> None:
    """ConstantRewards when the episode returns of every dataset (their `returns`:
    `return_summary`) are one and the same value: the logs carry no outcome the verifiers
    read, and every estimate, SFT record and preference pair after would be empty."""
    spreads = {name: s["returns"] for name, s in summaries.items() if "returns" in s}
    if not spreads or sum(s["episodes"] for s in spreads.values()) == 0:
        return
    values = {v for s in spreads.values() if s["episodes"] for v in (s["min"], s["max"])}
    if len(values) > 1:
        return
    episodes = sum(s["episodes"] for s in spreads.values())
    builtins = {"command_exit_status@1": "coding-agent sessions: the last test or shell "
                                         "command's exit status; weight command_success",
                "user_feedback@1": "explicit user feedback such as 'that worked'; weight "
                                   "user_feedback"}
    missing = [f"{vid} ({why})" for vid, why in builtins.items() if vid not in verifiers]
    found = [vid for vid in builtins if vid in verifiers]
    add = (f"an outcome verifier: {', '.join(missing)}, or your own" if missing else
           "your own outcome verifier")
    raise ConstantRewards(
        f"every episode's return is {values.pop():g} ({episodes} episode(s) of "
        f"{', '.join(spreads)}; verifiers {', '.join(verifiers)}): these logs carry no "
        f"outcome those verifiers read"
        + (f" ({', '.join(found)} found no shell command or explicit feedback, or their "
           f"weight is 0)" if found else "")
        + f", so no policy can be told from another. Add to relabel.verifiers (with a "
        f"weight for its component in relabel.weights) {add}, named by import path "
        f"(package.module:verifier); or log a reward with each episode (tau2_outcome@1 "
        f"reads it)")


# --- Registry ----------------------------------------------------------------------------


def register(verifier: Verifier, *, replace: bool = False) -> Verifier:
    """Add `verifier` under its id at run time (e.g. a notebook's own version); an id
    already taken needs replace=True. Pipelines name verifiers declared in
    ``tracerl.config.registries`` or by a fixture."""
    VERIFIERS.add(verifier.id, verifier, replace=replace)
    return verifier


def get_verifier(verifier_id: str) -> Verifier:
    """The verifier `name@version` (generic or a fixture's) or a plugin's
    `package.module:attr`; UnknownName (a KeyError) listing known ids otherwise."""
    return VERIFIERS.get(verifier_id)


class FunctionVerifier(Verifier):
    """A plugin's plain function `steps -> one float per row`, as a verifier."""

    def __init__(self, function: Callable[[pa.Table], Any], name: str) -> None:
        self.function = function
        self.name = name
        self.version = str(getattr(function, "version", "1"))
        self.component = str(getattr(function, "component", name))
        self.inputs = str(getattr(function, "inputs", f"what {name} reads (a plugin)"))

    def score(self, steps: pa.Table) -> np.ndarray:
        return np.asarray(self.function(steps), dtype=np.float64)


def from_plugin(target: str, item: Any) -> Verifier:
    """The verifier a plugin's `package.module:attr` names (see the module docstring); a
    TypeError saying what it is otherwise."""
    if isinstance(item, type) and issubclass(item, Verifier):
        return item()
    if isinstance(item, Verifier):
        return item
    if callable(item):
        return FunctionVerifier(item, target.rpartition(":")[2])
    raise TypeError(f"verifier plugin {target!r} is a {type(item).__name__}, not a Verifier "
                    f"subclass, a Verifier or a function of the step table")
