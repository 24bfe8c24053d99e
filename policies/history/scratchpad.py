"""The scratchpad: archived texts behind `ref=<id>` stubs (recall.py reads them back for the model).

Writes land in memory at once (the request path never waits on disk) and are persisted to a Chroma
collection (`scratchpad`: each tenant sees only its own rows) by a background task: Chroma commits cost tens of
milliseconds each, so they are batched off the request path. Reads hit memory first, then Chroma.
Ids are deterministic (a hash of the content and the tool call id), so the same conversation is
archived under the same refs on every turn, and a lost write heals itself: the client resends
the original with its next request, and it is archived again.

Isolation (tenant → user → task): an entry belongs to the tenant, user and task of the request that
archived it (the user and task as the memory policy reads them: base.user_and_task). Its id is the
ref and a hash of that owner, so only a request of the same user and task finds it, by ref or by
query; one that names neither uses the bare ref, as before owners existed, and still reads the
archives written then (no owner in their metadata). The history policy's block keys name the owner
too, so each user's task summarizes (and archives) its own spans.

Retention (archive.retention_days, archive.max_items per tenant): entries older than the retention
are never served, and are deleted from Chroma by the background writer, amortized: a tenant's
collection is pruned after every PRUNE_EVERY writes to it (max_items / 10 if smaller; and on its
first write in a process), the oldest entries going first once it holds more than max_items (plus
10%, so a prune frees a batch, not one entry per write).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterator, Sequence

from ..base import Exchange, Services, user_and_task
from ..cache import LRU, cache_scale, stable_hash
from ..messages import Message, carried_values, content_text, fingerprint, remembered
from .archive_rows import batches, created_before, lexical_vector, row_metadata, row_text
from .blocks import summary_sections

log = logging.getLogger("ctxwarden.scratchpad")

RECALL_TOOL_NAME = "context_recall"
REF_RE = re.compile(r"ref=((?:ar|hs)_[A-Za-z0-9_-]{8,64})")
STUB_PREFIX = "[archived tool result ref="
COLLECTION = "scratchpad"
Owner = tuple[str, str]  # (user, task) inside the tenant
NO_OWNER: Owner = ("", "")


def owner_of(ex: Exchange) -> Owner:
    """Whose archive a request writes and reads: its user and task, as the memory policy reads them,
    taken as sent (an invalid name still makes a scope; the memory policy is the one to refuse it)."""
    return user_and_task(ex, check=False)


def stored_id(ref: str, owner: Owner) -> str:
    """An entry's id in memory and in Chroma: the bare ref without an owner, else the ref and the owner's hash."""
    return ref if owner == NO_OWNER else f"{ref}.{stable_hash(list(owner))[:16]}"


def _owned_by(meta: dict[str, Any] | None, owner: Owner) -> bool:
    meta = meta or {}
    return (meta.get("user", ""), meta.get("task", "")) == owner


def archive_ref(content: str, tool_call_id: str) -> str:
    """The ref of an archived tool result: stable for the same content and call."""
    return "ar_" + stable_hash(f"{tool_call_id}\x00{content}")[:20]


def span_ref(key: str) -> str:
    """The ref of an archived history span (its summary block's span key)."""
    return "hs_" + key[:20]


def stub_text(ref: str, tokens: int, digest: str) -> str:
    """A stub: the ref, the original's size, how to get it back, then the digest of what it held."""
    return (
        f"{STUB_PREFIX}{ref}: {tokens} tokens; {RECALL_TOOL_NAME} with this ref (and a query, to search "
        f"inside it) returns the full text]\n{digest}"
    )


def refs_in(messages: Sequence[Message]) -> list[str]:
    """Archive refs the forwarded messages mention: stubs (tool results) and the proxy's summaries
    (in user turns; what the user typed there is not read)."""
    per_message = carried_values("refs.of", messages, _refs_of) or map(_refs_of, messages)
    return list(dict.fromkeys(chain.from_iterable(per_message)))  # each once, in order (C speed: no Python per message)


# fingerprint → the refs one message mentions. An agent's request carries every earlier tool result
# again and is read three times (history, archive twice): scanning its text each time was ~0.9 ms a
# read at 500 KB of history. ~250 bytes an entry and ~90 a ref.
_REFS: LRU[tuple[int, int], tuple[str, ...]] = LRU(
    100_000, max_bytes=4 * 2**20, sizeof=lambda key, refs: 250 + 90 * len(refs))


def _refs_of(msg: Message) -> tuple[str, ...]:
    if msg.get("role") not in ("user", "tool", "system", "developer"):
        return ()
    return remembered("refs", msg, _scan_refs)


def _scan_refs(msg: Message) -> tuple[str, ...]:
    role = msg.get("role")
    seen = fingerprint(msg)
    refs = _REFS.get(seen) if seen is not None else None
    if refs is None:
        texts = summary_sections(msg) if role == "user" else [content_text(msg)]
        refs = tuple(r for text in texts for r in REF_RE.findall(text))
        if seen is not None:
            _REFS.put(seen, refs)
    return refs


@dataclass
class _Entry:
    text: str
    meta: dict[str, Any]
    persisted: bool = False


# Archived text held in memory in front of Chroma, at most (Chroma holds it all). A cache like the others:
# its share of the process's cache budget (`server.cache_mb`), counted in real bytes (sys.getsizeof: a text
# with one emoji takes 4 bytes a character). Before, 32 M characters were kept whatever the budget: under
# varied traffic (bench/fuzz.py) its history transcripts were the largest Python growth tracemalloc showed.
MEMORY_BYTES = 32 * 2**20
RETENTION_S = 7 * 86_400  # defaults of archive.retention_days and archive.max_items
MAX_ITEMS = 10_000
PRUNE_EVERY = 100  # writes to a tenant's collection between two prunes of it
FLUSH_DELAY_S = 0.2


def _text_bytes(text: str) -> int:
    return sys.getsizeof(text)


class Scratchpad:
    """Archived texts per tenant: memory (bounded) in front of Chroma (persistent)."""

    def __init__(self, services: Services, memory_entries: int = 2000, retention_s: float = RETENTION_S,
                 max_items: int = MAX_ITEMS) -> None:
        self.services = services
        self.memory: OrderedDict[tuple[str | None, str], _Entry] = OrderedDict()
        self.memory_entries = memory_entries
        self.retention_s = retention_s
        self.max_items = max_items
        self._unpruned: LRU[str | None, int] = LRU(10_000)  # tenant → writes since its last prune
        self.memory_bytes = 0  # the texts' total size: big archived spans are bounded by bytes too
        self._pending: dict[tuple[str | None, str], _Entry] = {}
        self._flusher: asyncio.Task | None = None
        self.held = 0  # requests gathering their writes (`gathered`): written when the last one ends
        self.persist_errors = 0

    # ------------------------------------------------------------------ write

    def put(self, tenant: str | None, ref: str, text: str, owner: Owner = NO_OWNER, **meta: Any) -> bool:
        """Archive `text` under `ref` for `owner` (memory now, Chroma soon). False if it was already there."""
        key = (tenant, stored_id(ref, owner))
        started = time.perf_counter()
        known = self.memory.get(key)
        if known is not None:
            self.memory.move_to_end(key)
            if not known.persisted and key not in self._pending and self.services.store is not None:
                self._pending[key] = known  # an earlier write failed: try again
                self._schedule_flush()
            return False
        owned = {"user": owner[0], "task": owner[1]} if owner != NO_OWNER else {}
        entry = _Entry(text, {**meta, **owned, "created": time.time()})
        self.memory[key] = entry
        self.memory_bytes += _text_bytes(text)
        self._evict()
        if self.services.store is not None:
            self._pending[key] = entry
            self._schedule_flush()
        self.services.metrics.add("ctxwarden.scratchpad.writes", 1, kind=meta.get("kind", "text"))
        self.services.metrics.record("ctxwarden.scratchpad.write_ms", (time.perf_counter() - started) * 1000)
        return True

    def _evict(self) -> None:
        """Drop the oldest entries, persisted ones first; pending writes stay until written. An entry
        lost here while the store is down comes back with the next request that carries it."""
        max_bytes = self.max_memory_bytes()
        if len(self.memory) <= self.memory_entries and self.memory_bytes <= max_bytes:
            return  # within bounds: no walk over the entries (this runs on every write)
        for only_persisted in (True, False):
            for key in list(self.memory):
                if len(self.memory) <= self.memory_entries and self.memory_bytes <= max_bytes:
                    return
                entry = self.memory[key]
                if key not in self._pending and (entry.persisted or not only_persisted or self.services.store is None):
                    del self.memory[key]
                    self.memory_bytes -= _text_bytes(entry.text)

    @staticmethod
    def max_memory_bytes() -> int:
        """The texts held in memory, at most: MEMORY_BYTES scaled by the cache budget (read at each
        write, so a budget set after this was made applies too)."""
        return int(MEMORY_BYTES * cache_scale())

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Writes made inside wait for its end, then go together. Chroma holds the GIL through each
        commit (~35-60 ms): a compaction event archives a block's texts as it makes each one, and the
        commits that started meanwhile, and the one gathered after FLUSH_DELAY_S, landed on the
        session's next steps (+5-20 ms of their policy time, for two or three steps)."""
        self.held += 1
        try:
            yield
        finally:
            self.held -= 1
            if not self.held and self._pending:
                self._start_flush()

    def _schedule_flush(self) -> None:
        if not self.held:
            self._start_flush()

    def _start_flush(self) -> None:
        if self._flusher is None or self._flusher.done():
            try:
                self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
            except RuntimeError:  # no running loop (library use): write now
                self._persist_batch(self._take_pending())
                self._evict()

    def _take_pending(self) -> dict[tuple[str | None, str], _Entry]:
        batch, self._pending = self._pending, {}
        return batch

    async def _flush_loop(self) -> None:
        while self._pending:
            for batch in batches(self._take_pending()):
                await asyncio.to_thread(self._persist_batch, batch)
            self._evict()  # here, on the event loop, where `memory` is changed
            if self._pending:  # more came during the write: a burst (a long history archived), let it gather
                await asyncio.sleep(FLUSH_DELAY_S)

    def _persist_batch(self, batch: dict[tuple[str | None, str], _Entry]) -> None:
        by_tenant: dict[str | None, list[tuple[str, _Entry]]] = {}
        for (tenant, ref), entry in batch.items():
            by_tenant.setdefault(tenant, []).append((ref, entry))
        for tenant, items in by_tenant.items():
            started = time.perf_counter()
            try:
                col = self.services.store.collection(COLLECTION, tenant)  # type: ignore[union-attr]
                col.upsert(  # the text as metadata, not as the row's document (archive_rows.TEXT_KEY)
                    ids=[ref for ref, _ in items],
                    embeddings=[lexical_vector(e.meta.get("gist") or e.text) for _, e in items],
                    metadatas=[row_metadata(e.meta, e.text) for _, e in items],
                )
            except Exception as exc:  # memory keeps serving; the next request carrying it retries the write
                self.persist_errors += 1
                log.exception("scratchpad: persisting %d entries for tenant %r failed", len(items), tenant)
                self.services.metrics.add("ctxwarden.scratchpad.errors", 1, op="write", error=type(exc).__name__)
                continue
            for _, entry in items:
                entry.persisted = True
            self.services.metrics.record("ctxwarden.scratchpad.persist_ms", (time.perf_counter() - started) * 1000)
            self._prune_if_due(tenant, col, len(items))

    async def flush(self) -> None:
        """Wait until every write so far is in Chroma (tests, shutdown)."""
        while True:
            if self._flusher is not None and not self._flusher.done():
                await self._flusher
            elif self._pending:
                self._start_flush()
            else:
                return

    # ------------------------------------------------------------------ read

    async def get(self, tenant: str | None, ref: str, owner: Owner = NO_OWNER) -> str | None:
        """The text archived under `ref` by `owner` in `tenant`; None when expired or someone else's."""
        started = time.perf_counter()
        ref = stored_id(ref, owner)
        entry = self.memory.get((tenant, ref))
        if entry is not None and (self._expired(entry.meta.get("created")) or not _owned_by(entry.meta, owner)):
            entry = None
        source = "memory"
        text = entry.text if entry else None
        if text is None and self.services.store is not None:
            source = "store"
            try:
                text = await asyncio.to_thread(self._read_store, tenant, ref, owner)
            except Exception as exc:
                log.exception("scratchpad: reading %s failed", ref)
                self.services.metrics.add("ctxwarden.scratchpad.errors", 1, op="read", error=type(exc).__name__)
                text = None
        self.services.metrics.add("ctxwarden.scratchpad.reads", 1, source=source, found=text is not None)
        self.services.metrics.record("ctxwarden.scratchpad.read_ms", (time.perf_counter() - started) * 1000, source=source)
        return text

    def _read_store(self, tenant: str | None, ref: str, owner: Owner) -> str | None:
        col = self.services.store.collection(COLLECTION, tenant)  # type: ignore[union-attr]
        got = col.get(ids=[ref], include=["documents", "metadatas"])
        docs, metas = got.get("documents") or [], got.get("metadatas") or [{}]
        meta = metas[0] or {}
        text = row_text(meta, docs)
        return text if not self._expired(meta.get("created")) and _owned_by(meta, owner) else None

    # ------------------------------------------------------------------ retention

    def _expired(self, created: Any) -> bool:
        return isinstance(created, (int, float)) and created < time.time() - self.retention_s

    def _prune_if_due(self, tenant: str | None, col: Any, written: int) -> None:
        """Every PRUNE_EVERY writes to a tenant (max_items / 10 when smaller; and on its first write
        in this process): delete what is past the retention, then the oldest beyond max_items."""
        due = self._unpruned.get(tenant)
        due = 0 if due is None else due + written
        if 0 < due < min(PRUNE_EVERY, max(1, self.max_items // 10)):
            self._unpruned.put(tenant, due)
            return
        self._unpruned.put(tenant, 1)  # counted from here
        try:
            self.prune(tenant, col)
        except Exception as exc:  # retried at the next prune; the entries stay meanwhile
            log.warning("scratchpad: pruning tenant %r failed: %s", tenant, exc)
            self.services.metrics.add("ctxwarden.scratchpad.errors", 1, op="prune", error=type(exc).__name__)

    def prune(self, tenant: str | None, col: Any = None) -> int:
        """Delete a tenant's expired entries and its oldest beyond max_items; how many went."""
        col = col or self.services.store.collection(COLLECTION, tenant)  # type: ignore[union-attr]
        before = col.count()
        col.delete(where={"created": {"$lt": time.time() - self.retention_s}})
        count, removed = col.count(), 0
        if count > self.max_items * 1.1:
            oldest = created_before(col, count - self.max_items, time.time() - self.retention_s, time.time())
            for start in range(0, len(oldest), 1000):
                col.delete(ids=oldest[start : start + 1000])
            removed = len(oldest)
        gone = before - count + removed
        if gone:
            self.services.metrics.add("ctxwarden.scratchpad.pruned", gone)
        return gone


def shared_scratchpad(services: Services, memory_entries: int | None = None, retention_s: float | None = None,
                      max_items: int | None = None) -> Scratchpad:
    """One scratchpad per pipeline, so history and archive read each other's refs. It lives in
    `services.shared`, which a policy's own copy of Services (its own embedder) keeps. The settings
    given (the archive policy's) apply whichever policy made it."""
    pad = services.shared.get("scratchpad")
    if pad is None:
        pad = services.shared["scratchpad"] = Scratchpad(services)
    if memory_entries is not None:
        pad.memory_entries = memory_entries
    if retention_s is not None:
        pad.retention_s = retention_s
    if max_items is not None:
        pad.max_items = max_items
    return pad
