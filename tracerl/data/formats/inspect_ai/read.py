"""Inspect AI eval logs (`.json` and the zipped `.eval`) → native step records, one episode
per sample and epoch.

The log (UKGovernmentBEIS/inspect_ai, src/inspect_ai/log/_log.py EvalLog, written by
log/_recorders/json.py and eval.py): `{version, status, eval: {eval_id, run_id, task,
model, dataset, ...}, plan, results, stats, error?, samples: [EvalSample]}`; `.eval` is a
zip of the same: `header.json` (the log without samples; a run that has not finished has
only `_journal/start.json` `{version, eval, plan}`; before 0.3.47 `start.json` and
`results.json`), `samples/<id>_epoch_<n>.json` (one EvalSample each), summaries and
reductions (not read). An EvalSample: `{id, epoch, input, target, messages: [ChatMessage],
output, scores: {scorer: Score{value, answer, explanation, metadata}} (schema 1: one
`score`), metadata, model_usage: {model: {input_tokens, output_tokens, ...}}, total_time,
error?: {message}, limit?: {type}, attachments: {hash: text}}`; a ChatMessage `{role:
system | user | assistant | tool, content: text or parts ({type: text | reasoning | image
| ...}), tool_calls?: [{id, function (the tool's name), arguments (an object),
parse_error?}], model?, tool_call_id?, function?, error?: {type, message}}` (earlier a
tool message's error was the text `tool_error`); strings
`attachment://<hash>` stand for the sample's attachments and are put back.

Mapping: each assistant tool call is one `tool_call` row (parallel calls share the turn),
an assistant message without calls a `message` row; a tool message is its call's result
(`error.message` the observation's error); system and user messages are events (before
the first action: the state; the first user message the user_goal). Reward: the sample's
scores, each a reward component (`C`/`I`/`P`/`N`, booleans, `yes`/`no`, numbers and
numeric text as Inspect's value_to_float reads them; an object score's numeric entries as
`<scorer>/<key>`); the reward is the score named by `ingest.reward_evaluation`, else the
first. behaviour policy = the message's `model`, else `eval.model`; episode: task, trial
(epoch), tokens (model_usage), duration (total_time), termination reason (the sample's
error or limit). episode_id: `<eval_id>:<sample id>:<epoch>` (the file's name when the
log has no eval_id). `read` counts samples.

A `.json` log is streamed (tracerl.data.formats.common.jsonstream.stream_object): memory holds
one sample, each under ingest.max_record_bytes; so is each `.eval` sample entry.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.data.formats import AdaptedRecord, AdapterError
from tracerl.data.formats.common.dialogue import EpisodeBuilder
from tracerl.data.formats.common.jsonstream import stream_object
from tracerl.data.formats.common.messages import arguments, result_content, text_of
from tracerl.data.ingest.limits import Limits, RecordRejected, load_record, oversize_reason
from tracerl.data.ingest.reader import InputError

_ATTACHMENT = "attachment://"
_HEADERS = ("header.json", "_journal/start.json", "start.json")
_ZSTD = 93  # a zip entry's compression method number for Zstandard
_SCORE_TEXT = {"c": 1.0, "i": 0.0, "p": 0.5, "n": 0.0, "yes": 1.0, "true": 1.0,
               "no": 0.0, "false": 0.0}


def is_log(value: Any) -> bool:
    """An Inspect eval log (or a .eval's header): `eval` naming its task and model, beside
    a `version`, `samples`, `status` or `plan`."""
    if not isinstance(value, dict) or not isinstance(value.get("eval"), dict):
        return False
    spec = value["eval"]
    return "task" in spec and "model" in spec and any(
        k in value for k in ("version", "samples", "status", "plan"))


def is_eval_zip(path: Path) -> bool:
    """A `.eval` log: a zip holding a header (or a journal start) entry."""
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return any(h in names for h in _HEADERS)


def read(path: Path, limits: Limits | None = None, options: Any = None,
         batch: Any = None) -> Iterator[AdaptedRecord]:
    limits = limits or Limits()
    if zipfile.is_zipfile(path):
        yield from _read_zip(path, limits, options)
        return
    try:
        header, samples = stream_object(path, "samples", limits, required=False)
    except InputError as exc:
        yield AdaptedRecord(1, "", error=AdapterError("<file>", str(exc)))
        return
    if not is_log(header):  # never a green empty read of another document
        yield _not_a_log(path, "/")
        return
    for element in samples:
        number, pointer = element.index + 1, f"/samples/{element.index}"
        if element.rejected is not None:
            yield AdaptedRecord(number, pointer, error=AdapterError(
                element.rejected.field, element.rejected.reason), text=element.text)
            continue
        yield _record(element.value, header, number, pointer, path, limits, options)


def _read_zip(path: Path, limits: Limits, options: Any) -> Iterator[AdaptedRecord]:
    with zipfile.ZipFile(path) as z:
        infos = {i.filename: i for i in z.infolist()}
        header: dict = {}
        for name in _HEADERS:  # the finished header, else what the run wrote first
            if name in infos:
                try:
                    header = _entry(z, infos[name], limits)
                except RecordRejected as exc:
                    yield AdaptedRecord(1, f"/{name}", error=AdapterError(exc.field,
                                                                          exc.reason))
                    return
                break
        if not is_log(header):
            yield _not_a_log(path, "/header.json")
            return
        samples = [i for i in z.infolist() if i.filename.startswith("samples/")
                   and i.filename.endswith(".json") and not i.is_dir()]
        for number, info in enumerate(samples, start=1):
            pointer = f"/{info.filename}"
            try:
                sample = _entry(z, info, limits)
            except RecordRejected as exc:
                yield AdaptedRecord(number, pointer, error=AdapterError(exc.field, exc.reason))
                continue
            yield _record(sample, header if isinstance(header, dict) else {}, number,
                          pointer, path, limits, options)


def _not_a_log(path: Path, pointer: str) -> AdaptedRecord:
    return AdaptedRecord(1, pointer, error=AdapterError(pointer, (
        "not an Inspect AI eval log (no `eval` naming its task and model beside a `version`, "
        "`status` or `plan`)")), episode_id=path.name)


def _entry(z: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits) -> Any:
    """One zip entry's JSON, under the record guards (size first, from the directory, then
    as read: the directory may understate it)."""
    limit = limits.max_record_bytes
    if info.file_size > limit:
        raise RecordRejected("<record>", oversize_reason(info.file_size, limit))
    if info.compress_type == _ZSTD:  # zipfile reads it only from Python 3.14
        data = _zstd_entry(z, info, limit)
    else:
        try:
            with z.open(info) as f:
                data = f.read(limit + 1)
        except (NotImplementedError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise RecordRejected("<record>", f"cannot be unzipped: {exc}") from None
    if len(data) > limit:
        raise RecordRejected("<record>", oversize_reason(len(data), limit))
    return load_record(data, limits)


def _zstd_entry(z: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    import zstandard

    f = z.fp
    f.seek(info.header_offset)
    local = f.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise RecordRejected("<record>", "a zip entry without its local header")
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    f.seek(info.header_offset + 30 + name_length + extra_length)
    compressed = f.read(info.compress_size)
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(compressed)
        return reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise RecordRejected("<record>", f"cannot be unzipped (zstd): {exc}") from None


def _record(sample: Any, header: dict, number: int, pointer: str, path: Path,
            limits: Limits, options: Any) -> AdaptedRecord:
    spec = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    sample_id = sample.get("id") if isinstance(sample, dict) else None
    epoch = sample.get("epoch") if isinstance(sample, dict) else None
    run = spec.get("eval_id") or spec.get("run_id") or getattr(options, "source_name",
                                                                None) or path.name
    episode_id = f"{run}:{sample_id if sample_id is not None else number}:{epoch or 1}"
    try:
        rows, pointers, notes = sample_rows(sample, spec, pointer, episode_id, limits.max_depth,
                                            getattr(options, "reward_evaluation", None))
    except AdapterError as exc:
        return AdaptedRecord(number, pointer, error=exc, episode_id=episode_id)
    return AdaptedRecord(number, pointer, rows, pointers, episode_id=episode_id, notes=notes)


def _attached(value: Any, attachments: dict) -> Any:
    """`value` with each `attachment://<hash>` string replaced by its attachment."""
    if isinstance(value, str):
        if value.startswith(_ATTACHMENT):
            return attachments.get(value[len(_ATTACHMENT):], value)
        return value
    if isinstance(value, list):
        return [_attached(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _attached(v, attachments) for k, v in value.items()}
    return value


def score_value(value: Any) -> float | None:
    """A score as a number, as Inspect's value_to_float reads it (None: not a number)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value) if abs(value) < 1e308 else None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _SCORE_TEXT:
            return _SCORE_TEXT[text]
        try:
            number = float(text)
        except ValueError:
            return None
        return number if abs(number) < 1e308 else None
    return None


