"""Summary blocks, cached by the hash of the span they cover and the event that made them.

The planner (events.py) decides which spans become blocks; this cache only saves re-making them:
the next turn (the client resends the same messages) forwards the same summary message with no new
summarizer call. Keys include the tenant, so a summary (and the refs in it) never crosses tenants.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Sequence

from ..cache import LRU
from ..messages import Message

SUMMARY_TAG = "[ctxwarden summary"


def span_key(tenant: str | None, hashes: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{tenant or ''}|{len(hashes)}|".encode())
    for h in hashes:
        digest.update(h.encode())
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
        head = f"{SUMMARY_TAG} of {self.n_messages} earlier messages"
        if self.refs:
            head += "; full text: " + ", ".join(f"ref={r}" for r in self.refs) + " (context_recall)"
        return f"{head}]\n{self.text}"

    def message(self, role: str = "system") -> Message:
        return {"role": role, "content": self.content()}


MAX_BLOCK_BYTES = 64 * 1024 * 1024  # summary text held by the cache, at most


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
    return len(block.text) + sum(len(r) for r in block.refs) + 200  # the text, its refs, the object
