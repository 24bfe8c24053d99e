"""The knowledge base: documents split into passages, stored in Chroma (one namespace per tenant).

Each document becomes one Chroma entry per sentence ("<id>#<n>"), so a claim is compared with
one fact rather than a page; part 0 also keeps the whole document text for listing. Vectors
come from `services.embedder` (Chroma is never asked to embed: its default model downloads).
Re-adding an id replaces the document. An in-memory evidence index (evidence.py: BM25 over
sentence windows + the stored vectors) mirrors the collection; it is rebuilt after a write and
when the collection's size changes under us (another process wrote).

All methods are synchronous and may be slow (embedding, disk): call them via asyncio.to_thread.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..base import Embedder, Store
from ..errors import CtxwardenError
from ..history.timestamps import parse_time
from ..text.sentences import split_sentences
from .checkers.base import Evidence
from .evidence import EvidenceIndex, IndexedSentence

COLLECTION = "kb"
MAX_ID_LENGTH = 200
_RESERVED = ("doc_id", "part", "parts", "doc_text")


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
    def __init__(self, store: Store, embedder: Embedder, tenant: str | None = None, refresh_s: float = 5.0) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.refresh_s = refresh_s
        self.version = 0  # bumped on every change seen: verdicts cached under an older version are void
        self._index: EvidenceIndex | None = None
        self._checked_at = 0.0
        self._lock = threading.RLock()

    @property
    def collection(self) -> Any:
        return self.store.collection(COLLECTION, self.tenant)

    # ------------------------------------------------------------------ writes

    def add(self, docs: Sequence[Document]) -> int:
        """Store documents (replacing those with the same id); returns the number of passages."""
        rows: list[tuple[str, str, dict[str, Any]]] = []
        for doc in docs:
            parts = split_sentences(doc.text) or [doc.text]
            for n, part in enumerate(parts):
                meta = {**doc.metadata, "doc_id": doc.id, "part": n, "parts": len(parts)}
                if n == 0:
                    meta["doc_text"] = doc.text
                rows.append((f"{doc.id}#{n}", part, meta))
        vectors = self.embedder.embed([text for _, text, _ in rows])
        with self._lock:
            for doc in docs:
                self._delete_passages(doc.id)
            for start in range(0, len(rows), 1000):
                batch = rows[start : start + 1000]
                self.collection.add(ids=[r[0] for r in batch], documents=[r[1] for r in batch],
                                    metadatas=[r[2] for r in batch], embeddings=vectors[start : start + 1000])
            self._index = None  # rebuilt on the next read
            self.version += 1
        return len(rows)

    def delete(self, doc_id: str) -> bool:
        with self._lock:
            found = self._delete_passages(doc_id)
            if found:
                self.version += 1
            return found

    def _delete_passages(self, doc_id: str) -> bool:
        existing = self.collection.get(where={"doc_id": doc_id}, include=[])["ids"]
        if existing:
            self.collection.delete(ids=existing)
            self._index = None
        return bool(existing)

    # ------------------------------------------------------------------ reads

    def documents(self, limit: int = 100, offset: int = 0) -> tuple[list[Document], int]:
        """Documents in id order (a page of them) and how many there are."""
        got = self.collection.get(where={"part": 0}, include=["metadatas"])
        rows = sorted(zip(got["ids"], got["metadatas"]), key=lambda r: r[1].get("doc_id", ""))
        page = rows[offset : offset + limit]
        return [_document_of(meta) for _, meta in page], len(rows)

    def document(self, doc_id: str) -> Document | None:
        got = self.collection.get(ids=[f"{doc_id}#0"], include=["metadatas"])
        return _document_of(got["metadatas"][0]) if got["ids"] else None

    def count(self) -> int:
        return self.collection.count()

    @property
    def loaded_index(self) -> EvidenceIndex | None:
        """The index as last loaded, without looking for changes (None before the first load):
        for callers on the event loop that must not touch the store."""
        return self._index

    @property
    def index(self) -> EvidenceIndex:
        """The passages, loaded on first use and reloaded when another writer changed the KB."""
        with self._lock:
            now = time.monotonic()
            if self._index is None or now - self._checked_at >= self.refresh_s:
                self._checked_at = now
                if self._index is None or self.collection.count() != len(self._index):
                    self._index = self._load()
                    self.version += 1
            return self._index

    def _load(self) -> EvidenceIndex:
        got = self.collection.get(include=["documents", "metadatas", "embeddings"])
        sentences = [IndexedSentence(pid, str(meta.get("doc_id", pid)), int(meta.get("part", 0)), text or "",
                                     is_stale(meta)) for pid, text, meta in zip(got["ids"], got["documents"], got["metadatas"])]
        vectors = got.get("embeddings")
        return EvidenceIndex(sentences, None if vectors is None or not len(vectors) else vectors)

    def search(self, queries: Sequence[str], k: int = 4) -> list[list[Evidence]]:
        """For each query, the k best passages (BM25 + embeddings, fused by rank)."""
        index = self.index
        if not queries or not len(index):
            return [[] for _ in queries]
        return index.search(queries, self.embedder.embed(list(queries)), k)


def is_stale(metadata: dict[str, Any], now: float | None = None) -> bool:
    """A passage whose `valid_until` (ISO date) has passed is stale: kept, listed, never used to judge."""
    until = parse_time(metadata.get("valid_until"))
    return until is not None and until < (time.time() if now is None else now)


def _document_of(meta: dict[str, Any]) -> Document:
    user = {k: v for k, v in meta.items() if k not in _RESERVED}
    return Document(str(meta.get("doc_id", "")), str(meta.get("doc_text", "")), user)
