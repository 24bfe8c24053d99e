"""Summary blocks, cached by the hash of the span they cover and the event that made them.

The planner (events.py) decides which spans become blocks; this cache only saves re-making them:
the next turn (the client resends the same messages) forwards the same summary text with no new
summarizer call. Keys include the tenant, so a summary (and the refs in it) never crosses tenants.

A block's text is context from the proxy, forwarded on the user's side of the conversation
(placement.py), between a header that says so and an end mark: `summary_sections` finds it inside
any message and `without_summaries` gives a message's text without it (the user's own words).
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

from ..cache import LRU, approx_size
from ..messages import Message, content_text

SUMMARY_TAG = "[ctxwarden: summary of"
SUMMARY_END = "[end of ctxwarden summary]"


def span_key(tenant: str | None, hashes: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{tenant or ''}|{len(hashes)}|".encode())
    digest.update("".join(hashes).encode())  # one call: the same digest as one update per hash, ~10× faster
    return digest.hexdigest()[:24]


@dataclass
class SummaryBlock:
    key: str  # span_key of the covered messages (and the event boundary)
    n_messages: int
    text: str
    mode: str  # extractive | llm | fallback | merged
    source_tokens: int
    refs: tuple[str, ...] = ()  # archived transcripts of the span (context_recall refs)
    created: float = field(default_factory=time.time)

    def content(self) -> str:
        """The note forwarded in the user's turn: marked as the proxy's, never the user's words."""
        head = f"{SUMMARY_TAG} {self.n_messages} earlier messages, written by the proxy, not the user"
        if self.refs:
            head += "; full text: " + ", ".join(f"ref={r}" for r in self.refs) + " (context_recall)"
        return f"{head}]\n{self.text}\n{SUMMARY_END}"

    def message(self) -> Message:
        """The block as a user turn of its own (placement.py decides where it goes)."""
        return {"role": "user", "content": self.content()}


def summary_sections(message: Message) -> list[str]:
    """The proxy's summaries inside a message (header to end mark), in order."""
    text = content_text(message)
    out, at = [], text.find(SUMMARY_TAG)
    while at >= 0:
        end = text.find(SUMMARY_END, at)
        stop = len(text) if end < 0 else end + len(SUMMARY_END)
        out.append(text[at:stop])
        at = text.find(SUMMARY_TAG, stop)
    return out


def without_summaries(text: str) -> str:
    """`text` without the proxy's summaries in it: what the user wrote (for policies that read the
    user's words after history ran, e.g. memory extraction and the tools query)."""
    if SUMMARY_TAG not in text:
        return text
    kept, at = [], 0
    start = text.find(SUMMARY_TAG)
    while start >= 0:
        kept.append(text[at:start])
        end = text.find(SUMMARY_END, start)
        at = len(text) if end < 0 else end + len(SUMMARY_END)
        start = text.find(SUMMARY_TAG, at)
    kept.append(text[at:])
    return "\n\n".join(part.strip("\n") for part in kept if part.strip())


MAX_BLOCK_BYTES = 16 * 2**20  # summary text held by the cache, at most (a block is re-derived from its messages)


class BlockCache:
    """Blocks by key (span + event boundary), per tenant by construction of the key. An LRU bounded
    by count and by the size of the summaries it holds."""

    def __init__(self, max_blocks: int = 20_000, max_bytes: int = MAX_BLOCK_BYTES) -> None:
        self._by_key: LRU[str, SummaryBlock] = LRU(max_blocks, max_bytes=max_bytes, sizeof=_block_size)

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> SummaryBlock | None:
        return self._by_key.get(key)

    def put(self, block: SummaryBlock) -> None:
        self._by_key.put(block.key, block)


def _block_size(key: str, block: SummaryBlock) -> int:
    # As CPython stores them (a text with one character outside the BMP takes 4 bytes a character),
    # the key too, and the object: counted in characters, blocks of fuzzed text held 2.2x their bound.
    return sys.getsizeof(key) + sys.getsizeof(block.text) + approx_size(block.refs) + 200
