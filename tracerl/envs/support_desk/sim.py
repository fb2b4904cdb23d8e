"""Support-desk fixture: a vectorised simulator of a multi-turn customer-service agent.

Each episode has a hidden customer: an intent (refund, cancel, status, address change), an
email, an order id, an amount, the days since purchase, whether the order shipped and a new
address. The agent sees only what the dialogue revealed so far, the *observable state*
(`STATE_VARS`, one small int each), and takes one of `ACTIONS` per step:

    ask_intent | ask_email | ask_order_id | ask_address        (a message; the user replies)
    lookup_customer(email) | lookup_order(order_id)             (lookups)
    check_policy(order_id, request)                             (the policy rule)
    issue_refund(order_id, amount) | cancel_order(order_id)
    | update_address(order_id, address)                         (actions with rules)
    reply_final | escalate                                      (end the conversation)

A tool's arguments are the values the dialogue revealed; an argument the agent does not know
is made up and the tool answers with an error (customer not found, order not found, amount
mismatch, invalid address, authentication required). Rules: an action tool may only run
after check_policy said the request is eligible and only for the customer's intent; breaking
a rule is a *violation* and the conversation fails. The verifier (`success`) on reply_final:
no violation, and status -> the order was looked up; other intents -> the policy was checked
and the action ran iff the request is eligible (refund: bought <= refund_days ago; cancel and
address change: not shipped). Rewards: -step_cost per action, -error_cost per tool error,
+1 on a successful reply_final, +escalate_reward on escalate. An episode ends at reply_final,
escalate, or after max_actions actions (a time limit, no bonus).

Everything is vectorised over episodes: one numpy step advances every live episode. Policies
are objects with ``action_probs(states) -> (m, N_ACTIONS)`` over observable-state arrays.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

ACTIONS: tuple[str, ...] = (
    "ask_intent", "ask_email", "ask_order_id", "ask_address",
    "lookup_customer", "lookup_order", "check_policy",
    "issue_refund", "cancel_order", "update_address",
    "reply_final", "escalate",
)
N_ACTIONS = len(ACTIONS)
(ASK_INTENT, ASK_EMAIL, ASK_ORDER_ID, ASK_ADDRESS, LOOKUP_CUSTOMER, LOOKUP_ORDER,
 CHECK_POLICY, ISSUE_REFUND, CANCEL_ORDER, UPDATE_ADDRESS, REPLY_FINAL, ESCALATE) = range(N_ACTIONS)
TERMINAL_ACTIONS = (REPLY_FINAL, ESCALATE)
NON_TERMINAL = tuple(range(REPLY_FINAL))  # the ten actions that do not end a conversation

INTENTS: tuple[str, ...] = ("unknown", "refund", "cancel", "status", "address")
REFUND, CANCEL, STATUS, ADDRESS = 1, 2, 3, 4
ACTION_INTENT = {ISSUE_REFUND: REFUND, CANCEL_ORDER: CANCEL, UPDATE_ADDRESS: ADDRESS}

# Observable state: what the dialogue has revealed (one int8 column each).
STATE_VARS: tuple[str, ...] = (
    "intent",        # 0 unknown, 1..4 INTENTS
    "email_known", "verified", "order_id_known", "looked_up",
    "checked",       # 0 not checked, 1 eligible, 2 not eligible
    "address_known", "resolved", "last_error",
    "violated",      # the agent ran an action tool against a rule (it knows: its own history)
)

if TYPE_CHECKING:  # the one protocol (tracerl.rl.policy), for type hints only
    from tracerl.rl.policy import Policy

STATE_CARDINALITY: tuple[int, ...] = (5, 2, 2, 2, 2, 3, 2, 2, 2, 2)
(S_INTENT, S_EMAIL, S_VERIFIED, S_OID, S_LOOKED, S_CHECKED, S_ADDR, S_RESOLVED,
 S_ERROR, S_VIOLATED) = range(len(STATE_VARS))

ENVIRONMENT_VERSION = "support_desk_v1"


@dataclass(frozen=True)
class SupportDeskParams:
    """The simulator's knobs (the `support_desk.env` block of params)."""

    intent_probs: tuple[float, ...] = (0.35, 0.2, 0.25, 0.2)  # refund, cancel, status, address
    p_intent_stated: float = 0.6   # the first user message names the intent
    p_answer: float = 0.75         # the user answers a question (else "not sure")
    p_shipped: float = 0.5
    refund_days: int = 30          # refund policy window
    max_days: int = 90             # days since purchase ~ U{0..max_days}
    step_cost: float = 0.01
    error_cost: float = 0.02
    escalate_reward: float = 0.2
    max_actions: int = 40

    def to_dict(self) -> dict:
        """Plain dict (for artifacts and params)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict | None) -> SupportDeskParams:
        """From a params block; unknown keys are an error."""
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown support_desk env params {sorted(unknown)}")
        if "intent_probs" in d:
            d["intent_probs"] = tuple(float(x) for x in d["intent_probs"])
        return cls(**d)


@dataclass(frozen=True)
class Customers:
    """The hidden side of n episodes (one entry each)."""

    intent: np.ndarray        # 1..4
    intent_stated: np.ndarray  # bool: the opening message names the intent
    email_id: np.ndarray
    order_id: np.ndarray
    amount_cents: np.ndarray
    days: np.ndarray
    shipped: np.ndarray
    address_id: np.ndarray
    eligible: np.ndarray      # bool: the request may be granted under the policy rules


def draw_customers(n: int, params: SupportDeskParams, rng: np.random.Generator) -> Customers:
    """n hidden customers."""
    p = np.asarray(params.intent_probs, dtype=np.float64)
    if p.shape != (4,) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("intent_probs must be 4 probabilities summing to 1")
    intent = (rng.choice(4, size=n, p=p) + 1).astype(np.int8)
    intent_stated = rng.random(n) < params.p_intent_stated
    email_id = rng.integers(0, 10**7, size=n)
    order_id = rng.integers(10**5, 10**6, size=n)
    amount_cents = rng.integers(500, 50_000, size=n)
    days = rng.integers(0, params.max_days + 1, size=n)
    shipped = rng.random(n) < params.p_shipped
    address_id = rng.integers(0, 10**6, size=n)
    eligible = np.select([intent == REFUND, np.isin(intent, (CANCEL, ADDRESS))],
                         [days <= params.refund_days, ~shipped], default=True)
    return Customers(intent=intent, intent_stated=intent_stated, email_id=email_id,
                     order_id=order_id, amount_cents=amount_cents, days=days,
                     shipped=shipped, address_id=address_id, eligible=eligible)


@dataclass
class Episodes:
    """Simulated episodes as flat per-step arrays, ordered by (episode, t).

    states: observable state before the action; answered: the user answered the question
    this step (for rendering); error: the tool returned an error; logp: log pi(a_t|s_t) of
    the policy that acted (the behaviour log-prob when logging).
    """

    customers: Customers
    episode: np.ndarray
    t: np.ndarray
    states: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    error: np.ndarray
    answered: np.ndarray
    logp: np.ndarray
    success: np.ndarray       # per episode
    violation: np.ndarray     # per episode
    params: SupportDeskParams = field(default_factory=SupportDeskParams)

    @property
    def n_episodes(self) -> int:
        return len(self.success)

    @property
    def lengths(self) -> np.ndarray:
        return np.bincount(self.episode, minlength=self.n_episodes)

    def returns(self, gamma: float) -> np.ndarray:
        """Discounted return of each episode."""
        return np.bincount(self.episode, weights=self.reward * gamma ** self.t.astype(float),
                           minlength=self.n_episodes)


def initial_states(c: Customers) -> np.ndarray:
    """(n, len(STATE_VARS)) observable states at t = 0."""
    s = np.zeros((len(c.intent), len(STATE_VARS)), dtype=np.int8)
    s[:, S_INTENT] = np.where(c.intent_stated, c.intent, 0)
    return s


def step(states: np.ndarray, actions: np.ndarray, c: Customers, violated: np.ndarray,
         params: SupportDeskParams, u_answer: np.ndarray) -> tuple:
    """Advance m live episodes by one action (vectorised).

    states (m, k) is modified in place; `c` and `violated` are the live episodes' rows.
    Returns (reward, done, error, answered, success).
    """
    a = actions
    s = states
    answered = u_answer < params.p_answer
    error = np.zeros(len(a), dtype=bool)

    m = (a == ASK_INTENT) & answered
    s[m, S_INTENT] = c.intent[m]
    m = (a == ASK_EMAIL) & answered
    s[m, S_EMAIL] = 1
    m = (a == ASK_ORDER_ID) & answered
    s[m, S_OID] = 1
    m = (a == ASK_ADDRESS) & answered & (c.intent == ADDRESS)
    s[m, S_ADDR] = 1

    m = a == LOOKUP_CUSTOMER  # lookup_customer(email): a made-up email is not found
    ok = m & (s[:, S_EMAIL] == 1)
    s[ok, S_VERIFIED] = 1
    error |= m & ~ok
    m = a == LOOKUP_ORDER  # needs an authenticated customer and the real order id
    ok = m & (s[:, S_VERIFIED] == 1) & (s[:, S_OID] == 1)
    s[ok, S_LOOKED] = 1
    error |= m & ~ok
    m = a == CHECK_POLICY  # check_policy(order_id, request)
    ok = m & (s[:, S_VERIFIED] == 1) & (s[:, S_OID] == 1) & (s[:, S_INTENT] > 0)
    eligible = c.eligible
    s[ok, S_CHECKED] = np.where(eligible[ok], 1, 2)
    error |= m & ~ok

    for tool, intent in ACTION_INTENT.items():  # three action tools, not episodes
        m = a == tool
        args_ok = (s[:, S_VERIFIED] == 1) & (s[:, S_OID] == 1)
        if tool == ISSUE_REFUND:
            args_ok &= s[:, S_LOOKED] == 1  # the amount comes from the order record
        if tool == UPDATE_ADDRESS:
            args_ok &= s[:, S_ADDR] == 1
        call = m & args_ok & (s[:, S_RESOLVED] == 0)
        error |= m & ~call
        # A well-formed call on the wrong request, an unchecked or ineligible one breaks
        # a rule; the tool refuses ineligible requests (an error) and runs the others.
        violated |= call & ((c.intent != intent) | (s[:, S_CHECKED] != 1))
        runs = call & ((c.intent != intent) | eligible)
        s[runs, S_RESOLVED] = 1
        error |= call & ~runs

    s[:, S_ERROR] = error
    s[:, S_VIOLATED] = violated
    final = a == REPLY_FINAL
    done = final | (a == ESCALATE)
    needs_action = c.intent != STATUS
    resolved_right = np.where(eligible, s[:, S_RESOLVED] == 1, s[:, S_RESOLVED] == 0)
    success = final & ~violated & np.where(
        needs_action, (s[:, S_CHECKED] > 0) & resolved_right, s[:, S_LOOKED] == 1)
    reward = (-params.step_cost - params.error_cost * error + 1.0 * success
              + params.escalate_reward * (a == ESCALATE))
    return reward, done, error, answered, success


def sample_actions(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of an (m, A) probability matrix."""
    cum = np.cumsum(probs, axis=1)
    u = rng.random(len(probs)) * cum[:, -1]
    return np.minimum((cum <= u[:, None]).sum(axis=1), probs.shape[1] - 1).astype(np.int8)


