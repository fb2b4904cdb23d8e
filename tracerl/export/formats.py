"""The shapes trainers read, from a Conversation (tracerl.export.conversation).

- `sft`: Hugging Face / TRL conversational language modelling, with tool calling
  (huggingface.co/docs/trl/dataset_formats, "Tool Calling"): `{"messages": [...],
  "tools": [...]}`; an assistant message holds `tool_calls: [{"id", "type": "function",
  "function": {"name", "arguments": {...}}}]` with the arguments as a JSON object (the
  transformers chat templates expect a dict, not the OpenAI string); a tool message holds
  `tool_call_id` and `name`; every message has `content` (TRL's `is_conversational` reads
  it). Each assistant message carries `weight` (1 trained on, 0 context only), which TRL's
  SFTTrainer does not read: mask with it in your collator, or use `sft_openai`.
- `sft_parquet`: the same records in Parquet, with tool-call `arguments` and `tools` as JSON
  text: Arrow types each column once, so free-form objects would be merged into one struct
  of every key seen, with nulls (`json.loads` them, or read the JSONL).
- `sft_openai`: the OpenAI fine-tuning chat format: arguments as a JSON string, tool
  messages with `tool_call_id` only, `weight` 0 or 1 on every assistant message (0: not
  trained on), tools as `{"type": "function", "function": {...}}`.
- `kto`: TRL unpaired preference, conversational: one record per assistant turn,
  `{"prompt": [messages before it], "completion": [the assistant message], "label": bool}`.
- `prm`: TRL stepwise supervision (standard format only in TRL): `{"prompt": text,
  "completions": [text per assistant turn], "labels": [bool]}`; completion k is what came
  back since turn k-1 (tool results, user replies) then turn k, rendered by `render`, so the
  prompt and the completions joined are the whole conversation.
- `weighted`: the `sft` shape (every conversation, every assistant message) with each
  assistant message's `weight` its credit weight, and `credit` beside the messages: per
  assistant message its advantage under the logging policy with interval, support and
  flags (`weighted_record`). One record per conversation.
- `pairs`: TRL and OpenAI preference records of mined pairs (`pair_records`).

Every record carries `provenance`: the episode, its task and split, and per exported step
its `t`, `turn` and lineage (`source_file`, `source_record`, `source_pointer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tracerl.data.schema import canonical_json
from tracerl.export.conversation import Conversation, Turn


def step_provenance(col: dict[str, list], rows: Sequence[int], **extra: Any) -> list[dict]:
    return [{"t": col["t"][i], "turn": col["turn"][i], **extra,
             "source_file": col["source_file"][i], "source_record": col["source_record"][i],
             "source_pointer": col["source_pointer"][i]} for i in rows]


def provenance(conv: Conversation, split: str, steps: list[dict]) -> dict:
    return {"episode_id": conv.episode_id, "task": conv.task, "split": split, "steps": steps}


# --- messages -----------------------------------------------------------------------------
def trl_message(m: dict, weight: float | None = None) -> dict:
    if m["role"] == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": m["content"]}
        if m["tool_calls"]:
            out["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for c in m["tool_calls"]]
        if weight is not None:
            out["weight"] = weight
        return out
    if m["role"] == "tool":
        return {"role": "tool", "tool_call_id": m["tool_call_id"], "name": m["name"],
                "content": m["content"]}
    return {"role": m["role"], "content": m["content"]}


def openai_message(m: dict, weight: int | None = None) -> dict:
    if m["role"] == "assistant":
        out: dict[str, Any] = {"role": "assistant"}
        if m["tool_calls"]:
            out["content"] = m["content"]
            out["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"],
                                               "arguments": canonical_json(c["arguments"])}}
                                 for c in m["tool_calls"]]
        else:
            out["content"] = m["content"] or ""
        if weight is not None:
            out["weight"] = weight
        return out
    if m["role"] == "tool":
        return {"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]}
    return {"role": m["role"], "content": m["content"]}


# --- records ------------------------------------------------------------------------------
def _flat(conv: Conversation, weights: Sequence[float]) -> list[tuple[dict, Turn | None, float]]:
    """(message, its turn if it is the turn's assistant message, weight) in order."""
    out = []
    for turn, w in zip(conv.turns, weights, strict=True):
        out += [(m, None, 0.0) for m in turn.before]
        out.append((turn.message, turn, w))
    return out


def sft_records(conv: Conversation, col: dict[str, list], split: str,
                weights: Sequence[float], tools: list[dict] | None, openai: bool = True
                ) -> tuple[dict, dict | None]:
    """(TRL record, OpenAI record or None when not `openai`) of one conversation;
    `weights`: one per turn."""
    trl, oai, steps = [], [], []
    for k, (m, turn, w) in enumerate(_flat(conv, weights)):
        if turn is None:
            trl.append(trl_message(m))
            if openai:
                oai.append(openai_message(m))
            continue
        trl.append(trl_message(m, float(w)))
        if openai:
            oai.append(openai_message(m, 1 if w > 0 else 0))
        steps += step_provenance(col, turn.rows, message=k)
    prov = provenance(conv, split, steps)
    trl_record: dict[str, Any] = {"messages": trl, "tools": tools, "provenance": prov}
    if not openai:
        return trl_record, None
    openai_record: dict[str, Any] = {"messages": oai}
    if tools:
        openai_record["tools"] = tools
    openai_record["provenance"] = prov
    return trl_record, openai_record


def kto_records(conv: Conversation, col: dict[str, list], split: str,
                labels: Sequence[bool], tools: list[dict] | None) -> list[dict]:
    """One TRL unpaired-preference record per assistant turn."""
    out, context = [], []
    for turn, label in zip(conv.turns, labels, strict=True):
        context += [trl_message(m) for m in turn.before]
        message = trl_message(turn.message)
        out.append({"prompt": list(context), "completion": [message], "label": bool(label),
                    "tools": tools,
                    "provenance": provenance(conv, split, step_provenance(col, turn.rows))})
        context.append(message)
    return out


def kto_conversation(conv: Conversation, col: dict[str, list], split: str,
                     labels: Sequence[bool], tools: list[dict] | None) -> dict:
    """One conversation with each assistant message's KTO `label` (tracerl.export.expand.
    kto_examples turns it into TRL's unpaired-preference records, one per assistant message
    with something before it)."""
    messages, steps = [], []
    for k, (m, turn, label) in enumerate(_flat(conv, labels)):
        if turn is None:
            messages.append(trl_message(m))
            continue
        messages.append({**trl_message(m), "label": bool(label)})
        steps += step_provenance(col, turn.rows, message=k)
    return {"messages": messages, "tools": tools,
            "provenance": provenance(conv, split, steps)}


def prm_record(conv: Conversation, col: dict[str, list], split: str,
               labels: Sequence[bool]) -> dict:
    """One TRL stepwise-supervision record: a completion and a label per assistant turn."""
    prompt = render(conv.turns[0].before)
    completions, steps = [], []
    for k, turn in enumerate(conv.turns):
        completions.append(render([*(turn.before if k else ()), turn.message]))
        steps += step_provenance(col, turn.rows, completion=k)
    return {"prompt": prompt, "completions": completions,
            "labels": [bool(v) for v in labels],
            "provenance": provenance(conv, split, steps)}


def render(messages: Sequence[dict]) -> str:
    """Messages as plain text, one block per message: `<role>: <content>`, a tool call as
    `assistant tool call: {"name": ..., "arguments": ...}`, a tool result as
    `tool <name>: <content>` (PRM's standard format has no chat template of its own)."""
    lines = []
    for m in messages:
        if m["role"] == "assistant":
            if m["content"]:
                lines.append(f"assistant: {m['content']}")
            lines += ["assistant tool call: " + canonical_json(
                {"name": c["name"], "arguments": c["arguments"]}) for c in m["tool_calls"]]
        elif m["role"] == "tool":
            lines.append(f"tool {m['name']}: {m['content']}")
        else:
            lines.append(f"{m['role']}: {m['content']}")
    return "\n".join(lines)


# --- Parquet ------------------------------------------------------------------------------
_STEP = pa.struct([("t", pa.int32()), ("turn", pa.int32()), ("message", pa.int32()),
                   ("source_file", pa.string()), ("source_record", pa.int64()),
                   ("source_pointer", pa.string())])
SFT_PARQUET_SCHEMA = pa.schema([
    ("messages", pa.list_(pa.struct([
        ("role", pa.string()), ("content", pa.string()),
        ("tool_calls", pa.list_(pa.struct([
            ("id", pa.string()), ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))]))),
        ("tool_call_id", pa.string()), ("name", pa.string()), ("weight", pa.float64())]))),
    ("tools", pa.string()),  # JSON text of the list, or null
    ("provenance", pa.struct([("episode_id", pa.string()), ("task", pa.string()),
                              ("split", pa.string()), ("steps", pa.list_(_STEP))])),
])


