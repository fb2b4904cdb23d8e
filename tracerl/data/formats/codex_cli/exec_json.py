"""`codex exec --json` output (what the CLI prints on stdout, saved to a file) → native step
records, one episode per thread.

Written by codex exec (openai/codex, codex-rs/exec/src/exec_events.rs: `ThreadEvent`,
`ThreadItem`; codex-rs/exec/src/event_processor_with_jsonl_output.rs maps the core's events
to them): one JSON object per line, `{type: thread.started {thread_id} | turn.started |
turn.completed {usage: {input_tokens, cached_input_tokens, output_tokens}} | turn.failed
{error: {message}} | item.started | item.updated | item.completed {item} | item.plan.delta |
request_user_input | error {message}}`. An item is `{id, type, ...}`: `agent_message
{text}`, `plan {text}`, `reasoning {text}`, `command_execution {command, aggregated_output,
exit_code, status: in_progress | completed | failed | declined}`, `file_change {changes:
[{path, kind}], status}`, `mcp_tool_call {server, tool, arguments, result: {content,
structured_content}, error: {message}, status}`, `collab_tool_call {tool, sender_thread_id,
receiver_thread_ids, prompt, agents_states, status}`, `web_search {query, action}`,
`todo_list {items: [{text, completed}]}`, `error {message}`. An item is started, updated and
completed under one id (`item_N`, counted by the printing process); the last state is read.
The user's prompt is not printed.

Mapping: each command execution, file change, MCP tool call, collab tool call and web
search is one `tool_call` row, its own turn (the stream does not say which calls one model
response made); the agent messages and reasoning before it, since the last call, are that
turn's content and `extra.reasoning`; an agent message (or plan) with no call after it in
its turn is a `message` row. A call's result is its terminal state: a command's
`aggregated_output` (a non-zero `exit_code` → observation.error `exit_code N`, `failed` /
`declined` without one → that status), an MCP call's `result` (its content's text, or the
structured content) or `error.message`, a file change's status (`failed` → error); a call
still `in_progress` when the stream ends has no result, and a web search none (its results
go to the model only). A to-do list, an error item, `turn.failed` and `error` lines are
system events; an event or item type this reader does not know (a newer CLI's) is counted
(`unknown_events`, `unknown_items`), not read. Tokens are the turns' `usage` summed. No
reward. episode_id: the thread id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import text_of

EVENTS = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed",
                    "item.started", "item.updated", "item.completed", "item.plan.delta",
                    "request_user_input", "error"})
ITEMS = frozenset({"agent_message", "plan", "reasoning", "command_execution", "file_change",
                   "mcp_tool_call", "collab_tool_call", "web_search", "todo_list", "error"})
CALLS = frozenset({"command_execution", "file_change", "mcp_tool_call", "collab_tool_call",
                   "web_search"})
_ITEM_EVENTS = frozenset({"item.started", "item.updated", "item.completed"})


def is_exec_event(value: Any) -> bool:
    """A line of `codex exec --json`: `thread.started` with its thread id, `turn.started`,
    or an item event whose item has an id and a known item type."""
    if not isinstance(value, dict):
        return False
    kind = value.get("type")
    if kind == "thread.started":  # (a field or two more from a newer CLI is fine)
        return isinstance(value.get("thread_id"), str) and len(value) <= 4
    if kind == "turn.started":
        return len(value) <= 3
    if kind in _ITEM_EVENTS:
        item = value.get("item")
        return len(value) <= 3 and isinstance(item, dict) and \
            isinstance(item.get("id"), str) and item.get("type") in ITEMS
    return False


def read_exec(lines: list[tuple[Any, str]], fallback_id: str,
              max_depth: int) -> Iterator[AdaptedRecord]:
    """One record per thread: a `thread.started` line opens a run (lines before the first
    belong to a thread named after the file); the runs of one thread id (`codex exec
    resume` prints it again, its item ids counted afresh) are one episode, in order."""
    runs: list[tuple[str, list[tuple[Any, str]]]] = []
    for value, where in lines:
        if isinstance(value, dict) and value.get("type") == "thread.started":
            runs.append((str(value.get("thread_id") or fallback_id), []))
            continue
        if not runs:
            runs.append((fallback_id, []))
        runs[-1][1].append((value, where))
    threads: dict[str, list[list[tuple[Any, str]]]] = {}
    for thread_id, events in runs:
        threads.setdefault(thread_id, []).append(events)
    for number, (thread_id, thread_runs) in enumerate(threads.items(), 1):
        try:
            rows, pointers, notes = thread_rows(thread_runs, thread_id, max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(number, "", error=exc, episode_id=thread_id)
            continue
        yield AdaptedRecord(number, "", rows, pointers, episode_id=thread_id, notes=notes)


def _items(events: list[tuple[Any, str]]) -> tuple[list[tuple[str, Any, str]], Counter]:
    """The thread's happenings in order: ("item", its last state, the pointer of its last
    event) at the item's first appearance, ("turn_end", None, where) at a turn's end,
    ("event", the line, where) for failures and errors; and the token usage summed."""
    order: list[tuple[str, Any, str]] = []
    latest: dict[str, tuple[dict, str]] = {}
    usage: Counter = Counter()
    for value, where in events:
        if not isinstance(value, dict):
            raise AdapterError(where, f"an event is an object, got {type(value).__name__}")
        kind = value.get("type")
        if kind in _ITEM_EVENTS:
            item = value.get("item")
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise AdapterError(f"{where}/item", "an item event's item is an object with "
                                                    "a string `id`")
            if item["id"] not in latest:
                order.append(("item", item["id"], where))
            latest[item["id"]] = (item, f"{where}/item")
        elif kind == "turn.completed":
            got = value.get("usage") if isinstance(value.get("usage"), dict) else {}
            for key in ("input_tokens", "output_tokens"):
                if type(got.get(key)) is int:
                    usage[key] += got[key]
            order.append(("turn_end", None, where))
        elif kind in ("turn.failed", "error"):
            order.append(("event", value, where))
            if kind == "turn.failed":
                order.append(("turn_end", None, where))
        elif kind not in EVENTS:  # a newer CLI's: counted, not read
            order.append(("unknown", kind, where))
    resolved = [(k, latest[x] if k == "item" else x, w) for k, x, w in order]
    return resolved, usage


def thread_rows(runs: list[list[tuple[Any, str]]], thread_id: str,
                max_depth: int) -> tuple[list[dict], list[str], Counter]:
    happenings: list[tuple[str, Any, str]] = []
    usage: Counter = Counter()
    for events in runs:
        got, used = _items(events)
        happenings += got
        usage.update(used)
    rows, pointers, notes = happenings_rows(happenings, usage, None, thread_id, max_depth)
    notes["exec_json_runs"] += len(runs)
    return rows, pointers, notes


def happenings_rows(happenings: list[tuple[str, Any, str]], usage: Counter,
                    model: str | None, episode_id: str,
                    max_depth: int) -> tuple[list[dict], list[str], Counter]:
    """The rows of one episode's happenings (`_items`; "user" a prompt)."""
    builder = EpisodeBuilder(episode_id, {"episode": {
        "agent_model": model, "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens")}}, max_depth)
    texts: list[tuple[str, str]] = []  # (text, pointer) since the last call
    reasoning: list[str] = []

    def flush() -> None:
        """The agent messages since the last call, with no call after them: a message
        row each (the reasoning before the first goes with it)."""
        for k, (text, at) in enumerate(texts):
            builder.assistant(at, text, [], extra={"reasoning": "\n".join(reasoning)}
                              if reasoning and k == 0 else None,
                              metadata={"behavior_policy": model} if model else None)
        if reasoning and not texts:
            builder.notes["reasoning_without_action"] += 1
        texts.clear()
        reasoning.clear()

    for kind, got, _ in happenings:
        if kind == "turn_end":
            flush()
            continue
        if kind == "unknown":
            builder.notes["unknown_events"] += 1
            continue
        if kind == "user":
            flush()
            builder.event("user", "message", content=got)
            continue
        if kind == "event":
            error = got.get("error") if got.get("type") == "turn.failed" else got
            message = error.get("message") if isinstance(error, dict) else None
            builder.event("system", "message", content=message, error=str(message))
            continue
        item, at = got
        itype = item.get("type")
        if itype in ("agent_message", "plan"):
            if isinstance(item.get("text"), str):
                texts.append((item["text"], at))
        elif itype == "reasoning":
            if isinstance(item.get("text"), str) and item["text"]:
                reasoning.append(item["text"])
        elif itype in CALLS:
            name, args = _call(item)
            content = "\n".join(t for t, _ in texts) or None
            builder.assistant(texts[0][1] if texts else at, content,
                              [(item["id"], name, args, at)],
                              extra={"reasoning": "\n".join(reasoning)} if reasoning else None,
                              metadata={"behavior_policy": model} if model else None)
            texts.clear()
            reasoning.clear()
            result = _result(item)
            if result is not None:
                builder.tool_result(at, item["id"], *result)
        elif itype == "todo_list":
            builder.event("system", "message", content={"todo_list": item.get("items")})
        elif itype == "error":
            builder.event("system", "message", content=item.get("message"),
                          error=str(item.get("message")))
        else:  # a newer CLI's item: counted, not read
            builder.notes["unknown_items"] += 1
    flush()
    rows, pointers = builder.finish("/", None, None, None, None)
    return list(rows), list(pointers), builder.notes


