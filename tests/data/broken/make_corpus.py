"""Write the broken-input corpus: one file per failure kind, and expected.json with the
quarantine (line, field, reason fragment) each must produce. Deterministic; rerun with
`python tests/data/broken/make_corpus.py` after changing it.

`*secret_*` files hold one class of secret each, in a step that is accepted and in a line
that is quarantined, as PHP or Go programs write JSON (`\\/`, `\\u0026`); every secret
holds the marker `ZQsecret`, and no output byte may (any case:
tests/test_redact_everywhere.py)."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from pathlib import Path

import orjson

from tracerl.envs.calculator.logs import log_records

HERE = Path(__file__).parent
GOOD = [orjson.dumps(r) for r in log_records("good_coverage", 2, seed=7, test_fraction=0.2)]


def _step(**changes) -> dict:
    record = orjson.loads(GOOD[0])
    record.update(episode_id="bad-episode", t=0, done=True)
    record.update(changes)
    return record


def _nested(depth: int) -> dict:
    value: object = 1
    for _ in range(depth - 1):
        value = {"x": value}
    return value  # type: ignore[return-value]


def main() -> None:
    cases: dict[str, tuple[bytes, list[tuple[int, str, str]]]] = {}
    n = len(GOOD)
    line = n + 1  # the bad record follows the good episodes

    def plain(name: str, bad: bytes, field: str, reason: str) -> None:
        cases[name] = (b"\n".join([*GOOD, bad]) + b"\n", [(line, field, reason)])

    args = _step(action={"type": "tool_call", "tool": "add", "arguments": _nested(300)})
    plain("deep_nesting.jsonl", json.dumps(args).encode(), "<record>",
          "nested 301 levels deep")
    plain("deeper_than_parser.jsonl", b'{"episode_id": "x", "t": 0, "action": '
          + b"[" * 3000 + b"]" * 3000 + b"}", "<record>", "more than 1024")
    big = _step(task="x" * 300_000)
    plain("oversize_record.jsonl", orjson.dumps(big), "<record>",
          "over ingest.max_record_bytes")
    plain("invalid_utf8.jsonl", orjson.dumps(_step(task="caf\u00e9")).replace(
        b"caf\xc3\xa9", b"caf\xe9"), "<encoding>", "not valid UTF-8: byte 0xe9")
    plain("nan.jsonl", orjson.dumps(_step()).replace(b'"reward":-0.02', b'"reward":NaN'),
          "<record>", "NaN is not a JSON number")
    plain("infinity.jsonl", orjson.dumps(_step()).replace(b'"reward":-0.02',
                                                          b'"reward":-Infinity'),
          "<record>", "-Infinity is not a JSON number")
    plain("number_too_large.jsonl", orjson.dumps(_step()).replace(b'"reward":-0.02',
                                                                  b'"reward":1e400'),
          "<record>", "number is infinity")
    plain("number_for_string.jsonl", orjson.dumps(_step(episode_id=12345)), "episode_id",
          "expected a non-empty string, got int 12345")
    plain("string_for_number.jsonl", orjson.dumps(_step(t="0")), "t",
          "expected an integer in [0, 2^31), got str '0'")
    plain("integer_out_of_range.jsonl", orjson.dumps(_step(t="@T@")).replace(
        b'"@T@"', b"123456789012345678901234567890"), "t",
          "expected an integer in [0, 2^31), got int 123456789012345678901234567890")
    plain("string_for_bool.jsonl", orjson.dumps(_step(done="yes")), "done",
          "expected true or false")
    plain("not_an_object.jsonl", b"[1, 2, 3]", "<record>", "expected a JSON object")
    plain("not_json.jsonl", b'{"episode_id": "x", "t": 0,', "<record>", "not valid JSON")
    plain("unknown_field.jsonl", orjson.dumps(_step(tokens_used=12)), "tokens_used",
          "unknown field")
    plain("lone_surrogate.jsonl", orjson.dumps(_step(task="SURR")).replace(
        b'"SURR"', b'"\\ud800"'), "<record>", "not valid JSON: no low surrogate")
    plain("negative_step.jsonl", orjson.dumps(_step(t=-1)), "t", "expected an integer")
    plain("missing_action.jsonl", orjson.dumps({k: v for k, v in _step().items()
                                                if k != "action"}), "action",
          "required field is missing")
    plain("wrong_action_type.jsonl", orjson.dumps(_step(action={"type": "dance"})),
          "action.type", "expected one of")
    plain("tool_call_without_tool.jsonl", orjson.dumps(_step(action={"type": "tool_call"})),
          "action.tool", "a tool name")
    plain("positive_logprob.jsonl", orjson.dumps(_step(action_logprobs=0.5)),
          "action_logprobs", "a log-probability")
    plain("nested_wrong_type.jsonl", orjson.dumps(_step(metadata={"safety_flags": [1]})),
          "metadata.safety_flags", "a list of strings")
    plain("no_done_step.jsonl", orjson.dumps(_step(done=False)), "done",
          "has no step with done=true")
    dup = orjson.dumps(_step())
    cases["duplicate_step.jsonl"] = (b"\n".join([*GOOD, dup, dup]) + b"\n",
                                     [(line, "t", "more than once"),
                                      (line + 1, "t", "more than once")])
    cases["empty.jsonl"] = (b"", [])
    cases["blank_lines_only.jsonl"] = (b"\n\n  \n", [])
    cases["bom_only.jsonl"] = (b"\xef\xbb\xbf", [])
    whole = gzip.compress(b"\n".join(GOOD) + b"\n", mtime=0)
    # cut inside the compressed stream: the intact lines are read, the cut is one record
    cases["truncated.jsonl.gz"] = (whole[: len(whole) * 2 // 3], [(2, "<file>",
                                                                   "gzip stream cut inside")])
    cases["no_final_newline.jsonl"] = (b"\n".join([*GOOD, orjson.dumps(_step(t="0"))]),
                                       [(line, "t", "expected an integer")])
    cases["crlf.jsonl"] = (b"\r\n".join(GOOD) + b"\r\n", [])

    _adapter_cases(cases)
    _secret_cases(cases)
    _format_cases(cases)
    _round4_cases(cases)

    expected = {}
    for name, (data, rejects) in sorted(cases.items()):
        if isinstance(data, dict):  # a folder of files: one dataset, several inputs
            (HERE / name).mkdir(exist_ok=True)
            for file_name, content in data.items():
                (HERE / name / file_name).parent.mkdir(parents=True, exist_ok=True)
                (HERE / name / file_name).write_bytes(content)
        else:
            (HERE / name).write_bytes(data)
        expected[name] = [{"line": a, "field": f, "reason": r} for a, f, r in rejects]
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    _round4_refused()


# --- the same failure kinds through the adapters -----------------------------------------
# tau2_*.json: a tau2-bench results file, record = simulation; chat_*.jsonl: openai-chat,
# record = conversation line. Eight good records, the bad one is record 9 (as line 9 above).
# The test reads tau2_* with --format tau2 and chat_* with --format openai-chat.

GOOD_RECORDS = 8
DEEP_ARGS = "@@DEEP@@"


def _tau2_simulation(i: int, arguments: object = None, **changes) -> dict:
    sim = {"id": f"sim-{i}", "task_id": "t1", "trial": 0, "termination_reason": "agent_stop",
           "agent_cost": 0.01, "user_cost": 0.0, "duration": 1.5,
           "messages": [
               {"role": "user", "content": "Cancel order 7, please."},
               {"role": "assistant", "content": None, "usage": {"prompt_tokens": 12,
                                                                "completion_tokens": 3},
                "tool_calls": [{"id": "c1", "name": "cancel_order", "requestor": "assistant",
                                "arguments": {"order_id": 7} if arguments is None
                                else arguments}]},
               {"role": "tool", "id": "c1", "content": '{"status": "cancelled"}'},
               {"role": "assistant", "content": "Order 7 is cancelled."}],
           "reward_info": {"reward": 1.0, "reward_breakdown": {"DB": 1.0}}}
    sim.update(changes)
    return sim


def _tau2_doc(bad: object) -> bytes:
    info = {"git_commit": "abc123", "agent_info": {"llm": "gpt-4.1"},
            "user_info": {"llm": "gpt-4.1"},
            "environment_info": {"domain_name": "retail", "tool_defs": [
                {"name": "cancel_order"}]}}
    sims = [orjson.dumps(_tau2_simulation(i)) for i in range(GOOD_RECORDS)]
    sims.append(bad if isinstance(bad, bytes) else orjson.dumps(bad))
    return (b'{"timestamp": "2026-01-01T00:00:00", "info": ' + orjson.dumps(info)
            + b', "tasks": [{"id": "t1"}], "simulations": [\n' + b",\n".join(sims) + b"\n]}\n")


def _chat(i: int, arguments: object = None, **changes) -> dict:
    args = '{"order_id": 7}' if arguments is None else arguments
    record = {"id": f"chat-{i}", "task_id": "t1", "trial": 0, "reward": 1.0, "messages": [
        {"role": "user", "content": "Cancel order 7, please."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "cancel_order", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "cancelled"}'},
        {"role": "assistant", "content": "Order 7 is cancelled."}]}
    record.update(changes)
    return record


def _chat_lines(bad: bytes) -> bytes:
    return b"\n".join([*(orjson.dumps(_chat(i)) for i in range(GOOD_RECORDS)), bad]) + b"\n"


def _deep(record: dict, depth: int) -> bytes:
    """The record with its tool arguments replaced by `depth` nested arrays."""
    return orjson.dumps(record).replace(orjson.dumps(DEEP_ARGS), b"[" * depth + b"]" * depth)


def _adapter_cases(cases: dict) -> None:
    bad = GOOD_RECORDS + 1
    nine = GOOD_RECORDS  # the bad record's index (its JSON pointer)

    def tau2(name: str, sim: object, field: str, reason: str) -> None:
        cases[f"tau2_{name}.json"] = (_tau2_doc(sim), [(bad, field, reason)])

    def chat(name: str, line: bytes, field: str, reason: str) -> None:
        cases[f"chat_{name}.jsonl"] = (_chat_lines(line), [(bad, field, reason)])

    # simulation: {messages: [{tool_calls: [{arguments: ...}]}]} is 5 levels before the
    # arguments; a conversation line: {messages: [{tool_calls: [{function: {arguments}}]}]}
    # is 6 (its arguments here an already parsed array)
    tau2("deep_nesting", _deep(_tau2_simulation(nine, DEEP_ARGS), 300), "<record>",
         "nested 305 levels deep, over the limit of 64")
    chat("deep_nesting", _deep(_chat(nine, DEEP_ARGS), 300), "<record>",
         "nested 306 levels deep, over the limit of 64")
    tau2("deeper_than_parser", _deep(_tau2_simulation(nine, DEEP_ARGS), 3000), "<record>",
         "more than 1024")
    chat("deeper_than_parser", _deep(_chat(nine, DEEP_ARGS), 3000), "<record>",
         "more than 1024")
    # JSON inside a string (the API's arguments) nests from the string's own value
    chat("arguments_too_deep", orjson.dumps(_chat(nine, "[" * 300 + "]" * 300)),
         "/messages/1/tool_calls/0/function/arguments", "arguments are nested 300 levels deep")
    chat("arguments_deeper_than_parser", orjson.dumps(_chat(nine, "[" * 3000 + "]" * 3000)),
         "/messages/1/tool_calls/0/function/arguments", "arguments are nested more than 1024")
    huge = "x" * 300_000
    tau2("oversize_record", _tau2_simulation(nine, duration=huge), "<record>",
         "over ingest.max_record_bytes")
    chat("oversize_record", orjson.dumps(_chat(nine, note=huge)), "<record>",
         "over ingest.max_record_bytes")
    tau2("invalid_utf8", orjson.dumps(_tau2_simulation(nine, task_id="caf\u00e9")).replace(
        b"caf\xc3\xa9", b"caf\xe9"), "<encoding>", "not valid UTF-8: byte 0xe9")
    chat("invalid_utf8", orjson.dumps(_chat(nine, task_id="caf\u00e9")).replace(
        b"caf\xc3\xa9", b"caf\xe9"), "<encoding>", "not valid UTF-8: byte 0xe9")
    tau2("nan", orjson.dumps(_tau2_simulation(nine)).replace(b'"reward":1.0', b'"reward":NaN'),
         "<record>", "NaN is not a JSON number")
    chat("infinity", orjson.dumps(_chat(nine)).replace(b'"reward":1.0', b'"reward":-Infinity'),
         "<record>", "-Infinity is not a JSON number")
    tau2("not_json", orjson.dumps(_tau2_simulation(nine)).replace(b'"trial":0,', b'"trial":,'),
         "<record>", "not valid JSON")
    chat("not_json", b'{"messages": [{"role": "user",', "<record>", "not valid JSON")
    tau2("number_for_string", _tau2_simulation(nine, id=12345), f"/simulations/{nine}/id",
         "a simulation needs a non-empty string id")
    chat("number_for_string", orjson.dumps(_chat(nine, messages=[{"role": 3}])),
         "/messages/0/role", "unknown role 3")
    usage = _tau2_simulation(nine)
    usage["messages"][1]["usage"]["prompt_tokens"] = "12"
    tau2("string_for_number", usage, f"/simulations/{nine}/messages/1/usage/prompt_tokens",
         "expected an integer, got str '12'")
    chat("string_for_number", orjson.dumps(_chat(nine, reward="1.0")), "/reward",
         "expected a number or an object of numbers, got str '1.0'")
    # an integer beyond 64 bits where the schema has an int64: the field is named
    tau2("integer_out_of_range", json.dumps(_tau2_simulation(
        nine, trial=123456789012345678901234567890)).encode(), "episode.trial", "an integer")
    chat("integer_out_of_range", json.dumps(
        _chat(nine, trial=123456789012345678901234567890)).encode(), "episode.trial",
         "an integer")
    tau2("not_an_object", [1, 2, 3], f"/simulations/{nine}", "a simulation is an object")
    cases["tau2_empty.json"] = (b"", [])
    cases["chat_empty.jsonl"] = (b"", [])
    cases["tau2_bom_only.json"] = (b"\xef\xbb\xbf\n", [])
    # cut inside the last simulation / conversation: the intact ones are read (the note
    # is hex, which gzip cannot shrink to a few bytes, so a cut can land inside it)
    note = "".join(hashlib.sha256(str(k).encode()).hexdigest() for k in range(60))
    doc = _tau2_doc(_tau2_simulation(nine, note=note))
    cases["tau2_truncated.json.gz"] = (_cut_inside_last(doc, note.encode()),
                                       [(bad, "<file>", "gzip stream cut")])
    lines = _chat_lines(orjson.dumps(_chat(nine, note=note)))
    cases["chat_truncated.jsonl.gz"] = (_cut_inside_last(lines, note.encode()),
                                        [(bad, "<file>", "gzip stream cut inside this record")])
    # openai-chat as one JSON document: a list of conversations (each a record, streamed),
    # or one conversation (the whole document is the record)
    def chat_doc(name: str, record: bytes, field: str, reason: str) -> None:
        good = [orjson.dumps(_chat(i)) for i in range(GOOD_RECORDS)]
        cases[f"chat_{name}.json"] = (b"[\n" + b",\n".join([*good, record]) + b"\n]\n",
                                      [(bad, field, reason)])

    chat_doc("document_oversize_record", orjson.dumps(_chat(nine, note=huge)), "<record>",
             "over ingest.max_record_bytes")
    chat_doc("document_deep_nesting", _deep(_chat(nine, DEEP_ARGS), 300), "<record>",
             "nested 306 levels deep, over the limit of 64")
    chat_doc("document_nan", orjson.dumps(_chat(nine)).replace(b'"reward":1.0',
                                                               b'"reward":NaN'),
             "<record>", "NaN is not a JSON number")
    chat_doc("document_invalid_utf8", orjson.dumps(_chat(nine, task_id="caf\u00e9")).replace(
        b"caf\xc3\xa9", b"caf\xe9"), "<encoding>", "not valid UTF-8: byte 0xe9")
    cases["chat_single_oversize.json"] = (orjson.dumps(_chat(0, note=huge)),
                                          [(1, "<record>", "over ingest.max_record_bytes")])
    cases["chat_document_empty.json"] = (b"\xef\xbb\xbf  \n", [])
    whole = b"[\n" + b",\n".join([*(orjson.dumps(_chat(i)) for i in range(GOOD_RECORDS)),
                                  orjson.dumps(_chat(nine, note=note))]) + b"\n]\n"
    cases["chat_document_truncated.json.gz"] = (_cut_inside_last(whole, note.encode()),
                                                [(bad, "<file>", "gzip stream cut")])
    cases["tau2_cut_document.json"] = (doc[:doc.index(note.encode()) + 100],
                                       [(bad, "<file>", "the file ends inside this record")])


# --- secrets, one class a file -------------------------------------------------------------
SECRET_FORMS = {
    "names": ['{"admin_password": "ZQsecret-adm"}', "PGPASSWORD=ZQsecret-pg\nSTRIPE_SECRET_KEY="
              "ZQsecret-stripe", "  api_token: ZQsecret-yml", "psql --password=ZQsecret-psql",
              '{"sendgridApiKey": "ZQsecret-sg", "oauth_client_secret": "ZQsecret-oc"}',
              "{'vault_token': 'ZQsecret-vt'}"],
    "query": ["https://auth.example.com/token?client_id=app&client_secret=ZQsecret-qa"
              "&grant_type=client_credentials", "wss://x.example/socket?token=ZQsecret-ws",
              "https://x.example/dl?X-Goog-Signature=ZQsecret0000ab&X-Goog-Date=1",
              "POST /login body: username=ann&passwd=ZQsecret-form"],
    "connection": ["Data Source=db;Initial Catalog=x;User Id=u;Pwd=ZQsecret-pwd;",
                   "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=ZQsecretKey+/0==;"
                   "EndpointSuffix=core.windows.net",
                   "Endpoint=sb://n.servicebus.windows.net/;SharedAccessKeyName=send;"
                   "SharedAccessKey=ZQsecretSas=",
                   "Provider=SQLOLEDB;Password='ZQsecret quoted';User=u"],
    "headers": ["Authorization: Basic ZQsecretQWxhZGRpbjpvcGVuIHNlc2FtZQ==",
                "authorization: ApiKey ZQsecret-es", "x-api-key: ZQsecret-xa",
                "Set-Cookie: sid=ZQsecret-sc; Path=/; HttpOnly", "apikey: ZQsecret-kong"],
    "webhooks": ["https://hooks.slack.com/services/T1/B2/ZQsecretSlack0000000001",
                 "https://discordapp.com/api/webhooks/987654321098765432/ZQsecret-dc",
                 "https://outlook.office.com/webhook/ZQsecret-o365@t/IncomingWebhook/x/y",
                 "https://hooks.example.com/T1/ZQsecret-generic"],
    "glued": ["build_ghp_ZQsecret0123456789abcdefghijklmnopqrst",
              "id-github_pat_ZQsecret0123456789abcdefghij", "x_glpat-ZQsecret0123456789abcd",
              "stripe_sk_live_ZQsecret0123456789ab"],
}


def _php(obj: object) -> bytes:
    """JSON as PHP's json_encode and org.json write it: every `/` as `\\/`."""
    return json.dumps(obj).replace("/", "\\/").encode()