def parquet_row(trl_record: dict) -> dict:
    """A TRL record in SFT_PARQUET_SCHEMA's shape (arguments and tools as JSON text)."""
    messages = []
    for m in trl_record["messages"]:
        row = dict(m)
        if "tool_calls" in row:
            row["tool_calls"] = [{**c, "function": {**c["function"], "arguments": canonical_json(
                c["function"]["arguments"])}} for c in row["tool_calls"]]
        messages.append(row)
    tools = trl_record["tools"]
    return {"messages": messages, "tools": None if tools is None else canonical_json(tools),
            "provenance": trl_record["provenance"]}


# --- the logging policy's credit (tracerl.rl.credit) ------------------------------------------
def turn_contexts(conv: Conversation) -> list[tuple[Turn, list[dict]]]:
    """Each turn with the (neutral) messages before it."""
    out, context = [], []
    for turn in conv.turns:
        context = [*context, *turn.before]
        out.append((turn, context))
        context = [*context, turn.message]
    return out


def weighted_record(conv: Conversation, col: dict[str, list], split: str,
                    weights: Sequence[float], credits: Sequence[list[dict]],
                    tools: list[dict] | None) -> dict:
    """One conversation for weighted fine-tuning, in the SFT (TRL conversational) shape:
    each assistant message's `weight` is its credit weight (export.weighting), and
    `credit` beside the messages holds, per assistant message (`message`: its index in
    `messages`), the credit under the logging policy that weight came from: the turn's
    smallest-advantage step's advantage with its interval, q, v, n (logged at that state
    and action), n_state, behavior_prob, the flags of any of its steps, and every step's
    credit (`steps`: tracerl.rl.credit StepCredit.step). One record per conversation, so
    the export grows with the log, not with the log times the turns."""
    record = sft_records(conv, col, split, weights, tools, openai=False)[0]
    entries, turns = [], iter(zip(weights, credits, strict=True))
    for k, m in enumerate(record["messages"]):
        if "weight" not in m:  # not an assistant message
            continue
        weight, steps = next(turns)
        lowest = min(steps, key=lambda c: c["advantage"])
        entries.append({"message": k, "weight": float(weight),
                        "advantage": lowest["advantage"],
                        "advantage_ci": lowest["advantage_ci"], "q": lowest["q"],
                        "v": lowest["v"], "n": lowest["n"], "n_state": lowest["n_state"],
                        "behavior_prob": lowest["behavior_prob"],
                        "flags": sorted({f for c in steps for f in c["flags"]}),
                        "steps": steps})
    return {"messages": record["messages"], "tools": tools, "credit": entries,
            "provenance": record["provenance"]}


