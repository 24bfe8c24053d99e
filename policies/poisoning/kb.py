"""The knowledge base: documents split into passages, stored in Chroma (one namespace per tenant).

Each document becomes one Chroma entry per sentence, so a claim is compared with one fact rather
than a page; part 0 also keeps the whole document text for listing. Vectors come from
`services.embedder` (Chroma is never asked to embed: its default model downloads).

Re-adding an id replaces the document, atomically for readers and crash-safe (kbstore.py: the new
version is written whole under a new generation before the old one is deleted; readers take each
document's newest complete generation). add() returns only after both steps are committed.
An in-memory evidence index (evidence.py: BM25 over sentence windows + the stored vectors)
mirrors the collection; it is rebuilt after a write here, when a published version moved (another
replica wrote: Redis, about a second), when the store's change signal moved (another process on the
same embedded store wrote: read every SIGNAL_CHECK_S) and, at the latest, when the KB's version
record changed, looked at every `refresh_s` seconds. Vectors another process wrote may be
unreadable here (kbstore.py); the index then embeds those passages itself (reusing the vectors it
had for unchanged ones). A load that fails is never papered over with the previous index: every
read tries again and raises until one succeeds (`failure` says why meanwhile, for /readyz).

All methods are synchronous and may be slow (embedding, disk): call them via asyncio.to_thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..base import Embedder, Store
from ..errors import CtxwardenError
from ..history.timestamps import parse_time
from ..state import Versions
from ..text.sentences import split_sentences
from .checkers.base import Evidence
from .evidence import EvidenceIndex, IndexedSentence
from .kbstore import DATA, KBStorage, current_generations, heads, next_generation, retrying

log = logging.getLogger("ctxwarden.poisoning")

COLLECTION = DATA  # kept for importers: the first data collection's name
MAX_ID_LENGTH = 200
SIGNAL_CHECK_S = 0.5  # how often the store's change signal is read (a small file read, no store I/O)
READY_TIMEOUT_S = 2.0  # /readyz waits this long for a failed knowledge base to load again
_RESERVED = ("doc_id", "part", "parts", "doc_text", "gen")


class DocumentError(CtxwardenError, ValueError):
    """A document that cannot be stored; the message says which and why."""


@dataclass
class Document:
    id: str
    text: str
    metadata: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "metadata": self.metadata}


def parse_documents(raw: Any) -> list[Document]:
    """Validate `[{"id", "text", "metadata"?}, ...]`; raise DocumentError naming the bad entry."""
    if not isinstance(raw, list) or not raw:
        raise DocumentError("expected a non-empty list of documents ({\"id\", \"text\", \"metadata\"})")
    docs: list[Document] = []
    for n, item in enumerate(raw):
        where = f"document {n}"
        if not isinstance(item, dict):
            raise DocumentError(f"{where}: expected an object with id and text")
        unknown = set(item) - {"id", "text", "metadata"}
        if unknown:
            raise DocumentError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} (allowed: id, text, metadata)")
        doc_id, text, metadata = item.get("id"), item.get("text"), item.get("metadata") or {}
        if isinstance(doc_id, int):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id.strip() or len(doc_id) > MAX_ID_LENGTH:
            raise DocumentError(f"{where}: 'id' must be a non-empty string of at most {MAX_ID_LENGTH} characters")
        if not isinstance(text, str) or not text.strip():
            raise DocumentError(f"{where} ({doc_id}): 'text' must be a non-empty string")
        if not isinstance(metadata, dict):
            raise DocumentError(f"{where} ({doc_id}): 'metadata' must be an object")
        docs.append(Document(doc_id.strip(), text.strip(), _scalar_metadata(metadata)))
    return docs


def _scalar_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Chroma keeps str/int/float/bool values: other values are stored as JSON text."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        key = str(key)
        if key in _RESERVED:
            key = f"user_{key}"
        if value is None:
            continue
        out[key] = value if isinstance(value, (str, int, float, bool)) else json.dumps(value, ensure_ascii=False)
    return out


class KnowledgeBase:
    def __init__(self, store: Store, embedder: Embedder, tenant: str | None = None, refresh_s: float = 5.0,
                 versions: Versions | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.refresh_s = refresh_s
        self.version = 0  # bumped on every change seen: verdicts cached under an older version are void
        self.storage = KBStorage(store, tenant, lambda texts: self.embedder.embed(list(texts)))
        self._index: EvidenceIndex | None = None
        self._stamp: tuple[Any, ...] | None = None  # the storage stamp the index was loaded at
        self._checked_at = 0.0
        self._lock = threading.RLock()
        # Writes here publish a version; another replica's write shows as a new version within
        # about a second (state.poll_s), so its index reloads then instead of after refresh_s.
        self.versions = versions
        self._version_name = f"kb:{tenant or ''}"
        self._published = 0  # the published version the index was loaded at
        self._signal: str | None = None  # the store's change signal as last read, at _signal_at
        self._signal_at = -SIGNAL_CHECK_S
        self._loaded_signal: str | None = None  # ... and as read before the index was loaded
        self._vectors_unreadable: set[str] = set()  # data collections whose stored vectors failed to read
        self.failure: str | None = None  # why the last load failed; None once one succeeds

    @property
    def collection(self) -> Any:
        """The current data collection (it changes only when a damaged one is rebuilt)."""
        return self.storage.data()

    # ------------------------------------------------------------------ writes

    def add(self, docs: Sequence[Document]) -> int:
        """Store documents (replacing those with the same id); returns the number of passages.
        Returns once the new versions are committed and the old ones deleted."""
        split = [(doc, split_sentences(doc.text) or [doc.text]) for doc in {d.id: d for d in docs}.values()]
        vectors = self.embedder.embed([part for _, parts in split for part in parts])
        with self._lock:
            previous = self.storage.passages_of([doc.id for doc, _ in split])
            gen = next_generation(str(meta.get("gen", "")) for _, meta in previous)
            rows = _rows(split, gen)
            self.storage.upsert(rows, vectors)  # the new generation, whole, before anything goes
            written = self.storage.bump(gen, len(rows) + len(previous))
            self.storage.delete(previous)
            self._index = None  # rebuilt on the next read
            self._vectors_unreadable.clear()  # writing brought this process's vector index up to date
            self.version += 1
            self._compact(written)
        self._publish()
        return len(rows)

    def delete(self, doc_id: str) -> bool:
        """Delete every passage of a document; True if it was there (a complete version)."""
        with self._lock:
            rows = self.storage.passages_of([doc_id])
            if not rows:
                return False
            found = doc_id in current_generations(rows)
            self.storage.delete(rows)
            written = self.storage.bump(next_generation(str(meta.get("gen", "")) for _, meta in rows), len(rows))
            self._index = None
            self._vectors_unreadable.clear()
            self.version += 1
            self._compact(written)
        self._publish()
        return found

    def _publish(self) -> None:
        self.storage.signal()  # processes on this embedded store
        if self.versions is not None:
            self.versions.publish(self._version_name)  # replicas (Redis)

    def _signal_now(self) -> str | None:
        """The store's change signal, read at most every SIGNAL_CHECK_S."""
        now = time.monotonic()
        if now - self._signal_at >= SIGNAL_CHECK_S:
            self._signal, self._signal_at = self.storage.signal_token(), now
        return self._signal

    def _published_now(self) -> int:
        return self.versions.current(self._version_name) if self.versions is not None else 0

    def _compact(self, written: int) -> None:
        """After an acknowledged write: compact the store's log when due (a failure is only logged)."""
        try:
            self.storage.compact_if_due(written)
        except Exception:
            log.exception("knowledge base: compacting the store failed; it is retried after the next write")

    # ------------------------------------------------------------------ reads

    def documents(self, limit: int = 100, offset: int = 0) -> tuple[list[Document], int]:
        """Documents in id order (a page of them) and how many there are."""
        got = self.storage.read(["metadatas"])
        ordered = sorted(heads(zip(got["ids"], got["metadatas"])).items())
        return [_document_of(meta) for _, meta in ordered[offset : offset + limit]], len(ordered)

    def document(self, doc_id: str) -> Document | None:
        head = heads(self.storage.passages_of([doc_id])).get(doc_id)
        return _document_of(head) if head is not None else None

    def count(self) -> int:
        """Stored passages (every generation: a replace in progress counts twice)."""
        col = self.storage.existing()
        return retrying(col.count) if col is not None else 0

    @property
    def loaded_index(self) -> EvidenceIndex | None:
        """The index as last loaded, without looking for changes (None before the first load):
        for callers on the event loop that must not touch the store."""
        return self._index

    @property
    def current(self) -> bool:
        """The index is loaded and no look for changes is due: reading `index` now touches no store."""
        return (self._index is not None and self.failure is None and self._published_now() == self._published
                and self._signal_now() == self._loaded_signal and time.monotonic() - self._checked_at < self.refresh_s)

    async def refreshed(self) -> None:
        """Load or refresh the index off the event loop, only when that may touch the store: a
        thread hop costs more than the rest of a short request's policies."""
        if not self.current:
            await asyncio.to_thread(lambda: self.index)

    @property
    def settled_empty(self) -> bool:
        """The loaded index is empty and no look for changes is due: a search now touches neither
        the store nor a model, so it may run on the event loop."""
        return self.current and not len(self._index or ())

    @property
    def index(self) -> EvidenceIndex:
        """The passages, loaded on first use and reloaded when another writer changed the KB.
        Raises while it cannot be loaded (the caller reports the check unavailable)."""
        with self._lock:
            now, published, signal = time.monotonic(), self._published_now(), self._signal_now()
            if (self._index is None or self.failure is not None or published != self._published
                    or signal != self._loaded_signal or now - self._checked_at >= self.refresh_s):
                try:
                    stamp = self.storage.stamp()
                    if self._index is None or stamp != self._stamp or published != self._published:
                        self._index = self._load()
                        self._stamp, self._published = stamp, published
                        self.version += 1
                except Exception as exc:  # _checked_at stays: the next read tries again
                    self.failure = f"{type(exc).__name__}: {exc}"[:300]
                    raise
                self._checked_at, self._loaded_signal, self.failure = now, signal, None
            assert self._index is not None
            return self._index

    def _load(self) -> EvidenceIndex:
        name, got = self.storage.data_name(), None
        if name not in self._vectors_unreadable:
            try:
                got = self.storage.read(["documents", "metadatas", "embeddings"])
            except Exception as exc:  # damaged, or vectors another process wrote (module docstring)
                log.info("knowledge base%s: stored vectors unreadable here (%s: %s); embedding the passages",
                         f" of tenant {self.tenant!r}" if self.tenant else "", type(exc).__name__, str(exc)[:200])
        if got is None:
            got = {**self.storage.read(["documents", "metadatas"]), "embeddings": None}  # vectors made again below
            self._vectors_unreadable.add(name)
        metas = got["metadatas"]
        current = current_generations(zip(got["ids"], metas))
        keep = [i for i, meta in enumerate(metas) if current.get(str(meta.get("doc_id", ""))) == str(meta.get("gen", ""))]
        sentences = [IndexedSentence(f"{metas[i].get('doc_id', '')}#{metas[i].get('part', 0)}",
                                     str(metas[i].get("doc_id", got["ids"][i])), int(metas[i].get("part", 0)),
                                     got["documents"][i] or "", is_stale(metas[i])) for i in keep]
        if not keep:
            return EvidenceIndex(sentences, None)
        vectors = got.get("embeddings")
        if vectors is None or len(vectors) != len(metas):
            return EvidenceIndex(sentences, self._vectors_of([s.text for s in sentences]))
        return EvidenceIndex(sentences, np.asarray(vectors)[keep])

    def _vectors_of(self, texts: list[str]) -> np.ndarray:
        """Vectors for these passages: the loaded index's for texts it has, the embedder's for the rest."""
        known = self._index.vectors_by_text() if self._index is not None else {}
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        fresh = dict(zip(missing, self.embedder.embed(missing))) if missing else {}
        return np.asarray([known[t] if t in known else fresh[t] for t in texts])

    def search(self, queries: Sequence[str], k: int = 4) -> list[list[Evidence]]:
        """For each query, the k best passages (BM25 + embeddings, fused by rank)."""
        index = self.index
        if not queries or not len(index):
            return [[] for _ in queries]
        return index.search(queries, self.embedder.embed(list(queries)), k)


