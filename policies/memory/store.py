"""Memories in Chroma (Services.store, the same store as the knowledge base), one namespace per
tenant (Store.collection names tenants injectively), held per user in process for search.

Three collections per tenant:
    memories              the source of truth: text + metadata (user, task, scope, kind, provenance,
                          superseded_by), with a placeholder vector (search runs in process)
    memory_vectors_<space> each memory's vector from the embedder in use (`space`: its name), so a
                          change of embedder re-embeds what it lacks and loses nothing
    memory_versions       one token per user, bumped by every write: another replica that sees a new
                          token reloads that user (checked at most every `refresh_s`)

Every write and deletion also publishes the tenant's content version `memory:<tenant>` through
Services.versions (policies/state.py; Redis carries it between replicas, read every `state.poll_s`):
a replica that sees it move checks the token of the next user it serves in that tenant at once,
not after `refresh_s`. One version per tenant, not per user: the versions are polled whole, and
a check that finds the token unchanged costs one read by id.

All methods are synchronous (Chroma and the embedder block): callers run them in a worker thread.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import Any, Sequence

import numpy as np

from ..base import Embedder, Store, embed_array
from ..cache import LRU, stable_hash
from .index import UserIndex
from .model import Memory

DOCS = "memories"
VERSIONS = "memory_versions"
PLACEHOLDER = [1.0]  # Chroma wants a vector per row; the documents collection is never searched by vector
USERS_BYTES = 16 * 2**20  # users' memories held in process, at most (a user's index grows as it is written)
PAGE = 2000  # rows per Chroma call when loading a user


def _space(embedder: Embedder) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", embedder.name)[:40] + "_" + stable_hash(embedder.name)[:8]


def version_name(tenant: str | None) -> str:
    """The tenant's memory content version in Services.versions."""
    return f"memory:{tenant or ''}"


