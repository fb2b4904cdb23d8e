"""Whether a file is OpenAI-style chat: a list of messages (also LangChain message
dumps), a record with `messages` / `traj` / `conversations` (OpenAI messages or ShareGPT
turns), a conversational prompt-completion record (`prompt` and `completion` message
lists), or a logged chat completion call (`{request: {messages}, response}` or
OpenPipe's `{input: {messages}, output}`). Tried after every other format of messages
(Anthropic's are a subset of this shape)."""

from __future__ import annotations

from tracerl.data.formats.common.detect import Sniffed


def is_chat_call_log(value: dict) -> bool:
    """A logged call ({request, response} / {input, output}), a conversational
    prompt-completion record (TRL, verifiers), or ShareGPT-style `conversations`."""
    from tracerl.data.formats.openai_chat.read import call_pair, prompt_completion

    turns = value.get("conversations")
    return call_pair(value) is not None or prompt_completion(value) or (
        isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict)
        and ("role" in turns[0] or ("from" in turns[0] and "value" in turns[0]))
        and "messages" not in value)


def detect(s: Sniffed) -> bool:
    if s.keys_only:
        return s.has(b"messages", b"traj", b"role")
    value = s.record
    if s.array:
        from tracerl.data.formats.openai_chat.read import is_message

        if value is None or is_message(value):
            return True  # an empty list of conversations, or a bare list of messages
    if not isinstance(value, dict):
        return False
    if "trajectory_format" in value:
        return False  # a producer's own trajectory format that carries messages (its
        # actions are in their text, not tool calls): refused, or read by its own format
    return is_chat_call_log(value) or "messages" in value or "traj" in value or (
        "role" in value and ("content" in value or "tool_calls" in value))
