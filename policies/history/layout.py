"""The conversation's body (messages after the system prompt) as the planner sees it.

The body is cut into units (`group_exchanges`: an assistant tool-call message and its answers are
one unit), so every layout keeps tool-call pairs whole. Hashes and token counts per message are
what the planner (events.py) and the block cache key on. Pure; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..cache import LRU
from ..messages import Message, fingerprint, group_exchanges, message_token_list, message_values, remembered, role_of
from .columns import Columns, unit_columns
from .events import Units

_PLAIN_KEYS = ("role", "content", "tool_call_id", "name")
# fingerprint → stable key. Every request of an agent loop carries the whole history again, freshly
# parsed: hashing each message's bytes (and its tool calls' JSON) was ~2.3 ms a request at 500 KB of
# history, twice (the planner, the prefix watch). ~330 bytes an entry (two ints, a 24-character str).
_KEYS: LRU[tuple[int, int], str] = LRU(200_000, max_bytes=8 * 2**20, sizeof=lambda key, value: 330)


def message_key(message: Message) -> str:
    """A stable hash of a message (the same in every process: block keys and archive refs are made
    of it), looked up by the message's in-process fingerprint when it has been seen before."""
    return remembered("message_key", message, _known_key)


def message_keys(messages: list[Message]) -> list[str]:
    """[message_key(m) for m in messages], which the caller must not change; within a request's memo,
    the keys of messages carried from the session's last request come as one slice of its list."""
    return message_values("message_key", messages, _known_key)


def _known_key(message: Message) -> str:
    seen = fingerprint(message)
    if seen is None:
        return _stable_key(message)
    key = _KEYS.get(seen)
    if key is None:
        key = _stable_key(message)
        _KEYS.put(seen, key)
    return key


def _stable_key(message: Message) -> str:
    """The message's hash from its bytes (about twice as fast as hashing its sorted JSON)."""
    content = message.get("content")
    parts = [str(message.get("role", "")), str(message.get("tool_call_id") or ""), str(message.get("name") or "")]
    parts.append(content if isinstance(content, str) else json.dumps(content, sort_keys=True, ensure_ascii=False))
    rest = {k: v for k, v in message.items() if k not in _PLAIN_KEYS}
    if rest:
        parts.append(json.dumps(rest, sort_keys=True, ensure_ascii=False))
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@dataclass
class Body:
    messages: list[Message]
    hashes: list[str]
    tokens: list[int]
    units: list[list[int]]
    times: list[float | None]
    columns: Columns | None = None  # the planner's per-unit view, when made with the units (of_request)

    @classmethod
    def build(cls, messages: list[Message], count: Callable[[Message, str], int], times: Sequence[float | None]) -> "Body":
        """`count(message, key)` gives a message's tokens (the key lets the caller cache them)."""
        hashes = [message_key(m) for m in messages]
        return cls(
            messages=messages,
            hashes=hashes,
            tokens=[count(m, h) for m, h in zip(messages, hashes)],
            units=group_exchanges(messages),
            times=list(times),
        )

    @classmethod
    def of_request(cls, messages: list[Message], n_sys: int, counter: Any, model: str,
                   times: Sequence[float | None], previous: Columns | None = None) -> "Body":
        """The body of a request (its messages after the first `n_sys`), its keys and token counts
        made once per message (`message_values`: a slice of the session's last request's lists for
        the messages it sent again), its units and their columns from `previous` (the session's
        last body's) for the units it sent again (columns.py)."""
        body = messages[n_sys:]
        hashes = message_keys(messages)[n_sys:]
        tokens = message_token_list(counter, messages, model)[n_sys:]
        roles = message_values("role", messages, role_of)[n_sys:]
        view = unit_columns(body, roles, hashes, tokens, list(times), previous)
        return cls(messages=body, hashes=hashes, tokens=tokens, units=view.units, times=view.times, columns=view)

    def span(self, a: int, b: int) -> tuple[int, int]:
        """Unit range [a, b) → message range [start, end)."""
        if a >= b:
            start = self.units[a][0] if a < len(self.units) else len(self.messages)
            return start, start
        return self.units[a][0], self.units[b - 1][-1] + 1

    def message_count(self, a: int, b: int) -> int:
        start, end = self.span(a, b)
        return end - start

    def token_count(self, a: int, b: int) -> int:
        start, end = self.span(a, b)
        return sum(self.tokens[start:end])

    def unit_time(self, u: int) -> float | None:
        known = [self.times[i] for i in self.units[u] if self.times[i] is not None]
        return max(known) if known else None

    def plan_units(self) -> Units:
        """The per-unit view the planner replays."""
        if self.columns is not None:
            return self.columns.view()
        roles = message_values("role", self.messages, role_of)  # the request's own: a slice of its list
        tokens, units = self.tokens, self.units
        untimed = self.times.count(None) == len(self.times)
        return Units(
            starts=[unit[0] for unit in units],
            messages=[len(unit) for unit in units],
            tokens=[sum(tokens[unit[0]:unit[-1] + 1]) for unit in units],  # a unit is a run of messages
            is_user=[roles[unit[0]] == "user" for unit in units],
            ends_request=[roles[unit[-1]] in ("user", "tool", "function") for unit in units],
            times=[None] * len(units) if untimed else [self.unit_time(u) for u in range(len(units))],
        )
