"""The support desk's observable dialogue state, read off the schema-v2 steps that the
`openai-chat` adapter makes of its chat logs (`chat.py`).

`decode` is the one reader: per step (in episode, t order) the action among `sim.ACTIONS`
(a tool call by its tool name, a message by its text), whether the tool answered with an
error, and the observable state before the action (`sim.STATE_VARS`), rebuilt as the
simulator builds it: a question answered reveals its value, a lookup or policy check that
did not error verifies / looks up / checks, an action tool that answered `done` resolves,
and an action tool called with well-formed arguments before an eligible policy check (or
for another request) is a violation. Every state variable only ever grows within an
episode, so the state before each step is a per-episode exclusive running maximum:
vectorised, no loop over episodes or steps.

The state encoder `support_desk` (learners, OPE and coverage) is
`transitions.SupportDeskEncoder`, over `decode`; the verifiers read `decode` alone.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from tracerl.data.verifiers import as_numpy, column
from tracerl.envs.support_desk import chat
from tracerl.envs.support_desk.sim import (
    ACTIONS,
    ADDRESS,
    ASK_ADDRESS,
    ASK_EMAIL,
    ASK_INTENT,
    ASK_ORDER_ID,
    CANCEL,
    CANCEL_ORDER,
    CHECK_POLICY,
    ESCALATE,
    INTENTS,
    ISSUE_REFUND,
    LOOKUP_CUSTOMER,
    LOOKUP_ORDER,
    N_ACTIONS,
    REFUND,
    REPLY_FINAL,
    S_ADDR,
    S_CHECKED,
    S_EMAIL,
    S_ERROR,
    S_INTENT,
    S_LOOKED,
    S_OID,
    S_RESOLVED,
    S_VERIFIED,
    S_VIOLATED,
    STATE_VARS,
    UPDATE_ADDRESS,
)

# The agent's messages, by text (chat.py renders each message action with one fixed text).
MESSAGE_ACTIONS: dict[str, int] = {**{text: a for a, text in chat.ASK.items()},
                                   chat.REPLY_TEXT: REPLY_FINAL, chat.ESCALATE_TEXT: ESCALATE}
TOOL_ACTIONS = (LOOKUP_CUSTOMER, LOOKUP_ORDER, CHECK_POLICY, ISSUE_REFUND, CANCEL_ORDER,
                UPDATE_ADDRESS)
ACTION_TOOLS = {ISSUE_REFUND: REFUND, CANCEL_ORDER: CANCEL, UPDATE_ADDRESS: ADDRESS}
OPENINGS = [chat.OPENING[name] for name in INTENTS[1:]]  # intent k's text at index k - 1
_ELIGIBLE = {'{"eligible":true}': 1, '{"eligible":false}': 2}
_STEP_COLUMNS = ["episode_id", "t", "task", "state", "action", "observation", "reward",
                 "done", "action_logprobs", "extra"]


@dataclass(frozen=True, eq=False)
class DecodedSteps:
    """Steps in (episode, t) order. order: the input row of each; episode: 0.. in
    episode_id order; states: observable state before the action; error: the tool
    answered with an error; task_intent: the intent the task names (0 when none)."""

    order: np.ndarray
    episode: np.ndarray
    episode_ids: list[str]
    t: np.ndarray
    states: np.ndarray
    action: np.ndarray
    error: np.ndarray
    task_intent: np.ndarray

    @property
    def last(self) -> np.ndarray:
        """True on each episode's last step."""
        return np.r_[self.episode[1:] != self.episode[:-1], True] if len(self.episode) \
            else np.zeros(0, dtype=bool)


class DecodeError(ValueError):
    """A step the support desk's logs cannot hold: names the episode, step and reason."""