def _call(item: dict) -> tuple[str, Any]:
    """(tool name, arguments) of a call item."""
    kind = item["type"]
    if kind == "command_execution":
        return "command_execution", {"command": item.get("command")}
    if kind == "file_change":
        return "file_change", {"changes": item.get("changes")}
    if kind == "mcp_tool_call":
        server, tool = item.get("server"), item.get("tool")
        name = f"{server}__{tool}" if isinstance(server, str) and server else tool
        return name, item.get("arguments")
    if kind == "collab_tool_call":
        return item.get("tool"), {k: item.get(k) for k in (
            "sender_thread_id", "receiver_thread_ids", "prompt") if k in item}
    return "web_search", {k: item[k] for k in ("query", "action") if k in item}


def _result(item: dict) -> tuple[Any, str | None] | None:
    """(the call's result, its error) once the call has ended; None while it runs, and for
    a web search (whose results only the model sees)."""
    kind, status = item["type"], item.get("status")
    if kind == "web_search" or status in (None, "in_progress"):
        return None
    if kind == "command_execution":
        code = item.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            error = f"exit_code {code}"
        else:
            error = status if status in ("failed", "declined") else None
        return item.get("aggregated_output"), error
    if kind == "mcp_tool_call":
        error = item.get("error")
        if isinstance(error, dict):
            return None, str(error.get("message"))
        result = item.get("result") if isinstance(item.get("result"), dict) else {}
        content = text_of(result.get("content")) if result.get("content") else None
        return (content if content is not None else result.get("structured_content")), \
            "failed" if status == "failed" else None
    if kind == "collab_tool_call":
        return item.get("agents_states"), "failed" if status == "failed" else None
    return status, "failed" if status == "failed" else None  # a file change


