"""Chroma, embedded (a directory) or shared (`storage.chroma_url`). Collections are created on
first use with cosine distance and no embedding function: callers always pass embeddings
(Chroma's default function downloads a model, which fails offline).

`collection(name, tenant)` is a tenant's rows of ONE collection per name that all tenants share
(pooled.py: ids prefixed and rows tagged with the tenant, every read filtered by it), because
embedded Chroma keeps ~1.4 MB for every collection a process touches. `own_collection` is a
collection of the tenant's own, for the knowledge base, which keeps state in collection metadata
and rebuilds whole collections; find_collection, collection_metadata, update_collection_metadata
and drop_collection are about those.

Own collections are named injectively (tenants.tenant_slug): a readable slug plus a
hash of the exact tenant name. Stores written before that (the name alone, made safe by replacing
characters, so "acme." and "acme" shared one collection) are migrated on open: the first time a
tenant's new collection is asked for and does not exist, an old-scheme collection whose name the
tenant maps to *exactly* (the tenant is already [a-zA-Z0-9._-] and was not shortened) is renamed to
the new name. Tenants whose old name was altered ("acme." → "acme") start empty: their old data is
indistinguishable from the exact tenant's, which keeps it.

Every collection call is watched: failures are counted and `healthy()` reports a store whose last
operation failed (e.g. an embedded store another process wrote to) even when heartbeat() still
answers.

Change signals (embedded store only): processes sharing one `storage.path` (two `ctxwarden serve`,
or `ctxwarden kb add --direct` beside a server) have no state backend in common, so a writer
rewrites a small file, `<storage.path>/signals/<hash of the name>`, atomically (a new file renamed
over the old) after each write, and readers read it (a few microseconds, no store I/O) to know that
they must reload. A Chroma server's clients are told by the state backend (Redis) instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

from ctxwarden.policies.cache import LRU

from . import pooled, stored_vectors
from .config import StorageConfig
from .tenants import tenant_slug

log = logging.getLogger("ctxwarden.storage")

MAX_OPEN_COLLECTIONS = 1024  # collection handles kept (one per name and tenant in use)
SIGNALS = "signals"  # <storage.path>/signals/: one change-signal file per name (signal_changed)
_SAFE = re.compile(r"[a-zA-Z0-9._-]+")


def collection_name(name: str, tenant: str | None) -> str:
    """Chroma names: 3-512 of [a-zA-Z0-9._-], alphanumeric at both ends; one namespace per tenant,
    injective in the tenant's exact name."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "-", f"ctxw_{name}")[:200].rstrip("._-")
    return f"{base}__t_{tenant_slug(tenant)}" if tenant else base


def legacy_collection_name(name: str, tenant: str) -> str | None:
    """The collection this tenant used before names were injective, when that name belonged to this
    exact tenant (the old mapping left it unchanged); None when the old name was an altered one."""
    full = f"ctxw_{name}__t_{tenant}"
    if not _SAFE.fullmatch(full) or len(full) > 500 or full != full.rstrip("._-"):
        return None
    return full


@contextlib.contextmanager
def _capped_index_cache(size: int) -> Iterator[None]:
    """Embedded Chroma (1.x) keeps up to `open-files limit / 5` vector indexes in memory (4,000 with a
    limit of 20,000), ~2.7 MB each even for a handful of rows, and offers no setting for it: with a
    few collections per tenant, RSS grew by hundreds of MB. The count is read when the client starts,
    so it is capped there. Without that internal (another Chroma version), nothing changes."""
    try:
        from chromadb.api.rust import RustBindingsAPI
    except ImportError:
        yield
        return
    original = RustBindingsAPI.start

    def start(api: Any) -> None:
        api.hnsw_cache_size = min(getattr(api, "hnsw_cache_size", size), size)
        original(api)

    RustBindingsAPI.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        RustBindingsAPI.start = original  # type: ignore[method-assign]


class _Watched:
    """A Chroma collection whose method calls report success or failure to the store, and whose
    rows carry their vectors in their metadata (stored_vectors: reads never need Chroma's index)."""

    def __init__(self, collection: Any, store: "ChromaStore") -> None:
        self._collection = collection
        self._store = store

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._collection, attr)
        if not callable(value):
            return value
        watched = self._store._watch(value, attr)
        if attr in stored_vectors.WRITES:
            placeholder = stored_vectors.only_in_metadata(self._collection.metadata)
            return lambda *args, **kwargs: watched(*args, **stored_vectors.with_vectors_in_metadata(kwargs, placeholder))
        if attr == "get":
            return lambda *args, **kwargs: stored_vectors.get_with_vectors(watched, *args, **kwargs)
        return watched