_CREDIT = pa.struct([
    ("message", pa.int32()), ("weight", pa.float64()), ("advantage", pa.float64()),
    ("advantage_low", pa.float64()), ("advantage_high", pa.float64()), ("q", pa.float64()),
    ("v", pa.float64()), ("n", pa.int64()), ("n_state", pa.int64()),
    ("behavior_prob", pa.float64()), ("flags", pa.list_(pa.string())),
    ("steps", pa.string())])  # JSON text of the steps' credit
WEIGHTED_PARQUET_SCHEMA = pa.schema([*SFT_PARQUET_SCHEMA, ("credit", pa.list_(_CREDIT))])


def weighted_parquet_row(record: dict) -> dict:
    """A weighted record in WEIGHTED_PARQUET_SCHEMA's shape: the SFT row (arguments and
    tools as JSON text) and the credit, each entry's interval as two columns."""
    credit = [{**{k: v for k, v in c.items() if k != "advantage_ci"},
               "advantage_low": c["advantage_ci"][0], "advantage_high": c["advantage_ci"][1],
               "steps": canonical_json(c["steps"])} for c in record["credit"]]
    return {**parquet_row(record), "credit": credit}


def pairs_conversation(context: list[dict], last: dict, tools: list[dict] | None,
                       pairs: list[dict], prov: dict) -> dict:
    """The pairs anchored in one conversation, the conversation written once: `messages`
    up to the last anchored assistant message (`context` and `last`: neutral messages),
    and per pair the index of its rejected assistant message, the chosen message, its
    credit and provenance (`pairs`: {"message", "chosen" (neutral), "credit",
    "provenance"}). tracerl.export.expand.pair_examples gives TRL's and OpenAI's records."""
    return {"messages": [trl_message(m) for m in [*context, last]], "tools": tools,
            "pairs": [{"message": p["message"], "chosen": [trl_message(p["chosen"])],
                       "credit": p["credit"], "provenance": p["provenance"]} for p in pairs],
            "provenance": prov}


def pair_records(context: list[dict], rejected: dict, chosen: dict, tools: list[dict] | None,
                 prov: dict, credit: dict) -> tuple[dict, dict]:
    """(TRL preference, OpenAI preference) of one mined pair. TRL conversational
    preference (huggingface.co/docs/trl/dataset_formats): `{"prompt": [messages],
    "chosen": [assistant message], "rejected": [assistant message]}`; OpenAI preference
    (DPO) fine-tuning: `{"input": {"messages", "tools", "parallel_tool_calls"},
    "preferred_output": [assistant message], "non_preferred_output": [...]}` (arguments as
    JSON strings). Both with the pair's credit and provenance."""
    trl = {"prompt": [trl_message(m) for m in context], "chosen": [trl_message(chosen)],
           "rejected": [trl_message(rejected)], "tools": tools, "credit": credit,
           "provenance": prov}
    inputs: dict[str, Any] = {"messages": [openai_message(m) for m in context]}
    if tools:
        inputs["tools"] = tools
        inputs["parallel_tool_calls"] = False  # each side is one logged call
    openai = {"input": inputs, "preferred_output": [openai_message(chosen)],
              "non_preferred_output": [openai_message(rejected)], "credit": credit,
              "provenance": prov}
    return trl, openai
