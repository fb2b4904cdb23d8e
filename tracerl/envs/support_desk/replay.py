"""How replay (`tracerl.ope.replay`) follows the support desk.

Every tool belongs to its episode: a call is served the response the log recorded for the
same tool and canonical arguments in the same episode; a call the episode never made is
unsupported (the replay stops there). Arguments are what the dialogue revealed, as the
simulator's agent sends them: a value the agent knows is the one the episode's own calls
used when the logged agent knew it; one it does not know is made up ("000000", ...), so
a call on made-up arguments is served only where the logged agent made the same mistake.

A question to the user is served like a tool: the k-th time the replay asks for the email
it gets the user's reply to the logged agent's k-th such question (the user's answers are
random: the k-th answer is what this user said; a (k+1)-th question the log never asked is
unsupported). reply_final and escalate end the episode and need no response.

Some answers depend on the session as well as the arguments: lookup_order and
check_policy error before the customer is verified, an action tool too, and a second action
"already processed". Those calls are served only a recording made in the same session
(verified; verified and resolved), so an authenticated replay is never served the log's
"authentication required".
"""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracerl.data.verifiers import as_numpy, column
from tracerl.envs.support_desk import chat
from tracerl.envs.support_desk.encoder import (
    ACTION_TOOLS,
    MESSAGE_ACTIONS,
    OPENINGS,
    _index_codes,
    _is_error,
    _user_reply,
    decode,
)
from tracerl.envs.support_desk.sim import (
    ACTIONS,
    ASK_ADDRESS,
    ASK_EMAIL,
    ASK_INTENT,
    ASK_ORDER_ID,
    CANCEL_ORDER,
    CHECK_POLICY,
    ESCALATE,
    INTENTS,
    ISSUE_REFUND,
    LOOKUP_CUSTOMER,
    LOOKUP_ORDER,
    REPLY_FINAL,
    S_RESOLVED,
    S_VERIFIED,
    STATE_VARS,
    UPDATE_ADDRESS,
)
from tracerl.ope.replay import EPISODE, TERMINAL

ASKS = (ASK_INTENT, ASK_EMAIL, ASK_ORDER_ID, ASK_ADDRESS)
# Made-up argument values (chat._tool_call): what the agent sends before it knows.
MADE_UP = {"email": '"customer@example.com"', "order_id": '"000000"', "amount": "0.0",
           "address": '""'}
_TOKEN = {"email": r'"email":(?P<v>"(?:[^"\\]|\\.)*")',
          "order_id": r'"order_id":(?P<v>"(?:[^"\\]|\\.)*")',
          "amount": r'"amount":(?P<v>-?[0-9][0-9.eE+-]*)',
          "address": r'"address":(?P<v>"(?:[^"\\]|\\.)*")'}
_COUNT = {a: f"asked_{ACTIONS[a]}" for a in ASKS}


def _struct_with(column_: pa.ChunkedArray, replace: dict[str, pa.Array]) -> pa.Array:
    arr = column_.combine_chunks()
    children = [replace.get(f.name, arr.field(i)) for i, f in enumerate(arr.type)]
    children = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in children]
    return pa.StructArray.from_arrays(children, fields=list(arr.type), mask=arr.is_null())


def session_code(action: np.ndarray, verified: np.ndarray,
                 resolved: np.ndarray) -> np.ndarray:
    """What a tool's answer depends on beyond its arguments: whether the customer is
    verified (lookups of the order, the policy check, action tools), and whether the
    request was already resolved (action tools). 0 for the other actions."""
    needs_login = np.isin(action, (LOOKUP_ORDER, CHECK_POLICY, *ACTION_TOOLS))
    return np.where(needs_login, verified, 0) \
        + 2 * np.where(np.isin(action, list(ACTION_TOOLS)), resolved, 0)


