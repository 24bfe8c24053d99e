"""Which tenant made each object the provider keeps under the proxy's one provider key.

Every tenant's stored Responses and conversations live together at the provider, under the key the
proxy sends. A client key bound to one tenant may still continue and read its own: the proxy notes
the id of each one made through it (a Response's `id` from POST /v1/responses, a conversation's
from POST /v1/conversations) with the tenant of the request that made it, and a later reference
(`previous_response_id`, `conversation`, GET /v1/responses/{id}, /v1/conversations/{id}/items, …)
passes only for that tenant. An id the proxy never saw made is nobody's: refused as before.

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
# The POST routes whose answer names a new stored object, and the routes that refer to one by id.
CREATES = ("responses", "conversations")
REFERS = re.compile(r"(?:responses|conversations)/([^/?]+)(?:/[^?]*)?")
SNIFF_BYTES = 16_384  # the new object's id is the first "id" of the answer (JSON) or of its first event (a stream)
_FIRST_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,200})"')


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
    which may refer to it at once, finds it noted)."""

    def __init__(self, charge: Any) -> None:
        self.charge = charge  # the request's Charge: its tenant, its registry (`owners`), and whether it stores
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
        self.head = (self.head + message.get("body", b""))[:SNIFF_BYTES]  # a 10 MB answer is not scanned whole
        found = _FIRST_ID.search(self.head)
        if found is None and len(self.head) < SNIFF_BYTES and message.get("more_body", False):
            return
        self.watching = False
        self.head = b""
        if found is not None:
            object_id = json.loads(b'"' + found.group(1) + b'"')
            try:
                await self.charge.owners.record(self.charge.tenant, object_id)
            except Exception as exc:
                log.warning("provider objects: %s not noted for its tenant (%s: %s)", object_id, type(exc).__name__, exc)
