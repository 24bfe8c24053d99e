"""Does each forwarded request extend the previous one of its session? (What a prompt cache can reuse.)

Providers (OpenAI, Anthropic, vLLM prefix caching) discount the part of a prompt that repeats the
previous request's opening bytes: tools, then messages. Per session this remembers the previous
forwarded request's tool list and message hashes, and reports whether the new one starts with
them: `extends` (the cache can hit), `changed` (something before the new turn was rewritten) or
`new` (the session's first request). An LRU of sessions bounded by count and by bytes (a session of
thousands of messages holds a hash each: ~110 bytes).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.cache import LRU, stable_hash
from ctxwarden.policies.history.layout import message_key

PrefixState = Literal["extends", "changed", "new"]


def _size(key: tuple[str | None, str], value: tuple[str, list[str]]) -> int:
    """An entry's bytes, about: the key's strings, the tools hash, ~110 bytes a message hash (a
    24-character str and its list slot)."""
    return 300 + sum(len(k or "") for k in key) + 110 * len(value[1])


class PrefixWatch:
    def __init__(self, max_sessions: int = 10_000, max_bytes: int = 16 * 2**20) -> None:
        self._last: LRU[tuple[str | None, str], tuple[str, list[str]]] = LRU(max_sessions, max_bytes=max_bytes,
                                                                             sizeof=_size)

    def observe(self, ex: Exchange, body: dict[str, Any]) -> PrefixState:
        """Compare the body about to be forwarded with the session's previous one, and remember it."""
        tools = stable_hash(json.dumps(body.get("tools") or [], sort_keys=True, ensure_ascii=False))
        messages = body.get("messages") or []
        known = ex.notes.forwarded_keys
        # The pipeline's keys (a step keys only its new messages), when they are this very list's
        if known is not None and known[0] is messages and len(known[1]) == len(messages):
            hashes = list(known[1])
        else:
            hashes = [message_key(m) if isinstance(m, dict) else stable_hash(repr(m)) for m in messages]
        previous = self._last.get(ex.session_key)
        self._last.put(ex.session_key, (tools, hashes))
        if previous is None:
            return "new"
        last_tools, last_hashes = previous
        extends = last_tools == tools and hashes[:len(last_hashes)] == last_hashes
        return "extends" if extends else "changed"