def reward_of(sample: dict, chosen: str | None) -> tuple[float | None, dict | None,
                                                         str | None]:
    """(reward, components, its scorer) of a sample's scores (see the module's
    docstring)."""
    scores = sample.get("scores")
    if not isinstance(scores, dict):
        scores = {"score": sample["score"]} if isinstance(sample.get("score"), dict) else {}
    components: dict[str, float] = {}
    first = None
    for name, score in scores.items():
        value = score.get("value") if isinstance(score, dict) else None
        if isinstance(value, dict):
            for key, v in value.items():
                number = score_value(v)
                if number is not None:
                    components[f"{name}/{key}"] = number
            continue
        number = score_value(value)
        if number is not None:
            components[name] = number
            first = first or name
    if chosen is not None and chosen in components:
        return components[chosen], components, chosen
    if first is None:
        return None, components or None, None
    return components[first], components, first


def sample_rows(sample: Any, spec: dict, pointer: str, episode_id: str, max_depth: int,
                chosen: str | None = None) -> tuple[list[dict], list[str], Any]:
    if not isinstance(sample, dict):
        raise AdapterError(pointer or "/", f"a sample is an object, got "
                                           f"{type(sample).__name__}")
    messages = sample.get("messages")
    if not isinstance(messages, list):
        raise AdapterError(f"{pointer}/messages", "a sample needs a `messages` list")
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"),
                                                          dict) else {}
    model = spec.get("model") if isinstance(spec.get("model"), str) else None
    usage = sample.get("model_usage") if isinstance(sample.get("model_usage"), dict) else {}
    prompt = sum(u.get("input_tokens") for u in usage.values()
                 if isinstance(u, dict) and type(u.get("input_tokens")) is int)
    completion = sum(u.get("output_tokens") for u in usage.values()
                     if isinstance(u, dict) and type(u.get("output_tokens")) is int)
    error = sample.get("error") if isinstance(sample.get("error"), dict) else {}
    limit = sample.get("limit") if isinstance(sample.get("limit"), dict) else {}
    ended = error.get("message") or (f"{limit['type']} limit" if limit.get("type") else None)
    total_time = sample.get("total_time")
    common = {"task": spec.get("task") if isinstance(spec.get("task"), str) else None,
              "metadata": {"behavior_policy": model},
              "episode": {"agent_model": model, "trial": sample.get("epoch")
                          if type(sample.get("epoch")) is int else None,
                          "prompt_tokens": prompt or None,
                          "completion_tokens": completion or None,
                          "duration_s": float(total_time) if isinstance(
                              total_time, int | float) and not isinstance(total_time, bool)
                          else None,
                          "termination_reason": str(ended) if ended else None}}
    builder = EpisodeBuilder(episode_id, common, max_depth)
    for j, m in enumerate(messages):
        _message(builder, _attached(m, attachments), f"{pointer}/messages/{j}", max_depth)
    reward, components, scorer = reward_of(sample, chosen)
    kept = {k: sample[k] for k in ("id", "target", "metadata") if sample.get(k) is not None}
    scores = sample.get("scores", sample.get("score"))
    if scores is not None:
        kept["scores"] = _attached(scores, attachments)
    rows, pointers = builder.finish(pointer or "/", reward, components,
                                    f"inspect:{scorer}" if scorer else None,
                                    {"episode": kept} if kept else None)
    return list(rows), list(pointers), builder.notes


