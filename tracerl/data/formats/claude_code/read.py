"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`, and
the `<session>/subagents/agent-<id>.jsonl` of the sub-agents it started) → native step
records, one episode per session and one per sub-agent (sidechain) session.

One JSON event per line, linked by `uuid` → `parentUuid`, with `sessionId`, `timestamp`,
`isSidechain`, `agentId` (sub-agents), `cwd`, `gitBranch`, `version` and `type`:
- `assistant`: `message` is an Anthropic Messages API message (`model`, `id`,
  `content` blocks text / thinking / tool_use, `usage`). One API response is often
  written over several lines sharing `message.id`: they are one turn (its tool_use blocks
  parallel calls of that turn, in the order written), placed where its first line is.
  A message of model `<synthetic>` or an `isApiErrorMessage` line is Claude Code's own
  text, not the model's: a system event.
- `user`: the user's text (an event), or `tool_result` blocks (`tool_use_id`, `content`,
  `is_error`) answering the calls (a result for a call the transcript does not hold, as
  when it starts mid-conversation, is an environment event, counted
  `results_without_call`; a second result for an answered call is left out, counted
  `duplicate_tool_results`); `isMeta` lines (injected context) and the
  `isCompactSummary` line after a compaction are system events.
- `system` lines with text content are system events; `summary` (session titles),
  `file-history-snapshot`, `progress`, `queue-operation` and other line types are not
  conversation turns and not agent actions: skipped (counted in the summary's notes).
Episodes: lines are grouped by session (`sessionId`) and, for sidechains, by sub-agent
(`agentId`; an older transcript without agentId starts a sidechain at each sidechain line
whose parent is not a sidechain line of the same group). A sub-agent whose agentId starts
`acompact` is Claude Code's context-compaction summariser, not a tool-using agent: it is
skipped (counted). episode_id = the sessionId, a sub-agent's `<sessionId>/agent-<agentId>`.
A session is a tree, not a list: each line names its parent (`parentUuid`; a
`compact_boundary` line, whose parentUuid is null, names it in `logicalParentUuid`), and a
rewind (the user edits or retries an earlier prompt) starts a second child of an earlier
line, leaving the abandoned branch in the file. The episode is the live branch: the chain
from the root to the last line written, plus the lines that hang off it without
continuing the conversation (a tool_result line answering a call of its parent, the
other lines of an API response already on the chain, system lines, progress lines). Any
other line whose parent is on the episode (a second user prompt, an assistant reply of
another API response) starts an abandoned branch: it and every line below it are not
actions of the episode (counted in the summary's notes: `abandoned_branches`,
`abandoned_branch_messages`). Lines without a uuid, or whose parent is not in the file,
are kept. A `compact_boundary` whose `logicalParentUuid` is not in the file (the file
was cut or rotated) continues the line written before it: the session's first half is
kept, never an abandoned branch, and counted (`compactions_with_parent_outside_file`).
The kept lines are read in file order; a uuid already seen in the file is skipped.

A sub-agent transcript `agent-<id>.jsonl` may have a sidecar `agent-<id>.meta.json`
(`{agentType, description, toolUseId}`: the Task call of the parent session that started
it): read with the transcript (`sidecars`), its fields under the episode's
`extra.episode` (`agent_type`, `agent_description`, `parent_tool_use_id`); read as an
input of its own, such a file is no record (counted: `subagent_meta_files`). So are the
other files Claude Code keeps beside the transcripts (`side_file`): the project's
`sessions-index.json` and, for a Workflow run (whose agents' transcripts are
`<session>/subagents/workflows/<runId>/agent-<id>.jsonl`), its `workflows/<runId>.json`
snapshot and `journal.jsonl` (counted: `sessions_index_files`, `workflow_run_files`,
`workflow_journal_files`).

A record is one episode with at least one agent turn (a session that only ran slash
commands has none and is not one; counted in notes), plus each line that cannot be read
(not JSON, over the size limit), which is quarantined alone: the rest of its session is
kept. Rows: source_record = the episode's first line, source_pointer
`/lines/<line>/message/content/<block>`. No reward is recorded by Claude Code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from tracerl.data.formats import AdaptedRecord, AdapterError
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.messages import normalize, text_of
from tracerl.data.formats.common.records import json_records
from tracerl.data.ingest.limits import Limits

_SKIPPED = ("summary", "file-history-snapshot", "progress", "queue-operation")
_EPISODE_FIELDS = ("cwd", "gitBranch", "version", "userType", "slug")


@dataclass
class _Turn:
    line: int
    msg_id: str | None
    model: str | None
    blocks: list = field(default_factory=list)
    pointers: list = field(default_factory=list)
    usage: dict | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class _Episode:
    key: tuple
    episode_id: str
    first_line: int
    items: list = field(default_factory=list)  # _Turn | (line, dict event line)
    turns: dict = field(default_factory=dict)  # message id -> _Turn
    lines: list = field(default_factory=list)  # (line number, line), file order
    facts: dict = field(default_factory=dict)
    agent_id: str | None = None
    tools: list | None = None  # the stream's `system` init line's tool names
    result: dict | None = None  # the stream's last `result` line


_META = {"agentType": "agent_type", "description": "agent_description",
         "toolUseId": "parent_tool_use_id"}


def sidecars(path: Path) -> list[Path]:
    """A sub-agent transcript's `agent-<id>.meta.json`, read with it."""
    meta = _meta_path(path)
    return [meta] if meta is not None and meta.is_file() else []


def _meta_path(path: Path) -> Path | None:
    name = path.name.removesuffix(".gz")
    if not (name.startswith("agent-") and name.endswith(".jsonl")):
        return None
    return path.with_name(name.removesuffix(".jsonl") + ".meta.json")


def is_meta_file(path: Path) -> bool:
    return path.name.startswith("agent-") and path.name.endswith(".meta.json")


def side_file(path: Path) -> str | None:
    """Which of Claude Code's other files in a project folder `path` is, by its name: the
    project's `sessions-index.json`, a Workflow run's `<session>/workflows/<runId>.json`
    snapshot or its `subagents/workflows/<runId>/journal.jsonl` (a `started` / `result`
    line per agent). None of them is a transcript; each is counted, not read."""
    name = path.name.removesuffix(".gz")
    if name == "sessions-index.json":
        return "sessions_index_files"
    if name == "journal.jsonl" and path.parent.parent.name == "workflows":
        return "workflow_journal_files"
    if name.endswith(".json") and path.parent.name == "workflows":
        return "workflow_run_files"
    return None


def _meta(path: Path) -> dict:
    """The episode facts of a sub-agent's meta.json sidecar (none when unreadable)."""
    meta = _meta_path(path)
    if meta is None or not meta.is_file():
        return {}
    try:
        doc = orjson.loads(meta.read_bytes()[:1 << 20])
    except (OSError, orjson.JSONDecodeError):
        return {}
    return {ours: doc[theirs] for theirs, ours in _META.items()
            if isinstance(doc, dict) and isinstance(doc.get(theirs), str)}


def read_claude_code(path: Path, limits: Limits | None = None,
                     options: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    if is_meta_file(path):  # a sub-agent's sidecar, given alone: read with its transcript
        yield AdaptedRecord(0, "", notes=Counter(subagent_meta_files=1), is_record=False)
        return
    side = side_file(path)
    if side is not None:  # an index or a Workflow run's record: no conversation in it
        yield AdaptedRecord(0, "", notes=Counter({side: 1}), is_record=False)
        return
    meta = _meta(path)
    episodes: dict[tuple, _Episode] = {}
    line_episode: dict[str, tuple] = {}  # uuid -> episode key (sidechains without agentId)
    seen: set[str] = set()
    parent_of: dict[str, Any] = {}  # uuid -> its parent's uuid, every line of the file
    passive: set[str] = set()  # uuids of lines that are not conversation turns
    notes: Counter = Counter()
    last_session: str | None = None
    results: dict[Any, dict] = {}  # session -> its last `result` line (SDK streams)
    for raw in json_records(path, limits):
        if raw.error is not None:
            yield AdaptedRecord(raw.number, raw.pointer, error=raw.error, text=raw.text)
            continue
        line = raw.value
        if not isinstance(line, dict):
            yield AdaptedRecord(raw.number, "", error=AdapterError(
                "<record>", f"a transcript line is an object, got {type(line).__name__}"),
                text=str(line)[:200])
            continue
        kind = line.get("type")
        uuid = line.get("uuid")
        session = _session(line)
        if session is None:  # an SDK stream's tool-result lines name no session
            session = last_session
        last_session = session
        if isinstance(uuid, str):
            if uuid in seen:
                notes["duplicate_lines"] += 1
                continue
            seen.add(uuid)
            parent = line.get("parentUuid")
            parent_of[uuid] = parent if parent is not None else line.get("logicalParentUuid")
        if kind not in ("user", "assistant", "system"):
            if isinstance(uuid, str):
                passive.add(uuid)
            if kind == "result":
                results[session] = line
            notes[f"skipped_{kind}_lines" if isinstance(kind, str) else "skipped_lines"] += 1
            continue
        key = _key(line, session, line_episode)
        if isinstance(uuid, str):
            line_episode[uuid] = key
        episode = episodes.get(key)
        if episode is None:
            name = session if session is not None else path.name.rsplit(".jsonl", 1)[0]
            agent = line.get("agentId") if isinstance(line.get("agentId"), str) else None
            suffix = f"/agent-{agent}" if agent else (
                f"/sidechain-{key[2]}" if key[1] == "sidechain" else
                f"/task-{key[2]}" if key[1] == "task" else "")
            episode = _Episode(key, f"{name}{suffix}", raw.number, agent_id=agent)
            episodes[key] = episode
        if kind == "system" and line.get("subtype") == "init" \
                and isinstance(line.get("tools"), list):
            episode.tools = [t for t in line["tools"] if isinstance(t, str)]
        for name in _EPISODE_FIELDS:
            if line.get(name) is not None and name not in episode.facts:
                episode.facts[name] = line[name]
        episode.lines.append((raw.number, line))
    for session, result in results.items():
        main = episodes.get((session, "main", None))
        if main is not None:
            main.result = result
    for episode in episodes.values():
        live, abandoned, joined = _live_branch(episode.lines, parent_of, passive)
        if joined:  # kept, and said: the start of the session hangs on a line not here
            notes["compactions_with_parent_outside_file"] += joined
        if abandoned:
            notes["abandoned_branches"] += abandoned
            notes["abandoned_branch_messages"] += len(episode.lines) - len(live)
        for number, line in live:
            _add(episode, line, number)
        episode.lines = []
        if episode.agent_id is not None:
            episode.facts.update(meta)
    for episode in episodes.values():
        if episode.agent_id is not None and episode.agent_id.startswith("acompact"):
            notes["compaction_agents_skipped"] += 1
            continue
        if not any(isinstance(i, _Turn) for i in episode.items):
            notes["sessions_without_agent_turns"] += 1
            continue
        try:
            rows, pointers, built = _rows(episode, limits.max_depth)
        except AdapterError as exc:
            yield AdaptedRecord(episode.first_line, "", error=exc,
                                episode_id=episode.episode_id)
            continue
        yield AdaptedRecord(episode.first_line, "", rows, pointers,
                            episode_id=episode.episode_id, notes=built)
    if notes:
        yield AdaptedRecord(0, "", notes=notes, is_record=False)  # facts to count only


def _live_branch(lines: list, parent_of: dict[str, Any], passive: set[str]
                 ) -> tuple[list, int, int]:
    """(the lines of an episode's live branch, file order; how many abandoned branches
    were left out; how many compaction markers pointing outside the file were joined to
    the line before them): see the module docstring."""
    uuids = [line.get("uuid") for _, line in lines]
    last = next((u for u in reversed(uuids) if isinstance(u, str)), None)
    chain: set[str] = set()
    joined = 0
    u = last
    while isinstance(u, str) and u in parent_of and u not in chain:
        chain.add(u)
        top, u = u, parent_of[u]
        if isinstance(u, str) and u not in parent_of:
            # a compaction marker whose logical parent is not in the file (the transcript
            # was cut or rotated): the lines before it are still this session's start
            before = _line_before(top, lines, uuids)
            if before is not None:
                joined += 1
                u = before
    if all(u in chain for u in uuids if isinstance(u, str)):
        return lines, 0, joined  # no branch: every line is on the chain
    live_messages = {_message_id(line) for _, line in lines
                     if line.get("uuid") in chain and line.get("type") == "assistant"}
    live_messages.discard(None)
    status: dict[str, bool] = {}  # uuid -> on the live branch

    def alive(parent: Any) -> bool | None:
        """Whether a parent is on the live branch; None: not in this episode."""
        seen = []
        while parent in passive and parent not in status:  # progress lines: see through
            seen.append(parent)
            parent = parent_of.get(parent)
        found = status.get(parent) if isinstance(parent, str) else None
        for p in seen:
            if found is not None:
                status[p] = found
        return found

    kept, abandoned = [], 0
    for (number, line), u in zip(lines, uuids, strict=True):
        if not isinstance(u, str):
            kept.append((number, line))
            continue
        parent = alive(parent_of.get(u))
        live = u in chain or parent is None or (parent and _hangs_off(line, live_messages))
        if not live and parent:
            abandoned += 1  # the first line of a branch
        status[u] = bool(live)
        if live:
            kept.append((number, line))
    return kept, abandoned, joined


def _line_before(boundary: str, lines: list, uuids: list) -> str | None:
    """The uuid of the line written just before a `compact_boundary` line (None when
    `boundary` is no such line or nothing precedes it)."""
    at = uuids.index(boundary)
    line = lines[at][1]
    if not (line.get("type") == "system" and line.get("subtype") == "compact_boundary"):
        return None
    return next((u for u in reversed(uuids[:at]) if isinstance(u, str)), None)


def _message_id(line: dict) -> str | None:
    message = line.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    return mid if isinstance(mid, str) else None


def _hangs_off(line: dict, live_messages: set) -> bool:
    """A line off the chain that does not continue the conversation: tool results, the
    other lines of an API response on the chain, system and injected lines."""
    kind = line.get("type")
    if kind == "system" or line.get("isMeta") is True:
        return True
    message = line.get("message")
    if kind == "assistant":
        return _message_id(line) in live_messages or (isinstance(message, dict) and (
            message.get("model") == "<synthetic>")) or line.get("isApiErrorMessage") is True
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def _session(line: dict) -> str | None:
    for name in ("sessionId", "session_id"):  # a transcript's, an SDK stream's
        if isinstance(line.get(name), str) and line[name]:
            return line[name]
    return None


def _key(line: dict, session: str | None, line_episode: dict[str, tuple]) -> tuple:
    if line.get("isSidechain") is not True:
        task = line.get("parent_tool_use_id")
        if isinstance(task, str) and task:  # an SDK stream: a sub-agent's message
            return (session, "task", task)
        return (session, "main", None)
    agent = line.get("agentId")
    if isinstance(agent, str):
        return (session, "agent", agent)
    parent = line_episode.get(line.get("parentUuid"))
    if parent is not None and parent[1] == "sidechain":
        return parent
    return (session, "sidechain", line.get("uuid"))


def _add(episode: _Episode, line: dict, number: int) -> None:
    message = line.get("message")
    model = message.get("model") if isinstance(message, dict) else None
    synthetic = model == "<synthetic>" or line.get("isApiErrorMessage") is True
    if line.get("type") == "assistant" and isinstance(message, dict) and not synthetic:
        msg_id = message.get("id") if isinstance(message.get("id"), str) else None
        turn = episode.turns.get(msg_id) if msg_id is not None else None
        if turn is None:
            turn = _Turn(number, msg_id, model if isinstance(model, str) else None)
            if msg_id is not None:
                episode.turns[msg_id] = turn
            episode.items.append(turn)
        content = message.get("content")
        blocks = content if isinstance(content, list) else (
            [{"type": "text", "text": content}] if isinstance(content, str) else [])
        for k, block in enumerate(blocks):
            turn.blocks.append(block)
            turn.pointers.append(f"/lines/{number}/message/content/{k}")
        if isinstance(message.get("usage"), dict):
            turn.usage = message["usage"]  # the last line's usage covers the whole message
        for name in ("stop_reason", "requestId"):
            value = message.get(name) if name in message else line.get(name)
            if value is not None:
                turn.extra[name] = value
        if turn.msg_id is not None:
            turn.extra["message_id"] = turn.msg_id
        return
    episode.items.append((number, line))


def _tokens(usage: Any) -> tuple[int, int]:
    if not isinstance(usage, dict):
        return 0, 0
    prompt = sum(v for k, v in usage.items() if type(v) is int and k in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    out = usage.get("output_tokens")
    return prompt, out if type(out) is int else 0


def _rows(episode: _Episode, max_depth: int) -> tuple[list[dict], list[str], Counter]:
    turns = [i for i in episode.items if isinstance(i, _Turn)]
    prompt = completion = 0
    for t in turns:
        p, c = _tokens(t.usage)
        prompt, completion = prompt + p, completion + c
    model = next((t.model for t in turns if t.model), None)
    common = {"metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "prompt_tokens": prompt or None,
                          "completion_tokens": completion or None, **_result_facts(episode)}}
    if episode.tools is not None:
        common["state"] = {"available_tools": sorted(set(episode.tools))}
    builder = EpisodeBuilder(episode.episode_id, common, max_depth)
    for item in episode.items:
        if isinstance(item, _Turn):
            where = f"/lines/{item.line}/message"
            msg = normalize({"role": "assistant", "content": item.blocks}, where, max_depth)
            for call, pointer in zip(msg.calls, _call_pointers(item), strict=False):
                call.pointer = pointer
            extra = dict(item.extra)
            if item.usage is not None:
                extra["usage"] = item.usage
            if msg.reasoning:
                extra["reasoning"] = msg.reasoning
            builder.assistant(where, msg.text, msg.calls, extra=extra or None,
                              metadata={"behavior_policy": item.model or model})
            for r in msg.results:  # a server tool's result, in the same message
                builder.tool_result(r.pointer, r.call_id, r.content, r.error, r.name)
            continue
        number, line = item
        where = f"/lines/{number}/message"
        message = line.get("message")
        kind = line.get("type")
        if kind == "system" or line.get("isMeta") is True \
                or line.get("isCompactSummary") is True or not isinstance(message, dict):
            text = text_of(message.get("content")) if isinstance(message, dict) \
                else text_of(line.get("content"))
            if text:
                builder.event("system", "message", content=text)
            continue
        if kind == "assistant":  # synthetic: Claude Code's own words
            text = text_of(message.get("content"))
            if text:
                builder.event("system", "message", content=text)
            continue
        _feed_user(builder, normalize({**message, "role": "user"}, where, max_depth))
    kept = dict(episode.facts)
    if episode.agent_id is not None:
        kept["agent_id"] = episode.agent_id
    rows, pointers = builder.finish(f"/lines/{episode.first_line}", None, None, None,
                                    {"episode": kept} if kept else None)
    return rows, pointers, builder.notes


def _result_facts(episode: _Episode) -> dict:
    """An SDK stream's last `result` line: its cost, duration and subtype (`success`,
    `error_max_turns`, `error_during_execution`, ...)."""
    result = episode.result
    if result is None:
        return {}
    facts: dict = {}
    cost = result.get("total_cost_usd", result.get("cost_usd"))
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        facts["agent_cost_usd"] = float(cost)
    duration = result.get("duration_ms")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        facts["duration_s"] = duration / 1000
    if isinstance(result.get("subtype"), str):
        facts["termination_reason"] = result["subtype"]
    return facts


def _feed_user(builder: EpisodeBuilder, msg: Any) -> None:
    """A user line: its tool results answer their calls; a result whose call is not in
    the transcript is an environment event, a second result for an answered call is left
    out (both counted); then its text."""
    results = []
    for r in msg.results:
        if builder.match(r.call_id, r.name) is not None:
            results.append(r)
        elif r.call_id is not None and r.call_id in builder.answered_ids:
            builder.notes["duplicate_tool_results"] += 1
        else:
            builder.notes["results_without_call"] += 1
            builder.event("environment", "tool_result", content=r.content,
                          call_id=r.call_id, error=r.error)
    if results or msg.text is not None or not msg.results:
        builder.feed(replace(msg, results=results))


def _call_pointers(turn: _Turn) -> list[str]:
    return [p for b, p in zip(turn.blocks, turn.pointers, strict=True)
            if isinstance(b, dict) and b.get("type") in ("tool_use", "server_tool_use")]