def _go(obj: object) -> bytes:
    """JSON as Go's encoding/json writes it: `&`, `<`, `>` as \\u escapes."""
    return (json.dumps(obj).replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e").encode())


def _secret_cases(cases: dict) -> None:
    n = len(GOOD)
    for name, forms in SECRET_FORMS.items():
        text = " | ".join(forms)
        step = _step(episode_id=f"secret-{name}", observation={"tool_result": {
            "body": text, "php_body": _php(text).decode()}, "error": None})
        step["state"]["user_goal"] = text
        # cut after the secrets: not JSON, quarantined with its raw text
        cut = _php({"episode_id": "cut", "note": text})[:-2]
        cases[f"secret_{name}.jsonl"] = (
            b"\n".join([*GOOD, orjson.dumps(step), cut]) + b"\n",
            [(n + 2, "<record>", "not valid JSON")])
    every = " | ".join(f for forms in SECRET_FORMS.values() for f in forms)
    # a whole file as PHP and Go write it, and the bad record's secrets in its raw text
    step = _step(episode_id="secret-escaped")
    step["state"]["user_goal"] = every
    cases["secret_escaped.jsonl"] = (
        b"\n".join([*GOOD, _php(step), _go({"episode_id": "go", "t": "0", "note": every}),
                    _php({"episode_id": "php", "t": "0", "note": every})]) + b"\n",
        [(n + 2, "t", "expected an integer"), (n + 3, "t", "expected an integer")])
    bad = GOOD_RECORDS + 1
    doc = orjson.loads(_tau2_doc(_tau2_simulation(GOOD_RECORDS, id=12345, note=every)))
    cases["tau2_secret_escaped.json"] = (_php(doc) + b"\n", [
        (bad, f"/simulations/{GOOD_RECORDS}/id", "a simulation needs a non-empty string id")])
    chats = [orjson.loads(orjson.dumps(_chat(i))) for i in range(GOOD_RECORDS)]
    cases["chat_secret_escaped.jsonl"] = (
        b"\n".join([*(_go(c) for c in chats), _go({"note": every, "messages": [
            {"role": "user", "content": every}]})[:-3]]) + b"\n",
        [(bad, "<record>", "not valid JSON")])


# --- the other formats: one hostile record each (record 9 after eight good ones), a
# byte-order mark on every format and wrapper (bom_*: read as if it were not there), and
# one episode id in two input files of two formats (dup_across_formats/: every side goes)

BOM = b"\xef\xbb\xbf"


def _anthropic(i: int, result_for: str = "tu1") -> dict:
    return {"id": f"conv-{i}", "model": "claude-x", "system": "Be brief.", "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "tu1", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": result_for,
                                      "content": "4C"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "4C in Oslo."}]}]}


