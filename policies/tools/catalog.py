"""The tool catalog: every distinct tool definition embedded once, kept in memory, stored in Chroma.

A definition is keyed by the hash of its JSON (`stable_hash`), so a renamed or re-described tool
is a new entry and an unchanged one is never embedded again: not on the next request (memory),
not after a restart (Chroma, which keeps the vectors, not the text). Each tool is stored as 1 + n records, `<key>:0` for the whole
definition and `<key>:i` for its segments (text.py), with the tool key in the metadata.

Synchronous and CPU/IO-bound: call it from a worker thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base import Embedder, Store, embed_array
from ..cache import LRU
from .text import ToolText

log = logging.getLogger("ctxwarden.tools")

CATALOG_VERSION = "v1"  # bump when text.py changes what is embedded
# Vectors held in memory: ~1-9 KB a tool (1 + up to 8 segments); a 525-tool MCP catalog is ~2.5 MB.
# At the default budget this share is ~6 MB. A share smaller than the catalog an agent sends misses
# on every tool of it (its tools are asked for in the same order each time the tool set changes).
CATALOG_BYTES = 24 * 2**20
MAX_PERSISTED = 100_000  # (tenant, embedder, tool) known to be in Chroma: ~200 bytes each


@dataclass(frozen=True)
class ToolVectors:
    key: str
    name: str | None
    vectors: np.ndarray  # (1 + segments, dim) float32, unit rows; row 0 is the whole definition


@dataclass
class CatalogReport:
    """What one lookup cost: for the action detail and the tests."""

    embedded: int = 0  # tools embedded now
    loaded: int = 0  # tools read back from Chroma
    store_error: str | None = None


@dataclass
class ToolCatalog:
    max_entries: int = 20_000
    _entries: LRU[tuple[str, str], ToolVectors] = field(init=False)
    _persisted: set[tuple[str, str, str]] = field(default_factory=set)  # (tenant, embedder, key) in Chroma
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def vectors(
        self,
        keys: Sequence[str],
        texts: Sequence[ToolText],
        embedder: Embedder,
        store: Store | None,
        tenant: str | None,
    ) -> tuple[list[ToolVectors], CatalogReport]:
        """The vectors of each tool (same order), embedding only the ones never seen before."""
        report = CatalogReport()
        space = embedder.name
        found: dict[str, ToolVectors] = {}
        for key in keys:
            hit = self._entries.get((space, key))
            if hit is not None:
                found[key] = hit
        wanted = {k: t for k, t in zip(keys, texts) if k not in found}
        collection = None
        if store is not None and (wanted or any((tenant or "", space, k) not in self._persisted for k in keys)):
            try:
                collection = store.collection(f"tools_{CATALOG_VERSION}_{space}", tenant)
                if wanted:
                    loaded = _load(collection, wanted)
                    found.update(loaded)
                    report.loaded = len(loaded)
                    self._mark_persisted(tenant, space, loaded)
                    wanted = {k: t for k, t in wanted.items() if k not in loaded}
            except Exception as exc:  # the store is optional for ranking: say so, carry on in memory
                report.store_error = f"{type(exc).__name__}: {exc}"
                collection = None
        if wanted:
            fresh = _embed(embedder, wanted)
            found.update(fresh)
            report.embedded = len(fresh)
        self._remember(space, found)
        if collection is not None:
            unsaved = {k: found[k] for k in keys if (tenant or "", space, k) not in self._persisted}
            try:
                _save(collection, unsaved)
                self._mark_persisted(tenant, space, unsaved)
            except Exception as exc:
                report.store_error = f"{type(exc).__name__}: {exc}"
        return [found[k] for k in keys], report

    def _remember(self, space: str, found: dict[str, ToolVectors]) -> None:
        for key, entry in found.items():
            self._entries.put((space, key), entry)

    def __post_init__(self) -> None:
        self._entries = LRU(self.max_entries, max_bytes=CATALOG_BYTES, sizeof=lambda key, v: 300 + len(key[1]) + v.vectors.nbytes)

    def _mark_persisted(self, tenant: str | None, space: str, keys: Any) -> None:
        with self._lock:
            if len(self._persisted) > MAX_PERSISTED:  # forgetting only costs a lookup in Chroma again
                self._persisted.clear()
            self._persisted.update((tenant or "", space, k) for k in keys)


def _embed(embedder: Embedder, wanted: dict[str, ToolText]) -> dict[str, ToolVectors]:
    """One embedder call for every part of every new tool."""
    flat = [text for t in wanted.values() for text in t.texts]
    vectors = embed_array(embedder, flat)
    out: dict[str, ToolVectors] = {}
    row = 0
    for key, text in wanted.items():
        n = len(text.texts)
        out[key] = ToolVectors(key, text.name, vectors[row : row + n])
        row += n
    return out


def _load(collection: Any, wanted: dict[str, ToolText]) -> dict[str, ToolVectors]:
    """The wanted tools Chroma already holds with every part (an incomplete one is re-embedded)."""
    got = collection.get(where={"tool": {"$in": list(wanted)}}, include=["embeddings", "metadatas"])
    parts: dict[str, dict[int, Any]] = {}
    for vec, meta in zip(got.get("embeddings") if got.get("embeddings") is not None else [], got.get("metadatas") or []):
        parts.setdefault(meta["tool"], {})[int(meta["part"])] = vec
    out: dict[str, ToolVectors] = {}
    for key, by_part in parts.items():
        n = len(wanted[key].texts)
        if sorted(by_part) == list(range(n)):
            out[key] = ToolVectors(key, wanted[key].name, np.asarray([by_part[i] for i in range(n)], dtype=np.float32))
    return out


def _save(collection: Any, entries: dict[str, ToolVectors]) -> None:
    """Vectors and their keys, no text: nothing reads a tool's text back (the request carries it), and
    Chroma indexes every document for full-text search, which took most of a catalog's write (600 new
    tools of 2 KB, embedded and written: 3.1 s → 1.6 s, the embedding 0.7 s of it)."""
    if not entries:
        return
    ids, embeddings, metadatas = [], [], []
    for key, entry in entries.items():
        for i, vec in enumerate(entry.vectors):
            ids.append(f"{key}:{i}")
            embeddings.append(vec.tolist())
            metadatas.append({"tool": key, "part": i, "name": entry.name or ""})
    collection.upsert(ids=ids, embeddings=embeddings, metadatas=metadatas)
