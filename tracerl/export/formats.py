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


def tool_specs(names: Sequence[str] | None, definitions: dict[str, dict] | None
               ) -> list[dict] | None:
    """The `tools` of a record: each offered tool's definition when one was given, else a
    stub naming it (`parameters: {"type": "object"}`, any object: the log keeps no schema).
    With no offered list, every given definition; with neither, None."""
    if names is None:
        return None if not definitions else list(definitions.values())
    return [(definitions or {}).get(n) or {"type": "function", "function": {
        "name": n, "parameters": {"type": "object"}}} for n in names]


# --- records ------------------------------------------------------------------------------
def _flat(conv: Conversation, weights: Sequence[float]) -> list[tuple[dict, Turn | None, float]]:
    """(message, its turn if it is the turn's assistant message, weight) in order."""
    out = []
    for turn, w in zip(conv.turns, weights, strict=True):
        out += [(m, None, 0.0) for m in turn.before]
        out.append((turn.message, turn, w))
    return out


def sft_records(conv: Conversation, col: dict[str, list], split: str,
                weights: Sequence[float], tools: list[dict] | None) -> tuple[dict, dict]:
    """(TRL record, OpenAI record) of one conversation; `weights`: one per turn."""
    trl, openai, steps = [], [], []
    for k, (m, turn, w) in enumerate(_flat(conv, weights)):
        if turn is None:
            trl.append(trl_message(m))
            openai.append(openai_message(m))
            continue
        trl.append(trl_message(m, float(w)))
        openai.append(openai_message(m, 1 if w > 0 else 0))
        steps += step_provenance(col, turn.rows, message=k)
    prov = provenance(conv, split, steps)
    trl_record: dict[str, Any] = {"messages": trl, "tools": tools, "provenance": prov}
    openai_record: dict[str, Any] = {"messages": openai}
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


# --- the logging policy's credit (tracerl.export.credit) -------------------------------------
def turn_contexts(conv: Conversation) -> list[tuple[Turn, list[dict]]]:
    """Each turn with the (neutral) messages before it."""
    out, context = [], []
    for turn in conv.turns:
        context = [*context, *turn.before]
        out.append((turn, context))
        context = [*context, turn.message]
    return out


def weighted_record(conv: Conversation, turn: Turn, context: list[dict],
                    col: dict[str, list], split: str, weight: float, steps: list[dict],
                    tools: list[dict] | None) -> dict:
    """One assistant turn for weighted fine-tuning: TRL prompt-completion (conversational)
    with its `weight` and each of its steps' credit (`steps`: tracerl.export.credit
    StepCredit.step); the turn's advantage, interval, n and flags are its smallest-weight
    step's (the weight a turn takes)."""
    lowest = min(steps, key=lambda c: c["advantage"])
    return {"prompt": [trl_message(m) for m in context],
            "completion": [trl_message(turn.message)], "weight": float(weight),
            "advantage": lowest["advantage"], "advantage_ci": lowest["advantage_ci"],
            "q": lowest["q"], "v": lowest["v"], "n": lowest["n"],
            "behavior_prob": lowest["behavior_prob"],
            "flags": sorted({f for c in steps for f in c["flags"]}), "steps": steps,
            "tools": tools, "provenance": provenance(conv, split, step_provenance(
                col, turn.rows))}


WEIGHTED_PARQUET_SCHEMA = pa.schema([
    ("prompt", pa.string()), ("completion", pa.string()),  # JSON text of the message lists
    ("weight", pa.float64()), ("advantage", pa.float64()), ("advantage_low", pa.float64()),
    ("advantage_high", pa.float64()), ("q", pa.float64()), ("v", pa.float64()),
    ("n", pa.int64()), ("behavior_prob", pa.float64()), ("flags", pa.list_(pa.string())),
    ("steps", pa.string()), ("tools", pa.string()),
    ("provenance", pa.struct([("episode_id", pa.string()), ("task", pa.string()),
                              ("split", pa.string()), ("steps", pa.list_(pa.struct([
                                  ("t", pa.int32()), ("turn", pa.int32()),
                                  ("source_file", pa.string()), ("source_record", pa.int64()),
                                  ("source_pointer", pa.string())])))])),
])


def weighted_parquet_row(record: dict) -> dict:
    """A weighted record in WEIGHTED_PARQUET_SCHEMA's shape (messages as JSON text)."""
    return {"prompt": canonical_json(record["prompt"]),
            "completion": canonical_json(record["completion"]), "weight": record["weight"],
            "advantage": record["advantage"], "advantage_low": record["advantage_ci"][0],
            "advantage_high": record["advantage_ci"][1], "q": record["q"], "v": record["v"],
            "n": record["n"], "behavior_prob": record["behavior_prob"],
            "flags": record["flags"], "steps": canonical_json(record["steps"]),
            "tools": None if record["tools"] is None else canonical_json(record["tools"]),
            "provenance": record["provenance"]}


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