class MemoryStore:
    def __init__(self, store: Store, embedder: Embedder, max_users: int = 10_000, versions: Any = None) -> None:
        self.store = store
        self.embedder = embedder
        self.versions = versions  # a state.Versions (Services.versions), or None: this process alone
        # keep_one: a user whose index alone passes the bound would otherwise be reloaded from the
        # store on every request (10,000 memories: ~23 MB, over the budget-scaled bound)
        self._users: LRU[tuple[str | None, str], UserIndex] = LRU(max_users, max_bytes=USERS_BYTES, keep_one=True,
                                                                  sizeof=lambda key, index: len(key[1]) + index.nbytes)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ collections

    def _docs(self, tenant: str | None) -> Any:
        return self.store.collection(DOCS, tenant)

    def _vectors(self, tenant: str | None) -> Any:
        return self.store.collection(f"memory_vectors_{_space(self.embedder)}", tenant)

    def _versions(self, tenant: str | None) -> Any:
        return self.store.collection(VERSIONS, tenant)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return embed_array(self.embedder, texts)

    # ------------------------------------------------------------------ reading

    def cached(self, tenant: str | None, user: str) -> UserIndex | None:
        return self._users.get((tenant, user))

    def index(self, tenant: str | None, user: str) -> UserIndex:
        """The user's memories, loaded from the store on first use."""
        hit = self._users.get((tenant, user))
        if hit is not None:
            return hit
        with self._lock:
            hit = self._users.get((tenant, user))
            if hit is None:
                hit = self._load(tenant, user)
                self._users.put((tenant, user), hit)
        return hit

    def published(self, tenant: str | None) -> int:
        """The tenant's memory version as this process last saw it (no I/O; 0 without versions)."""
        return self.versions.current(version_name(tenant)) if self.versions is not None else 0

    def _load(self, tenant: str | None, user: str) -> UserIndex:
        published = self.published(tenant)  # before reading: a write meanwhile is seen next time
        version = self.version(tenant, user)
        docs = self._docs(tenant)
        rows: list[Memory] = []
        offset = 0
        while True:
            got = docs.get(where={"user": user}, include=["documents", "metadatas"], limit=PAGE, offset=offset)
            rows += [Memory.from_store(i, d or "", m or {}) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])]
            if len(got["ids"]) < PAGE:
                break
            offset += PAGE
        vectors = self._vectors_of(tenant, rows)
        index = UserIndex(self.embedder.dim)
        for memory in rows:
            index.put(memory, vectors[memory.id])
        index.version, index.published = version, published
        return index

    def _vectors_of(self, tenant: str | None, rows: list[Memory]) -> dict[str, np.ndarray]:
        col = self._vectors(tenant)
        found: dict[str, np.ndarray] = {}
        ids = [m.id for m in rows]
        for start in range(0, len(ids), PAGE):
            got = col.get(ids=ids[start : start + PAGE], include=["embeddings"])
            for i, e in zip(got["ids"], got["embeddings"]):
                found[i] = np.asarray(e, dtype=np.float32)
        missing = [m for m in rows if m.id not in found]
        if missing:  # written under another embedder: embed here, and keep them for next time
            fresh = self.embed([m.text for m in missing])
            for m, v in zip(missing, fresh):
                found[m.id] = v
            col.upsert(ids=[m.id for m in missing], embeddings=fresh.tolist())
        return found

    def version(self, tenant: str | None, user: str) -> object:
        got = self._versions(tenant).get(ids=[_user_key(user)], include=["metadatas"])
        return (got["metadatas"][0] or {}).get("token") if got["ids"] else None

    def stale(self, tenant: str | None, user: str) -> bool:
        """Another process wrote this user's memories since they were loaded here."""
        index = self._users.get((tenant, user))
        return index is not None and self.version(tenant, user) != index.version

    def reload(self, tenant: str | None, user: str) -> None:
        fresh = self._load(tenant, user)
        with self._lock:
            self._users.put((tenant, user), fresh)

    # ------------------------------------------------------------------ writing

    def put(self, memory: Memory, vector: np.ndarray) -> None:
        """Store (or replace) a memory: Chroma first, then the in-process index."""
        self._docs(memory.tenant).upsert(ids=[memory.id], documents=[memory.text], metadatas=[memory.metadata()],
                                         embeddings=[PLACEHOLDER])
        self._vectors(memory.tenant).upsert(ids=[memory.id], embeddings=[vector.tolist()])
        self.index(memory.tenant, memory.user).put(memory, vector)
        self._users.remeasure((memory.tenant, memory.user))
        self._bump(memory.tenant, memory.user)

    def put_many(self, tenant: str | None, user: str, memories: Sequence[Memory], vectors: np.ndarray) -> None:
        """Store many memories of one user at once (an import; no comparison, no merge)."""
        index = self.index(tenant, user)
        for start in range(0, len(memories), PAGE):
            part = memories[start : start + PAGE]
            self._docs(tenant).upsert(ids=[m.id for m in part], documents=[m.text for m in part],
                                      metadatas=[m.metadata() for m in part], embeddings=[PLACEHOLDER] * len(part))
            self._vectors(tenant).upsert(ids=[m.id for m in part], embeddings=vectors[start : start + PAGE].tolist())
        for memory, vector in zip(memories, vectors):
            index.put(memory, vector)
        self._users.remeasure((tenant, user))
        self._bump(tenant, user)

    def update(self, memory: Memory) -> None:
        """Rewrite a stored memory's metadata (superseded, merged)."""
        self._docs(memory.tenant).update(ids=[memory.id], metadatas=[memory.metadata()])
        self.index(memory.tenant, memory.user).update(memory)
        self._bump(memory.tenant, memory.user)

    def find(self, tenant: str | None, mid: str) -> Memory | None:
        got = self._docs(tenant).get(ids=[mid], include=["documents", "metadatas"])
        if not got["ids"]:
            return None
        return Memory.from_store(got["ids"][0], got["documents"][0] or "", got["metadatas"][0] or {})

    def delete(self, tenant: str | None, mid: str) -> Memory | None:
        """Forget one memory, at once, everywhere this process searches."""
        memory = self.find(tenant, mid)
        if memory is None:
            return None
        self._docs(tenant).delete(ids=[mid])
        self._vectors(tenant).delete(ids=[mid])
        cached = self._users.get((tenant, memory.user))
        if cached is not None:
            cached.remove(mid)
        self._bump(tenant, memory.user)
        return memory

    def delete_user(self, tenant: str | None, user: str) -> int:
        """Forget every memory of a user (the right to be forgotten); how many there were."""
        ids: list[str] = []
        while True:
            got = self._docs(tenant).get(where={"user": user}, include=[], limit=PAGE)
            if not got["ids"]:
                break
            ids += got["ids"]
            self._docs(tenant).delete(ids=got["ids"])
            self._vectors(tenant).delete(ids=got["ids"])
        self._users.pop((tenant, user))
        self._bump(tenant, user)
        return len(ids)

    def _bump(self, tenant: str | None, user: str) -> None:
        token = uuid.uuid4().hex
        self._versions(tenant).upsert(ids=[_user_key(user)], metadatas=[{"token": token, "at": time.time()}],
                                      embeddings=[PLACEHOLDER])
        cached = self._users.get((tenant, user))
        if cached is not None:
            cached.version = token
        if self.versions is not None:  # after the store has it: a replica that sees the version finds it
            self.versions.publish(version_name(tenant))


def _user_key(user: str) -> str:
    return "user_" + stable_hash(user)
