"""The `Relevant context:` block: built from selected memories and put at the start of the latest
user message, never in the system prompt (the cached prefix stays intact).

A block given to a user message is remembered for the session (session.py, keyed by that message's
text and occurrence), and the same bytes are put back into that message on every later turn, so a
conversation that grows by one turn is forwarded as the turn before plus the new turn.
"""

from __future__ import annotations

from ..cache import stable_hash
from ..messages import Message, content_text

HEADER = "Relevant context:"


def block_text(texts: list[str]) -> str:
    return "\n".join([HEADER, *(f"- {' '.join(t.split())}" for t in texts)])


def with_block(message: Message, block: str) -> Message:
    """A copy of a user message with `block` first: a text part of its own when the content is a list."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": block}, *content]}
    return {**message, "content": f"{block}\n\n{content or ''}"}


def user_message_keys(messages: list[Message]) -> dict[int, str]:
    """A key per user message: the hash of its text and which occurrence of that text it is."""
    seen: dict[str, int] = {}
    keys: dict[int, str] = {}
    for i, m in enumerate(messages):
        if m.get("role") != "user":
            continue
        h = stable_hash(content_text(m))
        keys[i] = f"{h}#{seen.get(h, 0)}"
        seen[h] = seen.get(h, 0) + 1
    return keys