def simulate(policy: Policy, n: int, params: SupportDeskParams | None = None, *,
             seed: int) -> Episodes:
    """Roll `policy` out for n episodes; every random choice comes from `seed`."""
    params = params or SupportDeskParams()
    rng = np.random.default_rng(seed)
    c = draw_customers(n, params, rng)
    s = initial_states(c)
    violated = np.zeros(n, dtype=bool)
    success = np.zeros(n, dtype=bool)
    live = np.arange(n)
    cols: dict[str, list] = {k: [] for k in ("episode", "t", "states", "action", "reward",
                                             "done", "error", "answered", "logp")}
    for t in range(params.max_actions):  # over steps, vectorised over episodes
        if not len(live):
            break
        st = s[live]
        probs = np.asarray(policy.action_probs(st), dtype=np.float64)
        a = sample_actions(probs, rng)
        logp = np.log(probs[np.arange(len(a)), a])
        sub = _take(c, live)
        v = violated[live]
        before = st.copy()
        r, done, err, ans, ok = step(st, a, sub, v, params, rng.random(len(live)))
        done |= t == params.max_actions - 1
        s[live] = st
        violated[live] = v
        success[live] |= ok
        for k, x in (("episode", live), ("t", np.full(len(live), t)), ("states", before),
                     ("action", a), ("reward", r), ("done", done), ("error", err),
                     ("answered", ans), ("logp", logp)):
            cols[k].append(x)
        live = live[~done]
    flat = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.lexsort((flat["t"], flat["episode"]))
    flat = {k: v[order] for k, v in flat.items()}
    return Episodes(customers=c, episode=flat["episode"].astype(np.int64),
                    t=flat["t"].astype(np.int16), states=flat["states"],
                    action=flat["action"], reward=flat["reward"], done=flat["done"],
                    error=flat["error"], answered=flat["answered"], logp=flat["logp"],
                    success=success, violation=violated, params=params)


