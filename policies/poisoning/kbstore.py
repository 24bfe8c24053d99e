"""Where the knowledge base lives in Chroma, and how it stays whole through crashes.

- Passages are versioned per document: "<id>#<n>@<generation>", with `gen` in their metadata.
  A replace writes the new generation whole, then deletes the older ones; readers take, per
  document, the newest generation whose passages are all there (`parts`), so a writer killed at
  any moment leaves each document in its old or its new full version.
- A row-less collection, `kbmeta`, holds in its *collection metadata* (one SQLite row, no vector
  index) the name of the current data collection, a version token bumped by every write (readers
  in other processes compare it, one cheap read, to know when to reload) and the rows written.
  Processes on one embedded store also get a change signal (`signal()`, a file the store rewrites),
  read often because it costs no store I/O.
- Embedded Chroma keeps each collection's vector index in the memory of every process that opened
  it, and a process does not see the vectors another process writes until it writes itself: its
  reads of those rows' embeddings fail ("Error finding id") while documents and metadata read fine.
  Readers therefore never depend on stored vectors (kb.py: they fall back to the texts).
- Embedded Chroma saves a collection's vector index (hnsw) to files every `sync_threshold` rows,
  not atomically: a process killed while it saves leaves the collection unreadable or unwritable
  ("Failed to apply logs to the hnsw segment writer"). Data collections are therefore set to
  never save it (sync_threshold: LOG_ONLY): every row stays in Chroma's write-ahead log (SQLite,
  transactional), which Chroma replays into memory when it opens the collection. The log only
  grows, so once the rows written exceed COMPACT_FACTOR × the rows kept (and COMPACT_MIN), the
  live rows are copied to a fresh data collection, `kbmeta` is pointed at it (one atomic metadata
  write) and the old one is dropped with its log. A collection damaged before (older stores) is
  handled the same way: reads are retried once (the first call after a crash fails), a write that
  fails so is done again after a rebuild from the readable rows (re-embedded).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any, Callable, Iterable, Sequence

log = logging.getLogger("ctxwarden.poisoning")

META = "kbmeta"
DATA = "kb"  # the first data collection; stores written before kbmeta existed keep using it
BATCH = 1000  # rows per Chroma call
LOG_ONLY = 2**31 - 1  # hnsw sync_threshold: the index is never saved to files, only the log is
COMPACT_MIN = 20_000  # rows written before the log is compacted, at least ...
COMPACT_FACTOR = 4  # ... and this many times the rows kept
Rows = list[tuple[str, dict[str, Any]]]


def damaged(exc: BaseException) -> bool:
    """A Chroma error of a damaged vector index (not a bad request, not a missing collection)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return "internalerror" in text.replace(" ", "") and any(w in text for w in ("hnsw", "compact", "backfill"))