class ChromaStore:
    def __init__(self, config: StorageConfig) -> None:
        self.config = config
        self._client: Any = None
        self._collections: LRU[str, Any] = LRU(MAX_OPEN_COLLECTIONS)
        self._views: LRU[tuple[str, str | None], pooled.TenantRows] = LRU(MAX_OPEN_COLLECTIONS)
        self._lock = threading.Lock()
        self._pool_lock = threading.Lock()  # apart from _lock, which `client` takes
        self._unpooled: set[str] | None = None  # names of collections from before pooling, not moved yet
        self.errors = 0  # failed collection calls since start
        self.last_error: str | None = None
        self._last_error_at = 0.0
        self._last_ok_at = 0.0

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import chromadb
                    from chromadb.config import Settings as ChromaSettings

                    chroma_settings = ChromaSettings(anonymized_telemetry=False)
                    if self.config.chroma_url:
                        url = urlparse(self.config.chroma_url)
                        self._client = chromadb.HttpClient(
                            host=url.hostname or "127.0.0.1",
                            port=url.port or (443 if url.scheme == "https" else 8000),
                            ssl=url.scheme == "https",
                            settings=chroma_settings,
                        )
                    else:
                        with _capped_index_cache(self.config.max_open_indexes):
                            self._client = chromadb.PersistentClient(path=self.config.path, settings=chroma_settings)
        return self._client

    def collection(self, name: str, tenant: str | None = None) -> pooled.TenantRows:
        """`tenant`'s rows of the collection `name` that all tenants share (module docstring)."""
        view = self._views.get((name, tenant))
        if view is None:
            with self._pool_lock:
                view = self._views.get((name, tenant))
                if view is None:
                    view = pooled.TenantRows(self.own_collection(f"{name}__pool"), tenant)
                    self._move_into_pool(name, tenant, view)
                    self._views.put((name, tenant), view)
        return view

    def _move_into_pool(self, name: str, tenant: str | None, view: pooled.TenantRows) -> None:
        """Rows this tenant kept in a collection of its own before pooling go into the pool, once."""
        if self._unpooled is None:
            self._unpooled = {c if isinstance(c, str) else c.name for c in self.client.list_collections()}
        if not self._unpooled:
            return
        from chromadb.errors import NotFoundError

        for old in {collection_name(name, tenant), legacy_collection_name(name, tenant) if tenant else None}:
            if old is None or old not in self._unpooled:
                continue
            try:
                raw = self.client.get_collection(old, embedding_function=None)
            except NotFoundError:  # another process moved it first
                self._unpooled.discard(old)
                continue
            if pooled.migrate(_Watched(raw, self), view, old):
                with contextlib.suppress(NotFoundError):
                    self.client.delete_collection(old)
                self._unpooled.discard(old)

    def own_collection(self, name: str, tenant: str | None = None) -> Any:
        """A collection of the tenant's own (the knowledge base's: module docstring)."""
        full = collection_name(name, tenant)
        col = self._collections.get(full)
        if col is None:
            col = _Watched(self._watch(self._open, "open")(name, tenant, full), self)
            self._collections.put(full, col)
        return col

    def find_collection(self, name: str, tenant: str | None = None) -> Any | None:
        """The collection if it exists (an old-scheme one is migrated), else None: nothing is created,
        so reading a tenant that never wrote leaves no empty collections behind."""
        full = collection_name(name, tenant)
        col = self._collections.get(full)
        if col is None:
            raw = self._watch(self._open, "open")(name, tenant, full, False)
            if raw is None:
                return None
            col = _Watched(raw, self)
            self._collections.put(full, col)
        return col

    def _open(self, name: str, tenant: str | None, full: str, create: bool = True) -> Any:
        from chromadb.errors import NotFoundError

        if tenant:
            self._migrate(name, tenant, full)
        if not create:
            try:
                return self.client.get_collection(full, embedding_function=None)
            except NotFoundError:
                return None
        # An existing collection keeps the metadata it was made with (Chroma ignores this argument then).
        return self.client.get_or_create_collection(full, embedding_function=None, metadata={
            "hnsw:space": "cosine", stored_vectors.MODE_KEY: stored_vectors.IN_METADATA})

    def _migrate(self, name: str, tenant: str, full: str) -> None:
        """Rename this tenant's old-scheme collection to `full`, once (when `full` does not exist yet)."""
        from chromadb.errors import NotFoundError

        legacy = legacy_collection_name(name, tenant)
        if legacy is None or legacy == full:
            return
        try:
            self.client.get_collection(full)
            return  # already there: migrated before, or new
        except NotFoundError:
            pass
        try:
            old = self.client.get_collection(legacy, embedding_function=None)
        except NotFoundError:
            return
        try:
            old.modify(name=full)
            log.info("storage: renamed collection %s to %s (tenant names are now injective)", legacy, full)
        except Exception as exc:  # another process renamed it first, or created `full`
            log.info("storage: collection %s not renamed to %s (%s)", legacy, full, exc)

    def forget(self, name: str, tenant: str | None = None) -> None:
        """Drop the cached handle (after the collection was deleted or renamed)."""
        self._collections.pop(collection_name(name, tenant))

    def collection_metadata(self, name: str, tenant: str | None = None) -> dict[str, Any]:
        """The collection's metadata as stored now (a cached handle keeps what it was opened with);
        {} when there is no such collection. One SQLite read (embedded) or one request (server);
        no vector index is touched."""
        from chromadb.errors import NotFoundError

        try:
            got = self._watch(self.client.get_collection, "metadata")(collection_name(name, tenant))
        except NotFoundError:
            return {}
        return dict(got.metadata or {})

    def update_collection_metadata(self, name: str, tenant: str | None, values: dict[str, Any]) -> None:
        """Merge `values` into the collection's metadata (one transaction; works on a collection whose
        vector index is damaged). Index settings (hnsw:*) are fixed at creation and left out."""
        current = {k: v for k, v in self.collection_metadata(name, tenant).items() if not k.startswith("hnsw:")}
        self.own_collection(name, tenant).modify(metadata={**current, **values})

    def drop_collection(self, name: str, tenant: str | None = None) -> bool:
        """Delete a collection and its rows; False if there was none."""
        from chromadb.errors import NotFoundError

        self.forget(name, tenant)
        try:
            self._watch(self.client.delete_collection, "drop")(collection_name(name, tenant))
        except NotFoundError:
            return False
        return True

    # ------------------------------------------------------------------ change signals

    def _signal_path(self, name: str) -> Path | None:
        if self.config.chroma_url:
            return None
        return Path(self.config.path) / SIGNALS / hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]

    def signal_changed(self, name: str) -> None:
        """Tell the other processes on this storage.path that `name` changed (module docstring).
        A failure is logged: they then see the change by the reader's own refresh interval."""
        path = self._signal_path(name)
        if path is None:
            return
        token = f"{time.time_ns():016x}{secrets.token_hex(4)}"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(token, encoding="ascii")
            os.replace(tmp, path)  # atomic: a reader sees the old token or the new one, never half of one
        except OSError as exc:
            log.warning("storage: could not signal a change of %s to other processes (%s)", name, exc)

    def changed_token(self, name: str) -> str | None:
        """The token the last signal_changed(name) wrote, by any process on this storage.path; None
        when none was written (or a Chroma server is used). One small file read."""
        path = self._signal_path(name)
        if path is None:
            return None
        try:
            return path.read_text(encoding="ascii")
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ health

    def _watch(self, method: Callable[..., Any], op: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = method(*args, **kwargs)
            except Exception as exc:
                if type(exc).__name__ == "NotFoundError":  # an answer, not a failure of the store
                    raise
                self.errors += 1
                self.last_error = f"{op}: {type(exc).__name__}: {exc}"[:300]
                self._last_error_at = time.monotonic()
                raise
            self._last_ok_at = time.monotonic()
            return result
        return call

    def heartbeat(self) -> bool:
        """The client answers (a Chroma server is up; the embedded one is loaded)."""
        try:
            self.client.heartbeat()
            return True
        except Exception as exc:
            self.last_error = f"heartbeat: {type(exc).__name__}: {exc}"[:300]
            return False

    def healthy(self) -> bool:
        """The client answers and the last collection call did not fail (for /readyz)."""
        return self.heartbeat() and self._last_error_at <= self._last_ok_at

    def status(self) -> dict[str, Any]:
        """What /readyz may show: healthy, failed calls so far and the last error."""
        return {"healthy": self.healthy(), "errors": self.errors, "last_error": self.last_error}
