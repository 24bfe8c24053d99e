"""Summary blocks, cached by the hash of the span they cover and found by where that span starts.

This is what keeps forwarded prefixes cache-stable: a block made on one turn is found again on
the next (the client resends the same messages), so the same summary message is forwarded with
no new summarizer call. Spans are keyed per tenant, so a summary (and the archive reference in
it) never crosses tenants. Bounded LRU; thread-safe (planning runs in a worker thread).
"""

from __future__ import annotations

import hashlib
import threading
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
    key: str  # span_key of the covered messages
    first: str  # hash of the span's first message (where the index finds it)
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


class SummaryIndex:
    def __init__(self, max_blocks: int = 20_000) -> None:
        self._by_key: LRU[str, tuple[str | None, SummaryBlock]] = LRU(max_blocks, on_evict=self._forget)
        self._by_start: dict[tuple[str | None, str], list[str]] = {}  # (tenant, first hash) → block keys
        self._lock = threading.Lock()  # guards _by_start (planning runs in worker threads)

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> SummaryBlock | None:
        hit = self._by_key.get(key)
        return None if hit is None else hit[1]

    def put(self, tenant: str | None, block: SummaryBlock) -> None:
        with self._lock:
            starts = self._by_start.setdefault((tenant, block.first), [])
            if block.key not in starts:
                starts.append(block.key)
        self._by_key.put(block.key, (tenant, block))

    def _forget(self, key: str, entry: tuple[str | None, SummaryBlock]) -> None:
        tenant, block = entry
        with self._lock:
            starts = self._by_start.get((tenant, block.first), [])
            if key in starts:
                starts.remove(key)
            if not starts:
                self._by_start.pop((tenant, block.first), None)

    def longest_at(
        self, tenant: str | None, hashes: Sequence[str], start: int, ends: set[int], max_end: int
    ) -> SummaryBlock | None:
        """The longest known block covering hashes[start:end] exactly, for an allowed `end`."""
        with self._lock:
            keys = list(self._by_start.get((tenant, hashes[start]), ()))
        candidates = [block for block in map(self.get, keys) if block is not None]
        best: SummaryBlock | None = None
        for block in sorted(candidates, key=lambda b: -b.n_messages):
            end = start + block.n_messages
            if end > max_end or end not in ends:
                continue
            if span_key(tenant, hashes[start:end]) == block.key:
                best = block
                break
        return best