def _atif(i: int, logprobs: list | None = None) -> dict:
    step = {"step_id": 2, "source": "agent", "message": "ls", "tool_calls": [
        {"tool_call_id": "call_1", "function_name": "bash", "arguments": {"cmd": "ls"}}],
        "observation": {"results": [{"source_call_id": "call_1", "content": "a b"}]}}
    if logprobs is not None:
        step["metrics"] = {"logprobs": logprobs}
    return {"schema_version": "ATIF-v1.6", "session_id": f"traj-{i}",
            "agent": {"name": "a", "version": "1"},
            "steps": [{"step_id": 1, "source": "user", "message": "count files"}, step,
                      {"step_id": 3, "source": "agent", "message": "2 files"}]}


def _claude_lines() -> list[bytes]:
    def line(kind: str, uuid: str, parent: str | None, message: dict) -> bytes:
        return orjson.dumps({"type": kind, "uuid": uuid, "parentUuid": parent,
                             "sessionId": "sess-1", "isSidechain": False,
                             "timestamp": "2026-01-01T00:00:00Z", "message": message})
    part = {"model": "claude-x", "role": "assistant", "type": "message"}
    return [orjson.dumps({"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}}),
            line("user", "u1", None, {"role": "user", "content": "run the tests"}),
            line("assistant", "a1", "u1", {**part, "id": "m1", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}]}),
            line("user", "u2", "a1", {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
            line("assistant", "a2", "u2", {**part, "id": "m2", "content": [
                {"type": "text", "text": "All green."}]}),
            line("user", "u3", "a2", {"role": "user", "content": "thanks"}),
            line("assistant", "a3", "u3", {**part, "id": "m3", "content": [
                {"type": "text", "text": "You are welcome."}]}),
            orjson.dumps({"type": "summary", "summary": "tests", "leafUuid": "a3"})]


def _langfuse(i: int, observations: object = None) -> dict:
    obs = [{"id": "g1", "traceId": f"tr-{i}", "type": "GENERATION", "name": "chat",
            "startTime": "2026-01-01T00:00:01Z", "endTime": "2026-01-01T00:00:02Z",
            "input": [{"role": "user", "content": "hi"}], "output": "hello"}]
    return {"trace": {"id": f"tr-{i}", "name": "greet"},
            "observations": obs if observations is None else observations}


def _otel_span(i: int) -> dict:
    return {"traceId": f"{i:032x}", "spanId": f"{i:016x}", "name": "chat m",
            "startTimeUnixNano": str(10**9 * i), "endTimeUnixNano": str(10**9 * i + 5),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                           {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                               [{"role": "assistant", "parts": [
                                   {"type": "text", "content": "hello"}]}])}}]}


