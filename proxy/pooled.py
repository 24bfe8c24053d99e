"""One Chroma collection per name for every tenant: each tenant sees only its own rows.

Why: embedded Chroma (1.x) keeps ~1.4 MB of native memory for every collection a process has
touched, read or written, and never gives it back (bench/chroma_memory.py). A collection per name
and tenant made the proxy's RSS grow with the number of tenants served, by ~165 MB by the time a few
dozen tenants had archived a tool result or sent a tool list. Pooled, the count of collections is
fixed by the code (archive, tool catalog, memory, quarantine), whatever the tenants.

How a tenant is kept apart (TenantRows, the only handle callers get):
- every row it writes carries TENANT_KEY = the tenant's key in its metadata, and its id is prefixed
  with that key (`<key>:<id>`), so two tenants' rows never share an id;
- every read and delete is limited to the tenant by a `where` on TENANT_KEY (ids are prefixed too),
  so a caller cannot reach another tenant's rows whatever ids or filters it passes;
- what comes back has the prefix and TENANT_KEY removed: callers see their rows as they wrote them;
- only row operations exist on the handle (no collection metadata, rename or vector query), so
  nothing goes around the filter.

The key is tenants.tenant_slug (injective in the exact tenant name, [a-zA-Z0-9_-]); no tenant is "".
The knowledge base keeps collections of its own (storage.ChromaStore.own_collection): it stores its
pointer and version in collection metadata and rebuilds whole collections.

Stores written before pooling are migrated on first use of (name, tenant) in a process: the rows of
the tenant's own collection are copied into the pool (vectors included) and that collection is
deleted. A collection whose rows cannot be read whole is left where it is, with a warning.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Sequence

from .stored_vectors import without_key
from .tenants import tenant_slug

log = logging.getLogger("ctxwarden.storage")

TENANT_KEY = "ctxw_tenant"
SEPARATOR = ":"  # never in a tenant key, so "<key>:" prefixes are prefix-free
PAGE = 1000  # rows per call when migrating


def tenant_key(tenant: str | None) -> str:
    return tenant_slug(tenant) if tenant else ""


class TenantRows:
    """One tenant's rows of a pooled collection, with Chroma's row methods (module docstring)."""

    def __init__(self, collection: Any, tenant: str | None) -> None:
        self._collection = collection  # a storage._Watched: calls counted, vectors kept in metadata
        self.tenant = tenant
        self.key = tenant_key(tenant)
        self._prefix = f"{self.key}{SEPARATOR}"

    # ------------------------------------------------------------------ writes

    def add(self, ids: Sequence[str], **kwargs: Any) -> Any:
        return self._collection.add(**self._write(ids, kwargs))

    def upsert(self, ids: Sequence[str], **kwargs: Any) -> Any:
        return self._collection.upsert(**self._write(ids, kwargs))

    def update(self, ids: Sequence[str], **kwargs: Any) -> Any:
        return self._collection.update(**self._write(ids, kwargs, tag_missing=False))

    def _write(self, ids: Sequence[str], kwargs: dict[str, Any], tag_missing: bool = True) -> dict[str, Any]:
        ids = self._ids(ids)
        out = {**kwargs, "ids": ids}
        metadatas = kwargs.get("metadatas")
        if metadatas is not None:
            out["metadatas"] = [{**(m or {}), TENANT_KEY: self.key} for m in metadatas]
        elif tag_missing:  # a row must carry its tenant, or no read of the tenant would find it
            out["metadatas"] = [{TENANT_KEY: self.key} for _ in ids]
        return out

    # ------------------------------------------------------------------ reads and deletes

    def get(self, ids: Sequence[str] | str | None = None, where: dict[str, Any] | None = None,
            **kwargs: Any) -> dict[str, Any]:
        got = self._collection.get(**self._scope(ids, where), **kwargs)
        return self._clean(dict(got))

    def count(self) -> int:
        return len(self._collection.get(where={TENANT_KEY: self.key}, include=[])["ids"])

    def delete(self, ids: Sequence[str] | str | None = None, where: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if ids is None and where is None and not kwargs:
            raise ValueError("delete needs ids or a where filter")  # as Chroma: never "all of it" by omission
        return self._collection.delete(**self._scope(ids, where), **kwargs)

    def _scope(self, ids: Sequence[str] | str | None, where: dict[str, Any] | None) -> dict[str, Any]:
        own = {TENANT_KEY: self.key}
        scoped: dict[str, Any] = {"where": {"$and": [own, where]} if where else own}
        if ids is not None:
            scoped["ids"] = self._ids([ids] if isinstance(ids, str) else ids)
        return scoped

    def _ids(self, ids: Iterable[str]) -> list[str]:
        return [self._prefix + str(i) for i in ids]

    def _clean(self, got: dict[str, Any]) -> dict[str, Any]:
        cut = len(self._prefix)
        got["ids"] = [i[cut:] for i in got.get("ids") or []]
        metas = got.get("metadatas")
        if metas is not None:
            got["metadatas"] = [without_key(m, TENANT_KEY) for m in metas]
        return got


def migrate(old: Any, rows: TenantRows, old_name: str) -> bool:
    """Copy every row of `old` (a tenant's own collection from before pooling, storage._Watched)
    into `rows`; True when all were copied (the caller then deletes `old`)."""
    copied, offset = 0, 0
    try:
        while True:
            got = old.get(include=["documents", "metadatas", "embeddings"], limit=PAGE, offset=offset)
            ids = got.get("ids") or []
            if not ids:
                break
            vectors = got.get("embeddings")
            rows.upsert(ids=ids, documents=got.get("documents"), metadatas=got.get("metadatas"),
                        embeddings=[list(v) for v in vectors] if vectors is not None and len(vectors) else None)
            copied += len(ids)
            offset += len(ids)
    except Exception as exc:  # a damaged index: keep the old collection, serve from the pool anyway
        log.warning("storage: collection %s not moved into the pool (%d rows copied): %s", old_name, copied, exc)
        return False
    if copied:
        log.info("storage: moved the %d rows of %s into the pool", copied, old_name)
    return True