class SupportDeskReplay:
    """Replay adapter of the support desk (`tracerl.ope.replay.ReplayAdapter`)."""

    actions = ACTIONS
    sessions = 4  # session_code: verified + 2 * resolved
    tool_scope = {**{name: EPISODE for name in ACTIONS},
                  ACTIONS[REPLY_FINAL]: TERMINAL, ACTIONS[ESCALATE]: TERMINAL}

    def __init__(self) -> None:
        self._entities: dict[str, pd.Series] = {}
        self._known: dict[str, np.ndarray] = {}
        self._opening_intent = pd.Series(dtype=np.int64)
        self._user_goal = pd.Series(dtype=object)
        self._recorded_session = np.zeros(0, dtype=np.int64)

    # --- the log ------------------------------------------------------------------------
    def replay_steps(self, steps: pa.Table) -> pa.Table:
        """The steps as replay records them: each question to the user becomes a call of
        its own name with arguments {"occurrence": k} and the user's reply as its result;
        the episode's known entity values are kept for `arguments`."""
        n = steps.num_rows
        decoded = decode(steps)
        self._recorded_session = np.zeros(n, dtype=np.int64)
        self._recorded_session[decoded.order] = session_code(
            decoded.action, decoded.states[:, S_VERIFIED], decoded.states[:, S_RESOLVED])
        content = column(steps, "action.content")
        message = _index_codes(pc.fill_null(pc.index_in(
            content, value_set=pa.array(list(MESSAGE_ACTIONS))), -1)).astype(np.int64)
        action = np.asarray(list(MESSAGE_ACTIONS.values()) + [-1])[message]
        is_ask = np.isin(action, ASKS) & as_numpy(pc.fill_null(pc.equal(
            column(steps, "action.type"), "message"), False)).astype(bool)
        frame = pd.DataFrame({"episode": as_numpy(steps.column("episode_id")),
                              "t": as_numpy(steps.column("t")), "action": action})
        occurrence = np.zeros(n, dtype=np.int64)
        asks = frame[is_ask].sort_values(["episode", "t"], kind="stable")
        occurrence[asks.index.to_numpy()] = asks.groupby(["episode", "action"]).cumcount()
        reply = _user_reply(steps)
        reply_json = pc.binary_join_element_wise(
            '"', pc.replace_substring(pc.replace_substring(pc.fill_null(reply, ""), "\\", "\\\\"),
                                      '"', '\\"'), '"', "")
        ask = pa.array(is_ask)
        names = np.asarray(ACTIONS, dtype=object)[np.maximum(action, 0)]
        arguments = pa.array(np.char.add(np.char.add('{"occurrence":', occurrence.astype(str)),
                                         "}"))
        steps = steps.set_column(
            steps.schema.get_field_index("action"), "action", _struct_with(
                steps.column("action"),
                {"type": pc.if_else(ask, "tool_call", column(steps, "action.type")),
                 "tool": pc.if_else(ask, pa.array(names, type=pa.string()),
                                    column(steps, "action.tool")),
                 "arguments": pc.if_else(ask, arguments, column(steps, "action.arguments"))}))
        steps = steps.set_column(
            steps.schema.get_field_index("observation"), "observation", _struct_with(
                steps.column("observation"),
                {"tool_result": pc.if_else(ask, reply_json,
                                           column(steps, "observation.tool_result"))}))
        self._remember_entities(steps)
        return steps

    def _remember_entities(self, steps: pa.Table) -> None:
        """Per episode, the intent its opening message states, and each entity value its
        calls sent when the agent knew it."""
        args = pc.fill_null(column(steps, "action.arguments"), "")
        episode = as_numpy(steps.column("episode_id"))
        first = as_numpy(pc.equal(steps.column("t"), 0)).astype(bool)
        goal = _index_codes(pc.fill_null(pc.index_in(column(steps, "state.user_goal"),
                                                 value_set=pa.array(OPENINGS)), -1)) + 1
        self._opening_intent = pd.Series(goal[first], index=episode[first])
        self._user_goal = pd.Series(as_numpy(column(steps, "state.user_goal"))[first],
                                    index=episode[first], dtype=object)
        # The email is judged by its answer: redaction turns the made-up address into a
        # placeholder too, and only the customer's own email finds the customer.
        lookup = as_numpy(pc.fill_null(pc.equal(column(steps, "action.tool"),
                                                ACTIONS[LOOKUP_CUSTOMER]), False)).astype(bool)
        erred = _is_error(steps)
        for name, pattern in _TOKEN.items():
            token = pc.struct_field(pc.extract_regex(args, pattern), "v")
            values = pd.Series(as_numpy(token), index=episode, dtype=object)
            present = values.notna().to_numpy()
            real = lookup & ~erred if name == "email" else values.to_numpy() != MADE_UP[name]
            self._entities[name] = _first_per_episode(values[present & real])
            if name == "email":  # the made-up address as this log wrote it (redacted?)
                self._entities["made_up_email"] = _first_per_episode(
                    values[present & lookup & erred])

    def trace_steps(self, steps: pa.Table) -> pa.Table:
        """A replayed trace (every action a call) as the desk's logs record it, for its
        verifiers and encoder: a question, reply_final or escalate is an assistant message
        of its fixed text; a question's served reply is the user's message in the step's
        observation.events; every step's state carries the episode's opening
        (state.user_goal). Tool calls are left as they are."""
        n = steps.num_rows
        action = _index_codes(pc.fill_null(pc.index_in(column(steps, "action.tool"),
                                                   value_set=pa.array(ACTIONS)), -1))
        texts = {**chat.ASK, REPLY_FINAL: chat.REPLY_TEXT, ESCALATE: chat.ESCALATE_TEXT}
        text = np.full(n, None, dtype=object)
        for a, words in texts.items():
            text[action == a] = words
        message = pa.array(pd.notna(text), type=pa.bool_())
        ask = np.isin(action, ASKS)
        # The served reply (replay_steps wrote it as a JSON string), parsed once per text.
        encoded = pc.dictionary_encode(column(steps, "observation.tool_result")).combine_chunks()
        parsed = [orjson.loads(x) for x in encoded.dictionary.to_pylist()]
        reply = np.array([x if isinstance(x, str) and x else None for x in parsed] + [None],
                         dtype=object)[as_numpy(pc.fill_null(encoded.indices, -1)).astype(
                             np.int64)] if n else np.zeros(0, dtype=object)
        said = ask & pd.notna(reply)
        event_type = steps.schema.field("observation").type.field("events").type
        events = pa.ListArray.from_arrays(
            pa.array(np.r_[0, np.cumsum(said)], type=pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(["user"] * int(said.sum()), type=pa.string()),
                 pa.array(["message"] * int(said.sum()), type=pa.string()),
                 *[pa.nulls(int(said.sum()), pa.string())] * 2,
                 pa.array(reply[said].tolist(), type=pa.string()),
                 *[pa.nulls(int(said.sum()), pa.string())] * 2],
                fields=list(event_type.value_type)),
            type=event_type, mask=pa.array(~said))
        steps = steps.set_column(
            steps.schema.get_field_index("action"), "action", _struct_with(
                steps.column("action"),
                {"type": pc.if_else(message, "message", column(steps, "action.type")),
                 "tool": pc.if_else(message, pa.scalar(None, pa.string()),
                                    column(steps, "action.tool")),
                 "arguments": pc.if_else(message, pa.scalar(None, pa.string()),
                                         column(steps, "action.arguments")),
                 "content": pa.array(text, type=pa.string())}))
        steps = steps.set_column(
            steps.schema.get_field_index("observation"), "observation", _struct_with(
                steps.column("observation"),
                {"tool_result": pc.if_else(message, pa.scalar(None, pa.string()),
                                           column(steps, "observation.tool_result")),
                 "events": events}))
        goal = self._user_goal.reindex(pd.Index(as_numpy(steps.column("episode_id"))))
        return steps.set_column(
            steps.schema.get_field_index("state"), "state", _struct_with(
                steps.column("state"),
                {"user_goal": pa.array(goal.to_numpy(dtype=object), type=pa.string())}))

    def recorded_session(self, steps: pa.Table) -> np.ndarray:
        """The session code of each row of the table `replay_steps` returned."""
        if len(self._recorded_session) != steps.num_rows:
            raise ValueError("recorded_session reads the table replay_steps returned")
        return self._recorded_session

    def session(self, state: dict[str, np.ndarray], rows: np.ndarray,
                actions: np.ndarray) -> np.ndarray:
        """The replay's session code of each call."""
        return session_code(actions, state["verified"][rows], state["resolved"][rows])

    # --- the replay state ---------------------------------------------------------------
    def initial_state(self, first_steps: pa.Table) -> dict[str, np.ndarray]:
        n = first_steps.num_rows
        ids = pd.Index(as_numpy(first_steps.column("episode_id")))
        self._known = {name: values.reindex(ids).to_numpy(dtype=object)
                       for name, values in self._entities.items()}
        goal = self._opening_intent.reindex(ids).fillna(0).to_numpy().astype(np.int64)
        state = {var: np.zeros(n, dtype=np.int64) for var in STATE_VARS}
        state["intent"] = goal.astype(np.int64)
        state.update({count: np.zeros(n, dtype=np.int64) for count in _COUNT.values()})
        state["episode"] = np.arange(n, dtype=np.int64)  # arguments use its entity values
        return state

    def state_codes(self, state: dict[str, np.ndarray], rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, the distinct observable states (k, len(STATE_VARS)))."""
        matrix = np.column_stack([state[var][rows] for var in STATE_VARS]).astype(np.int8)
        distinct, code = np.unique(matrix, axis=0, return_inverse=True)
        return code.reshape(-1), distinct

    def arguments(self, state: dict[str, np.ndarray], rows: np.ndarray,
                  actions: np.ndarray) -> np.ndarray:
        """Canonical JSON arguments of each call, filled from what the agent knows."""
        episode = state["episode"][rows]

        def known_value(name: str) -> np.ndarray:
            have = self._known.get(name)
            return have[episode] if have is not None else np.full(len(rows), None)

        def value(name: str, known: np.ndarray) -> np.ndarray:
            real = known_value(name)
            made_up = known_value(f"made_up_{name}")
            made_up = np.where(pd.notna(made_up), made_up, MADE_UP[name])
            # Known but never sent by the logged agent: a value no recording can match.
            return np.where(known & pd.notna(real), real,
                            np.where(known, '"<unrecorded>"', made_up))

        email = value("email", state["email_known"][rows] == 1)
        oid = value("order_id", state["order_id_known"][rows] == 1)
        amount = value("amount", state["looked_up"][rows] == 1)
        address = value("address", state["address_known"][rows] == 1)
        intent = state["intent"][rows]
        request = np.where(intent > 0, np.char.add(np.char.add(
            '"', np.asarray(INTENTS, dtype=str)[intent]), '"'), '"unknown"')
        out = np.full(len(rows), "null", dtype=object)
        for a in ASKS:
            hit = actions == a
            out[hit] = [f'{{"occurrence":{k}}}' for k in state[_COUNT[a]][rows][hit]]
        pick = {LOOKUP_CUSTOMER: lambda m: '{"email":' + email[m] + "}",
                LOOKUP_ORDER: lambda m: '{"order_id":' + oid[m] + "}",
                CHECK_POLICY: lambda m: '{"order_id":' + oid[m] + ',"request":' + request[m]
                + "}",
                ISSUE_REFUND: lambda m: '{"amount":' + amount[m] + ',"order_id":' + oid[m] + "}",
                CANCEL_ORDER: lambda m: '{"order_id":' + oid[m] + "}",
                UPDATE_ADDRESS: lambda m: '{"address":' + address[m] + ',"order_id":'
                + oid[m] + "}"}
        for a, make in pick.items():
            hit = actions == a
            if hit.any():
                out[hit] = make(hit).astype(object)
        return out

    def apply(self, state: dict[str, np.ndarray], rows: np.ndarray, actions: np.ndarray,
              results: np.ndarray) -> None:
        """What each served response reveals, as the simulator's state moves."""
        texts, distinct = pd.factorize(pd.Series(results, dtype=object), use_na_sentinel=True)
        parsed = [orjson.loads(x) if isinstance(x, str) else None for x in distinct]
        error = np.array([isinstance(v, dict) and v.get("error") is not None for v in parsed]
                         + [False])[texts]
        reply = np.array([v if isinstance(v, str) else None for v in parsed] + [None],
                         dtype=object)[texts]
        eligible = np.array([(1 if v.get("eligible") else 2) if isinstance(v, dict)
                             and "eligible" in v else 0 for v in parsed] + [0])[texts]
        answered = pd.notna(reply) & (reply != chat.NOT_SURE)
        ok = ~error & ~np.isin(actions, ASKS + (REPLY_FINAL, ESCALATE))
        s = {k: v[rows] for k, v in state.items()}

        for a in ASKS:
            state[_COUNT[a]][rows[actions == a]] += 1
        reply_intent = pd.Index(OPENINGS).get_indexer(pd.Series(reply, dtype=object)) + 1
        hit = (actions == ASK_INTENT) & answered & (reply_intent > 0)
        state["intent"][rows[hit]] = reply_intent[hit]
        state["email_known"][rows[(actions == ASK_EMAIL) & answered]] = 1
        state["order_id_known"][rows[(actions == ASK_ORDER_ID) & answered]] = 1
        state["address_known"][rows[(actions == ASK_ADDRESS) & answered
                                    & (reply != chat.NO_ADDRESS_CHANGE)]] = 1
        state["verified"][rows[(actions == LOOKUP_CUSTOMER) & ok]] = 1
        state["looked_up"][rows[(actions == LOOKUP_ORDER) & ok]] = 1
        hit = (actions == CHECK_POLICY) & ok & (eligible > 0)
        state["checked"][rows[hit]] = eligible[hit]
        tool_intent = np.select([actions == a for a in ACTION_TOOLS],
                                list(ACTION_TOOLS.values()), 0)
        args_ok = (s["verified"] == 1) & (s["order_id_known"] == 1)
        args_ok &= np.where(actions == ISSUE_REFUND, s["looked_up"] == 1, True)
        args_ok &= np.where(actions == UPDATE_ADDRESS, s["address_known"] == 1, True)
        call = (tool_intent > 0) & args_ok & (s["resolved"] == 0)
        broke = call & ((s["checked"] != 1) | (s["intent"] != tool_intent))
        state["violated"][rows[broke]] = 1
        state["resolved"][rows[(tool_intent > 0) & ok]] = 1
        state["last_error"][rows] = error


def _first_per_episode(values: pd.Series) -> pd.Series:
    return values[~values.index.duplicated()]
