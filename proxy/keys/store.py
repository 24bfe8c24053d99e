"""Where client keys live: a file beside the proxy's other state, or Redis when replicas share state.

- `FileKeyStore`: `<storage.path>/client_keys.json`, written whole to a temporary file and renamed
  (a reader sees the old file or the new one, never half of one), under an exclusive lock so the
  CLI and a server can both write. Every process on that path re-reads it when its mtime changes.
- `RedisKeyStore`: the hash `ctxw:keys` (key hash → record JSON), when `state.redis_url` is set,
  so every replica sees a new or revoked key on its next refresh. A Redis restarted without
  persistence (or flushed) comes back without them, and every client would get 401 from then on.
  No record is ever deleted (a revoked key is kept, marked), so a record that was there and is gone
  was lost: each replica keeps what it last read in `<storage.path>/client_keys.redis-copy.json`
  and writes a lost record back (HSETNX: never over one another replica restored first).

Both are synchronous and small (a record is ~300 bytes); the gate keeps a snapshot and refreshes
it at most every `REFRESH_S` (gate.py), so a request never waits on the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Protocol

from .records import KeyRecord

FILE_NAME = "client_keys.json"
COPY_NAME = "client_keys.redis-copy.json"  # a replica's copy of the Redis hash, to restore it from
REDIS_KEY = "ctxw:keys"

log = logging.getLogger("ctxwarden.keys")


class KeyStore(Protocol):
    where: str

    def snapshot(self) -> dict[str, KeyRecord]:
        """Every record (revoked ones too), by key hash."""

    def changed(self) -> bool:
        """Whether the stored keys may differ from the last snapshot (cheap)."""

    def add(self, record: KeyRecord) -> None: ...

    def revoke(self, key_id: str) -> KeyRecord | None:
        """Mark the key revoked (kept, for the record); None if there is no such key."""


class FileKeyStore:
    def __init__(self, directory: str | Path, name: str = FILE_NAME) -> None:
        self.path = Path(directory) / name
        self.where = str(self.path)
        self._seen: tuple[int, int] | None = None

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def changed(self) -> bool:
        return self._stamp() != self._seen

    def snapshot(self) -> dict[str, KeyRecord]:
        stamp = self._stamp()
        records = self._read()
        self._seen = stamp
        return {r.key_hash: r for r in records}

    def _read(self) -> list[KeyRecord]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        return [KeyRecord.from_json(item) for item in data.get("keys", [])]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, records: list[KeyRecord]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".client_keys.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"keys": [r.to_json() for r in records]}, out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)  # hashes only, but nobody else needs to read them
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def add(self, record: KeyRecord) -> None:
        with self._locked():
            self._write([*self._read(), record])

    def replace(self, records: list[KeyRecord]) -> None:
        with self._locked():
            self._write(records)

    def revoke(self, key_id: str) -> KeyRecord | None:
        with self._locked():
            records = self._read()
            found = next((r for r in records if r.id == key_id), None)
            if found is None:
                return None
            if found.revoked_at is None:
                found.revoked_at = time.time()
                self._write(records)
            return found


class RedisKeyStore:
    def __init__(self, url: str, copy_dir: str | Path | None = None, timeout_s: float = 1.0) -> None:
        import redis

        self.client: Any = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                                decode_responses=True)
        self.where = f"redis {REDIS_KEY}"
        self.copy = FileKeyStore(copy_dir, COPY_NAME) if copy_dir is not None else None
        self.known: dict[str, str] | None = None  # key hash → record JSON, as last read (None: not yet)

    def changed(self) -> bool:
        return True  # no cheap stamp: the gate refreshes on its clock

    def snapshot(self) -> dict[str, KeyRecord]:
        raw = self.client.hgetall(REDIS_KEY)
        if self.known is None:  # this process's first read: what the last one on this path had seen
            self.known = {r.key_hash: json.dumps(r.to_json()) for r in self.copy.snapshot().values()} if self.copy else {}
        lost = {h: doc for h, doc in self.known.items() if h not in raw}
        if lost:
            restored = sum(bool(self.client.hsetnx(REDIS_KEY, h, doc)) for h, doc in lost.items())
            log.warning("client keys: %d of the %d keys this replica knew were gone from Redis (restarted without "
                        "persistence, or flushed?); %d written back from its copy", len(lost), len(self.known), restored)
            raw = self.client.hgetall(REDIS_KEY)
        if raw != self.known:
            self.known = dict(raw)
            if self.copy is not None:
                self.copy.replace([KeyRecord.from_json(json.loads(doc)) for doc in raw.values()])
        return {h: KeyRecord.from_json(json.loads(doc)) for h, doc in raw.items()}

    def add(self, record: KeyRecord) -> None:
        self.client.hset(REDIS_KEY, record.key_hash, json.dumps(record.to_json()))

    def revoke(self, key_id: str) -> KeyRecord | None:
        for h, doc in self.client.hgetall(REDIS_KEY).items():
            record = KeyRecord.from_json(json.loads(doc))
            if record.id == key_id:
                if record.revoked_at is None:
                    record.revoked_at = time.time()
                    self.client.hset(REDIS_KEY, h, json.dumps(record.to_json()))
                return record
        return None


def open_store(storage_path: str, redis_url: str | None) -> KeyStore:
    return RedisKeyStore(redis_url, copy_dir=storage_path) if redis_url else FileKeyStore(storage_path)
