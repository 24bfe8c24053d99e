"""What the input checks read of a request's messages: the text of each message they check and its
verdict's cache key, made once a message and carried to the session's next request for the messages
it sends again (`messages.message_values`), so a step costs what is new in it."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..cache import parts_hash
from ..messages import Message, message_values, remembered

Read = Callable[[Message], str]  # the text the checks read in a message (made once a message)


def inputs_to_check(messages: Sequence[Message], roles: frozenset[str], read: Read) -> list[tuple[int, str, str]]:
    """(index, role, text) of the messages the checks read: of `roles`, with text that is not blank."""
    texts = message_values(("poisoning.input", roles), messages, lambda m: _text(m, roles, read))
    return [(i, messages[i].get("role", ""), text) for i, text in enumerate(texts) if text is not None]


def verdict_keys(messages: Sequence[Message], tenant: str | None, kb_version: Any, roles: frozenset[str],
                 read: Read) -> list[str | None]:
    """Per message of `roles`: the input verdicts' cache key (tenant, KB version, role, the text's hash)."""
    def key(m: Message) -> str | None:
        if m.get("role") not in roles:
            return None
        text_key = remembered("poisoning.hash", m, lambda m: parts_hash(read(m)))
        return parts_hash(tenant or "", kb_version, m.get("role", ""), text_key)

    return message_values(("poisoning.key", tenant, kb_version, roles), messages, key)


def _text(message: Message, roles: frozenset[str], read: Read) -> str | None:
    if message.get("role") not in roles:
        return None
    text = read(message)
    return text if text.strip() else None