def _message(builder: EpisodeBuilder, m: Any, where: str, max_depth: int) -> None:
    if not isinstance(m, dict):
        raise AdapterError(where, f"a message is an object, got {type(m).__name__}")
    role = m.get("role")
    content = m.get("content")
    if role == "assistant":
        calls = []
        raw_calls = m.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise AdapterError(f"{where}/tool_calls", "expected a list of tool calls")
        for k, c in enumerate(raw_calls):
            at = f"{where}/tool_calls/{k}"
            if not isinstance(c, dict):
                raise AdapterError(at, "a tool call is an object")
            name = c.get("function")
            if isinstance(name, dict):  # an OpenAI-style call kept as is
                name, raw = name.get("name"), name.get("arguments")
            else:
                raw = c.get("arguments")
            calls.append((c.get("id"), name, arguments(raw, f"{at}/arguments", max_depth),
                          at))
        extra = {}
        reasoning = [p.get("reasoning") for p in content if isinstance(p, dict) and
                     p.get("type") == "reasoning" and isinstance(p.get("reasoning"), str)] \
            if isinstance(content, list) else []
        if reasoning:
            extra["reasoning"] = "\n".join(reasoning)
        errors = [c.get("parse_error") for c in raw_calls if isinstance(c, dict) and
                  c.get("parse_error")]
        if errors:
            extra["parse_errors"] = errors
        model = m.get("model") if isinstance(m.get("model"), str) else None
        builder.assistant(where, text_of(content), calls, extra=extra or None,
                          metadata={"behavior_policy": model} if model else None)
        return
    if role == "tool":
        failed = m.get("error") if isinstance(m.get("error"), dict) else None
        error = (str(failed.get("message") or failed.get("type") or "error")
                 if failed else None)
        if error is None and isinstance(m.get("tool_error"), str) and m["tool_error"]:
            error = m["tool_error"]  # before ToolCallError (inspect_ai 0.3.1x)
        builder.tool_result(where, m.get("tool_call_id"), result_content(content), error,
                            m.get("function") if isinstance(m.get("function"), str) else None)
        return
    if role not in ("system", "user"):
        raise AdapterError(f"{where}/role", f"unknown role {role!r} (expected system, user, "
                                            "assistant or tool)")
    builder.event(role, "message", content=text_of(content))