async def readiness(kbs: Iterable[KnowledgeBase]) -> tuple[bool, dict[str, Any]]:
    """For /readyz: not ready while a knowledge base cannot be loaded (its answers pass unchecked or
    are withheld, by on_failure). Each failed one is tried again first: while a replica is not ready
    no traffic comes to it, so the probe must be what finds it recovered."""
    failing = [kb for kb in kbs if kb.failure is not None]
    for kb in failing:
        try:
            await asyncio.wait_for(asyncio.to_thread(lambda kb=kb: kb.index), READY_TIMEOUT_S)
        except Exception:
            pass  # kb.failure says why
    failing = [kb for kb in failing if kb.failure is not None]
    if not failing:
        return True, {"kb": "ok"}
    return False, {"kb": "unavailable", "kb_error": failing[0].failure,
                   "kb_tenants": sorted(kb.tenant or "" for kb in failing)}


def _rows(split: Sequence[tuple[Document, list[str]]], gen: str) -> list[tuple[str, str, dict[str, Any]]]:
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for doc, parts in split:
        for n, part in enumerate(parts):
            meta = {**doc.metadata, "doc_id": doc.id, "part": n, "parts": len(parts), "gen": gen}
            if n == 0:
                meta["doc_text"] = doc.text
            rows.append((f"{doc.id}#{n}@{gen}", part, meta))
    return rows


def is_stale(metadata: dict[str, Any], now: float | None = None) -> bool:
    """A passage whose `valid_until` (ISO date) has passed is stale: kept, listed, never used to judge."""
    until = parse_time(metadata.get("valid_until"))
    return until is not None and until < (time.time() if now is None else now)


def _document_of(meta: dict[str, Any]) -> Document:
    user = {k: v for k, v in meta.items() if k not in _RESERVED}
    return Document(str(meta.get("doc_id", "")), str(meta.get("doc_text", "")), user)
