"""The proxy's small SQLite files (the dashboard's minutes, client key usage): opened the same way, and
written in short transactions that several processes on one storage path can share.

WAL lets readers go on while one process writes; `synchronous=NORMAL` in WAL loses nothing committed
when a process dies (only a power cut can take the last transactions); `BEGIN IMMEDIATE` takes the
write lock before the first read, so a read-then-write (a count checked, then added to) is one step
across processes. Blocking: call these off the event loop.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterable, Iterator


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
