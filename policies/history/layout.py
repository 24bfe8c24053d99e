"""How a conversation is laid out for forwarding: verbatim units, summary blocks, trimmed units.

The body (messages after the system prompt) is cut into units (`group_exchanges`: an assistant
tool-call message and its answers are one unit), so every layout keeps tool-call pairs whole.
`walk` lays the body out from the oldest unit on:

- a known summary block that starts here (and ends at a unit boundary before the protected tail)
  is reused, the longest one first; a block whose messages are all too old is trimmed whole;
- a unit older than `max_age_s` is trimmed;
- the pinned unit (the current user message) and the protected tail stay verbatim;
- anything else joins a *run*: verbatim for now, a candidate for a new summary block.

Pure functions over hashes and counts; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from ..messages import Message, group_exchanges
from .blocks import SummaryBlock, SummaryIndex

SegmentKind = Literal["keep", "run", "block", "trim"]
_PLAIN_KEYS = ("role", "content", "tool_call_id", "name")


def message_key(message: Message) -> str:
    """A stable hash of a message (about twice as fast as hashing its sorted JSON)."""
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

    def is_stale(self, u: int, cutoff: float | None) -> bool:
        moment = self.unit_time(u)
        return cutoff is not None and moment is not None and moment < cutoff

    def unit_starting_at(self, message_index: int) -> int:
        for u, unit in enumerate(self.units):
            if unit[0] == message_index:
                return u
        return len(self.units)

    def protected_from(self, keep_recent: int) -> int:
        """The first unit of the tail that stays verbatim: the last `keep_recent` messages, whole units."""
        first = len(self.messages) - keep_recent
        for u in range(len(self.units) - 1, -1, -1):
            if self.units[u][0] < first:
                return u + 1 if self.units[u][-1] < first else u
        return 0


@dataclass
class Segment:
    kind: SegmentKind
    start: int  # unit index
    end: int  # unit index, exclusive
    block: SummaryBlock | None = None


def walk(
    body: Body,
    index: SummaryIndex,
    tenant: str | None,
    protect_from: int,
    pinned: int | None,
    cutoff: float | None,
) -> list[Segment]:
    """Lay the body out: reuse known blocks, trim stale units, collect runs (see module doc)."""
    segments: list[Segment] = []
    boundaries = {unit[0] for unit in body.units} | {len(body.messages)}
    run_start: int | None = None

    def close_run(at: int) -> None:
        nonlocal run_start
        if run_start is not None:
            segments.append(Segment("run", run_start, at))
            run_start = None

    u = 0
    n_units = len(body.units)
    while u < n_units:
        if u >= protect_from:
            close_run(u)
            segments.append(Segment("keep", u, n_units))
            break
        if u == pinned:
            close_run(u)
            segments.append(Segment("keep", u, u + 1))
            u += 1
            continue
        limit = min(protect_from, pinned if pinned is not None and pinned > u else n_units)
        max_end = body.span(limit, limit)[0] if limit < n_units else len(body.messages)
        block = index.longest_at(tenant, body.hashes, body.units[u][0], boundaries, max_end)
        if block is not None:
            close_run(u)
            end = body.unit_starting_at(body.units[u][0] + block.n_messages)
            stale = all(body.is_stale(v, cutoff) for v in range(u, end))
            segments.append(Segment("trim" if stale else "block", u, end, None if stale else block))
            u = end
            continue
        if body.is_stale(u, cutoff):
            close_run(u)
            segments.append(Segment("trim", u, u + 1))
            u += 1
            continue
        if run_start is None:
            run_start = u
        u += 1
    close_run(n_units)
    return segments


def assemble(system: list[Message], body: Body, segments: Sequence[Segment], role: str) -> list[Message]:
    out = list(system)
    for seg in segments:
        if seg.kind == "block" and seg.block is not None:
            out.append(seg.block.message(role))
        elif seg.kind in ("keep", "run"):
            start, end = body.span(seg.start, seg.end)
            out.extend(body.messages[start:end])
    return out


def layout_size(body: Body, segments: Sequence[Segment], summary_tokens: Callable[[SummaryBlock], int]) -> tuple[int, int]:
    """(messages, tokens) of the history this layout forwards."""
    messages = tokens = 0
    for seg in segments:
        if seg.kind == "block" and seg.block is not None:
            messages += 1
            tokens += summary_tokens(seg.block)
        elif seg.kind in ("keep", "run"):
            messages += body.message_count(seg.start, seg.end)
            tokens += body.token_count(seg.start, seg.end)
    return messages, tokens
