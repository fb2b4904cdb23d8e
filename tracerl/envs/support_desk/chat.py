"""Support-desk episodes as OpenAI-chat records (JSONL, one conversation per line).

One record per episode, in the shape the `openai-chat` adapter reads:

    {"messages": [{"role": "system", ...}, {"role": "user", ...},
                  {"role": "assistant", "content": null,
                   "tool_calls": [{"id": "call_3", "type": "function",
                                   "function": {"name": "lookup_order",
                                                "arguments": "{\"order_id\": \"482913\"}"}}]},
                  {"role": "tool", "tool_call_id": "call_3", "content": "{...}"},
                  {"role": "assistant", "content": "Could you give me your email?"},
                  {"role": "user", "content": "sure, it's ..."}, ...],
     "reward": 1.0, "task_id": "support_desk/refund", "trial": 0,
     "info": {"episode_id": ..., "behavior_policy": ..., "behavior_logprobs": [...],
              "step_rewards": [...], ...}}

Every agent action is exactly one assistant message (a text message or one tool call), so
`info.behavior_logprobs[k]` and `info.step_rewards[k]` belong to the k-th assistant message
(the adapter's `call_index` / step t). `reward` is the verifier's outcome (1 success, 0 not);
the shaped per-step rewards of the simulator are `info.step_rewards`. Tool arguments are
canonical JSON (sorted keys), so (tool, arguments) keys a recorded response for replay.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

from tracerl.envs.support_desk.sim import (
    ACTIONS,
    ASK_ADDRESS,
    ASK_EMAIL,
    ASK_INTENT,
    ASK_ORDER_ID,
    CANCEL_ORDER,
    CHECK_POLICY,
    ENVIRONMENT_VERSION,
    INTENTS,
    ISSUE_REFUND,
    LOOKUP_CUSTOMER,
    LOOKUP_ORDER,
    REPLY_FINAL,
    S_ADDR,
    S_CHECKED,
    S_EMAIL,
    S_INTENT,
    S_LOOKED,
    S_OID,
    S_RESOLVED,
    S_VERIFIED,
    UPDATE_ADDRESS,
    Episodes,
)

SYSTEM = ("You are Acme's customer-support agent. Verify the customer, look up the order, "
          "check the policy before any refund, cancellation or address change.")
VERIFIER = "support_desk_success@1"
OPENING = {
    "refund": "Hi, I'd like a refund for an order.",
    "cancel": "Hello, I want to cancel my order.",
    "status": "Hi, where is my order?",
    "address": "Hi, I need to change the delivery address of my order.",
}
ASK = {
    ASK_INTENT: "How can I help you today?",
    ASK_EMAIL: "Could you tell me the email on your account?",
    ASK_ORDER_ID: "What is your order number?",
    ASK_ADDRESS: "What is the new delivery address?",
}
NOT_SURE = "I'm not sure, sorry."
NO_ADDRESS_CHANGE = "I don't need an address change."
REPLY_TEXT = "I've taken care of your request. Anything else?"
ESCALATE_TEXT = "Let me transfer you to a human colleague."
# The agent's messages are these fixed texts, so a reader of the log (encoder.py) knows
# each message action by its text.


def _dumps(x: object) -> str:
    return orjson.dumps(x, option=orjson.OPT_SORT_KEYS).decode()


def records(ep: Episodes, *, behavior_policy: str, gamma: float,
            start: int = 0, stop: int | None = None) -> Iterator[dict]:
    """OpenAI-chat records of episodes [start, stop)."""
    c = ep.customers
    bounds = np.concatenate([[0], np.cumsum(ep.lengths)])
    stop = ep.n_episodes if stop is None else stop
    for i in range(start, stop):  # rendering text is per message by nature
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        intent = INTENTS[int(c.intent[i])]
        email = f"user{int(c.email_id[i])}@example.com"
        oid = str(int(c.order_id[i]))
        address = f"{int(c.address_id[i])} Main St"
        opening = OPENING[intent] if c.intent_stated[i] else "Hi, I need some help."
        msgs: list[dict] = [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": opening}]
        for j in range(lo, hi):
            a, s, t = int(ep.action[j]), ep.states[j], int(ep.t[j])
            name = ACTIONS[a]
            if a in ASK:
                msgs.append({"role": "assistant", "content": ASK[a]})
                reply = NOT_SURE
                if ep.answered[j]:
                    reply = {ASK_INTENT: OPENING[intent], ASK_EMAIL: f"It's {email}.",
                             ASK_ORDER_ID: f"Order {oid}.",
                             ASK_ADDRESS: (f"Please ship to {address}." if intent == "address"
                                           else NO_ADDRESS_CHANGE)}[a]
                msgs.append({"role": "user", "content": reply})
                continue
            if a == REPLY_FINAL:
                msgs.append({"role": "assistant",
                             "content": REPLY_TEXT})
                continue
            if a not in (LOOKUP_CUSTOMER, LOOKUP_ORDER, CHECK_POLICY, ISSUE_REFUND,
                         CANCEL_ORDER, UPDATE_ADDRESS):  # escalate
                msgs.append({"role": "assistant",
                             "content": ESCALATE_TEXT})
                continue
            args, result = _tool_call(a, s, bool(ep.error[j]), email, oid, address,
                                      int(c.amount_cents[i]), int(c.days[i]),
                                      bool(c.shipped[i]), intent, bool(c.eligible[i]))
            call_id = f"call_{t}"
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": name, "arguments": _dumps(args)}}]})
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": _dumps(result)})
        episode_id = f"support_desk-{i:08d}"
        yield {
            "id": episode_id,  # the adapter's episode_id (sorts in simulation order)
            "messages": msgs,
            "reward": float(ep.success[i]),
            "task_id": f"support_desk/{intent}",
            "trial": 0,
            "info": {
                "episode_id": episode_id,
                "environment_version": ENVIRONMENT_VERSION,
                "behavior_policy": behavior_policy,
                "behavior_logprobs": [float(x) for x in ep.logp[lo:hi]],
                "step_rewards": [round(float(x), 10) for x in ep.reward[lo:hi]],
                "gamma": gamma,
                "verifier": VERIFIER,
                "success": bool(ep.success[i]),
                "violation": bool(ep.violation[i]),
            },
        }


def _tool_call(a: int, s: np.ndarray, error: bool, email: str, oid: str, address: str,
               cents: int, days: int, shipped: bool, intent: str,
               eligible: bool) -> tuple[dict, dict]:
    """(arguments, result) of one tool call; unknown arguments are made up."""
    e = email if s[S_EMAIL] else "customer@example.com"
    o = oid if s[S_OID] else "000000"
    if a == LOOKUP_CUSTOMER:
        return {"email": e}, ({"error": "customer not found"} if error else
                              {"customer_id": f"C-{e.split('@')[0]}", "orders": [oid]})
    if a == LOOKUP_ORDER:
        if error:
            why = "authentication required" if not s[S_VERIFIED] else "order not found"
            return {"order_id": o}, {"error": why}
        return {"order_id": o}, {"amount": round(cents / 100, 2), "days_since_purchase": days,
                                 "shipped": shipped, "status": "shipped" if shipped else "packing"}
    if a == CHECK_POLICY:
        request = intent if s[S_INTENT] else "unknown"
        if error:
            return {"order_id": o, "request": request}, {"error": "invalid request"}
        return ({"order_id": o, "request": request},
                {"eligible": eligible})
    args: dict = {"order_id": o}
    if a == ISSUE_REFUND:
        args["amount"] = round(cents / 100, 2) if s[S_LOOKED] else 0.0
    if a == UPDATE_ADDRESS:
        args["address"] = address if s[S_ADDR] else ""
    if error:
        why = ("already processed" if s[S_RESOLVED] else "not eligible under policy"
               if s[S_CHECKED] == 2 or (s[S_VERIFIED] and s[S_OID]) else "invalid arguments")
        return args, {"error": why}
    return args, {"status": "done", "tool": ACTIONS[a]}


def write_jsonl(ep: Episodes, path: str | Path, *, behavior_policy: str, gamma: float) -> Path:
    """Write every episode as one JSON line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for rec in records(ep, behavior_policy=behavior_policy, gamma=gamma):
            f.write(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS) + b"\n")
    return path


def distinct_share(ep: Episodes, *, behavior_policy: str = "", gamma: float = 0.99,
                   messages_only: bool = True) -> float:
    """Share of episodes whose conversation (messages; with info if not messages_only)
    is unlike every other's."""
    digests = set()
    n = 0
    for rec in records(ep, behavior_policy=behavior_policy, gamma=gamma):
        body = rec["messages"] if messages_only else {k: v for k, v in rec.items()
                                                      if k != "info"}
        digests.add(hashlib.blake2b(orjson.dumps(body, option=orjson.OPT_SORT_KEYS),
                                    digest_size=16).digest())
        n += 1
    return len(digests) / n if n else 0.0