def _take(c: Customers, idx: np.ndarray) -> Customers:
    return Customers(**{k: getattr(c, k)[idx] for k in Customers.__dataclass_fields__})


# --------------------------------------------------------------------------- policies


def script_actions(states: np.ndarray) -> np.ndarray:
    """The scripted next action of a competent agent, from the observable state."""
    s = states
    intent = s[:, S_INTENT]
    conds = [
        intent == 0,
        s[:, S_EMAIL] == 0,
        s[:, S_VERIFIED] == 0,
        s[:, S_OID] == 0,
        s[:, S_LOOKED] == 0,
        intent == STATUS,
        s[:, S_CHECKED] == 0,
        (s[:, S_CHECKED] == 1) & (intent == ADDRESS) & (s[:, S_ADDR] == 0),
        (s[:, S_CHECKED] == 1) & (s[:, S_RESOLVED] == 0),
    ]
    tool = np.select([intent == REFUND, intent == CANCEL], [ISSUE_REFUND, CANCEL_ORDER],
                     default=UPDATE_ADDRESS)
    choices = [ASK_INTENT, ASK_EMAIL, LOOKUP_CUSTOMER, ASK_ORDER_ID, LOOKUP_ORDER,
               REPLY_FINAL, CHECK_POLICY, ASK_ADDRESS, tool]
    return np.select(conds, choices, default=REPLY_FINAL).astype(np.int64)


