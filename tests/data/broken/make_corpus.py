"""Write the broken-input corpus: one file per failure kind, and expected.json with the
quarantine (line, field, reason fragment) each must produce. Deterministic; rerun with
`python tests/data/broken/make_corpus.py` after changing it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson

from tracerl.envs.calculator import log_records

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

    expected = {}
    for name, (data, rejects) in sorted(cases.items()):
        (HERE / name).write_bytes(data)
        expected[name] = [{"line": a, "field": f, "reason": r} for a, f, r in rejects]
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
