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
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

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
        self._by_key: OrderedDict[str, SummaryBlock] = OrderedDict()
        self._by_start: dict[tuple[str | None, str], list[str]] = {}
        self._tenant_of: dict[str, str | None] = {}
        self._max = max_blocks
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> SummaryBlock | None:
        with self._lock:
            block = self._by_key.get(key)
            if block is not None:
                self._by_key.move_to_end(key)
            return block

    def put(self, tenant: str | None, block: SummaryBlock) -> None:
        with self._lock:
            if block.key not in self._by_key:
                self._by_start.setdefault((tenant, block.first), []).append(block.key)
                self._tenant_of[block.key] = tenant
            self._by_key[block.key] = block
            self._by_key.move_to_end(block.key)
            while len(self._by_key) > self._max:
                old_key, old = self._by_key.popitem(last=False)
                starts = self._by_start.get((self._tenant_of.pop(old_key, None), old.first), [])
                if old_key in starts:
                    starts.remove(old_key)

    def longest_at(
        self, tenant: str | None, hashes: Sequence[str], start: int, ends: set[int], max_end: int
    ) -> SummaryBlock | None:
        """The longest known block covering hashes[start:end] exactly, for an allowed `end`."""
        with self._lock:
            keys = list(self._by_start.get((tenant, hashes[start]), ()))
            candidates = [self._by_key[k] for k in keys if k in self._by_key]
        best: SummaryBlock | None = None
        for block in sorted(candidates, key=lambda b: -b.n_messages):
            end = start + block.n_messages
            if end > max_end or end not in ends:
                continue
            if span_key(tenant, hashes[start:end]) == block.key:
                best = block
                break
        if best is not None:
            self.get(best.key)  # refresh its LRU position
        return best