# --- before the 0.4x rewrite ---------------------------------------------------------------
# `codex exec --json` printed the config summary as one object (`{workdir, model, provider,
# approval, sandbox, ...}`), then `{prompt}`, then each core event as serialised
# (codex-rs/exec/src/event_processor_with_json_output.rs of 2025 summer; codex-rs/core
# protocol.rs `Event {id, msg: EventMsg}`, the message tagged by `type`, its deltas left
# out): `session_configured {session_id, model}`, `agent_message {message}`,
# `agent_reasoning {text}`, `exec_command_begin {call_id, command: [..], cwd}` /
# `exec_command_end {call_id, stdout, stderr, aggregated_output?, exit_code}`,
# `mcp_tool_call_begin {call_id, invocation: {server, tool, arguments}}` / `_end {call_id,
# result: {Ok: CallToolResult} | {Err: text}}`, `patch_apply_begin {call_id, changes}` /
# `_end {call_id, stdout, stderr, success}`, `web_search_begin {call_id}` / `_end {call_id,
# query}`, `token_count`, `error`, `stream_error`, `task_started`, `task_complete`, ...
# They are read as the items the rewrite made of them: a call per begin (its end the
# result), so both versions give the same rows.
_CONFIG_KEYS = frozenset({"workdir", "model", "provider", "approval", "sandbox"})


def is_legacy_line(value: Any) -> bool:
    """A line of the old `codex exec --json`: an event `{id, msg: {type}}`, or the config
    summary that starts the output."""
    if not isinstance(value, dict):
        return False
    msg = value.get("msg")
    if value.keys() == {"id", "msg"} and isinstance(msg, dict):
        return isinstance(value["id"], str) and isinstance(msg.get("type"), str)
    return value.keys() >= _CONFIG_KEYS and all(isinstance(v, str) for v in value.values())