@dataclass(frozen=True)
class ScriptedPolicy:
    """The logging policy: the scripted action with probability p_script, else one of the
    ten non-terminal actions uniformly (the noise never ends a conversation, so the logger
    never escalates and never replies before its script says so). Its flaw: on refunds,
    with probability p_skip_check it issues the refund instead of checking the policy."""

    p_script: float = 0.4
    p_skip_check: float = 0.3
    name: str = "support_desk_scripted_v1"

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        script = script_actions(states)
        m = len(script)
        probs = np.zeros((m, N_ACTIONS))
        probs[:, list(NON_TERMINAL)] = (1.0 - self.p_script) / len(NON_TERMINAL)
        flaw = (states[:, S_INTENT] == REFUND) & (script == CHECK_POLICY)
        rows = np.arange(m)
        probs[rows, script] += self.p_script * np.where(flaw, 1.0 - self.p_skip_check, 1.0)
        probs[rows[flaw], ISSUE_REFUND] += self.p_script * self.p_skip_check
        return probs

    def to_dict(self) -> dict:
        return {"p_script": self.p_script, "p_skip_check": self.p_skip_check, "name": self.name}


@dataclass(frozen=True)
class EscalateOnError:
    """Acts like `base`, but escalates with probability p after a tool error (an action the
    logger never takes: an unsupported candidate)."""

    base: object
    p: float = 1.0

    def action_probs(self, states: np.ndarray) -> np.ndarray:
        probs = np.asarray(self.base.action_probs(states), dtype=np.float64).copy()
        err = states[:, S_ERROR] == 1
        probs[err] *= 1.0 - self.p
        probs[err, ESCALATE] += self.p
        return probs


def one_hot_policy(actions_of):
    """A deterministic policy from a function states -> action index."""

    class _OneHot:
        def action_probs(self, states: np.ndarray) -> np.ndarray:
            a = actions_of(states)
            probs = np.zeros((len(a), N_ACTIONS))
            probs[np.arange(len(a)), a] = 1.0
            return probs

    return _OneHot()


SCRIPT = one_hot_policy(script_actions)
