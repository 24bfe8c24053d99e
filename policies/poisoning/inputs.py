"""What the input checks read of a request's messages: the text of each message they check and its
verdict's cache key, made once a message and carried to the session's next request for the messages
it sends again (`messages.message_values`), so a step costs what is new in it."""

from __future__ import annotations

from itertools import compress
from typing import Any, Callable, Sequence

from ..cache import LRU, parts_hash
from ..messages import Message, carried_values, message_values, remembered

Read = Callable[[Message], str]  # the text the checks read in a message (made once a message)
UNSEEN: Any = object()  # no verdict known yet


def input_texts(messages: Sequence[Message], roles: frozenset[str], read: Read) -> list[str | None]:
    """Per message: the text the checks read, for one of `roles` with text that is not blank, else None
    (which the caller must not change)."""
    return message_values(("poisoning.input", roles), messages, lambda m: _text(m, roles, read))


def _input_text(message: Message, roles: frozenset[str], read: Read) -> str | None:
    return remembered(("poisoning.input", roles), message, lambda m: _text(m, roles, read))


def to_check(texts: list[str | None], known: list | None) -> list[int]:
    """Indices of the inputs whose verdict is not known to be clean: with the carried verdicts, those
    whose verdict is unseen or a finding, picked at C speed (a clean one, or a message the checks do not
    read, is None there), so an agent's step walks its new result and its findings, not its history."""
    if known is None:
        return [i for i, text in enumerate(texts) if text is not None]
    return list(compress(range(len(known)), known))


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


def known_verdicts(messages: Sequence[Message], scope: tuple, roles: frozenset[str], read: Read) -> list | None:
    """Per message of the request (None for any other list): its input verdict once known, else
    UNSEEN. The list is carried to the session's next request, and each verdict is written into it
    as it becomes known (`verdict_of`, `remember`), so a step looks up the verdict cache for its new
    messages only, not once per message of the history (a locked lookup each: ~0.1 ms at 60 tool
    results). A verdict depends, besides the message, on `scope` (tenant, KB version, how often the
    verdicts were forgotten) and on what the checks read: a message that is not of `roles`, or blank
    by `read` (`input_texts`), starts as None (nothing to find), any other as UNSEEN."""
    return carried_values(("poisoning.verdict", *scope, roles, read), messages,
                          lambda m: None if _input_text(m, roles, read) is None else UNSEEN)


def verdict_of(known: list | None, i: int, key: str, cache: LRU) -> Any:
    """Message i's verdict: from the carried list, else the cache (and kept in the list); UNSEEN if none."""
    found = known[i] if known is not None else UNSEEN
    if found is UNSEEN:
        found = cache.get(key, UNSEEN)
        if known is not None:
            known[i] = found
    return found


def remember(known: list | None, i: int, key: str, finding: Any, cache: LRU | None) -> None:
    """A verdict made now: in the cache (None: verdicts are not cached) and in the carried list."""
    if cache is not None:
        cache.put(key, finding)
        if known is not None:
            known[i] = finding
