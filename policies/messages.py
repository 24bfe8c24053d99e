"""Reading chat messages: their text, tool-call pairing, and where the system prompt ends."""

from __future__ import annotations

from typing import Any, Sequence

Message = dict[str, Any]
Tool = dict[str, Any]


def content_text(message: Message) -> str:
    """The text of a message: string content, or the text parts of list-form content.

    Non-text parts (images, audio, files) are represented by a short marker so that nothing is
    silently lost from summaries and checks.
    """
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            parts.append(str(part.get("text", "")))
        elif kind in ("image_url", "input_image"):
            parts.append("[image]")
        elif kind in ("input_audio", "audio"):
            parts.append("[audio]")
        elif kind == "file":
            parts.append("[file]")
        elif kind == "refusal":
            parts.append(str(part.get("refusal", "")))
        else:
            parts.append(f"[{kind}]")
    return "\n".join(parts)


def tool_call_ids(message: Message) -> list[str]:
    return [c.get("id", "") for c in message.get("tool_calls") or []]


def group_exchanges(messages: Sequence[Message]) -> list[list[int]]:
    """Split message indices into units that must be kept or dropped whole.

    An assistant message with tool_calls and the tool messages answering it form one unit (so do
    a legacy `function_call` and the `function` message after it); every other message is a unit
    of its own. Trimming and summarizing by units keeps every tool-call pair intact
    (docs/ARCHITECTURE.md, invariant 1).
    """
    units: list[list[int]] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        unit = [i]
        if msg.get("role") == "assistant" and msg.get("function_call") and not msg.get("tool_calls"):
            if i + 1 < len(messages) and messages[i + 1].get("role") == "function":
                unit.append(i + 1)
            i += len(unit)
        elif msg.get("role") == "assistant" and msg.get("tool_calls"):
            ids = set(tool_call_ids(msg))
            j = i + 1
            while j < len(messages) and messages[j].get("role") == "tool" and messages[j].get("tool_call_id") in ids:
                unit.append(j)
                j += 1
            i = j
        else:
            i += 1
        units.append(unit)
    return units


def system_prefix_length(messages: Sequence[Message]) -> int:
    """How many leading messages are the system prompt (system/developer) — never summarized."""
    n = 0
    while n < len(messages) and messages[n].get("role") in ("system", "developer"):
        n += 1
    return n


def last_user_index(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def with_note(message: Message, note: str) -> Message:
    """A copy of a user message with `note` after its own words, which stay byte for byte: string
    content gains "\\n\\n" + note, list content a text part. Every provider's template accepts it
    (a late system message is rejected by many, and a second user message in a row breaks the
    alternation some require)."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": note}]}
    text = content if isinstance(content, str) else ""
    return {**message, "content": f"{text}\n\n{note}" if text else note}


def append_note(messages: list[Message], note: str) -> list[Message]:
    """`messages` with a note from the proxy to the model at the very end, where the provider's
    cached prefix is untouched: inside the last message when it is the user's, else as a user
    message of its own after the last tool results (OpenAI, Anthropic and Gemini all accept a user
    turn there)."""
    if messages and messages[-1].get("role") == "user":
        return [*messages[:-1], with_note(messages[-1], note)]
    return [*messages, {"role": "user", "content": note}]