def _otel_console_span(i: int) -> bytes:
    """_otel_span(i) as Python OpenTelemetry's ConsoleSpanExporter writes a span
    (ReadableSpan.to_json(): indented, plain attributes, ISO times) and a newline."""
    span = _otel_span(i)
    return json.dumps({
        "name": span["name"], "context": {"trace_id": "0x" + span["traceId"],
                                          "span_id": "0x" + span["spanId"],
                                          "trace_state": "[]"},
        "kind": "SpanKind.CLIENT", "parent_id": None,
        "start_time": f"2026-01-01T00:00:{i:02d}.000000Z",
        "end_time": f"2026-01-01T00:00:{i:02d}.000005Z", "status": {"status_code": "UNSET"},
        "attributes": {kv["key"]: kv["value"]["stringValue"] for kv in span["attributes"]},
        "events": [], "links": [],
        "resource": {"attributes": {"service.name": "agent"}, "schema_url": ""}},
        indent=4).encode() + b"\n"


def _jsonl(records: list) -> bytes:
    return b"\n".join(r if isinstance(r, bytes) else orjson.dumps(r) for r in records) + b"\n"


def _format_cases(cases: dict) -> None:
    bad = GOOD_RECORDS + 1
    cases["anthropic_result_without_call.jsonl"] = (
        _jsonl([*(_anthropic(i) for i in range(GOOD_RECORDS)), _anthropic(8, "tu-none")]),
        [(bad, "/messages/2/content/0", "which no earlier tool call in the episode has")])
    cases["atif_positive_logprobs.jsonl"] = (
        _jsonl([*(_atif(i) for i in range(GOOD_RECORDS)), _atif(8, [0.5, -0.1])]),
        [(bad, "/steps/1/metrics/logprobs", "log-probabilities sum to 0.4 > 0")])
    failed = {"custom_id": "req-8", "result": {"type": "errored", "error": {
        "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}}
    cases["anthropic_batch_result_errored.jsonl"] = (
        _jsonl([*(_anthropic(i) for i in range(GOOD_RECORDS)), failed]),
        [(bad, "/result/type", "did not run: errored: overloaded_error, Overloaded")])
    cases["langfuse_observation_ids_only.jsonl"] = (
        _jsonl([*(_langfuse(i) for i in range(GOOD_RECORDS)), _langfuse(8, ["o1", "o2"])]),
        [(bad, "/observations", "lists its observations by id only")])
    cases["claude_line_not_json.jsonl"] = (
        _jsonl([*_claude_lines(), b'{"type": "assistant", "uuid": "a4", "message": {']),
        [(bad, "<record>", "not valid JSON")])
    cases["langfuse_observations_not_a_list.jsonl"] = (
        _jsonl([*(_langfuse(i) for i in range(GOOD_RECORDS)), _langfuse(8, "x")]),
        [(bad, "/observations", "a trace export needs a list of `observations`")])
    cases["otel_line_not_a_span.jsonl"] = (
        _jsonl([*(_otel_span(i) for i in range(1, GOOD_RECORDS + 1)), {"foo": 1}]),
        [(bad, "<record>", "not an OpenTelemetry export")])
    # a span cut midway (the process killed mid-write; the next run appended): the cut
    # one is quarantined on the line it starts on, the spans after it read
    half = GOOD_RECORDS // 2
    before = b"".join(_otel_console_span(i) for i in range(1, half + 1))
    cut = _otel_console_span(half + 1)
    cases["otel_console_span_cut.json"] = (
        before + cut[:len(cut) // 2] + b"\n"
        + b"".join(_otel_console_span(i) for i in range(half + 2, GOOD_RECORDS + 2)),
        [(before.count(b"\n") + 1, "<record>", "the value that starts on this line is cut")])
    good_chat = [_chat(i) for i in range(2)]
    messages = good_chat[0]["messages"]
    tau2 = _tau2_doc(orjson.dumps(_tau2_simulation(GOOD_RECORDS)))
    boms = {
        "bom_native.jsonl": b"\n".join(GOOD) + b"\n",
        "bom_chat_list.json": orjson.dumps(good_chat),
        "bom_chat_bare.json": orjson.dumps(messages),
        "bom_chat_single.json": orjson.dumps(good_chat[0]),
        "bom_chat.jsonl": _jsonl(good_chat),
        "bom_tau2.json": tau2,
        "bom_anthropic.json": orjson.dumps(_anthropic(0)),
        "bom_atif.json": orjson.dumps([_atif(0), _atif(1)]),
        "bom_claude.jsonl": _jsonl(_claude_lines()),
        "bom_langfuse.json": orjson.dumps(_langfuse(0)),
        "bom_otel.json": orjson.dumps({"resourceSpans": [{"scopeSpans": [
            {"spans": [_otel_span(1), _otel_span(2)]}]}]}),
    }
    for name, data in boms.items():
        cases[name] = (BOM + data, [])
        cases[name.replace("bom_", "bom_gz_", 1) + ".gz"] = (
            gzip.compress(BOM + data, mtime=0), [])
    native = [orjson.dumps({"episode_id": "chat-0", "t": 0, "action": {"type": "message",
                                                                        "content": "x"},
                            "done": True})]
    cases["dup_across_formats"] = ({"a_chat.json": orjson.dumps([_chat(0), _chat(1)]),
                                    "b_native.jsonl": _jsonl(native)},
                                   [(1, "t", "come from 2 input files"),
                                    (1, "t", "every copy is quarantined")])


def _cut_inside_last(data: bytes, marker: bytes) -> bytes:
    """A gzip of `data` cut so that what decompresses ends inside `marker` (deterministic:
    the shortest cut that gets past the marker's start)."""
    whole = gzip.compress(data, mtime=0)
    start = data.index(marker)
    for cut in range(len(whole) // 2, len(whole)):
        out = zlib.decompressobj(wbits=31).decompress(whole[:cut])
        if start + 10 < len(out) < start + len(marker):
            return whole[:cut]
    raise AssertionError("no cut lands inside the marker")



# --- hostile round 4 (issue 34): classes, each with other members than the first -----------
# utf16_* / utf32_*: UTF-16 and UTF-32 text, big- and little-endian, with a byte-order mark
# or without one (JSON's first character is ASCII: RFC 4627's zero-byte pattern), plain
# or compressed, native steps or another format; a quarantined line with a secret (no
# output byte may hold it: tests/test_hostile_round4.py). zst_/bz2_/xz_: the compressions
# beside gzip. skipped_files/: every file of a folder that is not read (dangling
# symlink, an archive, a compressed file of another kind, a file of another kind, a
# symlinked folder), each named in the summary. unreadable_subfolder/: its locked/ made
# unreadable by the test. refused.json: inputs refused as a whole (exit 2, the message).

SECRET_LINE = b'{"episode_id": "cut", "note": "Authorization: Basic ZQsecretUTF16x==", '


def _round4_cases(cases: dict) -> None:
    import bz2
    import lzma

    import zstandard

    n = len(GOOD)
    steps = b"\n".join([*GOOD, SECRET_LINE]) + b"\n"
    chats = _chat_lines(orjson.dumps(_chat(GOOD_RECORDS)))
    rejects = [(n + 1, "<record>", "not valid JSON")]
    for enc, bom in (("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"),
                     ("utf-32-le", b"\xff\xfe\x00\x00"), ("utf-32-be", b"\x00\x00\xfe\xff")):
        tag = enc.replace("-", "")
        cases[f"{tag}_steps.jsonl"] = (bom + steps.decode().encode(enc), rejects)
        cases[f"{tag}_nobom_steps.jsonl"] = (steps.decode().encode(enc), rejects)
        cases[f"{tag}_chat.jsonl"] = (bom + chats.decode().encode(enc), [])
    cases["utf16le_steps.jsonl.gz"] = (gzip.compress(b"\xff\xfe" + steps.decode().encode(
        "utf-16-le"), mtime=0), rejects)
    cases["utf16le_tau2.json"] = (b"\xff\xfe" + _tau2_doc(_tau2_simulation(
        GOOD_RECORDS)).decode().encode("utf-16-le"), [])
    cases["zst_steps.jsonl.zst"] = (zstandard.ZstdCompressor(level=3).compress(steps), rejects)
    cases["bz2_steps.jsonl.bz2"] = (bz2.compress(steps), rejects)
    cases["xz_steps.jsonl.xz"] = (lzma.compress(steps), rejects)
    cases["unreadable_subfolder"] = ({"a.jsonl": b"\n".join(GOOD[:4]) + b"\n",
                                      "locked/b.jsonl": b"\n".join(GOOD[4:]) + b"\n"}, [])
    cases["skipped_files"] = ({"good.jsonl": b"\n".join(GOOD) + b"\n",
                               "notes.txt": b"not a log\n",
                               "logs.tar.gz": gzip.compress(b"tar?", mtime=0),
                               "run.log.zst": zstandard.ZstdCompressor().compress(b"x\n"),
                               "bundle.zip": b"PK\x05\x06" + b"\x00" * 18}, [])


def _bomb(compress, line: bytes, size: int) -> bytes:
    return compress(line * (size // len(line)))


def _round4_refused() -> None:
    """Files refused as a whole, with refused.json: name -> (format, message fragment)."""
    import bz2
    import lzma

    import zstandard

    for name, target in [("skipped_files/dangling.jsonl", "../no-such-file.jsonl"),
                         ("skipped_files/linked_folder", "../unreadable_subfolder")]:
        link = HERE / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    line = GOOD[0] + b"\n"
    size = 32 << 20
    refused = {
        "bomb_steps.jsonl.zst": ("jsonl", "a decompression bomb"),
        "bomb_steps.jsonl.bz2": ("jsonl", "a decompression bomb"),
        "bomb_steps.jsonl.xz": ("jsonl", "a decompression bomb"),
        "bomb_chat.json.zst": ("openai-chat", "a decompression bomb"),
    }
    chat = orjson.dumps(_chat(0)) + b"\n"
    (HERE / "bomb_steps.jsonl.zst").write_bytes(
        _bomb(zstandard.ZstdCompressor(level=19).compress, line, size))
    # bzip2 shrinks repeated lines some 600 times only: a line, then zeros
    (HERE / "bomb_steps.jsonl.bz2").write_bytes(bz2.compress(line + bytes(size)))
    (HERE / "bomb_steps.jsonl.xz").write_bytes(_bomb(lzma.compress, line, size))
    (HERE / "bomb_chat.json.zst").write_bytes(
        _bomb(zstandard.ZstdCompressor(level=19).compress, chat, size))
    _params_cases()
    (HERE / "refused.json").write_text(json.dumps(
        {k: {"format": f, "message": m} for k, (f, m) in refused.items()}, indent=1,
        sort_keys=True) + "\n")



def _params_cases() -> None:
    """params_*.yaml: `--params` files refused in one line (exit 2) naming the line."""
    laughs = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    laughs += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    merges = ["m0: &m0 {a: 1, b: 2, c: 3}"]
    merges += [f"m{i}: &m{i}\n  <<: [{', '.join([f'*m{i - 1}'] * 8)}]\n  k{i}: 1"
               for i in range(1, 12)]
    lists = ["x: &x [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    lists += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}' if i > 1 else '*x'] * 10)}]"
              for i in range(1, 9)]
    files = {
        "params_alias_bomb.yaml": "ingest:\n  max_bad_fraction: 0.5\n" + "\n".join(laughs),
        "params_merge_bomb.yaml": "\n".join(merges),
        "params_list_anchor_bomb.yaml": "\n".join(lists),
        "params_recursive_alias.yaml": "ingest: &i\n  nested: *i",
        "params_deep.yaml": "ingest: " + "[" * 3000 + "]" * 3000,
        "params_duplicate_key.yaml": "ingest:\n  max_bad_fraction: 0.5\n  redact:\n"
                                     "    enabled: true\n  redact:\n    enabled: false",
        "params_duplicate_flow_key.yaml": "ingest: {strict: true, strict: false}",
    }
    for name, text in files.items():
        (HERE / name).write_text(text + "\n")


if __name__ == "__main__":
    main()
