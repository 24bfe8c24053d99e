"""Which tenant made each object the provider keeps under the proxy's one provider key.

Every tenant's stored Responses, conversations, files, batches and vector stores live together at
the provider, under the key the proxy sends. A client key bound to one tenant may still use its own:
the proxy notes the id of each one made through it (the answer's top-level `id` to POST
/v1/responses, /v1/conversations, /v1/files, /v1/batches, /v1/vector_stores, /v1/messages/batches,
and a batch's output and error files as its owner reads it) with the tenant of the request that made
it, and a later reference (`previous_response_id`, an id in the path, a `file_id` or
`vector_store_ids` in a body, …) passes only for that tenant. An id the proxy never saw made is
nobody's: refused as before.

Kept in Redis when replicas share it, else in SQLite beside the keys (`<storage.path>/
provider_objects.sqlite3`: every process on the path, and a restart, see the same owners), for
`RETAIN_S` (the provider's default retention of stored Responses). If the registry cannot be read,
a reference is refused (fail closed: an id is a capability); if a new id cannot be written, the
answer still goes out and its tenant cannot refer to it later (logged).
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..sqlite_wal import WalFile

log = logging.getLogger("ctxwarden.keys")

FILE_NAME = "provider_objects.sqlite3"
RETAIN_S = 30 * 86400
SCHEMA = ("CREATE TABLE IF NOT EXISTS owners (object_id TEXT PRIMARY KEY, tenant TEXT, made REAL)",
          "CREATE INDEX IF NOT EXISTS owners_made ON owners (made)")
PRUNE_EVERY_S = 3600.0
# The POST routes whose answer names a new stored object, and the routes that refer to one by id
# (and to what hangs off it: a file's content, a batch's cancel, a vector store's files and search).
# Listing routes (GET /v1/files, /v1/batches, …) list every tenant's objects: not opened.
CREATES = ("responses", "conversations", "files", "batches", "vector_stores", "messages/batches")
REFERS = re.compile(r"(?:responses|conversations|files|batches|vector_stores|messages/batches)/([^/?]+)(?:/[^?]*)?")
# A batch's results are files the provider makes: read from the batch as its owner reads it (BatchFiles)
READS_BATCH = re.compile(r"batches/[^/?]+(?:/cancel)?")
SNIFF_BYTES = 16_384  # a JSON answer read whole up to here (its top-level ids), else a stream's first "id"
_FIRST_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,200})"')
# Body fields that name a stored file or vector store, at any depth (a content part's `file_id`, a batch's
# `input_file_id`, file_search's `vector_store_ids`, a vector store's `file_ids`, …); not looked for
# inside what holds the client's own names (metadata) or a JSON schema (a tool's parameters).
REFERENCE_FIELDS = frozenset({"file_id", "file_ids", "input_file_id", "vector_store_id", "vector_store_ids"})
NOT_REFERENCES = frozenset({"metadata", "parameters", "input_schema", "schema", "properties"})


def body_references(body: Any) -> list[tuple[str, str]]:
    """(field, id) for each stored file or vector store a parsed JSON body names (REFERENCE_FIELDS),
    one pass over its containers; an id that is not a string is no reference (the provider refuses it)."""
    found: list[tuple[str, str]] = []
    stack = [body]
    while stack:
        node = stack.pop()
        for key, value in node.items() if type(node) is dict else enumerate(node):
            if key in REFERENCE_FIELDS:
                values = value if type(value) is list else [value]
                found += [(key, v) for v in values if isinstance(v, str)]
            elif (type(value) is dict or type(value) is list) and key not in NOT_REFERENCES:
                stack.append(value)
    return found


def referenced_id(value: Any) -> str | None:
    """The id a body field names: a string, or an object's `id` (`conversation: {"id": …}`)."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


