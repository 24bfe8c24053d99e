"""The proxy's small SQLite files (the dashboard's minutes, client key usage, who made which provider
object): opened the same way, and
written in short transactions that several processes on one storage path can share.

WAL lets readers go on while one process writes; `synchronous=NORMAL` in WAL loses nothing committed
when a process dies (only a power cut can take the last transactions); `BEGIN IMMEDIATE` takes the
write lock before the first read, so a read-then-write (a count checked, then added to) is one step
across processes. Blocking: call these off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def open_wal(path: Path, timeout_s: float, schema: Iterable[str]) -> sqlite3.Connection:
    """The file at `path` (made, with its folder, if need be), in WAL mode, with `schema` applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=timeout_s, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    for statement in schema:
        db.execute(statement)
    return db


@contextlib.contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed if the block ends, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class WalFile:
    """One such file, opened on first use and shared by this process's threads: each `transaction`
    is one `immediate` write transaction, run under a lock (one connection, several threads)."""

    def __init__(self, path: Path, schema: Iterable[str], timeout_s: float = 2.0) -> None:
        self.path = path
        self.schema = tuple(schema)
        self.timeout_s = timeout_s
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock, immediate(self._open()) as db:
            return work(db)

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` outside a write transaction (WAL readers do not wait for writers)."""
        with self._lock:
            return work(self._open())

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_wal(self.path, self.timeout_s, self.schema)
        return self._db

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`transaction`, off the event loop."""
        return await asyncio.to_thread(self.transaction, work)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

