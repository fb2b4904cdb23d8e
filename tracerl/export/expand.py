"""Per-conversation export records (`kto/`, `pairs/` with `records: conversation`, the
default) as the per-example records trainers read: TRL's unpaired preference
`{prompt, completion, label}`, TRL's preference `{prompt, chosen, rejected}` and OpenAI's
preference fine-tuning `{input, preferred_output, non_preferred_output}`.

The files keep each conversation once, so they grow with the logs; an example per
assistant turn repeats the conversation before it (a conversation of T turns: T prompts,
~T²/2 messages). Expand where the trainer reads, e.g. with Hugging Face `datasets`:

    ds = load_dataset("json", data_files="kto/train.jsonl", split="train")
    ds = ds.map(kto_batch, batched=True, remove_columns=ds.column_names)

(`pairs_batch` / `pairs_openai_batch` likewise), or write the files once:
`for record in read: for example in kto_examples(record): write(example)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracerl.export.formats import openai_message


def _plain(m: dict) -> dict:
    """A TRL message without the export's own keys (a KTO `label`)."""
    return {k: v for k, v in m.items() if k != "label"}


def _steps_at(record: dict, message: int) -> dict:
    prov = record["provenance"]
    return {**{k: v for k, v in prov.items() if k != "steps"},
            "steps": [{k: v for k, v in s.items() if k != "message"}
                      for s in prov["steps"] if s.get("message") == message]}


def kto_examples(record: dict) -> list[dict]:
    """TRL unpaired-preference records of one `kto/` conversation: one per assistant
    message with something before it, its label, the conversation's tools, the step's
    provenance."""
    messages, out = record["messages"], []
    for k, m in enumerate(messages):
        if m["role"] != "assistant" or k == 0:
            continue
        out.append({"prompt": [_plain(x) for x in messages[:k]], "completion": [_plain(m)],
                    "label": m["label"], "tools": record["tools"],
                    "provenance": _steps_at(record, k)})
    return out


def _neutral(m: dict) -> dict:
    """A TRL message as the neutral message tracerl.export.formats shapes."""
    if m["role"] == "assistant":
        return {"role": "assistant", "content": m["content"],
                "tool_calls": [{"id": c["id"], "name": c["function"]["name"],
                                "arguments": c["function"]["arguments"]}
                               for c in m.get("tool_calls") or ()]}
    return dict(m)


def pair_examples(record: dict, openai: bool = False) -> list[dict]:
    """The preference records of one `pairs/` conversation, one per pair: TRL's
    `{prompt, chosen, rejected, tools}` or (openai) OpenAI's `{input: {messages, tools,
    parallel_tool_calls}, preferred_output, non_preferred_output}` (arguments as JSON
    strings), each with the pair's credit and provenance."""
    messages, tools, out = record["messages"], record["tools"], []
    for p in record["pairs"]:
        k = p["message"]
        if not openai:
            out.append({"prompt": messages[:k], "chosen": p["chosen"],
                        "rejected": [messages[k]], "tools": tools, "credit": p["credit"],
                        "provenance": p["provenance"]})
            continue
        inputs: dict[str, Any] = {"messages": [openai_message(_neutral(m))
                                               for m in messages[:k]]}
        if tools:
            inputs["tools"] = tools
            inputs["parallel_tool_calls"] = False  # each side is one logged call
        out.append({"input": inputs,
                    "preferred_output": [openai_message(_neutral(m)) for m in p["chosen"]],
                    "non_preferred_output": [openai_message(_neutral(messages[k]))],
                    "credit": p["credit"], "provenance": p["provenance"]})
    return out


def _batch(records: Iterable[dict], expand: Any) -> dict[str, list]:
    rows = [e for r in records for e in expand(r)]
    keys = list(rows[0]) if rows else []
    return {k: [r[k] for r in rows] for k in keys}


def _records(batch: dict[str, list]) -> list[dict]:
    n = len(next(iter(batch.values()), []))
    return [{k: v[i] for k, v in batch.items()} for i in range(n)]


def kto_batch(batch: dict[str, list]) -> dict[str, list]:
    """`datasets.Dataset.map(batched=True)` form of kto_examples."""
    return _batch(_records(batch), kto_examples)


def pairs_batch(batch: dict[str, list]) -> dict[str, list]:
    """`datasets.Dataset.map(batched=True)` form of pair_examples (TRL)."""
    return _batch(_records(batch), pair_examples)


def pairs_openai_batch(batch: dict[str, list]) -> dict[str, list]:
    """`datasets.Dataset.map(batched=True)` form of pair_examples (OpenAI)."""
    return _batch(_records(batch), lambda r: pair_examples(r, openai=True))