class FileOwners:
    def __init__(self, directory: str | Path, timeout_s: float = 2.0) -> None:
        self.file = WalFile(Path(directory) / FILE_NAME, SCHEMA, timeout_s)
        self._pruned_at = 0.0

    async def record(self, tenant: str, object_id: str, now: float | None = None) -> None:
        now = time.time() if now is None else now

        def work(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?)", (object_id, tenant, now))
            if now - self._pruned_at > PRUNE_EVERY_S:
                self._pruned_at = now
                db.execute("DELETE FROM owners WHERE made < ?", (now - RETAIN_S,))

        await self.file.run(work)

    async def owner(self, object_id: str, now: float | None = None) -> str | None:
        now = time.time() if now is None else now

        def work(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT tenant FROM owners WHERE object_id = ? AND made >= ?",
                              (object_id, now - RETAIN_S)).fetchone()

        row = await self.file.run(work)
        return row[0] if row else None

    async def aclose(self) -> None:
        self.file.close()


class RedisOwners:
    PREFIX = "ctxw:owner:"

    def __init__(self, url: str, timeout_s: float = 0.25) -> None:
        import redis.asyncio

        self.client: Any = redis.asyncio.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                                        decode_responses=True)

    async def record(self, tenant: str, object_id: str) -> None:
        await self.client.set(self.PREFIX + object_id, tenant, ex=RETAIN_S)

    async def owner(self, object_id: str) -> str | None:
        return await self.client.get(self.PREFIX + object_id)

    async def aclose(self) -> None:
        await self.client.aclose()


def open_owners(directory: str | Path, redis_url: str | None, timeout_s: float) -> Any:
    return RedisOwners(redis_url, timeout_s) if redis_url else FileOwners(directory)


async def owned_by(owners: Any, object_id: str, tenant: str) -> bool:
    """Whether `tenant` made `object_id` through this proxy; False when the registry does not answer."""
    try:
        return await owners.owner(object_id) == tenant
    except Exception as exc:
        log.warning("provider objects: could not read the owner of %s (%s: %s); refused", object_id, type(exc).__name__, exc)
        return False


class NewObject:
    """Watches an answer to a POST that makes a stored object, and notes its id for the request's
    tenant before the chunk that carries it reaches the client (so the client's next request,
    which may refer to it at once, finds it noted). An answer that arrives whole as JSON is parsed
    and its top-level `id` taken: a field the client wrote (a file's name, a batch's metadata) can
    never stand in for it. A stream's is the first "id" of its first event (`response.created`).
    With `results` (BatchFiles) it notes a batch's top-level output and error file ids instead, and
    only from an answer read whole."""

    def __init__(self, charge: Any, results: bool = False) -> None:
        self.charge = charge  # the request's Charge: its tenant, its registry (`owners`), and whether it stores
        self.results = results
        self.head = b""
        self.watching = True

    async def see(self, message: Any) -> None:
        if not self.watching or not self.charge.stored:
            return
        if message["type"] == "http.response.start":
            self.watching = 200 <= message.get("status", 500) < 300
            return
        if message["type"] != "http.response.body":
            return
        self.head = (self.head + message.get("body", b""))[:SNIFF_BYTES + 1]  # a 10 MB answer is not scanned whole
        more = message.get("more_body", False) and len(self.head) <= SNIFF_BYTES
        if more and (self.results or self.head.lstrip().startswith(b"{")):
            return  # JSON is read whole (up to SNIFF_BYTES): only its top-level ids count
        whole = _json_object(self.head) if not more and len(self.head) <= SNIFF_BYTES else None
        if self.results:
            found = [whole.get(k) for k in ("output_file_id", "error_file_id")] if whole is not None else []
        elif whole is not None:
            found = [whole.get("id")]
        else:  # a stream's first event (or a JSON answer past SNIFF_BYTES: its first "id", the provider's own)
            first = _FIRST_ID.search(self.head[:SNIFF_BYTES])
            if first is None and more:
                return
            found = [json.loads(b'"' + first.group(1) + b'"')] if first is not None else []
        self.watching = False
        self.head = b""
        for object_id in found:
            if not isinstance(object_id, str) or not object_id:
                continue
            try:
                await self.charge.owners.record(self.charge.tenant, object_id)
            except Exception as exc:
                log.warning("provider objects: %s not noted for its tenant (%s: %s)", object_id, type(exc).__name__, exc)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    """An answer read whole, as a JSON object; None for a stream's events or anything else."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def BatchFiles(charge: Any) -> NewObject:  # noqa: N802 (a kind of watcher, named as one)
    """The output and error files of a batch its owner reads (GET /v1/batches/{id}, or cancels it)."""
    return NewObject(charge, results=True)