def _index_codes(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An index_in result as int64 codes (-1 filled in by the caller), also when empty."""
    return as_numpy(arr).astype(np.int64)


def _where(steps: pa.Table, rows: np.ndarray) -> str:
    i = int(rows[0])
    return (f"episode {steps.column('episode_id')[i].as_py()!r}, t={steps.column('t')[i].as_py()}"
            f" ({len(rows)} row(s) in all)")


def _exclusive_running_max(values: np.ndarray, episode: np.ndarray, first: np.ndarray,
                           initial: np.ndarray | int = 0) -> np.ndarray:
    """Per row, the max of `values` over the episode's earlier rows (and `initial`).

    Rows are in (episode, t) order: offsetting each episode by more than any value makes a
    running maximum over the whole array stay inside its episode."""
    values = values.astype(np.int64)
    span = int(values.max(initial=0)) + 1
    running = np.maximum.accumulate(episode * span + values) - episode * span
    before = np.r_[0, running[:-1]] if len(running) else running
    before = np.where(first, 0, before)
    return np.maximum(before, initial)


def _user_reply(steps: pa.Table) -> pa.Array:
    """Per row, the text of the last user message in its observation (null if none)."""
    events = column(steps, "observation.events").combine_chunks() if steps.num_rows \
        else pa.array([], type=steps.schema.field("observation").type.field("events").type)
    flat = pc.list_flatten(events)
    parents = as_numpy(pc.list_parent_indices(events)).astype(np.int64)
    is_user = as_numpy(pc.fill_null(pc.and_(pc.equal(pc.struct_field(flat, "actor"), "user"),
                                            pc.equal(pc.struct_field(flat, "kind"),
                                                     "message")), False)).astype(bool)
    at = np.full(steps.num_rows, -1, dtype=np.int64)
    at[parents[is_user]] = np.flatnonzero(is_user)  # the last one wins
    content = pc.struct_field(flat, "content")
    return content.take(pa.array(np.where(at >= 0, at, 0) if len(content) else
                                 np.zeros(steps.num_rows, dtype=np.int64),
                                 mask=at < 0)) if len(content) else \
        pa.nulls(steps.num_rows, pa.string())


def _is_error(steps: pa.Table) -> np.ndarray:
    """The call failed: observation.error is set, or the tool result is an object with an
    `error` member. Only distinct result texts that mention "error" are parsed."""
    import orjson

    error = as_numpy(column(steps, "observation.error").is_valid()).astype(bool)
    result = column(steps, "observation.tool_result")
    maybe = as_numpy(pc.fill_null(pc.match_substring(result, '"error"'), False)).astype(bool)
    rows = np.flatnonzero(maybe)
    if rows.size:
        texts = result.take(pa.array(rows))
        encoded = pc.dictionary_encode(texts).combine_chunks()
        verdict = []
        for text in encoded.dictionary.to_pylist():
            value = orjson.loads(text)
            verdict.append(isinstance(value, dict) and value.get("error") is not None)
        error[rows] |= np.asarray(verdict, dtype=bool)[as_numpy(encoded.indices).astype(int)]
    return error


# The last table decoded and its decoding: relabel's verifiers (success, tool error,
# escalate, the success check's diagnostics) each decode the same table, the costliest
# part of the stage. Held by a weak reference: the decoding goes when its table does.
_last_decoded: list[tuple[weakref.ref, DecodedSteps]] = []


def decode(steps: pa.Table) -> DecodedSteps:
    """The support desk's actions and observable states of a step table (any row order).
    The same table object decoded again gives the same (read-only) decoding."""
    if _last_decoded and _last_decoded[0][0]() is steps:
        return _last_decoded[0][1]
    decoded = _decode(steps)
    for value in vars(decoded).values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)

    def forget(ref: weakref.ref) -> None:
        if _last_decoded and _last_decoded[0][0] is ref:
            _last_decoded.clear()

    _last_decoded[:] = [(weakref.ref(steps, forget), decoded)]
    return decoded


def _decode(steps: pa.Table) -> DecodedSteps:
    n = steps.num_rows
    order = as_numpy(pc.sort_indices(steps.select(["episode_id", "t"]),
                                     sort_keys=[("episode_id", "ascending"),
                                                ("t", "ascending")])).astype(np.int64)
    steps = steps.take(pa.array(order, type=pa.int64())) if n else steps
    encoded = pc.dictionary_encode(steps.column("episode_id")).combine_chunks() if n else None
    episode = as_numpy(encoded.indices).astype(np.int64) if n else np.zeros(0, np.int64)
    episode_ids = encoded.dictionary.to_pylist() if n else []
    t = as_numpy(steps.column("t")).astype(np.int64)
    first = np.r_[True, episode[1:] != episode[:-1]] if n else np.zeros(0, dtype=bool)
    expected_t = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0)) \
        if n else t
    if np.any(t != expected_t):
        raise DecodeError(f"steps are not t = 0, 1, 2, ... in each episode: "
                          f"{_where(steps, np.flatnonzero(t != expected_t))}")

    # The action: a tool call by its tool name, a message by its text.
    kind = column(steps, "action.type")
    is_call = as_numpy(pc.fill_null(pc.equal(kind, "tool_call"), False)).astype(bool)
    tool = _index_codes(pc.fill_null(pc.index_in(column(steps, "action.tool"),
                                             value_set=pa.array(ACTIONS)), -1))
    message = _index_codes(pc.fill_null(pc.index_in(column(steps, "action.content"),
                                                value_set=pa.array(list(MESSAGE_ACTIONS))), -1))
    message_action = np.asarray(list(MESSAGE_ACTIONS.values()) + [-1])[message]
    action = np.where(is_call, tool, message_action).astype(np.int64)
    bad = (action < 0) | (is_call & ~np.isin(action, TOOL_ACTIONS)) \
        | (~is_call & np.isin(action, TOOL_ACTIONS))
    if bad.any():
        raise DecodeError(f"action is not one of the support desk's {N_ACTIONS} actions "
                          f"(a tool call of {[ACTIONS[a] for a in TOOL_ACTIONS]} or one of "
                          f"its messages): {_where(steps, np.flatnonzero(bad))}")

    error = _is_error(steps) & is_call
    ok = is_call & ~error
    reply = _user_reply(steps)
    answered = as_numpy(pc.fill_null(pc.not_equal(reply, chat.NOT_SURE), False)).astype(bool)
    reply_intent = _index_codes(pc.fill_null(pc.index_in(reply, value_set=pa.array(OPENINGS)),
                                         -1)) + 1
    goal_intent = _index_codes(pc.fill_null(pc.index_in(column(steps, "state.user_goal"),
                                                    value_set=pa.array(OPENINGS)), -1)) + 1
    result = column(steps, "observation.tool_result")
    eligible = np.asarray([0, *_ELIGIBLE.values()])[_index_codes(pc.fill_null(pc.index_in(
        result, value_set=pa.array(list(_ELIGIBLE))), -1)) + 1]

    # What each step reveals (the state after it), then the state before each step.
    sets = np.zeros((n, len(STATE_VARS)), dtype=np.int64)
    sets[:, S_INTENT] = np.where((action == ASK_INTENT) & answered, reply_intent, 0)
    sets[:, S_EMAIL] = (action == ASK_EMAIL) & answered
    sets[:, S_OID] = (action == ASK_ORDER_ID) & answered
    sets[:, S_ADDR] = (action == ASK_ADDRESS) & answered & as_numpy(pc.fill_null(
        pc.not_equal(reply, chat.NO_ADDRESS_CHANGE), False)).astype(bool)
    sets[:, S_VERIFIED] = (action == LOOKUP_CUSTOMER) & ok
    sets[:, S_LOOKED] = (action == LOOKUP_ORDER) & ok
    sets[:, S_CHECKED] = np.where((action == CHECK_POLICY) & ok, eligible, 0)
    sets[:, S_RESOLVED] = np.isin(action, list(ACTION_TOOLS)) & ok
    # The opening message may state the intent: the state every episode starts from.
    initial_intent = goal_intent[np.maximum.accumulate(np.where(first, np.arange(n), 0))] \
        if n else goal_intent
    states = np.zeros((n, len(STATE_VARS)), dtype=np.int8)
    for var in (S_INTENT, S_EMAIL, S_OID, S_ADDR, S_VERIFIED, S_LOOKED, S_CHECKED, S_RESOLVED):
        states[:, var] = _exclusive_running_max(sets[:, var], episode, first,
                                                initial_intent if var == S_INTENT else 0)
    states[:, S_ERROR] = np.where(first, 0, np.r_[False, error[:-1]] if n else error)
    # A violation: an action tool called with arguments the dialogue revealed, on an
    # unresolved request, without an eligible check (or for a request the check was not
    # about); it breaks the rule whether the tool then runs or refuses.
    args_ok = (states[:, S_VERIFIED] == 1) & (states[:, S_OID] == 1)
    args_ok &= np.where(action == ISSUE_REFUND, states[:, S_LOOKED] == 1, True)
    args_ok &= np.where(action == UPDATE_ADDRESS, states[:, S_ADDR] == 1, True)
    tool_intent = np.select([action == a for a in ACTION_TOOLS], list(ACTION_TOOLS.values()), 0)
    call = (tool_intent > 0) & args_ok & (states[:, S_RESOLVED] == 0)
    violated = call & ((states[:, S_CHECKED] != 1) | (states[:, S_INTENT] != tool_intent))
    states[:, S_VIOLATED] = _exclusive_running_max(violated, episode, first)

    task = pc.replace_substring_regex(pc.fill_null(steps.column("task"), ""),
                                      "^support_desk/", "")
    task_intent = _index_codes(pc.fill_null(pc.index_in(task, value_set=pa.array(INTENTS[1:])),
                                        -1)) + 1
    return DecodedSteps(order=order, episode=episode, episode_ids=episode_ids, t=t,
                        states=states, action=action, error=error, task_intent=task_intent)


def logged_behavior_logp(steps: pa.Table, decoded: DecodedSteps) -> np.ndarray:
    """log pi_b(a_t|s_t) per decoded step: the `action_logprobs` column where logged, else
    the conversation's `info.behavior_logprobs` (kept by the adapter under `extra.episode`
    of the done row; k-th entry = k-th assistant message). NaN where neither is logged.
    The done rows' extras are parsed by Arrow's JSON reader in one pass."""
    n = steps.num_rows
    logp = as_numpy(pc.fill_null(steps.column("action_logprobs"), np.nan)).astype(float)[
        decoded.order] if n else np.zeros(0)
    missing = np.isnan(logp)
    if not missing.any() or "extra" not in steps.column_names:
        return logp
    last_rows = np.flatnonzero(decoded.last)
    extras = steps.column("extra").take(pa.array(decoded.order[last_rows]))
    # One newline-delimited document of the extras, joined and parsed by Arrow (C++).
    one_list = pa.ListArray.from_arrays(pa.array([0, len(extras)], type=pa.int32()),
                                        pc.fill_null(extras, "{}").combine_chunks())
    document = pc.binary_join(one_list, "\n")[0].as_buffer()
    schema = pa.schema([("episode", pa.struct([("info", pa.struct([
        ("behavior_logprobs", pa.list_(pa.float64()))]))]))])
    parsed = pa_json.read_json(pa.BufferReader(document), parse_options=pa_json.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="ignore"))
    lists = pc.struct_field(pc.struct_field(parsed.column("episode"), "info"),
                            "behavior_logprobs").combine_chunks()
    lengths = as_numpy(pc.fill_null(pc.list_value_length(lists), -1)).astype(np.int64)
    steps_per_episode = np.diff(np.r_[-1, last_rows])
    wrong = (lengths >= 0) & (lengths != steps_per_episode)
    if wrong.any():
        e = int(np.flatnonzero(wrong)[0])
        raise DecodeError(f"episode {decoded.episode_ids[e]!r}: info.behavior_logprobs has "
                          f"{lengths[e]} entries for {steps_per_episode[e]} steps "
                          f"({int(wrong.sum())} episode(s) in all)")
    has = np.repeat(lengths >= 0, steps_per_episode)
    values = as_numpy(pc.list_flatten(lists)).astype(float)
    from_info = np.full(n, np.nan)
    from_info[has] = values
    return np.where(missing, from_info, logp)


def state_labels(states: np.ndarray) -> list[str]:
    """A readable key per distinct observable state, e.g. ``intent=refund|email|verified``."""
    names = ("email", "verified", "order_id", "looked_up", None, "address", "resolved",
             "last_error", "violated")
    keys = []
    for row in states.tolist():
        parts = [f"intent={INTENTS[row[0]]}"]
        parts += [name for name, v in zip(names, row[1:], strict=True) if name and v]
        if row[S_CHECKED]:
            parts.append("eligible" if row[S_CHECKED] == 1 else "not_eligible")
        keys.append("|".join(parts))
    return keys