def retrying(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a Chroma read; once more if the index is damaged (the first call after a crash fails)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if not damaged(exc):
            raise
        return fn(*args, **kwargs)


def next_generation(seen: Iterable[str]) -> str:
    """A generation token newer than every one in `seen` (and than any written before now):
    16 hex digits of nanoseconds, then random ones so two writers never pick the same."""
    newest = max((g for g in seen if g), default="")
    floor = int(newest[:16], 16) + 1 if newest else 0
    return f"{max(time.time_ns(), floor):016x}{secrets.token_hex(4)}"


def current_generations(rows: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """doc_id → the newest generation of it whose passages are all there (its `parts`). Passages
    from before generations existed have none ("") and count as the oldest."""
    counts: dict[tuple[str, str], int] = {}
    parts: dict[tuple[str, str], int] = {}
    for _, meta in rows:
        key = (str(meta.get("doc_id", "")), str(meta.get("gen", "")))
        counts[key] = counts.get(key, 0) + 1
        parts[key] = int(meta.get("parts", 1))
    best: dict[str, str] = {}
    for (doc_id, gen), n in counts.items():
        if n >= parts[(doc_id, gen)] and (doc_id not in best or gen > best[doc_id]):
            best[doc_id] = gen
    return best


def heads(rows: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """doc_id → the part-0 metadata of its current generation."""
    rows = list(rows)
    current = current_generations(rows)
    return {str(meta.get("doc_id")): meta for _, meta in rows
            if int(meta.get("part", -1)) == 0 and current.get(str(meta.get("doc_id", ""))) == str(meta.get("gen", ""))}


def _data_name(name: str, step: int) -> str | None:
    """kb → kb.r1 → kb.r2 …: where a rebuild goes (step 1; a rebuild cut short is redone in the same
    place) and where the previous one was (step -1)."""
    base, _, n = name.partition(".r")
    number = (int(n) if n.isdigit() else 0) + step
    return None if number < 0 else base if number == 0 else f"{base}.r{number}"


class KBStorage:
    """The Chroma side of one tenant's knowledge base."""

    def __init__(self, store: Any, tenant: str | None, embed: Callable[[list[str]], Any]) -> None:
        self.store = store
        self.tenant = tenant
        self.embed = embed
        self._log_only: set[str] = set()  # data collections known to keep their index in the log only

    def _own(self, name: str, tenant: str | None) -> Any:
        """A collection of this tenant's own, not its rows of a pooled one: the pointer and version
        live in collection metadata and rebuilds replace whole collections (a store without pools
        has only `collection`)."""
        return getattr(self.store, "own_collection", self.store.collection)(name, tenant)

    # ------------------------------------------------------------------ the pointer and version

    def meta(self) -> dict[str, Any]:
        fresh = getattr(self.store, "collection_metadata", None)
        if fresh is not None:
            return fresh(META, self.tenant)
        return dict(self._own(META, self.tenant).metadata or {})

    def data_name(self, meta: dict[str, Any] | None = None) -> str:
        return str((self.meta() if meta is None else meta).get("data") or DATA)

    def data(self, name: str | None = None) -> Any:
        name = name or self.data_name()
        col = self._own(name, self.tenant)
        if name not in self._log_only:
            _keep_index_in_log(col)
            self._log_only.add(name)
        return col

    def existing(self, name: str | None = None) -> Any | None:
        """The data collection for reading: None when it was never written (nothing is created)."""
        name = name or self.data_name()
        find = getattr(self.store, "find_collection", None)
        if find is None or name in self._log_only:
            return self.data(name)
        col = find(name, self.tenant)
        return None if col is None else self.data(name)

    def stamp(self) -> tuple[Any, ...]:
        """What changes with every write: the data collection, the version token (this code's
        writers) and the row count (writers from before the token existed)."""
        meta = self.meta()
        name = self.data_name(meta)
        col = self.existing(name)
        return name, meta.get("version"), retrying(col.count) if col is not None else 0

    def bump(self, token: str, written: int = 0, **values: Any) -> int:
        """Record a write (a new version token, `written` more rows in the log); the rows written
        to the current data collection so far."""
        meta = self.meta()
        total = int(meta.get("written", 0) or 0) + written
        values = {"version": token, "written": total, **values}
        update = getattr(self.store, "update_collection_metadata", None)
        if update is not None:
            update(META, self.tenant, values)
        else:
            col = self._own(META, self.tenant)
            col.modify(metadata={**{k: v for k, v in meta.items() if not k.startswith("hnsw:")}, **values})
        return total

    def signal(self) -> None:
        """Tell other processes on this store that the KB changed (a store that can: the embedded
        one, by a file beside it; see proxy/storage.py)."""
        send = getattr(self.store, "signal_changed", None)
        if send is not None:
            send(self.signal_name)

    def signal_token(self) -> str | None:
        """What signal() last left, by any process (None: nothing, or a store that cannot signal).
        No store I/O: cheap enough to read on every request."""
        read = getattr(self.store, "changed_token", None)
        return read(self.signal_name) if read is not None else None

    @property
    def signal_name(self) -> str:
        return f"kb:{self.tenant or ''}"

    def compact_if_due(self, written: int) -> None:
        """Copy the live rows to a fresh collection once the log holds many times more."""
        if written >= COMPACT_MIN and written >= COMPACT_FACTOR * retrying(self.data().count):
            self.rebuild(None)

    # ------------------------------------------------------------------ rows

    def read(self, include: list[str], **where: Any) -> dict[str, Any]:
        col = self.existing()
        if col is None:
            return {"ids": [], "documents": [], "metadatas": [], "embeddings": None}
        return retrying(col.get, include=include, **where)

    def passages_of(self, doc_ids: Sequence[str]) -> Rows:
        """(id, metadata) of every stored passage of these documents, every generation."""
        out: Rows = []
        for start in range(0, len(doc_ids), 500):
            chunk = list(doc_ids[start : start + 500])
            where = {"doc_id": chunk[0]} if len(chunk) == 1 else {"doc_id": {"$in": chunk}}
            got = self.read(["metadatas"], where=where)
            out += list(zip(got["ids"], got["metadatas"]))
        return out

    def write(self, op: Callable[[Any], None]) -> None:
        """op(data collection); if the collection's index is damaged, rebuild it and run op again;
        if another process moved the KB to a new collection meanwhile, run op there too
        (op must be idempotent: upserts and deletes)."""
        name = self.data_name()
        try:
            op(self.data(name))
        except Exception as exc:
            if not damaged(exc):
                raise
            name = self.rebuild(exc)
            op(self.data(name))
        now = self.data_name()
        if now != name:
            op(self.data(now))

    def upsert(self, rows: Sequence[tuple[str, str, dict[str, Any]]], vectors: Sequence[Any]) -> None:
        def op(col: Any) -> None:
            for start in range(0, len(rows), BATCH):
                batch = rows[start : start + BATCH]
                col.upsert(ids=[r[0] for r in batch], documents=[r[1] for r in batch],
                           metadatas=[r[2] for r in batch], embeddings=list(vectors[start : start + BATCH]))
        self.write(op)

    def delete(self, rows: Rows) -> None:
        """Oldest generation first: a delete cut short never brings an older version back."""
        ids = [pid for pid, _ in sorted(rows, key=lambda r: str(r[1].get("gen", "")))]

        def op(col: Any) -> None:
            for start in range(0, len(ids), BATCH):
                col.delete(ids=ids[start : start + BATCH])
        if ids:
            self.write(op)

    def rebuild(self, why: BaseException | None) -> str:
        """Copy the live rows of the current data collection into a fresh one and point at it
        (why: the damage found; None: compacting the log)."""
        old = self.data_name()
        rows = self._live_rows(why is None)
        new = str(_data_name(old, 1))
        drop = getattr(self.store, "drop_collection", None)
        if drop is not None:
            drop(new, self.tenant)  # left half full by a rebuild that was cut short
            previous = _data_name(old, -1)
            if previous is not None:
                drop(previous, self.tenant)  # left behind by a rebuild cut short after its switch
        ids, texts, metas, vectors = rows
        for start in range(0, len(ids), BATCH):
            end = start + BATCH
            self.data(new).upsert(ids=ids[start:end], documents=texts[start:end], metadatas=metas[start:end],
                                  embeddings=list(vectors[start:end]) if vectors is not None else
                                  list(self.embed(texts[start:end])))
        self.bump(next_generation(()), data=new, written=-int(self.meta().get("written", 0) or 0) + len(ids))
        if why is not None:
            log.warning("knowledge base%s: collection %s was damaged (%s); its %d passages were copied to %s",
                        f" of tenant {self.tenant!r}" if self.tenant else "", old, str(why)[:200], len(ids), new)
        if drop is not None:
            try:
                drop(old, self.tenant)
            except Exception as exc:  # the copy is in use; the old one is only garbage now
                log.warning("knowledge base: could not drop the old collection %s: %s", old, exc)
        return new

    def _live_rows(self, with_vectors: bool) -> tuple[list[str], list[str], list[dict[str, Any]], Any]:
        """The current generation of every document: ids, texts, metadatas and (when asked for and
        readable) stored vectors; None for vectors means "embed them again"."""
        got: dict[str, Any] = {}
        if with_vectors:
            try:
                got = self.read(["documents", "metadatas", "embeddings"])
            except Exception as exc:
                if not damaged(exc):
                    raise
        if not got:
            got = {**self.read(["documents", "metadatas"]), "embeddings": None}
        metas = got["metadatas"]
        current = current_generations(zip(got["ids"], metas))
        keep = [i for i, m in enumerate(metas) if current.get(str(m.get("doc_id", ""))) == str(m.get("gen", ""))]
        vectors = got.get("embeddings")
        return ([got["ids"][i] for i in keep], [got["documents"][i] or "" for i in keep], [metas[i] for i in keep],
                None if vectors is None or len(vectors) != len(metas) else [vectors[i] for i in keep])


def _keep_index_in_log(col: Any) -> None:
    """Set a collection to never save its vector index to files (see the module's docstring)."""
    config = getattr(col, "configuration_json", None) or {}
    hnsw = config.get("hnsw") if isinstance(config, dict) else None
    if isinstance(hnsw, dict) and hnsw.get("sync_threshold") == LOG_ONLY:
        return
    try:
        col.modify(configuration={"hnsw": {"sync_threshold": LOG_ONLY}})
    except Exception as exc:  # an older server: the index is saved as Chroma decides
        log.info("knowledge base: could not keep the vector index in the log only: %s", exc)