def read_legacy(lines: list[tuple[Any, str]], fallback_id: str,
                max_depth: int) -> Iterator[AdaptedRecord]:
    """The old output: one episode (one `codex exec` run)."""
    ends: dict[str, dict] = {}
    for value, _ in lines:
        msg = value.get("msg") if isinstance(value, dict) else None
        if isinstance(msg, dict) and str(msg.get("type", "")).endswith("_end") and \
                isinstance(msg.get("call_id"), str):
            ends[msg["call_id"]] = msg
    happenings: list[tuple[str, Any, str]] = []
    usage: Counter = Counter()
    episode_id, model = fallback_id, None
    for value, where in lines:
        if not isinstance(value, dict):
            yield AdaptedRecord(1, "", error=AdapterError(where, "an event is an object"),
                                episode_id=episode_id)
            return
        msg = value.get("msg")
        if not isinstance(msg, dict):
            if isinstance(value.get("prompt"), str):
                happenings.append(("user", value["prompt"], where))
            elif isinstance(value.get("model"), str):
                model = value["model"]
            continue
        kind, at = msg.get("type"), f"{where}/msg"
        if kind == "session_configured":
            if isinstance(msg.get("session_id"), str) and msg["session_id"]:
                episode_id = msg["session_id"]
            model = msg["model"] if isinstance(msg.get("model"), str) else model
        elif kind == "agent_message":
            happenings.append(("item", ({"id": at, "type": "agent_message",
                                         "text": msg.get("message")}, at), where))
        elif kind == "agent_reasoning":
            happenings.append(("item", ({"id": at, "type": "reasoning",
                                         "text": msg.get("text")}, at), where))
        elif kind in _LEGACY_BEGINS:
            end = ends.get(msg.get("call_id"))
            happenings.append(("item", (_legacy_item(kind, msg, end), at), where))
        elif kind in ("error", "stream_error"):
            happenings.append(("event", {"type": "error", "message": msg.get("message")},
                               where))
        elif kind == "token_count":
            info = msg.get("info") if isinstance(msg.get("info"), dict) else None
            total = info.get("total_token_usage") if info else msg
            if isinstance(total, dict):
                usage = Counter({k: total[k] for k in ("input_tokens", "output_tokens")
                                 if type(total.get(k)) is int})
    try:
        rows, pointers, notes = happenings_rows(happenings, usage, model, episode_id,
                                                max_depth)
    except AdapterError as exc:
        yield AdaptedRecord(1, "", error=exc, episode_id=episode_id)
        return
    yield AdaptedRecord(1, "", rows, pointers, episode_id=episode_id, notes=notes)


_LEGACY_BEGINS = frozenset({"exec_command_begin", "mcp_tool_call_begin", "patch_apply_begin",
                            "web_search_begin"})


def _legacy_item(kind: str, begin: dict, end: dict | None) -> dict:
    """The item the rewrite makes of a begin event and its end (None: still running)."""
    call_id = begin.get("call_id")
    if kind == "exec_command_begin":
        command = begin.get("command")
        item = {"type": "command_execution", "command": " ".join(map(str, command))
                if isinstance(command, list) else command, "status": "in_progress"}
        if end is not None:
            code = end.get("exit_code")
            output = end.get("aggregated_output")
            if output is None:
                output = "".join(x for x in (end.get("stdout"), end.get("stderr"))
                                 if isinstance(x, str))
            item.update(aggregated_output=output, exit_code=code,
                        status="completed" if code == 0 else "failed")
    elif kind == "mcp_tool_call_begin":
        invocation = begin.get("invocation") if isinstance(begin.get("invocation"), dict) \
            else begin
        item = {"type": "mcp_tool_call", "server": invocation.get("server"),
                "tool": invocation.get("tool"), "arguments": invocation.get("arguments"),
                "status": "in_progress"}
        if end is not None:
            result = end.get("result")
            if isinstance(result, dict) and "Err" in result:
                item.update(status="failed", error={"message": result["Err"]})
            else:
                ok = result.get("Ok") if isinstance(result, dict) and "Ok" in result \
                    else result
                ok = ok if isinstance(ok, dict) else {}
                failed = ok.get("isError") is True or end.get("success") is False
                item.update(result={"content": ok.get("content"),
                                    "structured_content": ok.get("structuredContent")},
                            status="failed" if failed else "completed")
    elif kind == "patch_apply_begin":
        changes = begin.get("changes")
        item = {"type": "file_change", "changes": [{"path": p} for p in changes]
                if isinstance(changes, dict) else changes, "status": "in_progress"}
        if end is not None:
            item["status"] = "completed" if end.get("success") is not False else "failed"
    else:
        item = {"type": "web_search", "query": end.get("query") if end else None}
    return {"id": call_id, **item}
